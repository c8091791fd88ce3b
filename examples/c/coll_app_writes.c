/* An application that chooses a collective algorithm itself, through MPI_T,
 * while it runs: what the tuner must leave alone.
 *
 *   coll_app_writes VARIABLE VALUE
 *
 * Phase 1: 8-int allreduces. Then every rank writes VALUE to the integer
 * control variable VARIABLE at the same point (as an ALL_EQ variable
 * requires), waits 50 ms, and runs phase 2: allreduces of 16 Ki ints (a
 * size no earlier call had, so a tuner searching would switch algorithms
 * there). Every result is checked. At the end each rank reads VARIABLE
 * back; rank 0 prints whether every rank still holds VALUE, and the exit
 * status is 0 either way (the test compares the output). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cvar_handle(const char *name, MPI_T_cvar_handle *h) {
    int index = -1, count;
    if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return -1;
    return MPI_T_cvar_handle_alloc(index, NULL, h, &count) == MPI_SUCCESS ? 0 : -1;
}

static int check(const int *out, int n, int size, int round) {
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (out[i] != size * (i % 97 + round)) bad++;
    return bad;
}

static int phase(int n, int rounds, int size) {
    int *in = malloc(sizeof(int) * n), *out = malloc(sizeof(int) * n), bad = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) in[i] = i % 97 + r;
        MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad += check(out, n, size, r);
    }
    free(in);
    free(out);
    return bad;
}

int main(int argc, char **argv) {
    int rank, size, provided, value, held = -1, bad = 0;
    MPI_T_cvar_handle h;
    if (argc != 3) {
        fprintf(stderr, "usage: coll_app_writes VARIABLE VALUE\n");
        return 2;
    }
    value = atoi(argv[2]);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    if (cvar_handle(argv[1], &h) != 0) {
        if (rank == 0) printf("coll_app_writes: %s: no such variable\n", argv[1]);
        MPI_Finalize();
        return 0;
    }
    bad += phase(8, 300, size);
    int rc = MPI_T_cvar_write(h, &value);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL);
    bad += phase(16 * 1024, 300, size);
    if (rc == MPI_SUCCESS) MPI_T_cvar_read(h, &held);
    int mine = held == value, all_hold, all_bad;
    MPI_Reduce(&mine, &all_hold, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("coll_app_writes: write %s\n", rc == MPI_SUCCESS ? "succeeded" : "failed");
        printf("coll_app_writes: %d wrong results\n", all_bad);
        printf("coll_app_writes: %s = %d on every rank at the end: %s\n", argv[1], value,
               all_hold ? "yes" : "no");
    }
    MPI_T_cvar_handle_free(&h);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
