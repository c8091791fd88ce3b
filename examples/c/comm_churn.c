/*
 * comm_churn: creates, uses and frees communicators and a window, over and
 * over, so that a tool which binds MPI_T handles to communicators and windows
 * sees objects appear and disappear while the job runs.
 *
 * Every iteration:
 *   - MPI_Comm_split of MPI_COMM_WORLD into even and odd ranks (key: reverse
 *     rank, so the new ranks are permuted), MPI_Comm_dup of the split
 *     communicator, MPI_Comm_create from a group of the lower half of
 *     MPI_COMM_WORLD (the other ranks get MPI_COMM_NULL);
 *   - on MPI_COMM_WORLD and on each new communicator: a ring MPI_Sendrecv
 *     of 4 B, 1 KiB and 64 KiB, and an MPI_Allreduce;
 *   - MPI_Win_create on MPI_COMM_WORLD, MPI_Put to the right neighbour
 *     between two MPI_Win_fence, MPI_Win_free (the window spans the world:
 *     Open MPI 4.1's osc/rdma names its shared-memory segment after the
 *     communicator's context id, which the even and odd communicators may
 *     share, so windows created at once on both halves collide on a node);
 *   - MPI_Comm_free of every communicator created.
 *
 * usage: comm_churn [single|multiple] [ITERATIONS]
 *   single (default) initialises with MPI_Init_thread(MPI_THREAD_SINGLE),
 *   multiple with MPI_THREAD_MULTIPLE; ITERATIONS defaults to 3.
 *
 * Output (rank 0, stdout): deterministic integers that depend only on the
 * arguments and the number of ranks, never on the MPI library: per category,
 * the sums over all ranks and iterations of what the ring exchanges received,
 * of the allreduce results (counted once per communicator), of the window
 * contents, the number of communicator handles created, and a weighted
 * checksum of all these. A provided thread level lower than requested is
 * reported on stderr.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

enum { ACC_WORLD, ACC_SPLIT, ACC_DUP, ACC_CREATE, ACC_ALLREDUCE, ACC_WIN, ACC_COMMS, ACC_N };
static const char *acc_name[ACC_N] = {"ring_world", "ring_split", "ring_dup",
                                      "ring_create", "allreduce", "window",
                                      "comm_handles"};

static const int sizes_bytes[] = {4, 1024, 65536};
#define NSIZES ((int)(sizeof sizes_bytes / sizeof sizes_bytes[0]))
#define MAX_INTS (65536 / (int)sizeof(int))

static int *sendbuf, *recvbuf;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        fprintf(stderr, "comm_churn: %s failed: %s\n", what, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* Ring exchange on comm: every rank sends to rank+1 and receives from rank-1
 * messages of every size; returns the sum of the received integers. */
static long long ring(MPI_Comm comm, int iter, int tag)
{
    int rank, size;
    long long sum = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (int s = 0; s < NSIZES; s++) {
        int n = sizes_bytes[s] / (int)sizeof(int);
        for (int i = 0; i < n; i++)
            sendbuf[i] = (rank * 31 + i + iter * 7 + s) % 1000;
        check(MPI_Sendrecv(sendbuf, n, MPI_INT, right, tag + s, recvbuf, n, MPI_INT, left,
                           tag + s, comm, MPI_STATUS_IGNORE),
              "MPI_Sendrecv");
        for (int i = 0; i < n; i++)
            sum += recvbuf[i];
    }
    return sum;
}

/* Allreduce of (rank + 1) * (iter + 1) on comm: the result is the same on all
 * ranks, so only the communicator's rank 0 accounts for it. */
static long long allreduce(MPI_Comm comm, int iter)
{
    int rank;
    long long mine, total = 0;
    MPI_Comm_rank(comm, &rank);
    mine = (long long)(rank + 1) * (iter + 1);
    check(MPI_Allreduce(&mine, &total, 1, MPI_LONG_LONG, MPI_SUM, comm), "MPI_Allreduce");
    return rank == 0 ? total : 0;
}

/* Window on comm: every rank puts (rank + iter) into slot `rank` of its right
 * neighbour, then sums its own window. */
static long long window(MPI_Comm comm, int iter)
{
    int rank, size;
    MPI_Win win;
    long long sum = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int *base = calloc((size_t)size, sizeof(int));
    if (!base) {
        fprintf(stderr, "comm_churn: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    check(MPI_Win_create(base, (MPI_Aint)size * (MPI_Aint)sizeof(int), sizeof(int),
                         MPI_INFO_NULL, comm, &win),
          "MPI_Win_create");
    check(MPI_Win_fence(0, win), "MPI_Win_fence");
    int value = rank + iter;
    check(MPI_Put(&value, 1, MPI_INT, (rank + 1) % size, rank, 1, MPI_INT, win), "MPI_Put");
    check(MPI_Win_fence(0, win), "MPI_Win_fence");
    for (int i = 0; i < size; i++)
        sum += base[i];
    check(MPI_Win_free(&win), "MPI_Win_free");
    free(base);
    return sum;
}

int main(int argc, char **argv)
{
    int required = MPI_THREAD_SINGLE, provided = MPI_THREAD_SINGLE;
    const char *level = "single";
    int iterations = 3;
    long hold_ms = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "single") == 0) {
            required = MPI_THREAD_SINGLE;
            level = "single";
        } else if (strcmp(argv[i], "multiple") == 0) {
            required = MPI_THREAD_MULTIPLE;
            level = "multiple";
        } else if (strncmp(argv[i], "hold=", 5) == 0) {
            /* Keep each iteration's communicators alive this long (ms), so
             * that a sampling tool sees them; the output does not change. */
            char *end;
            hold_ms = strtol(argv[i] + 5, &end, 10);
            if (*end != '\0' || hold_ms < 0 || hold_ms > 60000) {
                fprintf(stderr, "usage: comm_churn [single|multiple] [ITERATIONS] [hold=MS]\n");
                return 2;
            }
        } else {
            char *end;
            long v = strtol(argv[i], &end, 10);
            if (*argv[i] == '\0' || *end != '\0' || v < 1 || v > 1000000) {
                fprintf(stderr, "usage: comm_churn [single|multiple] [ITERATIONS] [hold=MS]\n");
                return 2;
            }
            iterations = (int)v;
        }
    }

    MPI_Init_thread(&argc, &argv, required, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < required && rank == 0)
        fprintf(stderr, "comm_churn: asked for MPI_THREAD_%s, the library provides less (%d)\n",
                required == MPI_THREAD_MULTIPLE ? "MULTIPLE" : "SINGLE", provided);

    sendbuf = malloc(MAX_INTS * sizeof(int));
    recvbuf = malloc(MAX_INTS * sizeof(int));
    if (!sendbuf || !recvbuf) {
        fprintf(stderr, "comm_churn: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    long long acc[ACC_N] = {0};
    MPI_Group world_group, low_group;
    check(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "MPI_Comm_group");
    int low_range[1][3] = {{0, (size - 1) / 2, 1}};
    check(MPI_Group_range_incl(world_group, 1, low_range, &low_group), "MPI_Group_range_incl");

    for (int iter = 0; iter < iterations; iter++) {
        MPI_Comm split, dup, created_comm;
        check(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, size - rank, &split), "MPI_Comm_split");
        check(MPI_Comm_dup(split, &dup), "MPI_Comm_dup");
        check(MPI_Comm_create(MPI_COMM_WORLD, low_group, &created_comm), "MPI_Comm_create");
        acc[ACC_COMMS] += 2 + (created_comm != MPI_COMM_NULL);

        acc[ACC_WORLD] += ring(MPI_COMM_WORLD, iter, 10);
        acc[ACC_SPLIT] += ring(split, iter, 20);
        acc[ACC_DUP] += ring(dup, iter, 30);
        acc[ACC_ALLREDUCE] += allreduce(MPI_COMM_WORLD, iter);
        acc[ACC_ALLREDUCE] += allreduce(split, iter);
        acc[ACC_ALLREDUCE] += allreduce(dup, iter);
        if (created_comm != MPI_COMM_NULL) {
            acc[ACC_CREATE] += ring(created_comm, iter, 40);
            acc[ACC_ALLREDUCE] += allreduce(created_comm, iter);
        }
        acc[ACC_WIN] += window(MPI_COMM_WORLD, iter);
        if (hold_ms > 0) {
            /* Hold the communicators while messages wait in their queues. */
            struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
            check(MPI_Barrier(dup), "MPI_Barrier");
            nanosleep(&ts, NULL);
            check(MPI_Barrier(dup), "MPI_Barrier");
        }

        if (created_comm != MPI_COMM_NULL)
            check(MPI_Comm_free(&created_comm), "MPI_Comm_free");
        check(MPI_Comm_free(&dup), "MPI_Comm_free");
        check(MPI_Comm_free(&split), "MPI_Comm_free");
    }
    MPI_Group_free(&low_group);
    MPI_Group_free(&world_group);

    long long total[ACC_N];
    check(MPI_Reduce(acc, total, ACC_N, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    if (rank == 0) {
        long long checksum = 0;
        printf("comm_churn: ranks=%d thread_level=%s iterations=%d\n", size, level, iterations);
        for (int i = 0; i < ACC_N; i++) {
            printf("%s=%lld\n", acc_name[i], total[i]);
            checksum += total[i] * (i + 1);
        }
        printf("checksum=%lld\n", checksum);
        fflush(stdout);
    }
    free(sendbuf);
    free(recvbuf);
    MPI_Finalize();
    return 0;
}
