/* Which reductions may online collective tuning's mode `safe` switch?
 * Floating-point ones and those with a user-defined operation must stay on
 * the library's default; integer ones with predefined operations may
 * switch.
 *
 *   coll_classes CALLS [ints]
 *
 * Each of CALLS rounds on MPI_COMM_WORLD makes, in this order:
 *   - MPI_Allreduce of 4 doubles with MPI_SUM (32 bytes);
 *   - MPI_Allreduce of 2 MPI_DOUBLE_INT with MPI_MINLOC;
 *   - MPI_Allreduce of 64 structs {int, double} with a user-defined
 *     (commutative) sum, whose function records the length of every piece
 *     it is handed: the algorithm's fingerprint (as in coll_fingerprint);
 *   - MPI_Bcast of 8 ints from root (round % size);
 * and with `ints`, between them, on the same communicator and size bin:
 *   - MPI_Allreduce of 8 ints with MPI_SUM (32 bytes);
 *   - MPI_Allreduce of 8 ints with MPI_BXOR.
 * (No predefined operation on a derived datatype: MPICH 4 and Open MPI
 * refuse them.)
 *
 * The doubles mix magnitudes (1e16 on odd ranks, negative on every fourth,
 * about 1 on even ranks), so
 * that another order of summation changes the last bits. Rank 0 prints an
 * FNV-1a hash of the bits of every floating-point result it got, the
 * integer results' checksum (checked exactly on every rank: a wrong one
 * aborts), and the number of distinct piece-length patterns the
 * user-defined operation saw on each rank (1: every call ran the same
 * algorithm; MPICH 5.0.2 hands the first call of a communicator other
 * pieces than the next ones, 2 without a tool), on a line of its own:
 *   "coll_classes: 200 rounds; floating-point bits 1a2b...; integers 12345"
 *   "coll_classes: user op patterns 1 | 1" */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAIRS 64
#define MAX_PIECES 64
#define MAX_PATTERNS 16

struct pair {
    int i;
    double d;
};

static int pieces[MAX_PIECES], npieces;

static void pair_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    if (npieces < MAX_PIECES) pieces[npieces++] = *len;
    struct pair *a = in, *b = inout;
    for (int k = 0; k < *len; k++) {
        b[k].i += a[k].i;
        b[k].d += a[k].d;
    }
}

static uint64_t fnv = 14695981039346656037ull;

static void hash_doubles(const double *x, int n) {
    for (int k = 0; k < n; k++) {
        uint64_t bits;
        memcpy(&bits, &x[k], sizeof bits);
        for (int b = 0; b < 8; b++) {
            fnv ^= (bits >> (8 * b)) & 0xff;
            fnv *= 1099511628211ull;
        }
    }
}

static void die(const char *what, long long got, long long want) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("WRONG %s on rank %d: got %lld, want %lld\n", what, rank, got, want);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int calls = argc > 1 ? atoi(argv[1]) : 100;
    int ints = argc > 2 && strcmp(argv[2], "ints") == 0;

    MPI_Datatype pair_type;
    int lengths[2] = {1, 1};
    MPI_Aint displs[2] = {offsetof(struct pair, i), offsetof(struct pair, d)};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
    MPI_Datatype pair_raw;
    MPI_Type_create_struct(2, lengths, displs, types, &pair_raw);
    MPI_Type_create_resized(pair_raw, 0, sizeof(struct pair), &pair_type);
    MPI_Type_commit(&pair_type);
    MPI_Type_free(&pair_raw);
    MPI_Op pair_op;
    MPI_Op_create(pair_sum, 1, &pair_op);

    /* Distinct piece-length patterns of the user-defined operation. */
    int patterns[MAX_PATTERNS][MAX_PIECES + 1];
    int npatterns = 0;
    long long checksum = 0;

    for (int k = 0; k < calls; k++) {
        double x[4], y[4];
        for (int j = 0; j < 4; j++)
            x[j] = rank % 2 ? (rank % 4 == 3 ? -1.0e16 : 1.0e16) * (j + 1)
                            : 1.0 + 0.25 * j + 0.5 * (k % 5);
        MPI_Allreduce(x, y, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        hash_doubles(y, 4);

        if (ints) {
            int a[8], b[8];
            long long want = 0;
            for (int j = 0; j < 8; j++) a[j] = rank * 1000 + j * 7 + k;
            MPI_Allreduce(a, b, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (int j = 0; j < 8; j++) {
                want = (long long)size * (size - 1) / 2 * 1000 + (long long)size * (j * 7 + k);
                if (b[j] != want) die("int sum", b[j], want);
                checksum += b[j];
            }
        }

        if (ints) {
            int a[8], b[8];
            for (int j = 0; j < 8; j++) a[j] = (rank + 1) * (j + 3) * (k + 5);
            MPI_Allreduce(a, b, 8, MPI_INT, MPI_BXOR, MPI_COMM_WORLD);
            for (int j = 0; j < 8; j++) {
                int want = 0;
                for (int r = 0; r < size; r++) want ^= (r + 1) * (j + 3) * (k + 5);
                if (b[j] != want) die("int bxor", b[j], want);
                checksum += b[j];
            }
        }

        struct {
            double d;
            int i;
        } loc[2], locmin[2];
        for (int j = 0; j < 2; j++) {
            loc[j].d = x[j];
            loc[j].i = rank;
        }
        MPI_Allreduce(loc, locmin, 2, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
        for (int j = 0; j < 2; j++) hash_doubles(&locmin[j].d, 1);

        struct pair p[PAIRS], q[PAIRS];
        for (int j = 0; j < PAIRS; j++) {
            p[j].i = rank + j;
            p[j].d = x[j % 4];
        }
        npieces = 0;
        MPI_Allreduce(p, q, PAIRS, pair_type, pair_op, MPI_COMM_WORLD);
        for (int j = 0; j < PAIRS; j++) {
            long long want = (long long)size * (size - 1) / 2 + (long long)size * j;
            if (q[j].i != want) die("pair sum", q[j].i, want);
            checksum += q[j].i;
        }
        int seen = 0;
        for (int s = 0; s < npatterns && !seen; s++)
            seen = patterns[s][0] == npieces &&
                   memcmp(&patterns[s][1], pieces, sizeof(int) * npieces) == 0;
        if (!seen && npatterns < MAX_PATTERNS) {
            patterns[npatterns][0] = npieces;
            memcpy(&patterns[npatterns][1], pieces, sizeof(int) * npieces);
            npatterns++;
        }

        int bc[8];
        for (int j = 0; j < 8; j++) bc[j] = rank == k % size ? k * 8 + j : -1;
        MPI_Bcast(bc, 8, MPI_INT, k % size, MPI_COMM_WORLD);
        for (int j = 0; j < 8; j++) {
            if (bc[j] != k * 8 + j) die("bcast", bc[j], k * 8 + j);
            checksum += bc[j];
        }
    }

    int *all = rank == 0 ? malloc(sizeof(int) * size) : NULL;
    MPI_Gather(&npatterns, 1, MPI_INT, all, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("coll_classes: %d rounds; floating-point bits %016llx; integers %lld\n", calls,
               (unsigned long long)fnv, checksum);
        printf("coll_classes: user op patterns");
        for (int r = 0; r < size; r++) printf("%s%d", r ? " | " : " ", all[r]);
        printf("\n");
        free(all);
    }
    MPI_Op_free(&pair_op);
    MPI_Type_free(&pair_type);
    MPI_Finalize();
    return 0;
}
