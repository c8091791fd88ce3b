//! Which calls mode `safe` lets the tuner switch: those whose result
//! cannot depend on the algorithm.
//!
//! Collectives that move data (bcast, allgather, alltoall, barrier) give
//! the same bytes whatever the algorithm. A reduction does too when every
//! basic datatype of its datatype is an integer, logical, character or
//! byte type and its operation is a predefined one (sum, product, min,
//! max, the logical and bitwise ones, and minloc/maxloc, whose ties the
//! standard defines): these are associative and commutative on such values,
//! so any order of combining gives the same bits. Floating-point addition
//! is not associative, and even min and max of floating-point values
//! depend on the order when NaN or signed zeros meet (`a < b ? a : b`), so
//! a reduction with a floating-point basic type anywhere in its datatype
//! (`MPI_DOUBLE`, `MPI_DOUBLE_INT`, `MPI_COMPLEX`, a struct holding one),
//! or with a user-defined operation, stays on the library's default.
//!
//! The class follows from the names of the basic datatypes only, so it is
//! the same on every rank of a reduction: the standard requires the ranks'
//! type signatures (the sequences of basic datatypes) to match, however
//! each rank built its datatype.

/// Whether a reduction of the predefined datatype `name` (as the header
/// spells it, `MPI_INT`) with a predefined operation gives the same bits
/// whatever the algorithm. A name this list does not know (a floating-point
/// type, or one a newer header adds) is not exact.
pub fn exact_datatype(name: &str) -> bool {
    let Some(base) = name.strip_prefix("MPI_") else {
        return false;
    };
    matches!(
        base,
        "CHAR"
            | "SIGNED_CHAR"
            | "UNSIGNED_CHAR"
            | "WCHAR"
            | "SHORT"
            | "UNSIGNED_SHORT"
            | "INT"
            | "UNSIGNED"
            | "LONG"
            | "UNSIGNED_LONG"
            | "LONG_LONG"
            | "LONG_LONG_INT"
            | "UNSIGNED_LONG_LONG"
            | "C_BOOL"
            | "CXX_BOOL"
            | "INT8_T"
            | "INT16_T"
            | "INT32_T"
            | "INT64_T"
            | "UINT8_T"
            | "UINT16_T"
            | "UINT32_T"
            | "UINT64_T"
            | "BYTE"
            | "PACKED"
            | "AINT"
            | "OFFSET"
            | "COUNT"
            | "SHORT_INT"
            | "2INT"
            | "LONG_INT"
            | "INTEGER"
            | "INTEGER1"
            | "INTEGER2"
            | "INTEGER4"
            | "INTEGER8"
            | "INTEGER16"
            | "2INTEGER"
            | "LOGICAL"
            | "LOGICAL1"
            | "LOGICAL2"
            | "LOGICAL4"
            | "LOGICAL8"
            | "CHARACTER"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_exact_and_floating_point_is_not() {
        for name in [
            "MPI_INT",
            "MPI_UINT64_T",
            "MPI_2INT",
            "MPI_LOGICAL",
            "MPI_BYTE",
        ] {
            assert!(exact_datatype(name), "{name}");
        }
        for name in [
            "MPI_FLOAT",
            "MPI_DOUBLE",
            "MPI_LONG_DOUBLE",
            "MPI_C_DOUBLE_COMPLEX",
            "MPI_DOUBLE_INT",
            "MPI_FLOAT_INT",
            "MPI_LONG_DOUBLE_INT",
            "MPI_REAL",
            "MPI_REAL8",
            "MPI_DOUBLE_PRECISION",
            "MPI_2DOUBLE_PRECISION",
            "MPI_COMPLEX",
            "MPI_FLOAT16",
            "INT",
            "",
        ] {
            assert!(!exact_datatype(name), "{name}");
        }
    }
}
