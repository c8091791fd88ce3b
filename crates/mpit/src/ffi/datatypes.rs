//! A datatype taken apart into its basic datatypes
//! (`PMPI_Type_get_envelope`, `PMPI_Type_get_contents`).

use super::*;

/// Arrays of `get_contents` up to these lengths live on the stack; longer
/// ones (a struct of many members) on the heap.
const INTS: usize = 32;
const ADDRESSES: usize = 16;
const TYPES: usize = 16;

/// Nesting deeper than this is refused (an error, never a guess).
const DEPTH: u32 = 64;

/// Whether `basic` holds for every basic (named) datatype `datatype` is
/// built from, or for `datatype` itself when it is a named one. A
/// constructor that names no datatype (`MPI_Type_create_f90_real` and the
/// like) counts as a basic datatype `basic` does not know: false. The
/// datatypes `MPI_Type_get_contents` hands out are freed again (the
/// derived ones: the standard makes the caller free them).
///
/// Only for a datatype the application passed to a call (valid by the
/// standard), after `MPI_Init`.
pub fn every_basic_datatype(
    datatype: sys::MPI_Datatype,
    basic: &mut dyn FnMut(sys::MPI_Datatype) -> bool,
) -> Result<bool> {
    let api = api()?;
    visit(api, datatype, basic, 0).map(|(every, _)| every)
}

/// [`every_basic_datatype`] at nesting `depth`; also says whether
/// `datatype` is a named one (which must not be freed).
fn visit(
    api: &Api,
    datatype: sys::MPI_Datatype,
    basic: &mut dyn FnMut(sys::MPI_Datatype) -> bool,
    depth: u32,
) -> Result<(bool, bool)> {
    let (mut ni, mut na, mut nd, mut combiner): (c_int, c_int, c_int, c_int) = (0, 0, 0, 0);
    // SAFETY: a valid datatype (see `every_basic_datatype`) and four valid
    // out-pointers.
    let rc = unsafe {
        func!(api, PMPI_Type_get_envelope)?(datatype, &mut ni, &mut na, &mut nd, &mut combiner)
    };
    check(api, "MPI_Type_get_envelope", rc)?;
    // SAFETY: reading a shim constant.
    if combiner == unsafe { sys::MPIT_COMBINER_NAMED } {
        return Ok((basic(datatype), true));
    }
    if depth >= DEPTH {
        return Err(Error::Datatype(format!(
            "a derived datatype nested more than {DEPTH} deep"
        )));
    }
    let (ni, na, nd) = (ni.max(0) as usize, na.max(0) as usize, nd.max(0) as usize);
    if nd == 0 {
        return Ok((false, false));
    }
    let mut ints_stack: [c_int; INTS] = [0; INTS];
    let mut addresses_stack: [sys::MPI_Aint; ADDRESSES] = [0; ADDRESSES];
    // SAFETY: an integer or a pointer, for which all zero bits are valid.
    let zero: sys::MPI_Datatype = unsafe { std::mem::zeroed() };
    let mut types_stack: [sys::MPI_Datatype; TYPES] = [zero; TYPES];
    let (mut ints_heap, mut addresses_heap, mut types_heap) = (Vec::new(), Vec::new(), Vec::new());
    let ints: &mut [c_int] = if ni <= INTS {
        &mut ints_stack[..]
    } else {
        ints_heap.resize(ni, 0);
        &mut ints_heap[..]
    };
    let addresses: &mut [sys::MPI_Aint] = if na <= ADDRESSES {
        &mut addresses_stack[..]
    } else {
        addresses_heap.resize(na, 0);
        &mut addresses_heap[..]
    };
    let types: &mut [sys::MPI_Datatype] = if nd <= TYPES {
        &mut types_stack[..]
    } else {
        types_heap.resize(nd, zero);
        &mut types_heap[..]
    };
    // SAFETY: the counts the envelope gave, and arrays at least that long.
    let rc = unsafe {
        func!(api, PMPI_Type_get_contents)?(
            datatype,
            ni as c_int,
            na as c_int,
            nd as c_int,
            ints.as_mut_ptr(),
            addresses.as_mut_ptr(),
            types.as_mut_ptr(),
        )
    };
    check(api, "MPI_Type_get_contents", rc)?;
    let mut every = true;
    let mut failed = None;
    for t in types[..nd].iter_mut() {
        // Every member is visited, so that each derived one is freed.
        match visit(api, *t, basic, depth + 1) {
            Ok((e, named)) => {
                every &= e;
                if !named {
                    // SAFETY: a derived datatype get_contents returned,
                    // which the caller frees; a valid in/out pointer.
                    let rc = unsafe { func!(api, PMPI_Type_free)?(t) };
                    if let Err(e) = check(api, "MPI_Type_free", rc) {
                        failed.get_or_insert(e);
                    }
                }
            }
            Err(e) => {
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e),
        None => Ok((every, false)),
    }
}
