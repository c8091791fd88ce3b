/*
 * eager_probe: which protocol did the sender use for one message? A
 * behaviour test of the eager limit (mpit-tuner's eager policies).
 *
 * Rank 0 posts MPI_Isend of BYTES bytes (default 32768) to rank 1 and polls
 * MPI_Test for up to 300 ms. Rank 1 meanwhile is late: it waits inside MPI
 * for rank 0's "done polling" message (tag 2), and only then posts the
 * receive of the probe message (tag 1). So while rank 0 polls, the receive
 * is never posted, whatever the timing of the two ranks:
 *
 * - eager protocol: the message travels without its receive (into the
 *   receiver's shared-memory fragments or buffers) and the send completes
 *   before the receive is posted: completed_before_receive=yes;
 * - rendezvous protocol: the data moves only once the receive is posted
 *   (request to send, clear to send), so the send cannot complete while
 *   rank 0 polls: completed_before_receive=no.
 *
 * Rank 1 waits inside MPI (its progress engine runs) rather than sleeping:
 * Open MPI's shared-memory BTL (vader) completes an eager send of a few KiB
 * only once the receiving process has taken the fragments out of its queue,
 * so with a sleeping receiver even an eager send would not complete in
 * time. Waiting inside MPI tells the two protocols apart on both libraries.
 *
 * One MPI_Barrier and a small exchange first set up the connection between
 * the two ranks, so that the probe measures the protocol, not the first
 * contact. Ranks other than 0 and 1 only take part in the barrier.
 *
 * usage: eager_probe [BYTES]
 *
 * Output (rank 0, stdout), one line:
 *   eager_probe: bytes=32768 completed_before_receive=yes
 * Deterministic for a given library and eager setting. Exit status 0; 2 for
 * a bad argument or fewer than 2 ranks; 1 if the payload arrived wrong.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLL_MS 300.0

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        fprintf(stderr, "eager_probe: %s failed (%d)\n", what, rc);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv)
{
    int rank, size, bad = 0;
    long bytes = 32768;
    check(MPI_Init(&argc, &argv), "MPI_Init");
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    if (argc > 1) {
        char *end;
        bytes = strtol(argv[1], &end, 10);
        if (*end != '\0' || bytes < 1 || bytes > (1L << 30)) {
            if (rank == 0)
                fprintf(stderr, "eager_probe: BYTES must be 1 to 2^30 (got '%s')\n", argv[1]);
            MPI_Finalize();
            return 2;
        }
    }
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "eager_probe: needs at least 2 ranks (got %d)\n", size);
        MPI_Finalize();
        return 2;
    }
    unsigned char *buf = malloc((size_t)bytes);
    if (buf == NULL) {
        fprintf(stderr, "eager_probe: cannot allocate %ld bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* First contact between ranks 0 and 1, small messages only. */
    int token = 0;
    if (rank == 0) {
        check(MPI_Send(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD), "MPI_Send");
        check(MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    } else if (rank == 1) {
        check(MPI_Recv(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        check(MPI_Send(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD), "MPI_Send");
    }
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");

    if (rank == 0) {
        for (long i = 0; i < bytes; i++)
            buf[i] = (unsigned char)(i * 7 + 1);
        MPI_Request req;
        int done = 0;
        check(MPI_Isend(buf, (int)bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req), "MPI_Isend");
        double start = MPI_Wtime();
        while (!done && (MPI_Wtime() - start) * 1e3 < POLL_MS) {
            check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
            if (!done)
                sleep_ms(1);
        }
        int was_done = done;
        /* Only now may rank 1 post the receive of the probe message. */
        check(MPI_Send(&token, 1, MPI_INT, 1, 2, MPI_COMM_WORLD), "MPI_Send");
        if (!done)
            check(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
        printf("eager_probe: bytes=%ld completed_before_receive=%s\n", bytes,
               was_done ? "yes" : "no");
        fflush(stdout);
    } else if (rank == 1) {
        check(MPI_Recv(&token, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        memset(buf, 0, (size_t)bytes);
        check(MPI_Recv(buf, (int)bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
        for (long i = 0; i < bytes; i++) {
            if (buf[i] != (unsigned char)(i * 7 + 1)) {
                fprintf(stderr, "eager_probe: byte %ld received wrong\n", i);
                bad = 1;
                break;
            }
        }
    }
    int any_bad = 0;
    check(MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
    free(buf);
    MPI_Finalize();
    return any_bad ? 1 : 0;
}
