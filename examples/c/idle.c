/*
 * idle: a short, mostly idle job, for the scaling benchmark
 * (benches/scaling.sh): what the tool costs a job at start and finalize,
 * and what it does to the file system while the job waits.
 *
 *   idle [seconds=S] [phases]
 *
 * Every rank: MPI_Init, one MPI_Barrier, S seconds of sleep (0 by default:
 * init, one barrier, finalize), one MPI_Barrier, MPI_Finalize. Sleeping,
 * not waiting in MPI: the ranks leave the cores to the tool's helper
 * threads and to each other.
 *
 * Output (rank 0): `idle: N ranks, S s`. With `phases`, every rank also
 * prints after MPI_Finalize `idle-phases: rank=R init_s=X finalize_s=Y`:
 * the wall time of its MPI_Init and of its MPI_Finalize (where the tool's
 * start and finalize run, inside the application's calls).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    double t0 = now();
    MPI_Init(&argc, &argv);
    double init_s = now() - t0;
    int phases = 0;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    double seconds = 0.0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "seconds=", 8) == 0) {
            seconds = atof(argv[i] + 8);
        } else if (strcmp(argv[i], "phases") == 0) {
            phases = 1;
        } else {
            if (rank == 0)
                fprintf(stderr, "usage: idle [seconds=S] [phases]\n");
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
    fflush(stdout);
    double t1 = now();
    MPI_Finalize();
    double finalize_s = now() - t1;
    if (phases)
        printf("idle-phases: rank=%d init_s=%.6f finalize_s=%.6f\n", rank, init_s, finalize_s);
    return 0;
}
