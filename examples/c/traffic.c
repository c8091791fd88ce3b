/*
 * traffic: a program with known MPI traffic, for checking what a tool
 * counts.
 *
 *   traffic [allreduces=N] [sends=M] [bytes=B] [evenodd] [smallreduce] [unexpected=U] [posted=P] [queued_ms=Q] [release=PATH] [threads=T]
 *
 * Every rank calls MPI_Allreduce N times on one double (8 bytes) and sends
 * M messages of B bytes (default 64 KiB) to the next rank in a ring with
 * MPI_Send, receiving as many from the previous one with MPI_Recv.
 * Defaults: N = 1000, M = 500. With `evenodd`, only even ranks do the
 * allreduce-heavy part on a sub-communicator of even ranks, and odd ranks
 * broadcast instead on theirs: two classes of behaviour.
 * With `smallreduce`, each rank does nothing but 8-byte allreduces
 * (N of them, and one more for the total), which dominate its time in MPI.
 * With `unexpected=U`, every rank but 0 first sends U small messages to rank
 * 0, which waits 300 ms, probes (taking them in unmatched) and waits Q ms
 * (default 200) more before receiving them: they queue as unexpected.
 * With `posted=P` as well, rank 0 first posts P receives from every other
 * rank (another tag), which those ranks match only after rank 0 received
 * the unexpected messages: for those 300 + Q ms the receives queue as
 * posted. With `release=PATH`, rank 0 stops holding them as soon as PATH
 * exists (Q ms at most): a test holds the queues until it saw what it
 * waits for.
 * With `threads=T` (T > 1), MPI is initialised with MPI_THREAD_MULTIPLE and
 * the allreduce part runs in T threads at once, each on its own duplicate
 * of MPI_COMM_WORLD: every rank makes T * N allreduces, concurrently.
 *
 * Output (rank 0): deterministic sums; nothing depends on timing.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct worker {
    MPI_Comm comm;
    long allreduces;
    int rank;
    double acc;
};

static void *allreduce_worker(void *arg)
{
    struct worker *w = arg;
    for (long i = 0; i < w->allreduces; i++) {
        double x = w->rank + i, y;
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, w->comm);
        w->acc += y;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long allreduces = 1000, sends = 500, bytes = 65536;
    int evenodd = 0, smallreduce = 0;
    long unexpected = 0, posted = 0, queued_ms = 200, threads = 1;
    const char *release = NULL;
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
        else if (strncmp(argv[i], "posted=", 7) == 0)
            posted = atol(argv[i] + 7);
        else if (strncmp(argv[i], "queued_ms=", 10) == 0)
            queued_ms = atol(argv[i] + 10);
        else if (strncmp(argv[i], "release=", 8) == 0)
            release = argv[i] + 8;
        else if (strncmp(argv[i], "threads=", 8) == 0)
            threads = atol(argv[i] + 8);
        else {
            fprintf(stderr, "usage: traffic [allreduces=N] [sends=M] [bytes=B] [evenodd] [smallreduce] [unexpected=U] [posted=P] [queued_ms=Q] [release=PATH] [threads=T]\n");
            return 2;
        }
    }
    if (allreduces < 0 || sends < 0 || bytes < 0 || bytes > (1L << 26) || unexpected < 0 ||
        unexpected > 100000 || posted < 0 || posted > 100000 || (posted > 0 && unexpected == 0) ||
        queued_ms < 0 || queued_ms > 60000 || threads < 1 || threads > 64 ||
        (threads > 1 && (evenodd || smallreduce))) {
        fprintf(stderr, "traffic: bad argument\n");
        return 2;
    }

    if (threads > 1) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided < MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "traffic: threads=%ld needs MPI_THREAD_MULTIPLE\n", threads);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    double acc = 0.0;
    if (unexpected > 0 && size > 1) {
        int one = 1, got;
        /* Rank 0's posted receives (posted=P): P from every other rank. */
        int *early = NULL;
        MPI_Request *requests = NULL;
        long npost = rank == 0 ? posted * (size - 1) : 0;
        if (npost > 0) {
            early = malloc(npost * sizeof *early);
            requests = malloc(npost * sizeof *requests);
            if (!early || !requests) {
                fprintf(stderr, "traffic: out of memory\n");
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            for (long i = 0; i < npost; i++)
                MPI_Irecv(&early[i], 1, MPI_INT, 1 + (int)(i / posted), 10, MPI_COMM_WORLD, &requests[i]);
        }
        if (rank == 0) {
            struct timespec ts = {0, 300000000L};
            nanosleep(&ts, NULL);
            /* Let the library take the arrived messages in (a probe for a
             * tag nobody sends progresses without matching them): they now
             * sit in the unexpected-message queue, where a sampler sees
             * them for the next queued_ms. */
            for (int p = 0; p < 100; p++) {
                int flag;
                MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
            }
            if (release) {
                struct timespec tick = {0, 10000000L};
                for (long waited = 0; waited < queued_ms && access(release, F_OK) != 0; waited += 10)
                    nanosleep(&tick, NULL);
            } else {
                struct timespec queued = {queued_ms / 1000, (queued_ms % 1000) * 1000000L};
                nanosleep(&queued, NULL);
            }
            for (long i = 0; i < unexpected * (size - 1); i++) {
                MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                acc += got;
            }
        } else {
            for (long i = 0; i < unexpected; i++)
                MPI_Send(&one, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank != 0) {
            for (long i = 0; i < posted; i++)
                MPI_Send(&one, 1, MPI_INT, 0, 10, MPI_COMM_WORLD);
        } else if (npost > 0) {
            for (long i = 0; i < npost; i++) {
                MPI_Wait(&requests[i], MPI_STATUS_IGNORE);
                acc += early[i];
            }
        }
        free(early);
        free(requests);
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
    } else if (threads > 1) {
        struct worker w[64];
        pthread_t tid[64];
        for (long t = 0; t < threads; t++) {
            w[t].allreduces = allreduces;
            w[t].rank = rank;
            w[t].acc = 0.0;
            MPI_Comm_dup(MPI_COMM_WORLD, &w[t].comm);
        }
        for (long t = 0; t < threads; t++)
            if (pthread_create(&tid[t], NULL, allreduce_worker, &w[t]) != 0)
                MPI_Abort(MPI_COMM_WORLD, 1);
        for (long t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            acc += w[t].acc;
            MPI_Comm_free(&w[t].comm);
        }
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
    /* `smallreduce` stays nothing but allreduces to the end: an MPI_Reduce
     * here would be the only other call, and one scheduling delay of a
     * millisecond or two in it (rank 0 waiting for a descheduled peer)
     * outweighs the 3000 allreduces' ~1.5 ms. */
    if (smallreduce)
        MPI_Allreduce(&acc, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    else
        MPI_Reduce(&acc, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("traffic: ranks=%d allreduces=%ld sends=%ld bytes=%ld%s%s unexpected=%ld threads=%ld total=%.1f\n",
               size, allreduces, sends, bytes, evenodd ? " evenodd" : "",
               smallreduce ? " smallreduce" : "", unexpected, threads, total);
    MPI_Finalize();
    return 0;
}
