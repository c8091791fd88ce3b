/*
 * traffic: a program with known MPI traffic, for checking what a tool
 * counts.
 *
 *   traffic [allreduces=N] [sends=M] [bytes=B] [evenodd] [smallreduce] [unexpected=U]
 *
 * Every rank calls MPI_Allreduce N times on one double (8 bytes) and sends
 * M messages of B bytes (default 64 KiB) to the next rank in a ring with
 * MPI_Send, receiving as many from the previous one with MPI_Recv.
 * Defaults: N = 1000, M = 500. With `evenodd`, only even ranks do the
 * allreduce-heavy part on a sub-communicator of even ranks, and odd ranks
 * broadcast instead on theirs: two classes of behaviour.
 * With `smallreduce`, each rank does nothing but 8-byte allreduces
 * (N of them), which dominate its time in MPI.
 * With `unexpected=U`, every rank but 0 first sends U small messages to rank
 * 0, which waits 300 ms before receiving them: they queue as unexpected.
 *
 * Output (rank 0): deterministic sums; nothing depends on timing.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    long allreduces = 1000, sends = 500, bytes = 65536;
    int evenodd = 0, smallreduce = 0;
    long unexpected = 0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "allreduces=", 11) == 0)
            allreduces = atol(argv[i] + 11);
        else if (strncmp(argv[i], "sends=", 6) == 0)
            sends = atol(argv[i] + 6);
        else if (strncmp(argv[i], "bytes=", 6) == 0)
            bytes = atol(argv[i] + 6);
        else if (strcmp(argv[i], "evenodd") == 0)
            evenodd = 1;
        else if (strcmp(argv[i], "smallreduce") == 0)
            smallreduce = 1;
        else if (strncmp(argv[i], "unexpected=", 11) == 0)
            unexpected = atol(argv[i] + 11);
        else {
            fprintf(stderr, "usage: traffic [allreduces=N] [sends=M] [bytes=B] [evenodd] [smallreduce] [unexpected=U]\n");
            return 2;
        }
    }
    if (allreduces < 0 || sends < 0 || bytes < 0 || bytes > (1L << 26) || unexpected < 0 ||
        unexpected > 100000) {
        fprintf(stderr, "traffic: bad argument\n");
        return 2;
    }

    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    double acc = 0.0;
    if (unexpected > 0 && size > 1) {
        int one = 1, got;
        if (rank == 0) {
            struct timespec ts = {0, 300000000L};
            nanosleep(&ts, NULL);
            for (long i = 0; i < unexpected * (size - 1); i++) {
                MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                acc += got;
            }
        } else {
            for (long i = 0; i < unexpected; i++)
                MPI_Send(&one, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    if (smallreduce) {
        for (long i = 0; i < allreduces; i++) {
            double x = rank + i, y;
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            acc += y;
        }
    } else if (evenodd) {
        MPI_Comm half;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        for (long i = 0; i < allreduces; i++) {
            double x = rank + i, y = x;
            if (rank % 2 == 0)
                MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, half);
            else
                MPI_Bcast(&y, 1, MPI_DOUBLE, 0, half);
            acc += y;
        }
        MPI_Comm_free(&half);
    } else {
        for (long i = 0; i < allreduces; i++) {
            double x = rank + i, y;
            MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            acc += y;
        }
    }

    if (!smallreduce && size > 1 && sends > 0) {
        char *out = malloc(bytes > 0 ? bytes : 1), *in = malloc(bytes > 0 ? bytes : 1);
        if (!out || !in)
            MPI_Abort(MPI_COMM_WORLD, 1);
        memset(out, rank & 0xff, bytes);
        int next = (rank + 1) % size, prev = (rank + size - 1) % size;
        long received = 0;
        for (long i = 0; i < sends; i++) {
            /* Even ranks send first, odd ranks receive first: no deadlock
             * with rendezvous-sized messages. */
            if (rank % 2 == 0) {
                MPI_Send(out, (int)bytes, MPI_BYTE, next, 7, MPI_COMM_WORLD);
                MPI_Recv(in, (int)bytes, MPI_BYTE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(in, (int)bytes, MPI_BYTE, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(out, (int)bytes, MPI_BYTE, next, 7, MPI_COMM_WORLD);
            }
            received += bytes > 0 ? (unsigned char)in[0] : 0;
        }
        acc += received;
        free(out);
        free(in);
    }

    double total;
    MPI_Reduce(&acc, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("traffic: ranks=%d allreduces=%ld sends=%ld bytes=%ld%s%s unexpected=%ld total=%.1f\n",
               size, allreduces, sends, bytes, evenodd ? " evenodd" : "",
               smallreduce ? " smallreduce" : "", unexpected, total);
    MPI_Finalize();
    return 0;
}
