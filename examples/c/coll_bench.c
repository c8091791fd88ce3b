/*
 * coll_bench: the time of a loop of blocking collectives, for the
 * collective-tuning benchmark (benches/collectives.sh): run it with the
 * library's default algorithm, with each algorithm fixed at start, and
 * under online tuning, and compare.
 *
 * usage: coll_bench COLL BYTES ITERS
 *        coll_bench mixed SCALE
 *
 *   COLL   allreduce (doubles, MPI_SUM), allreduce_int (64-bit integers,
 *          MPI_SUM: what collective tuning's default mode `safe` tunes,
 *          where it leaves the doubles' allreduce on the library's
 *          choice), reduce_int (64-bit integers, MPI_SUM, to rank 0),
 *          bcast (ints, root 0), allgather or alltoall (ints)
 *   BYTES  per rank: the vector reduced, the message broadcast, each rank's
 *          contribution to the allgather, the block sent to each rank by
 *          the alltoall (the size the tuner bins by); a multiple of 8
 *   ITERS  blocking calls, all timed: the first calls are in the loop on
 *          purpose, so that online tuning's exploration counts
 *
 * `mixed` is a small "application": SCALE steps, each an allreduce of 8 B
 * (a residual), a little computation that depends on it, an allreduce of
 * 1 MiB, a bcast of 64 KiB and an alltoall of 4 KiB per rank.
 *
 * After a barrier, every rank times its loop with MPI_Wtime; rank 0 prints
 * the maximum over ranks:
 *   coll_bench: allreduce bytes=1048576 iters=500 time_s=0.812345
 *   coll_bench: mixed scale=400 time_s=1.234567
 * The data are integers (exactly representable doubles for the
 * allreduce), and one element changes at every call, so the results are
 * exact whatever the algorithm; that element is checked after every call
 * (so every algorithm a tuner tries is checked), the whole result once,
 * after the loop. A
 * wrong result is reported on stderr and aborts the job (status 3); bad
 * arguments exit with status 2.
 *
 * COLL_BENCH_SWITCH=COLL:CVAR=VALUE (no tool loaded) measures what switching
 * an algorithm per call costs the library: the program initialises MPI_T
 * with MPI_THREAD_MULTIPLE (as mpit-tuner does), and around every call of
 * COLL (allreduce, bcast, allgather, alltoall, reduce; in `mixed` too) writes the
 * integer VALUE to CVAR before the call and the value it read at start back
 * after it, which is what online tuning does on a library that reads the
 * variable at every call (MPICH). A write that fails or does not read back
 * is reported on stderr and aborts the job (status 2).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static void wrong(const char *what, long i, double got, double want)
{
    fprintf(stderr, "coll_bench: WRONG %s at %ld on rank %d: got %.17g, want %.17g\n", what, i, rank, got,
            want);
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static void *alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "coll_bench: cannot allocate %zu bytes\n", bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* COLL_BENCH_SWITCH: which collective (0: none), the variable, the value
 * written before each call, the default written back after it. */
enum { SW_NONE, SW_ALLREDUCE, SW_BCAST, SW_ALLGATHER, SW_ALLTOALL, SW_REDUCE };
static struct {
    int coll;
    MPI_T_cvar_handle h;
    int value, dflt;
    const char *name;
} sw;

static void sw_fail(const char *what, int rc)
{
    fprintf(stderr, "coll_bench: COLL_BENCH_SWITCH, variable %s: %s failed on rank %d (error %d)\n", sw.name, what,
            rank, rc);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Parses COLL_BENCH_SWITCH and proves the value is taken; 0 or 2 (bad). */
static int switch_init(void)
{
    static char spec[256];
    const char *env = getenv("COLL_BENCH_SWITCH");
    if (!env || !*env) return 0;
    if (strlen(env) >= sizeof spec) goto bad;
    strcpy(spec, env);
    char *colon = strchr(spec, ':'), *eq = strchr(spec, '=');
    if (!colon || !eq || eq < colon) goto bad;
    *colon = *eq = 0;
    const char *names[] = {"", "allreduce", "bcast", "allgather", "alltoall", "reduce"};
    for (int c = 1; c < (int)(sizeof names / sizeof names[0]); c++)
        if (strcmp(spec, names[c]) == 0) sw.coll = c;
    char *end;
    long v = strtol(eq + 1, &end, 10);
    if (!sw.coll || *end || end == eq + 1 || v < 0 || v > 0x7fffffffL) goto bad;
    sw.value = (int)v;
    sw.name = colon + 1;
    int provided, index, count, rc;
    if ((rc = MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided)) != MPI_SUCCESS) sw_fail("MPI_T_init_thread", rc);
    if ((rc = MPI_T_cvar_get_index(sw.name, &index)) != MPI_SUCCESS) sw_fail("MPI_T_cvar_get_index", rc);
    char name[256], desc[8];
    int name_len = sizeof name, desc_len = sizeof desc, verbosity, bind, scope;
    MPI_Datatype type;
    MPI_T_enum enumtype;
    rc = MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind, &scope);
    if (rc != MPI_SUCCESS) sw_fail("MPI_T_cvar_get_info", rc);
    if (type != MPI_INT) sw_fail("the check that it is an MPI_INT", 0);
    if ((rc = MPI_T_cvar_handle_alloc(index, NULL, &sw.h, &count)) != MPI_SUCCESS)
        sw_fail("MPI_T_cvar_handle_alloc", rc);
    if (count != 1) sw_fail("the check that it is a scalar", 0);
    int back = -1;
    if ((rc = MPI_T_cvar_read(sw.h, &sw.dflt)) != MPI_SUCCESS) sw_fail("MPI_T_cvar_read", rc);
    if ((rc = MPI_T_cvar_write(sw.h, &sw.value)) != MPI_SUCCESS) sw_fail("MPI_T_cvar_write", rc);
    if ((rc = MPI_T_cvar_read(sw.h, &back)) != MPI_SUCCESS || back != sw.value)
        sw_fail("reading the value back", rc);
    if ((rc = MPI_T_cvar_write(sw.h, &sw.dflt)) != MPI_SUCCESS) sw_fail("writing the default back", rc);
    return 0;
bad:
    if (rank == 0) fprintf(stderr, "coll_bench: COLL_BENCH_SWITCH=%s: want COLL:CVAR=VALUE\n", env);
    return 2;
}

static void switch_end(void)
{
    if (!sw.coll) return;
    int rc;
    if ((rc = MPI_T_cvar_handle_free(&sw.h)) != MPI_SUCCESS || (rc = MPI_T_finalize()) != MPI_SUCCESS)
        fprintf(stderr, "coll_bench: COLL_BENCH_SWITCH, variable %s: closing MPI_T failed on rank %d (error %d)\n",
                sw.name, rank, rc);
}

/* Around a call of collective `c`: `&sw.value` before, `&sw.dflt` after. */
static inline void switch_write(int c, const int *v)
{
    int rc;
    if (sw.coll == c && (rc = MPI_T_cvar_write(sw.h, v)) != MPI_SUCCESS) sw_fail("MPI_T_cvar_write", rc);
}

/* The value rank r contributes at index i: small integers. */
static int val(int r, long i) { return (int)((r * 7919L + i * 31L) % 1009L) - 504; }

/* Allreduce of n doubles (or of n 64-bit integers, xi and yi); x[0]
 * carries the call's number. */
struct allreduce {
    long n;
    int integer;
    int reduce; /* MPI_Reduce to rank 0 instead */
    double *x, *y;
    int64_t *xi, *yi;
};

static void allreduce_init(struct allreduce *a, long bytes, int integer)
{
    a->n = bytes / 8;
    a->integer = integer;
    a->reduce = 0;
    a->x = alloc(8 * (size_t)a->n);
    a->y = alloc(8 * (size_t)a->n);
    a->xi = (int64_t *)(void *)a->x;
    a->yi = (int64_t *)(void *)a->y;
    for (long i = 0; i < a->n; i++) {
        if (integer) a->xi[i] = val(rank, i);
        else a->x[i] = val(rank, i);
    }
    memset(a->y, 0, 8 * (size_t)a->n);
}

/* The element call number k changed, after that call: every call's result
 * is checked there, whatever algorithm ran it (the whole result once, after
 * the loop). */
static void allreduce_first(const struct allreduce *a, long k)
{
    if (a->n == 0 || (a->reduce && rank != 0)) return;
    double want = (double)size * (double)k + (double)size * (size - 1) / 2;
    double got = a->integer ? (double)a->yi[0] : a->y[0];
    if (got != want) wrong("first element, call", k, got, want);
}

static void allreduce_call(struct allreduce *a, long k)
{
    if (a->n > 0) {
        if (a->integer) a->xi[0] = k + rank;
        else a->x[0] = (double)(k + rank);
    }
    MPI_Datatype t = a->integer ? MPI_INT64_T : MPI_DOUBLE;
    if (a->reduce) {
        switch_write(SW_REDUCE, &sw.value);
        MPI_Reduce(a->x, a->y, (int)a->n, t, MPI_SUM, 0, MPI_COMM_WORLD);
        switch_write(SW_REDUCE, &sw.dflt);
        allreduce_first(a, k);
        return;
    }
    switch_write(SW_ALLREDUCE, &sw.value);
    MPI_Allreduce(a->x, a->y, (int)a->n, t, MPI_SUM, MPI_COMM_WORLD);
    switch_write(SW_ALLREDUCE, &sw.dflt);
    allreduce_first(a, k);
}

/* After call number `last`. */
static void allreduce_check(const struct allreduce *a, long last, const char *what)
{
    if (a->reduce && rank != 0) return;
    for (long i = 0; i < a->n; i++) {
        double want = 0;
        for (int r = 0; r < size; r++) want += i == 0 ? (double)(last + r) : val(r, i);
        double got = a->integer ? (double)a->yi[i] : a->y[i];
        if (got != want) wrong(what, i, got, want);
    }
}

/* Bcast of n ints from rank 0; b[0] carries the call's number. */
struct bcast {
    long n;
    int *b;
};

static void bcast_init(struct bcast *c, long bytes)
{
    c->n = bytes / (long)sizeof(int);
    c->b = alloc(sizeof(int) * (size_t)c->n);
    for (long i = 0; i < c->n; i++) c->b[i] = rank == 0 ? val(0, i) : 0;
}

static void bcast_call(struct bcast *c, long k)
{
    if (rank == 0 && c->n > 0) c->b[0] = (int)k;
    switch_write(SW_BCAST, &sw.value);
    MPI_Bcast(c->b, (int)c->n, MPI_INT, 0, MPI_COMM_WORLD);
    switch_write(SW_BCAST, &sw.dflt);
    if (c->n > 0 && c->b[0] != (int)k) wrong("first element, call", k, c->b[0], (double)k);
}

static void bcast_check(const struct bcast *c, long last, const char *what)
{
    for (long i = 0; i < c->n; i++) {
        int want = i == 0 ? (int)last : val(0, i);
        if (c->b[i] != want) wrong(what, i, c->b[i], want);
    }
}

/* Allgather (all = 0) or alltoall (all = 1) of blocks of n ints; the
 * first element of each block carries the call's number. */
struct gather {
    int all;
    long n;
    int *s, *r;
};

static void gather_init(struct gather *g, int all, long bytes)
{
    g->all = all;
    g->n = bytes / (long)sizeof(int);
    long send = all ? g->n * size : g->n;
    g->s = alloc(sizeof(int) * (size_t)send);
    g->r = alloc(sizeof(int) * (size_t)(g->n * size));
    for (long i = 0; i < send; i++) g->s[i] = val(rank, i);
    memset(g->r, 0, sizeof(int) * (size_t)(g->n * size));
}

static void gather_call(struct gather *g, long k)
{
    if (g->n > 0) {
        if (g->all)
            for (int d = 0; d < size; d++) g->s[d * g->n] = (int)(k + d);
        else
            g->s[0] = (int)k;
    }
    int c = g->all ? SW_ALLTOALL : SW_ALLGATHER;
    switch_write(c, &sw.value);
    if (g->all)
        MPI_Alltoall(g->s, (int)g->n, MPI_INT, g->r, (int)g->n, MPI_INT, MPI_COMM_WORLD);
    else
        MPI_Allgather(g->s, (int)g->n, MPI_INT, g->r, (int)g->n, MPI_INT, MPI_COMM_WORLD);
    switch_write(c, &sw.dflt);
    /* The first element of every block, after every call. */
    if (g->n > 0)
        for (int src = 0; src < size; src++) {
            int want = (int)(g->all ? k + rank : k);
            if (g->r[src * g->n] != want) wrong("first element of a block, call", k, g->r[src * g->n], want);
        }
}

static void gather_check(const struct gather *g, long last, const char *what)
{
    for (int src = 0; src < size; src++) {
        for (long i = 0; i < g->n; i++) {
            /* Block src of the result: what rank src sent to this rank. */
            long j = g->all ? rank * g->n + i : i;
            int want = i == 0 ? (int)(g->all ? last + rank : last) : val(src, j);
            int got = g->r[src * g->n + i];
            if (got != want) wrong(what, src * g->n + i, got, want);
        }
    }
}

/* About 20 us of arithmetic that depends on the residual, so the
 * computation cannot move across the collectives. */
static double compute(double *w, long n, double residual)
{
    double s = 0;
    for (int pass = 0; pass < 4; pass++)
        for (long i = 0; i < n; i++) {
            w[i] = w[i] * 0.999 + 1e-3 * residual / (double)(i + 1);
            s += w[i];
        }
    return s;
}

static double max_time(double t)
{
    double m = 0;
    MPI_Reduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    return m;
}

static int usage(void)
{
    if (rank == 0)
        fprintf(stderr, "usage: coll_bench allreduce|allreduce_int|reduce_int|bcast|allgather|alltoall BYTES ITERS\n"
                        "       coll_bench mixed SCALE\n");
    MPI_Finalize();
    return 2;
}

static int mixed(long scale)
{
    struct allreduce small, big;
    struct bcast bc;
    struct gather a2a;
    allreduce_init(&small, 8, 0);
    allreduce_init(&big, 1L << 20, 0);
    bcast_init(&bc, 64L << 10);
    gather_init(&a2a, 1, 4L << 10);
    long nw = 2048;
    double *w = alloc(sizeof(double) * (size_t)nw), sink = 0;
    for (long i = 0; i < nw; i++) w[i] = 1.0;

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long k = 0; k < scale; k++) {
        allreduce_call(&small, k);
        sink += compute(w, nw, small.y[0]);
        allreduce_call(&big, k);
        bcast_call(&bc, k);
        gather_call(&a2a, k);
    }
    double t = max_time(MPI_Wtime() - t0);
    if (scale > 0) {
        allreduce_check(&small, scale - 1, "mixed allreduce 8 B");
        allreduce_check(&big, scale - 1, "mixed allreduce 1 MiB");
        bcast_check(&bc, scale - 1, "mixed bcast 64 KiB");
        gather_check(&a2a, scale - 1, "mixed alltoall 4 KiB");
    }
    if (sink != sink) fprintf(stderr, "coll_bench: the computation gave NaN\n");
    if (rank == 0) printf("coll_bench: mixed scale=%ld time_s=%.6f\n", scale, t);
    free(w);
    free(small.x), free(small.y), free(big.x), free(big.y), free(bc.b), free(a2a.s), free(a2a.r);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (switch_init()) {
        MPI_Finalize();
        return 2;
    }
    if (argc == 3 && strcmp(argv[1], "mixed") == 0) {
        char *end;
        long scale = strtol(argv[2], &end, 10);
        if (*end || scale < 0) return usage();
        int rc = mixed(scale);
        switch_end();
        MPI_Finalize();
        return rc;
    }
    if (argc != 4) return usage();
    const char *coll = argv[1];
    char *end1, *end2;
    long bytes = strtol(argv[2], &end1, 10), iters = strtol(argv[3], &end2, 10);
    if (*end1 || *end2 || bytes < 0 || bytes % 8 || iters < 1 || bytes / 4 > 0x7fffffffL / size) return usage();

    struct allreduce ar;
    struct bcast bc;
    struct gather g;
    int which;
    if (strcmp(coll, "allreduce") == 0 || strcmp(coll, "allreduce_int") == 0) {
        which = 0;
        allreduce_init(&ar, bytes, coll[9] == '_');
    } else if (strcmp(coll, "reduce_int") == 0) {
        which = 0;
        allreduce_init(&ar, bytes, 1);
        ar.reduce = 1;
    } else if (strcmp(coll, "bcast") == 0) {
        which = 1;
        bcast_init(&bc, bytes);
    } else if (strcmp(coll, "allgather") == 0 || strcmp(coll, "alltoall") == 0) {
        which = 2;
        gather_init(&g, coll[3] == 't', bytes);
    } else {
        return usage();
    }

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    switch (which) {
    case 0:
        for (long k = 0; k < iters; k++) allreduce_call(&ar, k);
        break;
    case 1:
        for (long k = 0; k < iters; k++) bcast_call(&bc, k);
        break;
    default:
        for (long k = 0; k < iters; k++) gather_call(&g, k);
        break;
    }
    double t = max_time(MPI_Wtime() - t0);
    switch (which) {
    case 0:
        allreduce_check(&ar, iters - 1, coll);
        free(ar.x), free(ar.y);
        break;
    case 1:
        bcast_check(&bc, iters - 1, coll);
        free(bc.b);
        break;
    default:
        gather_check(&g, iters - 1, coll);
        free(g.s), free(g.r);
        break;
    }
    if (rank == 0) printf("coll_bench: %s bytes=%ld iters=%ld time_s=%.6f\n", coll, bytes, iters, t);
    switch_end();
    MPI_Finalize();
    return 0;
}
