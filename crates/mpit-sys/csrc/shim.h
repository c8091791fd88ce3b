/*
 * mpit-sys C shim: MPI macro constants turned into link-time symbols.
 *
 * mpi.h defines most of what MPI_T needs as macros (datatype handles, NULL
 * handles, error codes) and some as enums; their values differ between
 * MPICH's ABI, Open MPI's and the MPI-5 standard ABI, and in Open MPI many are
 * addresses of data symbols in libmpi. bindgen cannot evaluate cast macros,
 * so this file gives each constant a name Rust can link against. Nothing here
 * is hard-coded: every value comes from the header of the MPI found at build
 * time. References to libmpi's data symbols are made weak after compilation
 * (see build.rs), so a process that never loads MPI still loads us.
 */
#ifndef MPIT_SHIM_H
#define MPIT_SHIM_H
#include <mpi.h>

/* The C type of a Fortran INTEGER (a macro in some headers). The MPI-5
 * standard ABI (mpi_abi.h, which alone defines MPI_ABI_VERSION) has no
 * MPI_Fint: its Fortran handles are default INTEGERs, converted with
 * MPI_Comm_fromint. */
#ifdef MPI_ABI_VERSION
typedef int mpit_fint;
#else
typedef MPI_Fint mpit_fint;
#endif

/* Thread levels. */
extern const int MPIT_THREAD_SINGLE, MPIT_THREAD_FUNNELED, MPIT_THREAD_SERIALIZED,
    MPIT_THREAD_MULTIPLE;

/* Return codes. */
extern const int MPIT_SUCCESS, MPIT_ERR_UNKNOWN_CODE;

/* PVAR classes. */
extern const int MPIT_PVAR_CLASS_STATE, MPIT_PVAR_CLASS_LEVEL, MPIT_PVAR_CLASS_SIZE,
    MPIT_PVAR_CLASS_PERCENTAGE, MPIT_PVAR_CLASS_HIGHWATERMARK,
    MPIT_PVAR_CLASS_LOWWATERMARK, MPIT_PVAR_CLASS_COUNTER, MPIT_PVAR_CLASS_AGGREGATE,
    MPIT_PVAR_CLASS_TIMER, MPIT_PVAR_CLASS_GENERIC;

/* CVAR scopes. */
extern const int MPIT_SCOPE_CONSTANT, MPIT_SCOPE_READONLY, MPIT_SCOPE_LOCAL,
    MPIT_SCOPE_GROUP, MPIT_SCOPE_GROUP_EQ, MPIT_SCOPE_ALL, MPIT_SCOPE_ALL_EQ;

/* Object bindings. */
extern const int MPIT_BIND_NO_OBJECT, MPIT_BIND_MPI_COMM, MPIT_BIND_MPI_DATATYPE,
    MPIT_BIND_MPI_ERRHANDLER, MPIT_BIND_MPI_FILE, MPIT_BIND_MPI_GROUP,
    MPIT_BIND_MPI_OP, MPIT_BIND_MPI_REQUEST, MPIT_BIND_MPI_WIN,
    MPIT_BIND_MPI_MESSAGE, MPIT_BIND_MPI_INFO;

/* Verbosity levels. */
extern const int MPIT_VERBOSITY_USER_BASIC, MPIT_VERBOSITY_USER_DETAIL,
    MPIT_VERBOSITY_USER_ALL, MPIT_VERBOSITY_TUNER_BASIC, MPIT_VERBOSITY_TUNER_DETAIL,
    MPIT_VERBOSITY_TUNER_ALL, MPIT_VERBOSITY_MPIDEV_BASIC,
    MPIT_VERBOSITY_MPIDEV_DETAIL, MPIT_VERBOSITY_MPIDEV_ALL;

/* Sizes. */
extern const int MPIT_MAX_LIBRARY_VERSION_STRING, MPIT_UNDEFINED;

/* MPI_T handle constants. */
extern const MPI_T_enum MPIT_T_ENUM_NULL;
extern const MPI_T_cvar_handle MPIT_T_CVAR_HANDLE_NULL;
extern const MPI_T_pvar_handle MPIT_T_PVAR_HANDLE_NULL;
extern const MPI_T_pvar_session MPIT_T_PVAR_SESSION_NULL;

/* MPI_T_PVAR_ALL_HANDLES (a variable in MPICH's libmpi, a constant in Open
 * MPI's header). Declared by hand in lib.rs. */
MPI_T_pvar_handle mpit_pvar_all_handles(void);

/* Fortran handles to C handles (MPI_Comm_f2c is a macro in MPICH and a
 * function in Open MPI; MPI_Comm_fromint in the standard ABI). Declared by
 * hand in lib.rs. */
MPI_Comm mpit_comm_f2c(mpit_fint comm);

/* Object handles. */
extern const MPI_Comm MPIT_COMM_WORLD, MPIT_COMM_SELF, MPIT_COMM_NULL;
extern const MPI_Win MPIT_WIN_NULL;
extern const MPI_Group MPIT_GROUP_NULL;

/* Datatypes MPI_T reports values in, and those the tool reduces with. */
extern const MPI_Datatype MPIT_INT, MPIT_UNSIGNED, MPIT_LONG, MPIT_UNSIGNED_LONG,
    MPIT_LONG_LONG, MPIT_UNSIGNED_LONG_LONG, MPIT_COUNT, MPIT_DOUBLE, MPIT_FLOAT,
    MPIT_CHAR, MPIT_C_BOOL, MPIT_BYTE, MPIT_INT64_T, MPIT_UINT64_T, MPIT_DATATYPE_NULL;

/* Reduction operations the tool's cross-rank summary uses: basic types and
 * basic operations only. No pair type and no MINLOC/MAXLOC: MVAPICH2 2.3.7
 * built without Fortran (or with NVHPC) rejects every C pair type in them. */
extern const MPI_Op MPIT_SUM, MPIT_MIN, MPIT_MAX, MPIT_BOR;

/* The error handler the tool's own communicators use, so that a failing
 * call of the tool returns instead of ending the job. */
extern const MPI_Errhandler MPIT_ERRORS_RETURN, MPIT_ERRHANDLER_NULL;
/* MPI_MAX_ERROR_STRING. */
extern const int MPIT_MAX_ERROR_STRING;

/* Special buffer and status addresses. */
extern void *const MPIT_IN_PLACE;
extern MPI_Status *const MPIT_STATUS_IGNORE;
/* The request a call hands back when it started nothing. */
extern const MPI_Request MPIT_REQUEST_NULL;

/* A 1 if the header is Open MPI's, 0 otherwise (MPICH family). */
extern const int MPIT_HEADER_IS_OPEN_MPI;
/* MPI_VERSION and MPI_SUBVERSION of the header. */
extern const int MPIT_HEADER_MPI_VERSION, MPIT_HEADER_MPI_SUBVERSION;

/* The MPI_T error codes (and the few MPI error classes MPI_T routines
 * return) this header defines, with their names: MPIT_ERROR_NAMES_LEN
 * entries of {code, "MPI_T_ERR_INVALID_INDEX"}. */
struct mpit_code_name {
    int code;
    const char *name;
};
extern const struct mpit_code_name MPIT_ERROR_NAMES[];
extern const int MPIT_ERROR_NAMES_LEN;

/* The predefined datatypes of C (and the C handles of Fortran's) this header
 * defines, with their names: MPIT_PREDEFINED_DATATYPES_LEN entries of
 * {MPI_DOUBLE, "MPI_DOUBLE"}. A type the build does not support may be
 * MPI_DATATYPE_NULL. The interposer asks their sizes once after init. */
struct mpit_named_datatype {
    MPI_Datatype datatype;
    const char *name;
};
extern const struct mpit_named_datatype MPIT_PREDEFINED_DATATYPES[];
extern const int MPIT_PREDEFINED_DATATYPES_LEN;

/* The predefined reduction operations, with their names. */
struct mpit_named_op {
    MPI_Op op;
    const char *name;
};
extern const struct mpit_named_op MPIT_PREDEFINED_OPS[];
extern const int MPIT_PREDEFINED_OPS_LEN;

/* MPI_COMBINER_NAMED: MPI_Type_get_envelope's combiner of a predefined
 * datatype. */
extern const int MPIT_COMBINER_NAMED;

#endif
