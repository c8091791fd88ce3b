/* When does a collective algorithm written through MPI_T after MPI_Init
 * take effect? A deterministic witness, not a timing: an algorithm the call
 * cannot use makes the call fail when the library reads the variable.
 *
 * MPICH: MPIR_CVAR_COLLECTIVE_FALLBACK is set to `error` (0), then
 * MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM to pairwise_sendrecv_replace (4 in
 * MPICH 4.0, 5 in 5.0, which added k_brucks before it: the value is the
 * entry's position in the variable's description), which needs MPI_IN_PLACE: an Alltoall with a separate send buffer fails
 * if, and only if, the library uses the written value.
 * Open MPI (started with OMPI_MCA_coll_tuned_use_dynamic_rules=1, 3 ranks):
 * coll_tuned_allgather_algorithm is set to two_proc, which refuses more
 * than two processes.
 * MVAPICH2 (2.3.7): MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM is set to
 * inplace_alltoall, whose value (the position in MVAPICH2's enum; MPI_T
 * gives no enumeration and no list) is the program's argument. That
 * algorithm, forced, copies the send buffer with the receive type, so an
 * alltoall whose send type is strided (every other int) and whose receive
 * type is MPI_INT gets wrong data: the call "fails" when any rank's data
 * is wrong (agreed with an allreduce). Started with the variable set to
 * that value in the environment, the first call fails: the control that
 * shows the witness sees the algorithm at all.
 *
 * Each library's case: a call with the default, the write, a call on the
 * same communicator, a call on a communicator created after the write, the
 * default written back. Rank 0 prints the library's version line, the
 * outcome of each and a verdict: "coll_witness: <variable>: next call" (the
 * next call used it), "next communicator" (only communicators created later
 * did) or "start only" (no call did: only a setting made before start can
 * choose the algorithm); the words of the tuner's support table
 * (`Support::when`), which the tests compare with this verdict. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size;

static int cvar_index(const char *name) {
    int index = -1;
    if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return -1;
    return index;
}

static int write_int(const char *name, int value) {
    int index = cvar_index(name), count;
    MPI_T_cvar_handle h;
    if (index < 0) return -1;
    if (MPI_T_cvar_handle_alloc(index, NULL, &h, &count) != MPI_SUCCESS) return -1;
    int rc = MPI_T_cvar_write(h, &value);
    MPI_T_cvar_handle_free(&h);
    return rc;
}

/* The value of item `item` of the variable's MPI_T enumeration, or -1. */
static int enum_value(const char *name, const char *item) {
    int index = cvar_index(name), verbosity, binding, scope, num;
    char vname[256], desc[1024], ename[256];
    int vlen = sizeof vname, dlen = sizeof desc, elen;
    MPI_Datatype type;
    MPI_T_enum e;
    if (index < 0) return -1;
    if (MPI_T_cvar_get_info(index, vname, &vlen, &verbosity, &type, &e, desc, &dlen, &binding, &scope) !=
            MPI_SUCCESS ||
        e == MPI_T_ENUM_NULL)
        return -1;
    elen = sizeof ename;
    if (MPI_T_enum_get_info(e, &num, ename, &elen) != MPI_SUCCESS) return -1;
    for (int i = 0; i < num; i++) {
        int value;
        char iname[256];
        int ilen = sizeof iname;
        if (MPI_T_enum_get_item(e, i, &value, iname, &ilen) == MPI_SUCCESS && strcmp(iname, item) == 0)
            return value;
    }
    return -1;
}

/* MPICH: the value of algorithm `item` of the variable, which is the
 * entry's position in its description ("auto - ...", "brucks    - ...", ...;
 * MPI_T gives no enumeration), or -1. Each entry before it has one " - ". */
static int described_value(const char *name, const char *item) {
    int index = cvar_index(name), verbosity, binding, scope;
    char vname[256], desc[4096];
    int vlen = sizeof vname, dlen = sizeof desc;
    MPI_Datatype type;
    MPI_T_enum e;
    if (index < 0 ||
        MPI_T_cvar_get_info(index, vname, &vlen, &verbosity, &type, &e, desc, &dlen, &binding, &scope) != MPI_SUCCESS)
        return -1;
    size_t n = strlen(item);
    for (const char *at = strstr(desc, item); at; at = strstr(at + 1, item)) {
        const char *end = at + n;
        while (*end == ' ') end++;
        if (*end != '-') continue;
        int value = 0;
        for (const char *p = desc + 1; p + 1 < at; p++)
            if (p[-1] == ' ' && p[0] == '-' && p[1] == ' ') value++;
        return value;
    }
    return -1;
}

static int alltoall(MPI_Comm comm) {
    int s[64], r[64];
    for (int i = 0; i < 64; i++) s[i] = rank;
    return MPI_Alltoall(s, 64 / size, MPI_INT, r, 64 / size, MPI_INT, comm);
}

/* One int to each rank, sent with a strided type (every other int of the
 * send buffer), received as MPI_INT; MPI_ERR_OTHER when any rank's data is
 * wrong. */
static int strided_alltoall(MPI_Comm comm) {
    int s[128], r[64], n, wrong = 0, any = 0;
    MPI_Comm_size(comm, &n);
    if (n > 64) return MPI_ERR_OTHER;
    for (int i = 0; i < n; i++) {
        s[2 * i] = rank * 1000 + i;
        s[2 * i + 1] = -1;
        r[i] = -2;
    }
    MPI_Datatype every_other;
    MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint)sizeof(int), &every_other);
    MPI_Type_commit(&every_other);
    int rc = MPI_Alltoall(s, 1, every_other, r, 1, MPI_INT, comm);
    MPI_Type_free(&every_other);
    if (rc != MPI_SUCCESS) return rc;
    int me;
    MPI_Comm_rank(comm, &me);
    for (int i = 0; i < n; i++) {
        int from_world;
        MPI_Group g, w;
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &w);
        MPI_Group_translate_ranks(g, 1, &i, w, &from_world);
        MPI_Group_free(&g);
        MPI_Group_free(&w);
        if (r[i] != from_world * 1000 + me) wrong = 1;
    }
    rc = MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, comm);
    if (rc != MPI_SUCCESS) return rc;
    return any ? MPI_ERR_OTHER : MPI_SUCCESS;
}

static int allgather(MPI_Comm comm) {
    int s[4] = {rank, rank, rank, rank}, r[256];
    return MPI_Allgather(s, 4, MPI_INT, r, 4, MPI_INT, comm);
}

static const char *outcome(int rc) { return rc == MPI_SUCCESS ? "ok" : "fails"; }

int main(int argc, char **argv) {
    int provided;
    MPI_Init(&argc, &argv);
    MPI_T_init_thread(MPI_THREAD_SINGLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    const char *variable;
    int value, fallback = 1, library_default = 0;
    int (*call)(MPI_Comm);
    if (cvar_index("MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM") >= 0) {
        variable = "MPIR_CVAR_ALLTOALL_COLLECTIVE_ALGORITHM";
        value = argc > 1 ? atoi(argv[1]) : -1;
        library_default = -1; /* MVAPICH2's own choice */
        call = strided_alltoall;
    } else if (cvar_index("MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM") >= 0) {
        variable = "MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM";
        value = described_value(variable, "pairwise_sendrecv_replace");
        call = alltoall;
        fallback = write_int("MPIR_CVAR_COLLECTIVE_FALLBACK", 0) == MPI_SUCCESS;
    } else {
        variable = "coll_tuned_allgather_algorithm";
        value = enum_value(variable, "two_proc");
        call = allgather;
    }
    if (value < 0 || !fallback) {
        if (rank == 0) printf("coll_witness: %s: cannot set up the witness\n", variable);
        MPI_T_finalize();
        MPI_Finalize();
        return 2;
    }
    int before = call(MPI_COMM_WORLD);
    int written = write_int(variable, value);
    int same = call(MPI_COMM_WORLD);
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
    int fresh = call(dup);
    int back = write_int(variable, library_default);
    int after = call(MPI_COMM_WORLD);
    if (rank == 0) {
        char version[MPI_MAX_LIBRARY_VERSION_STRING];
        int vlen = 0;
        MPI_Get_library_version(version, &vlen);
        version[strcspn(version, "\r\n")] = '\0';
        printf("coll_witness: library: %s\n", version);
        printf("coll_witness: default %s; write %s=%d %s; same communicator %s; new communicator %s; "
               "default back %s, then %s\n",
               outcome(before), variable, value, written == MPI_SUCCESS ? "accepted" : "refused", outcome(same),
               outcome(fresh), back == MPI_SUCCESS ? "accepted" : "refused", outcome(after));
        const char *verdict = before != MPI_SUCCESS ? "no verdict (the call fails before the write)"
                              : same != MPI_SUCCESS ? "next call"
                              : fresh != MPI_SUCCESS ? "next communicator"
                                                     : "start only";
        printf("coll_witness: %s: %s\n", variable, verdict);
    }
    MPI_Comm_free(&dup);
    MPI_T_finalize();
    MPI_Finalize();
    return 0;
}
