/*
 * faultinject: a test-only preload that makes the tuner's own MPI and MPI_T
 * calls fail on purpose. Never shipped; built by crates/preload/tests/faults.rs
 * with the MPI compiler wrapper of the build, so every prototype below is
 * checked against that library's mpi.h and no constant is hard-coded.
 *
 * It goes after libpreload.so in LD_PRELOAD and defines only PMPI_* and
 * MPI_T_* functions (and MPI_Get_library_version). The tuner looks those up
 * in the global scope (or with dlsym(RTLD_NEXT)), so it finds these first;
 * the application's MPI_* calls go through the tuner's wrappers to the real
 * MPI_* functions, which are not defined here: only the tool's calls are
 * intercepted. A library may call its own PMPI_* functions through the
 * global scope too (MVAPICH2 2.3.7's MPI_Init calls PMPI_Group_free), so a
 * call is counted, and may fail, only when it comes from the tool's own
 * library (libpreload*.so, found with dladdr); any other caller gets
 * the real function.
 *
 *   MPIT_FAULT="NAME[=VARIABLE][#N[+]][@RANK][:null][,...]"
 *
 *   NAME   the function, e.g. PMPI_Reduce, MPI_T_pvar_read
 *   =VARIABLE  with MPI_T_cvar_write only: the library refuses to change
 *          that control variable (by name): only the writes of a value
 *          other than the one it holds (read back first) fail, and #N
 *          counts those writes
 *   =derived   with PMPI_Type_size: only the calls on a datatype that is
 *          not predefined (its combiner is not MPI_COMBINER_NAMED) fail,
 *          and #N counts those calls
 *   #N     only the N-th call of NAME in this process (1-based);
 *   #N+    the N-th and every later call; default: every call
 *   @RANK  only in the process of that rank (PMI_RANK, OMPI_COMM_WORLD_RANK
 *          or PMIX_RANK); default: every rank
 *   :null  succeed, but hand out a null handle (MPI_T_pvar_handle_alloc,
 *          MPI_T_pvar_session_create, MPI_T_cvar_handle_alloc,
 *          PMPI_Comm_create_group)
 *
 * A failing local call returns an error code without calling the library
 * (MPI_ERR_OTHER for MPI routines, MPI_T_ERR_INVALID_HANDLE for MPI_T ones).
 * A failing collective (PMPI_Bcast, PMPI_Reduce, PMPI_Allreduce,
 * PMPI_Iallreduce, PMPI_Wait, PMPI_Gather, PMPI_Comm_create_group) first
 * calls the library, so that the other ranks
 * never wait for a rank that skipped it, then returns the error: the error
 * is reported on the chosen ranks only, as when a library rejects a call
 * after taking part in it. Each injected fault is announced on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RULES 16

struct rule {
    char name[64];
    char var[128]; /* "": any call of name */
    long nth;     /* 0: every call */
    int onwards;  /* with nth: that call and every later one */
    int rank;     /* -1: every rank */
    int null;     /* hand out a null handle instead of an error */
    long seen;    /* with var: the changes of var so far */
};

static struct rule rules[MAX_RULES];
static int nrules = -1;
static int my_rank = -2;

static int env_rank(void)
{
    const char *names[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"};
    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

static void parse(void)
{
    const char *spec = getenv("MPIT_FAULT");
    nrules = 0;
    my_rank = env_rank();
    if (!spec)
        return;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item && nrules < MAX_RULES;
         item = strtok_r(NULL, ",", &save)) {
        struct rule *r = &rules[nrules];
        memset(r, 0, sizeof(*r));
        r->rank = -1;
        char *p = strchr(item, ':');
        if (p) {
            r->null = strcmp(p + 1, "null") == 0;
            *p = 0;
        }
        p = strchr(item, '@');
        if (p) {
            r->rank = atoi(p + 1);
            *p = 0;
        }
        p = strchr(item, '#');
        if (p) {
            r->nth = atol(p + 1);
            r->onwards = strchr(p, '+') != NULL;
            *p = 0;
        }
        p = strchr(item, '=');
        if (p) {
            snprintf(r->var, sizeof(r->var), "%s", p + 1);
            *p = 0;
        }
        snprintf(r->name, sizeof(r->name), "%s", item);
        nrules++;
    }
}

/* Whether rule `r` applies in this process (its @RANK). */
static int on_this_rank(const struct rule *r)
{
    return r->rank < 0 || r->rank == my_rank;
}

/* Whether call (or change) number `n` is one rule `r` counts (its #N[+]). */
static int nth_matches(const struct rule *r, long n)
{
    return r->nth <= 0 || (r->onwards ? n >= r->nth : n == r->nth);
}

/* Whether call number `n` (1-based) of `name` fails here; *null says how. */
static int fault(const char *name, long n, int *null)
{
    if (nrules < 0)
        parse();
    for (int i = 0; i < nrules; i++) {
        const struct rule *r = &rules[i];
        if (strcmp(r->name, name) != 0 || r->var[0])
            continue;
        if (!on_this_rank(r))
            continue;
        if (!nth_matches(r, n))
            continue;
        if (null)
            *null = r->null;
        fprintf(stderr, "faultinject: rank %d: %s call %ld %s\n", my_rank, name, n,
                r->null ? "gives a null handle" : "fails");
        return 1;
    }
    return 0;
}

/* Whether the code at `caller` is in the tool's library. */
static int from_tool(void *caller)
{
    Dl_info info;
    if (!dladdr(caller, &info) || !info.dli_fname)
        return 0;
    const char *base = strrchr(info.dli_fname, '/');
    base = base ? base + 1 : info.dli_fname;
    return strncmp(base, "libpreload", strlen("libpreload")) == 0;
}

/* The real function and, for a call from the tool, this call's number
 * (thread-safe) and whether it fails. */
#define ENTER(name, type, ...)                                                     \
    static type real;                                                              \
    static long calls;                                                             \
    if (!real)                                                                     \
        real = (type)dlsym(RTLD_NEXT, #name);                                      \
    int null = 0;                                                                  \
    int inject = 0;                                                                \
    int tool = from_tool(__builtin_return_address(0));                             \
    if (tool) {                                                                    \
        long call_no = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);            \
        inject = fault(#name, call_no, &null);                                     \
    }                                                                              \
    (void)null;                                                                    \
    (void)tool

/* A local call: fail without calling the library. */
#define LOCAL(code, name, type, params, args)                                      \
    int name params                                                                \
    {                                                                              \
        ENTER(name, type);                                                         \
        if (inject)                                                                \
            return code;                                                           \
        return real args;                                                          \
    }

/* A collective: take part, then report the error. */
#define COLLECTIVE(name, type, params, args)                                       \
    int name params                                                                \
    {                                                                              \
        ENTER(name, type);                                                         \
        int rc = real args;                                                        \
        return inject ? MPI_ERR_OTHER : rc;                                        \
    }

#define T_ERR MPI_T_ERR_INVALID_HANDLE

/* MPI_T: initialisation and the catalogue. */
typedef int (*init_thread_t)(int, int *);
LOCAL(T_ERR, MPI_T_init_thread, init_thread_t, (int required, int *provided),
      (required, provided))
typedef int (*void_t)(void);
LOCAL(T_ERR, MPI_T_finalize, void_t, (void), ())
typedef int (*num_t)(int *);
LOCAL(T_ERR, MPI_T_cvar_get_num, num_t, (int *num), (num))
LOCAL(T_ERR, MPI_T_pvar_get_num, num_t, (int *num), (num))
LOCAL(T_ERR, MPI_T_category_get_num, num_t, (int *num), (num))
typedef int (*cvar_info_t)(int, char *, int *, int *, MPI_Datatype *, MPI_T_enum *, char *,
                           int *, int *, int *);
LOCAL(T_ERR, MPI_T_cvar_get_info, cvar_info_t,
      (int i, char *name, int *name_len, int *verbosity, MPI_Datatype *datatype,
       MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *scope),
      (i, name, name_len, verbosity, datatype, enumtype, desc, desc_len, bind, scope))
typedef int (*pvar_info_t)(int, char *, int *, int *, int *, MPI_Datatype *, MPI_T_enum *,
                           char *, int *, int *, int *, int *, int *);
LOCAL(T_ERR, MPI_T_pvar_get_info, pvar_info_t,
      (int i, char *name, int *name_len, int *verbosity, int *var_class,
       MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind,
       int *readonly, int *continuous, int *atomic),
      (i, name, name_len, verbosity, var_class, datatype, enumtype, desc, desc_len, bind,
       readonly, continuous, atomic))

typedef int (*get_index_t)(const char *, int *);
LOCAL(T_ERR, MPI_T_cvar_get_index, get_index_t, (const char *name, int *i), (name, i))
typedef int (*pvar_index_t)(const char *, int, int *);
LOCAL(T_ERR, MPI_T_pvar_get_index, pvar_index_t, (const char *name, int var_class, int *i),
      (name, var_class, i))
typedef int (*enum_info_t)(MPI_T_enum, int *, char *, int *);
LOCAL(T_ERR, MPI_T_enum_get_info, enum_info_t,
      (MPI_T_enum e, int *num, char *name, int *name_len), (e, num, name, name_len))
typedef int (*enum_item_t)(MPI_T_enum, int, int *, char *, int *);
LOCAL(T_ERR, MPI_T_enum_get_item, enum_item_t,
      (MPI_T_enum e, int i, int *value, char *name, int *name_len),
      (e, i, value, name, name_len))
typedef int (*category_info_t)(int, char *, int *, char *, int *, int *, int *, int *);
LOCAL(T_ERR, MPI_T_category_get_info, category_info_t,
      (int i, char *name, int *name_len, char *desc, int *desc_len, int *num_cvars,
       int *num_pvars, int *num_categories),
      (i, name, name_len, desc, desc_len, num_cvars, num_pvars, num_categories))
typedef int (*category_list_t)(int, int, int[]);
LOCAL(T_ERR, MPI_T_category_get_cvars, category_list_t, (int i, int len, int indices[]),
      (i, len, indices))
LOCAL(T_ERR, MPI_T_category_get_pvars, category_list_t, (int i, int len, int indices[]),
      (i, len, indices))
LOCAL(T_ERR, MPI_T_category_get_categories, category_list_t, (int i, int len, int indices[]),
      (i, len, indices))

/* The variable of each handle the process allocated, for =VARIABLE rules. */
#define MAX_HANDLES 256
static struct {
    MPI_T_cvar_handle handle;
    int index;
} handles[MAX_HANDLES];
static int nhandles;
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember(MPI_T_cvar_handle handle, int index)
{
    pthread_mutex_lock(&handles_lock);
    int i = 0;
    while (i < nhandles && handles[i].handle != handle) /* a freed handle reused */
        i++;
    if (i < MAX_HANDLES) {
        handles[i].handle = handle;
        handles[i].index = index;
        nhandles += i == nhandles;
    } else {
        fprintf(stderr, "faultinject: more than %d control variable handles\n", MAX_HANDLES);
    }
    pthread_mutex_unlock(&handles_lock);
}

static int index_of(MPI_T_cvar_handle handle)
{
    int index = -1;
    pthread_mutex_lock(&handles_lock);
    for (int i = 0; i < nhandles && index < 0; i++)
        if (handles[i].handle == handle)
            index = handles[i].index;
    pthread_mutex_unlock(&handles_lock);
    return index;
}

/* MPI_T: control variables. */
int MPI_T_cvar_handle_alloc(int i, void *obj, MPI_T_cvar_handle *handle, int *count)
{
    typedef int (*alloc_t)(int, void *, MPI_T_cvar_handle *, int *);
    ENTER(MPI_T_cvar_handle_alloc, alloc_t);
    if (inject && null) {
        *handle = MPI_T_CVAR_HANDLE_NULL;
        *count = 0;
        return MPI_SUCCESS;
    }
    if (inject)
        return T_ERR;
    int rc = real(i, obj, handle, count);
    if (rc == MPI_SUCCESS)
        remember(*handle, i);
    return rc;
}
typedef int (*cvar_free_t)(MPI_T_cvar_handle *);
LOCAL(T_ERR, MPI_T_cvar_handle_free, cvar_free_t, (MPI_T_cvar_handle *h), (h))
typedef int (*cvar_read_t)(MPI_T_cvar_handle, void *);
LOCAL(T_ERR, MPI_T_cvar_read, cvar_read_t, (MPI_T_cvar_handle h, void *buf), (h, buf))

/* Whether this write of `buf` through `h` is one a =VARIABLE rule
 * refuses: a write to that variable of another value than it holds. */
static int refused_change(MPI_T_cvar_handle h, const void *buf)
{
    if (nrules < 0)
        parse();
    int index = index_of(h);
    if (index < 0)
        return 0;
    for (int i = 0; i < nrules; i++) {
        struct rule *r = &rules[i];
        if (!r->var[0] || strcmp(r->name, "MPI_T_cvar_write") != 0)
            continue;
        if (!on_this_rank(r))
            continue;
        char name[256], desc[1024];
        int name_len = sizeof(name), desc_len = sizeof(desc), verbosity, bind, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        cvar_info_t info = (cvar_info_t)dlsym(RTLD_NEXT, "MPI_T_cvar_get_info");
        if (info(index, name, &name_len, &verbosity, &type, &enumtype, desc, &desc_len, &bind,
                 &scope) != MPI_SUCCESS ||
            strcmp(name, r->var) != 0)
            continue;
        /* Only an int is compared; a write of any other type is a change. */
        if (type == MPI_INT) {
            int held;
            cvar_read_t read = (cvar_read_t)dlsym(RTLD_NEXT, "MPI_T_cvar_read");
            if (read(h, &held) == MPI_SUCCESS && held == *(const int *)buf)
                continue;
        }
        long n = __atomic_add_fetch(&r->seen, 1, __ATOMIC_RELAXED);
        if (!nth_matches(r, n))
            continue;
        fprintf(stderr, "faultinject: rank %d: MPI_T_cvar_write of %s, change %ld, fails\n",
                my_rank, r->var, n);
        return 1;
    }
    return 0;
}

typedef int (*cvar_write_t)(MPI_T_cvar_handle, const void *);
int MPI_T_cvar_write(MPI_T_cvar_handle h, const void *buf)
{
    ENTER(MPI_T_cvar_write, cvar_write_t);
    if (inject || (tool && refused_change(h, buf)))
        return T_ERR;
    return real(h, buf);
}

/* MPI_T: performance variables. */
int MPI_T_pvar_session_create(MPI_T_pvar_session *session)
{
    typedef int (*create_t)(MPI_T_pvar_session *);
    ENTER(MPI_T_pvar_session_create, create_t);
    if (inject && null) {
        *session = MPI_T_PVAR_SESSION_NULL;
        return MPI_SUCCESS;
    }
    if (inject)
        return T_ERR;
    return real(session);
}
typedef int (*session_free_t)(MPI_T_pvar_session *);
LOCAL(T_ERR, MPI_T_pvar_session_free, session_free_t, (MPI_T_pvar_session *s), (s))
int MPI_T_pvar_handle_alloc(MPI_T_pvar_session s, int i, void *obj, MPI_T_pvar_handle *handle,
                            int *count)
{
    typedef int (*alloc_t)(MPI_T_pvar_session, int, void *, MPI_T_pvar_handle *, int *);
    ENTER(MPI_T_pvar_handle_alloc, alloc_t);
    if (inject && null) {
        *handle = MPI_T_PVAR_HANDLE_NULL;
        *count = 0;
        return MPI_SUCCESS;
    }
    if (inject)
        return T_ERR;
    return real(s, i, obj, handle, count);
}
typedef int (*pvar_free_t)(MPI_T_pvar_session, MPI_T_pvar_handle *);
LOCAL(T_ERR, MPI_T_pvar_handle_free, pvar_free_t, (MPI_T_pvar_session s, MPI_T_pvar_handle *h),
      (s, h))
typedef int (*pvar_op_t)(MPI_T_pvar_session, MPI_T_pvar_handle);
LOCAL(T_ERR, MPI_T_pvar_start, pvar_op_t, (MPI_T_pvar_session s, MPI_T_pvar_handle h), (s, h))
LOCAL(T_ERR, MPI_T_pvar_stop, pvar_op_t, (MPI_T_pvar_session s, MPI_T_pvar_handle h), (s, h))
typedef int (*pvar_read_t)(MPI_T_pvar_session, MPI_T_pvar_handle, void *);
LOCAL(T_ERR, MPI_T_pvar_read, pvar_read_t,
      (MPI_T_pvar_session s, MPI_T_pvar_handle h, void *buf), (s, h, buf))

/* MPI: the tool's communicator, error handlers and queries. */
typedef int (*get_errh_t)(MPI_Comm, MPI_Errhandler *);
LOCAL(MPI_ERR_OTHER, PMPI_Comm_get_errhandler, get_errh_t, (MPI_Comm c, MPI_Errhandler *e),
      (c, e))
typedef int (*set_errh_t)(MPI_Comm, MPI_Errhandler);
LOCAL(MPI_ERR_OTHER, PMPI_Comm_set_errhandler, set_errh_t, (MPI_Comm c, MPI_Errhandler e),
      (c, e))
typedef int (*free_errh_t)(MPI_Errhandler *);
LOCAL(MPI_ERR_OTHER, PMPI_Errhandler_free, free_errh_t, (MPI_Errhandler *e), (e))
typedef int (*comm_int_t)(MPI_Comm, int *);
LOCAL(MPI_ERR_OTHER, PMPI_Comm_rank, comm_int_t, (MPI_Comm c, int *r), (c, r))
LOCAL(MPI_ERR_OTHER, PMPI_Comm_size, comm_int_t, (MPI_Comm c, int *s), (c, s))
typedef int (*comm_group_t)(MPI_Comm, MPI_Group *);
LOCAL(MPI_ERR_OTHER, PMPI_Comm_group, comm_group_t, (MPI_Comm c, MPI_Group *g), (c, g))
typedef int (*group_free_t)(MPI_Group *);
LOCAL(MPI_ERR_OTHER, PMPI_Group_free, group_free_t, (MPI_Group *g), (g))
typedef int (*comm_free_t)(MPI_Comm *);
LOCAL(MPI_ERR_OTHER, PMPI_Comm_free, comm_free_t, (MPI_Comm *c), (c))
typedef int (*query_t)(int *);
LOCAL(MPI_ERR_OTHER, PMPI_Query_thread, query_t, (int *p), (p))
typedef int (*type_size_t)(MPI_Datatype, int *);

/* Whether a =derived rule refuses the size of `t`: a datatype that is not
 * predefined. */
static int refused_derived(MPI_Datatype t)
{
    if (nrules < 0)
        parse();
    typedef int (*envelope_t)(MPI_Datatype, int *, int *, int *, int *);
    static envelope_t envelope;
    if (!envelope)
        envelope = (envelope_t)dlsym(RTLD_NEXT, "PMPI_Type_get_envelope");
    for (int i = 0; i < nrules; i++) {
        struct rule *r = &rules[i];
        if (strcmp(r->var, "derived") != 0 || strcmp(r->name, "PMPI_Type_size") != 0)
            continue;
        if (!on_this_rank(r))
            continue;
        int ints, addresses, types, combiner;
        if (envelope(t, &ints, &addresses, &types, &combiner) != MPI_SUCCESS ||
            combiner == MPI_COMBINER_NAMED)
            continue;
        long n = __atomic_add_fetch(&r->seen, 1, __ATOMIC_RELAXED);
        if (!nth_matches(r, n))
            continue;
        fprintf(stderr, "faultinject: rank %d: PMPI_Type_size of a derived datatype, call %ld, "
                        "fails\n", my_rank, n);
        return 1;
    }
    return 0;
}

int PMPI_Type_size(MPI_Datatype t, int *s)
{
    ENTER(PMPI_Type_size, type_size_t);
    if (inject || (tool && refused_derived(t)))
        return MPI_ERR_OTHER;
    return real(t, s);
}
typedef int (*error_class_t)(int, int *);
LOCAL(MPI_ERR_OTHER, PMPI_Error_class, error_class_t, (int code, int *class_), (code, class_))
typedef int (*error_string_t)(int, char *, int *);
LOCAL(MPI_ERR_OTHER, PMPI_Error_string, error_string_t, (int code, char *text, int *len),
      (code, text, len))
typedef int (*op_create_t)(MPI_User_function *, int, MPI_Op *);
LOCAL(MPI_ERR_OTHER, PMPI_Op_create, op_create_t, (MPI_User_function *f, int commute, MPI_Op *op),
      (f, commute, op))
typedef int (*op_free_t)(MPI_Op *);
LOCAL(MPI_ERR_OTHER, PMPI_Op_free, op_free_t, (MPI_Op *op), (op))
typedef int (*type_free_t)(MPI_Datatype *);
LOCAL(MPI_ERR_OTHER, PMPI_Type_free, type_free_t, (MPI_Datatype *t), (t))
typedef int (*version_t)(char *, int *);
LOCAL(MPI_ERR_OTHER, MPI_Get_library_version, version_t, (char *v, int *len), (v, len))

int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    typedef int (*create_t)(MPI_Comm, MPI_Group, int, MPI_Comm *);
    ENTER(PMPI_Comm_create_group, create_t);
    int rc = real(comm, group, tag, newcomm);
    if (inject && null) {
        *newcomm = MPI_COMM_NULL;
        return rc;
    }
    return inject ? MPI_ERR_OTHER : rc;
}

/* MPI: the tool's collectives. */
typedef int (*bcast_t)(void *, int, MPI_Datatype, int, MPI_Comm);
COLLECTIVE(PMPI_Bcast, bcast_t, (void *buf, int n, MPI_Datatype t, int root, MPI_Comm c),
           (buf, n, t, root, c))
typedef int (*reduce_t)(const void *, void *, int, MPI_Datatype, MPI_Op, int, MPI_Comm);
COLLECTIVE(PMPI_Reduce, reduce_t,
           (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c),
           (s, r, n, t, op, root, c))
typedef int (*gather_t)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm);
COLLECTIVE(PMPI_Gather, gather_t,
           (const void *s, int sn, MPI_Datatype st, void *r, int rn, MPI_Datatype rt, int root,
            MPI_Comm c),
           (s, sn, st, r, rn, rt, root, c))
typedef int (*allreduce_t)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
COLLECTIVE(PMPI_Allreduce, allreduce_t,
           (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c),
           (s, r, n, t, op, c))
/* The start agreement on MPICH's ABI: a nonblocking allreduce and its
 * wait. A failing start hands back the library's request all the same, as
 * a library that rejects the call after starting it would; a failing wait
 * completes the operation first. */
typedef int (*iallreduce_t)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm,
                            MPI_Request *);
COLLECTIVE(PMPI_Iallreduce, iallreduce_t,
           (const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
            MPI_Request *req),
           (s, r, n, t, op, c, req))
typedef int (*wait_t)(MPI_Request *, MPI_Status *);
COLLECTIVE(PMPI_Wait, wait_t, (MPI_Request *req, MPI_Status *status), (req, status))
