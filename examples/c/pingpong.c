/*
 * pingpong: half round-trip latency between ranks 0 and 1 for a few message
 * sizes, for the overhead benchmarks (benches/overhead.sh): run it with and
 * without the tuner and compare.
 *
 * First ITERS/2 zero-byte round trips warm up (not timed: a tool's start-up
 * work right after MPI_Init, such as mpit-tuner's first sample, falls here
 * and the timed loops measure the steady state). Then for each size, rank 0
 * sends a message to rank 1, which sends it back: ITERS/10 round trips are
 * done first and not timed, then ITERS are timed with MPI_Wtime. Ranks
 * other than 0 and 1 only take part in the barriers.
 *
 * usage: pingpong [ITERS [SIZE...]]
 *   ITERS defaults to 100000, the sizes (bytes) to 0 8 1024.
 *
 * Output (rank 0, stdout), one line per size, parseable:
 *   latency: bytes=0 iters=100000 usec=0.812
 * where usec is the time of one message (half a round trip) in
 * microseconds. Exit status 0 on success; a wrong payload received is
 * reported on stderr and makes the program exit with status 1.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SIZES 16

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "pingpong: %s failed (%d)\n", what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    long iters = 100000;
    long sizes[MAX_SIZES] = {0, 8, 1024};
    int nsizes = 3;

    check(MPI_Init(&argc, &argv), "MPI_Init");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    if (argc > 1) {
        iters = strtol(argv[1], NULL, 10);
    }
    if (argc > 2) {
        nsizes = 0;
        for (int i = 2; i < argc && nsizes < MAX_SIZES; i++) {
            sizes[nsizes++] = strtol(argv[i], NULL, 10);
        }
    }
    if (size < 2 || iters < 1) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpiexec -n 2 pingpong [ITERS [SIZE...]] (ITERS >= 1)\n");
        }
        MPI_Finalize();
        return 2;
    }
    long max = 0;
    for (int s = 0; s < nsizes; s++) {
        if (sizes[s] < 0) {
            sizes[s] = 0;
        }
        if (sizes[s] > max) {
            max = sizes[s];
        }
    }
    char *buf = malloc((size_t)max + 1);
    if (!buf) {
        fprintf(stderr, "pingpong: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    for (long i = 0; i < iters / 2; i++) {
        if (rank == 0) {
            check(MPI_Send(buf, 0, MPI_CHAR, 1, 0, MPI_COMM_WORLD), "MPI_Send");
            check(MPI_Recv(buf, 0, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        } else if (rank == 1) {
            check(MPI_Recv(buf, 0, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
            check(MPI_Send(buf, 0, MPI_CHAR, 0, 0, MPI_COMM_WORLD), "MPI_Send");
        }
    }
    long warmup = iters / 10 + 1;
    for (int s = 0; s < nsizes; s++) {
        int n = (int)sizes[s];
        double start = 0.0;
        memset(buf, rank == 0 ? 'a' + s : 0, (size_t)max + 1);
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        for (long i = 0; i < warmup + iters; i++) {
            if (i == warmup) {
                start = MPI_Wtime();
            }
            if (rank == 0) {
                check(MPI_Send(buf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD), "MPI_Send");
                check(MPI_Recv(buf, n, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
            } else if (rank == 1) {
                check(MPI_Recv(buf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
                check(MPI_Send(buf, n, MPI_CHAR, 0, 1, MPI_COMM_WORLD), "MPI_Send");
            }
        }
        double elapsed = MPI_Wtime() - start;
        if (rank <= 1 && n > 0 && (buf[0] != 'a' + s || buf[n - 1] != 'a' + s)) {
            fprintf(stderr, "pingpong: rank %d received a wrong payload for %d bytes\n", rank, n);
            bad = 1;
        }
        if (rank == 0) {
            printf("latency: bytes=%d iters=%ld usec=%.4f\n", n, iters,
                   elapsed / (2.0 * (double)iters) * 1e6);
            fflush(stdout);
        }
    }
    free(buf);
    check(MPI_Finalize(), "MPI_Finalize");
    return bad;
}
