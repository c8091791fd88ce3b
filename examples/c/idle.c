/*
 * idle: a short, mostly idle job, for the scaling benchmark
 * (benches/scaling.sh): what the tool costs a job at start and finalize,
 * and what it does to the file system while the job waits.
 *
 *   idle [seconds=S]
 *
 * Every rank: MPI_Init, one MPI_Barrier, S seconds of sleep (0 by default:
 * init, one barrier, finalize), one MPI_Barrier, MPI_Finalize. Sleeping,
 * not waiting in MPI: the ranks leave the cores to the tool's helper
 * threads and to each other.
 *
 * Output (rank 0): `idle: N ranks, S s`.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = 0.0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "seconds=", 8) == 0) {
            seconds = atof(argv[i] + 8);
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: idle [seconds=S]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (seconds > 0) {
        struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        while (nanosleep(&t, &t) != 0) {
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("idle: %d ranks, %g s\n", size, seconds);
    MPI_Finalize();
    return 0;
}
