/* Checks every result of the blocking collectives the tuner can switch
 * (Allreduce, Bcast, Reduce, Allgather, Alltoall, Reduce_scatter_block,
 * Barrier) on several communicators whose collectives interleave: the
 * world, a dup of it, the row and column communicators of a 2-D grid, and
 * an even/odd split; message sizes from 0 bytes to 4 MiB. Integer data, so
 * every result is exact and compared bit for bit with the expected value.
 *
 *   coll_check [iterations] [multiple]
 *
 * The reductions (Allreduce, Reduce, Reduce_scatter_block) also run with a
 * non-commutative user-defined operation on a derived datatype: each element
 * is an affine map x -> m*x + c modulo a prime (two ints, a contiguous type),
 * and the operation composes maps in rank order, so an algorithm that
 * combines operands out of order, or one MPICH should have fallen back from,
 * gives a wrong result.
 *
 * `multiple` initialises with MPI_THREAD_MULTIPLE. Prints one line per
 * communicator on rank 0 and "coll_check: all results correct"; a wrong
 * result prints what and where and aborts the job. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long checked = 0;

static void fail(const char *what, const char *comm, int count, int i, long long got, long long want) {
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    printf("WRONG %s on %s (count %d) at %d on world rank %d: got %lld, want %lld\n", what, comm, count,
           i, rank, got, want);
    fflush(stdout);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

/* The value rank r contributes at index i in round k. */
static int val(int r, int i, int k) { return (r * 7919 + i * 31 + k * 17) % 100003 - 50000; }

/* Affine maps modulo P, as (m, c) pairs of ints: compose(f, g) is "f, then g". */
#define P 65521
static MPI_Datatype affine;
static MPI_Op compose;

static void affine_of(int r, int i, int k, int *m, int *c) {
    *m = 1 + (val(r, i, k) + 50000) % (P - 1);
    *c = (val(r, i, k + 7) + 50000) % P;
}

/* g := f then g, element-wise (f from the lower ranks, as MPI requires). */
static void compose_fn(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const int *f = in;
    int *g = inout;
    for (int i = 0; i < *len; i++) {
        long long m = (long long)f[2 * i] * g[2 * i] % P;
        long long c = ((long long)g[2 * i] * f[2 * i + 1] + g[2 * i + 1]) % P;
        g[2 * i] = (int)m;
        g[2 * i + 1] = (int)c;
    }
}

/* The composition of the maps of ranks 0 to size-1 at index i, in that order. */
static void composed(int size, int i, int k, int *m, int *c) {
    long long am, ac;
    int fm, fc;
    affine_of(0, i, k, &fm, &fc);
    am = fm;
    ac = fc;
    for (int r = 1; r < size; r++) {
        affine_of(r, i, k, &fm, &fc);
        ac = (fm * ac + fc) % P;
        am = am * fm % P;
    }
    *m = (int)am;
    *c = (int)ac;
}

static void check_affine(int got_m, int got_c, int size, int i, int k, const char *what, const char *comm, int count) {
    int m, c;
    composed(size, i, k, &m, &c);
    if (got_m != m) fail(what, comm, count, i, got_m, m);
    if (got_c != c) fail(what, comm, count, i, got_c, c);
}

/* The non-commutative reductions: `count` ints make count/2 maps. */
static void check_noncommutative(MPI_Comm comm, const char *name, int count, int k, int *a, int *b, int *c) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int n = count / 2;
    for (int i = 0; i < n; i++) affine_of(rank, i, k, &a[2 * i], &a[2 * i + 1]);
    MPI_Allreduce(a, b, n, affine, compose, comm);
    for (int i = 0; i < n; i++) check_affine(b[2 * i], b[2 * i + 1], size, i, k, "allreduce (composition)", name, count);
    int root = (k + 1) % size;
    MPI_Reduce(a, b, n, affine, compose, root, comm);
    if (rank == root)
        for (int i = 0; i < n; i++) check_affine(b[2 * i], b[2 * i + 1], size, i, k, "reduce (composition)", name, count);
    int per = n / size;
    for (int i = 0; i < per * size; i++) affine_of(rank, i, k, &a[2 * i], &a[2 * i + 1]);
    MPI_Reduce_scatter_block(a, c, per, affine, compose, comm);
    for (int i = 0; i < per; i++)
        check_affine(c[2 * i], c[2 * i + 1], size, rank * per + i, k, "reduce_scatter_block (composition)", name, count);
    checked += 3;
}

static void check_comm(MPI_Comm comm, const char *name, int count, int k, int *a, int *b, int *c) {
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);

    /* Allreduce (sum). */
    for (int i = 0; i < count; i++) a[i] = val(rank, i, k);
    MPI_Allreduce(a, b, count, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < count; i++) {
        long long want = 0;
        for (int r = 0; r < size; r++) want += val(r, i, k);
        if (b[i] != (int)want) fail("allreduce", name, count, i, b[i], want);
    }
    /* Reduce (max) onto a rotating root. */
    int root = k % size;
    for (int i = 0; i < count; i++) a[i] = val(rank, i, k + 1);
    MPI_Reduce(a, b, count, MPI_INT, MPI_MAX, root, comm);
    if (rank == root) {
        for (int i = 0; i < count; i++) {
            int want = val(0, i, k + 1);
            for (int r = 1; r < size; r++)
                if (val(r, i, k + 1) > want) want = val(r, i, k + 1);
            if (b[i] != want) fail("reduce", name, count, i, b[i], want);
        }
    }
    /* Bcast from the rotating root. */
    for (int i = 0; i < count; i++) b[i] = rank == root ? val(root, i, k + 2) : 0;
    MPI_Bcast(b, count, MPI_INT, root, comm);
    for (int i = 0; i < count; i++)
        if (b[i] != val(root, i, k + 2)) fail("bcast", name, count, i, b[i], val(root, i, k + 2));
    /* Allgather, Alltoall and Reduce_scatter_block: `per` elements per rank. */
    int per = count / size;
    for (int i = 0; i < per; i++) a[i] = val(rank, i, k + 3);
    MPI_Allgather(a, per, MPI_INT, b, per, MPI_INT, comm);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < per; i++)
            if (b[r * per + i] != val(r, i, k + 3)) fail("allgather", name, count, r * per + i, b[r * per + i], val(r, i, k + 3));
    for (int r = 0; r < size; r++)
        for (int i = 0; i < per; i++) a[r * per + i] = val(rank, r * per + i, k + 4);
    MPI_Alltoall(a, per, MPI_INT, b, per, MPI_INT, comm);
    for (int r = 0; r < size; r++)
        for (int i = 0; i < per; i++)
            if (b[r * per + i] != val(r, rank * per + i, k + 4))
                fail("alltoall", name, count, r * per + i, b[r * per + i], val(r, rank * per + i, k + 4));
    for (int i = 0; i < per * size; i++) a[i] = val(rank, i, k + 5);
    MPI_Reduce_scatter_block(a, c, per, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < per; i++) {
        long long want = 0;
        for (int r = 0; r < size; r++) want += val(r, rank * per + i, k + 5);
        if (c[i] != (int)want) fail("reduce_scatter_block", name, count, i, c[i], want);
    }
    MPI_Barrier(comm);
    checked += 6;
    check_noncommutative(comm, name, count, k, a, b, c);
}

int main(int argc, char **argv) {
    int iterations = argc > 1 ? atoi(argv[1]) : 16;
    int multiple = argc > 2 && strcmp(argv[2], "multiple") == 0;
    if (multiple) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Type_contiguous(2, MPI_INT, &affine);
    MPI_Type_commit(&affine);
    MPI_Op_create(compose_fn, 0, &compose);

    int dims[2] = {0, 0};
    MPI_Dims_create(size, 2, dims);
    MPI_Comm dup, row, col, parity;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank / dims[1], rank, &row);
    MPI_Comm_split(MPI_COMM_WORLD, rank % dims[1], rank, &col);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &parity);
    MPI_Comm comms[5] = {MPI_COMM_WORLD, dup, row, col, parity};
    const char *names[5] = {"world", "dup", "row", "column", "parity"};

    /* Counts of ints: 0 B, 4 B, 400 B, 20 KB, 280 KB, 1.2 MB, 4 MiB. */
    const int counts[] = {0, 1, 100, 5000, 70000, 300000, 1 << 20};
    const int ncounts = sizeof counts / sizeof counts[0];
    int max = 1 << 20;
    int *a = malloc(sizeof(int) * max), *b = malloc(sizeof(int) * max), *c = malloc(sizeof(int) * max);
    if (!a || !b || !c) MPI_Abort(MPI_COMM_WORLD, 2);

    for (int k = 0; k < iterations; k++) {
        for (int s = 0; s < ncounts; s++) {
            /* The largest sizes every fourth round only: the job stays short. */
            if (counts[s] >= 300000 && k % 4) continue;
            for (int m = 0; m < 5; m++) check_comm(comms[m], names[m], counts[s], k, a, b, c);
        }
    }
    long long total = 0;
    MPI_Reduce(&checked, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("coll_check: %d ranks, grid %dx%d, %d rounds, %lld collective calls checked\n", size, dims[0],
               dims[1], iterations, total);
        printf("coll_check: all results correct\n");
    }
    MPI_Comm_free(&parity);
    MPI_Comm_free(&col);
    MPI_Comm_free(&row);
    MPI_Comm_free(&dup);
    MPI_Op_free(&compose);
    MPI_Type_free(&affine);
    free(a);
    free(b);
    free(c);
    MPI_Finalize();
    return 0;
}
