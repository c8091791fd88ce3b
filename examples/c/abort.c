/*
 * abort: a job that dies in the middle of its run. Every rank does a few
 * MPI_Allreduce; then rank 0 sleeps (so that a sampling tool has time to
 * write some records) and calls MPI_Abort(MPI_COMM_WORLD, 3) while the other
 * ranks wait in an MPI_Barrier that never completes.
 *
 * usage: abort [SLEEP_MS]      (default 1500)
 *
 * Output (rank 0, stdout): deterministic lines, the last one printed just
 * before MPI_Abort. The launcher exits with a non-zero status: 3 with both
 * Debian launchers (mpiexec.mpich, mpiexec.openmpi), which also print their
 * own abort notice on stderr.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    long sleep_ms = 1500;
    if (argc > 1) {
        char *end;
        sleep_ms = strtol(argv[1], &end, 10);
        if (*argv[1] == '\0' || *end != '\0' || sleep_ms < 0 || sleep_ms > 600000) {
            fprintf(stderr, "usage: abort [SLEEP_MS]\n");
            return 2;
        }
    }

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    long long total = 0;
    for (int iter = 0; iter < 5; iter++) {
        long long mine = (long long)(rank + 1) * (iter + 1), sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
    }
    if (rank == 0) {
        printf("abort: ranks=%d allreduce_total=%lld\n", size, total);
        printf("abort: rank 0 calls MPI_Abort(MPI_COMM_WORLD, 3) in %ld ms\n", sleep_ms);
        fflush(stdout);
        struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
        MPI_Abort(MPI_COMM_WORLD, 3);
    } else {
        MPI_Barrier(MPI_COMM_WORLD); /* rank 0 never joins: killed by the abort */
    }
    /* Not reached. */
    MPI_Finalize();
    return 0;
}
