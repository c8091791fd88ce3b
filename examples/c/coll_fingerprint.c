/* Which collective algorithm ran? A deterministic witness, not a timing,
 * for settings made before the job starts (an exported MPICH selection
 * JSON, an Open MPI dynamic rules file, an environment variable).
 *
 * Allreduce: a user-defined (commutative) sum of `count` ints, whose
 * function records the length of every piece it is handed. The lengths
 * are the algorithm's fingerprint: recursive doubling on 2 ranks reduces
 * the whole vector once on each rank, reduce-scatter-allgather reduces
 * halves. Rank 0 prints them, rank by rank:
 * "coll_fingerprint: allreduce ok; op lengths: 1024 | 1024".
 *
 * Allgather: one call of 4 ints per rank; prints "ok" or "fails" (Open
 * MPI's two_proc algorithm refuses more than two processes).
 *
 * Every result is checked; the exit status is 1 when one is wrong. A
 * failed call (errors are returned) is reported, not fatal.
 *
 * With `builtin`, the allreduce uses MPI_SUM instead (no lengths): some
 * algorithms take built-in operations only.
 *
 * With `calls=N`, the allreduce runs N times (the user-defined sum) and each
 * rank counts the distinct fingerprints its calls left: 1 when every call
 * ran the same algorithm, more when a tool switched algorithms between
 * calls. Rank 0 prints them, rank by rank:
 * "coll_fingerprint: 40 allreduces ok; distinct op lengths: 1 | 1".
 * With `derived` as well, those calls reduce a derived datatype (a
 * contiguous type of one int, the same data): a tool asks the library the
 * size of that datatype, where it knows the predefined ones' already.
 *
 *   mpiexec -n 2 ./coll_fingerprint [count [builtin] [calls=N [derived]]]   (default 1024) */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIECES 64
static int pieces[MAX_PIECES], npieces;

static void sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    if (npieces < MAX_PIECES) pieces[npieces++] = *len;
    for (int i = 0; i < *len; i++) ((int *)inout)[i] += ((int *)in)[i];
}

int main(int argc, char **argv) {
    int rank, size, wrong = 0;
    int count = argc > 1 ? atoi(argv[1]) : 1024;
    int builtin = argc > 2 && strcmp(argv[2], "builtin") == 0;
    int calls = 1, derived = 0;
    for (int a = 2; a < argc; a++) {
        if (strncmp(argv[a], "calls=", 6) == 0) calls = atoi(argv[a] + 6);
        if (strcmp(argv[a], "derived") == 0) derived = 1;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int *s = malloc(sizeof(int) * (size_t)count), *r = malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++) s[i] = rank + i;
    if (calls > 1) {
        /* Each call's fingerprint: how many pieces the operation was handed
         * and their lengths (a hash of them), kept when new. */
        MPI_Op user;
        MPI_Op_create(sum, 1, &user);
        MPI_Datatype type = MPI_INT;
        if (derived) {
            MPI_Type_contiguous(1, MPI_INT, &type);
            MPI_Type_commit(&type);
        }
        long seen[16];
        int distinct = 0, ok = 1;
        for (int c = 0; c < calls; c++) {
            npieces = 0;
            int rc = MPI_Allreduce(s, r, count, type, user, MPI_COMM_WORLD);
            for (int i = 0; i < count; i++)
                if (rc != MPI_SUCCESS || r[i] != size * (size - 1) / 2 + size * i) ok = 0;
            long f = npieces;
            for (int i = 0; i < npieces && i < MAX_PIECES; i++) f = f * 1000003 + pieces[i];
            int known = 0;
            for (int i = 0; i < distinct; i++) known |= seen[i] == f;
            if (!known && distinct < 16) seen[distinct++] = f;
        }
        MPI_Op_free(&user);
        if (derived) MPI_Type_free(&type);
        int mine[2] = {distinct, ok}, *every = malloc(sizeof mine * (size_t)size);
        MPI_Gather(mine, 2, MPI_INT, every, 2, MPI_INT, 0, MPI_COMM_WORLD);
        int all_ok = 1;
        if (rank == 0) {
            for (int p = 0; p < size; p++) all_ok &= every[2 * p + 1];
            printf("coll_fingerprint: %d allreduces %s; distinct op lengths:", calls, all_ok ? "ok" : "WRONG");
            for (int p = 0; p < size; p++) printf(p ? " | %d" : " %d", every[2 * p]);
            printf("\n");
        }
        free(every);
        MPI_Bcast(&all_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
        free(s);
        free(r);
        MPI_Finalize();
        return all_ok ? 0 : 1;
    }
    MPI_Op op = MPI_SUM;
    if (!builtin) MPI_Op_create(sum, 1, &op);
    int rc = MPI_Allreduce(s, r, count, MPI_INT, op, MPI_COMM_WORLD);
    for (int i = 0; rc == MPI_SUCCESS && i < count; i++)
        if (r[i] != size * (size - 1) / 2 + size * i) wrong = 1;
    /* Every rank's lengths, printed by rank 0: "1024 | 1024" (rank 0 | rank 1). */
    int mine[17] = {0}, *every = malloc(sizeof mine * (size_t)size);
    mine[0] = npieces < 16 ? npieces : 16;
    for (int i = 0; i < mine[0]; i++) mine[1 + i] = pieces[i];
    MPI_Gather(mine, 17, MPI_INT, every, 17, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("coll_fingerprint: allreduce %s; op lengths:", rc == MPI_SUCCESS ? "ok" : "fails");
        for (int p = 0; p < size; p++) {
            printf(p ? " |" : "");
            for (int i = 0; i < every[17 * p]; i++) printf(" %d", every[17 * p + 1 + i]);
        }
        printf("\n");
    }
    free(every);
    if (!builtin) MPI_Op_free(&op);

    int g[4] = {rank, rank, rank, rank}, *all = malloc(sizeof(int) * 4 * (size_t)size);
    rc = MPI_Allgather(g, 4, MPI_INT, all, 4, MPI_INT, MPI_COMM_WORLD);
    for (int i = 0; rc == MPI_SUCCESS && i < 4 * size; i++)
        if (all[i] != i / 4) wrong = 1;
    if (rank == 0) printf("coll_fingerprint: allgather %s\n", rc == MPI_SUCCESS ? "ok" : "fails");

    int any = 0;
    MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) printf("coll_fingerprint: %s\n", any ? "WRONG RESULTS" : "all results correct");
    free(s);
    free(r);
    free(all);
    MPI_Finalize();
    return any ? 1 : 0;
}
