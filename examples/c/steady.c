/*
 * steady: a job that runs until it is told to stop, for watching and
 * steering a running job (tests of `mpit-tuner set`, `reload`, `watch`)
 * and for the demo.
 *
 *   steady STOPFILE [seconds=60] [phase=S]
 *
 * Every rank loops: one 8-byte MPI_Allreduce, then a 64 KiB message to the
 * next rank of a ring and one from the previous (MPI_Sendrecv), then 5 ms
 * of sleep. The loop ends, on every rank at the same iteration, when
 * STOPFILE exists (rank 0 looks, and the allreduce carries the verdict) or
 * after `seconds` (60 by default, a safety net for tests). With `phase=S`
 * the work changes every S seconds between the ring (phase 0) and a burst
 * of 50 small allreduces with no ring (phase 1): a change a live view and
 * the plots show.
 *
 * Output (rank 0): `steady: N iterations` (nothing depends on timing but N).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (64 * 1024)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2) {
        if (rank == 0)
            fprintf(stderr, "usage: steady STOPFILE [seconds=N] [phase=S]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *stop_file = argv[1];
    double seconds = 60.0, phase = 0.0;
    for (int i = 2; i < argc; i++) {
        if (strncmp(argv[i], "seconds=", 8) == 0)
            seconds = atof(argv[i] + 8);
        else if (strncmp(argv[i], "phase=", 6) == 0)
            phase = atof(argv[i] + 6);
    }
    char *out = calloc(RING_BYTES, 1), *in = calloc(RING_BYTES, 1);
    if (!out || !in)
        MPI_Abort(MPI_COMM_WORLD, 3);
    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    const struct timespec nap = {0, 5 * 1000 * 1000};
    const double start = MPI_Wtime();
    long iterations = 0;
    for (;;) {
        double now = MPI_Wtime() - start;
        int mine = rank == 0 && (now >= seconds || access(stop_file, F_OK) == 0);
        int stop = 0;
        MPI_Allreduce(&mine, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (stop)
            break;
        /* Rank 0's clock decides the phase for everyone. */
        int which = phase > 0 ? (int)(now / phase) % 2 : 0;
        MPI_Bcast(&which, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (which == 0) {
            MPI_Sendrecv(out, RING_BYTES, MPI_BYTE, next, 0, in, RING_BYTES, MPI_BYTE, prev, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int k = 0; k < 50; k++) {
                double x = rank, sum;
                MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            }
        }
        nanosleep(&nap, NULL);
        iterations++;
    }
    if (rank == 0)
        printf("steady: %ld iterations\n", iterations);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
