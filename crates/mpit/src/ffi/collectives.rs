//! The tool's own collectives and reductions, through PMPI.

use super::*;

// ---------------------------------------------------------------------------
// Collectives for the cross-rank summary, through PMPI so that other tools
// do not see them. Called only on the application's thread, inside its
// MPI_Init or MPI_Finalize.

/// A communicator of the tool's own over all the processes of `comm`,
/// made with `PMPI_Comm_create_group` on `comm`'s whole group rather than
/// with `PMPI_Comm_dup`. Open MPI 4.1 agrees on a dup's context id with a
/// non-blocking allreduce on the parent communicator, which registers
/// libnbc's progress function in every progress loop for the rest of the
/// run (+2% on 0-byte ping-pong latency for an application that never dups
/// a communicator itself, see docs/design.md#decisions-worth-knowing); a
/// group-based creation agrees with point-to-point messages. A dup would
/// also run the application's attribute copy callbacks on `comm`.
/// Collective over `comm`.
pub(crate) fn comm_private(comm: Comm) -> Result<Comm> {
    let api = api()?;
    let mut group = api.c.group_null.0;
    // SAFETY: a live communicator and a valid out-pointer.
    let rc = unsafe { func!(api, PMPI_Comm_group)?(comm.0, &mut group) };
    check(api, "MPI_Comm_group", rc)?;
    let mut new = api.c.comm_null.0;
    let created = func!(api, PMPI_Comm_create_group).and_then(|create| {
        // SAFETY: a live communicator, its own group, a tag (which does not
        // conflict with point-to-point tags, MPI-3.1 section 6.4.2) and a
        // valid out-pointer; every rank of `comm` calls it at the same point
        // (inside MPI_Init).
        let rc = unsafe { create(comm.0, group, PRIVATE_COMM_TAG, &mut new) };
        check(api, "MPI_Comm_create_group", rc)
    });
    let freed = func!(api, PMPI_Group_free).and_then(|free| {
        // SAFETY: the group obtained above, freed once.
        let rc = unsafe { free(&mut group) };
        check(api, "MPI_Group_free", rc)
    });
    created?;
    if new == api.c.comm_null.0 {
        // Every process of `comm` is in its group: a null result is the
        // library's failure, reported as one.
        return Err(Error::Mpi(MpiError {
            call: "MPI_Comm_create_group",
            code: api.c.success,
            name: "MPI_COMM_NULL returned for the whole group".into(),
            variable: None,
        }));
    }
    let comm = Comm(new);
    if let Err(mut e) = freed {
        // Not used: the caller turns the tuner off. A failed free of it is
        // told with the first error, not dropped.
        if let (Err(free), Error::Mpi(m)) = (comm_free(comm), &mut e) {
            m.name = format!("{} (then freeing the new communicator: {free})", m.name);
        }
        return Err(e);
    }
    Ok(comm)
}

/// The tag of the tool's `MPI_Comm_create_group` call: any value up to
/// 32767, the least `MPI_TAG_UB` the standard allows.
const PRIVATE_COMM_TAG: c_int = 0x6d70;

/// Frees a communicator made by [`comm_private`] (through
/// [`PrivateComm`](crate::PrivateComm), which frees it once).
pub(crate) fn comm_free(comm: Comm) -> Result<()> {
    let api = api()?;
    let mut c = comm.0;
    // SAFETY: a communicator this crate created, freed once.
    let rc = unsafe { func!(api, PMPI_Comm_free)?(&mut c) };
    check(api, "MPI_Comm_free", rc)
}

/// Rank and size of a communicator.
pub fn rank_size(comm: Comm) -> Result<(i32, i32)> {
    comm_rank_size(api()?, comm)
}

/// Broadcasts bytes from `root` (`PMPI_Bcast` of MPI_BYTE).
pub(crate) fn bcast_bytes(comm: Comm, buf: &mut [u8], root: i32) -> Result<()> {
    let api = api()?;
    let n = c_int::try_from(buf.len()).map_err(|_| Error::BadValue {
        variable: "broadcast".into(),
        message: "too large".into(),
    })?;
    // SAFETY: `buf` holds `n` bytes on every rank (the length is broadcast
    // first by the caller); MPIT_BYTE is the header's MPI_BYTE.
    let rc = unsafe {
        func!(api, PMPI_Bcast)?(buf.as_mut_ptr().cast(), n, sys::MPIT_BYTE, root, comm.0)
    };
    check(api, "MPI_Bcast", rc)
}

/// Element-wise sum of doubles onto `root` (`PMPI_Reduce` with MPI_SUM).
pub(crate) fn reduce_sum(comm: Comm, send: &[f64], recv: &mut [f64], root: i32) -> Result<()> {
    reduce(comm, send, recv, ReduceOp::Sum, Some(root))
}

/// The host name, from the kernel.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// The reduction operations the tool uses (basic ones only: no pair types,
/// no MINLOC/MAXLOC, which MVAPICH2 2.3.7 rejects in builds without Fortran).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// `MPI_MIN`
    Min,
    /// `MPI_MAX`
    Max,
    /// `MPI_SUM`
    Sum,
}

impl ReduceOp {
    /// The header's handle of the operation.
    fn handle(self) -> sys::MPI_Op {
        // SAFETY: reading shim constants.
        unsafe {
            match self {
                ReduceOp::Min => sys::MPIT_MIN,
                ReduceOp::Max => sys::MPIT_MAX,
                ReduceOp::Sum => sys::MPIT_SUM,
            }
        }
    }
}

/// Element-wise reduction of signed 64-bit integers to every rank
/// (`PMPI_Allreduce` of MPI_INT64_T).
/// (Signed on purpose: MPICH 4.0.2 compares MPI_UINT64_T as signed in
/// MPI_MIN, so values of 2^63 and above would come out wrong.)
pub(crate) fn allreduce_i64(
    comm: Comm,
    send: &[i64],
    recv: &mut [i64],
    op: ReduceOp,
) -> Result<()> {
    reduce(comm, send, recv, op, None)
}

/// The element count of a reduction of `send` elements into `recv`: the
/// same length, and one an `int` holds.
fn reduced_count(send: usize, recv: usize) -> Result<c_int> {
    c_int::try_from(send)
        .ok()
        .filter(|_| send == recv)
        .ok_or_else(|| Error::BadValue {
            variable: "reduction".into(),
            message: format!("{send} elements into {recv}"),
        })
}

/// [`allreduce_i64`] as `PMPI_Iallreduce` and `PMPI_Wait`: a reduction
/// whose algorithm no blocking collective's variable selects (MPICH reads
/// `MPIR_CVAR_ALLREDUCE_INTRA_ALGORITHM` in every `MPI_Allreduce`, its
/// nonblocking schedules do not). A start that fails after taking part
/// (a request came back) is still waited for, so that this rank's part
/// completes and no peer waits for it; its error is the one returned.
pub(crate) fn iallreduce_i64(
    comm: Comm,
    send: &[i64],
    recv: &mut [i64],
    op: ReduceOp,
) -> Result<()> {
    let api = api()?;
    let count = reduced_count(send.len(), recv.len())?;
    let iallreduce = func!(api, PMPI_Iallreduce)?;
    let wait = func!(api, PMPI_Wait)?;
    // SAFETY: reading a shim constant (the header's MPI_REQUEST_NULL).
    let null = unsafe { sys::MPIT_REQUEST_NULL };
    let mut request = null;
    // SAFETY: both buffers hold `count` MPI_INT64_T elements and stay
    // borrowed (alive, not moved) until the wait below completes the
    // operation; the same count and operation on every rank; collective
    // over `comm`, called by every rank at the same point; `request` is a
    // valid out-pointer.
    let rc = unsafe {
        iallreduce(
            send.as_ptr().cast::<c_void>() as *mut c_void,
            recv.as_mut_ptr().cast::<c_void>(),
            count,
            i64::datatype(),
            op.handle(),
            comm.0,
            &mut request,
        )
    };
    let started = check(api, "MPI_Iallreduce", rc);
    if request == null {
        return started;
    }
    // SAFETY: a request the call above returned, waited for once, with
    // the header's MPI_STATUS_IGNORE; the buffers are still borrowed.
    let rc = unsafe { wait(&mut request, sys::MPIT_STATUS_IGNORE) };
    let waited = check(api, "MPI_Wait", rc);
    started.and(waited)
}

/// Whether the start agreement is nonblocking
/// ([`crate::collective::Collectives::agree_start`]): with MPICH's header
/// or the standard ABI's, not with Open MPI's or MVAPICH2's. The same in
/// every process of a job (it is the build's).
pub(crate) fn start_agreement_nonblocking() -> bool {
    // SAFETY: reading a shim constant (set from the header's OPEN_MPI).
    let open_mpi = unsafe { sys::MPIT_HEADER_IS_OPEN_MPI != 0 };
    !open_mpi && sys::BUILD_HEADER_LIBRARY != "mvapich2"
}

/// Element-wise reduction of signed 64-bit integers onto `root`
/// (`PMPI_Reduce` of MPI_INT64_T; `recv` is written on `root` only).
pub(crate) fn reduce_i64(
    comm: Comm,
    send: &[i64],
    recv: &mut [i64],
    op: ReduceOp,
    root: i32,
) -> Result<()> {
    reduce(comm, send, recv, op, Some(root))
}

/// The element types the tool reduces, with their MPI datatype.
trait Reduced: Copy {
    fn datatype() -> sys::MPI_Datatype;
}

impl Reduced for f64 {
    fn datatype() -> sys::MPI_Datatype {
        // SAFETY: reading a shim constant (the header's MPI_DOUBLE).
        unsafe { sys::MPIT_DOUBLE }
    }
}

impl Reduced for i64 {
    fn datatype() -> sys::MPI_Datatype {
        // SAFETY: reading a shim constant (the header's MPI_INT64_T).
        unsafe { sys::MPIT_INT64_T }
    }
}

/// `PMPI_Reduce` onto `root`, or `PMPI_Allreduce` when `root` is `None`,
/// of `send` into `recv` element-wise.
fn reduce<T: Reduced>(
    comm: Comm,
    send: &[T],
    recv: &mut [T],
    op: ReduceOp,
    root: Option<i32>,
) -> Result<()> {
    reduce_as(comm, send, recv, T::datatype(), op.handle(), root)
}

/// [`reduce`] with the MPI datatype of one element of `T` and the
/// operation given (a basic pair, or [`MixedOp`]'s).
fn reduce_as<T: Copy>(
    comm: Comm,
    send: &[T],
    recv: &mut [T],
    datatype: sys::MPI_Datatype,
    op: sys::MPI_Op,
    root: Option<i32>,
) -> Result<()> {
    let api = api()?;
    let count = reduced_count(send.len(), recv.len())?;
    let (sendbuf, recvbuf) = (
        send.as_ptr().cast::<c_void>() as *mut c_void,
        recv.as_mut_ptr().cast::<c_void>(),
    );
    // SAFETY: both buffers hold `count` elements of `T`, one `datatype`
    // each (the callers' contract: `T::datatype()`, or `MixedOp`'s type for
    // `Mixed`); the same count, operation and root on every rank; collective
    // over `comm`, called by every rank at the same point.
    let rc = unsafe {
        match root {
            None => func!(api, PMPI_Allreduce)?(sendbuf, recvbuf, count, datatype, op, comm.0),
            Some(root) => {
                func!(api, PMPI_Reduce)?(sendbuf, recvbuf, count, datatype, op, root, comm.0)
            }
        }
    };
    check(
        api,
        if root.is_some() {
            "MPI_Reduce"
        } else {
            "MPI_Allreduce"
        },
        rc,
    )
}

/// One element of a mixed reduction ([`reduce_mixed`]): its operation and
/// its values, three 64-bit integers that travel as one MPI element (a
/// contiguous type of three `MPI_INT64_T`), so that the library, which may
/// split a reduction's buffer between ranks and calls (reduce-scatter
/// algorithms, segmented pipelines), never separates an element from its
/// operation.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mixed {
    /// [`Mixed::MIN`], [`Mixed::SUM`] or [`Mixed::MIN_PAIR`]; the same on
    /// every rank for a given position.
    pub op: i64,
    /// The value (the pair's first member).
    pub a: i64,
    /// The pair's second member (unused by `MIN` and `SUM`).
    pub b: i64,
}

impl Mixed {
    /// The minimum of `a`.
    pub const MIN: i64 = 0;
    /// The (wrapping) sum of `a`.
    pub const SUM: i64 = 1;
    /// The least `(a, b)` pair in lexicographic order (a value and the rank
    /// holding it: MINLOC without MPI's pair types).
    pub const MIN_PAIR: i64 = 2;

    /// An element reduced with the minimum.
    pub fn min(a: i64) -> Mixed {
        Mixed {
            op: Mixed::MIN,
            a,
            b: 0,
        }
    }

    /// An element reduced with the sum.
    pub fn sum(a: i64) -> Mixed {
        Mixed {
            op: Mixed::SUM,
            a,
            b: 0,
        }
    }

    /// An element reduced with the least pair.
    pub fn min_pair(a: i64, b: i64) -> Mixed {
        Mixed {
            op: Mixed::MIN_PAIR,
            a,
            b,
        }
    }

    /// Combines `x` into `self` (commutative and associative).
    pub fn combine(&mut self, x: &Mixed) {
        match self.op {
            Mixed::MIN => self.a = self.a.min(x.a),
            Mixed::SUM => self.a = self.a.wrapping_add(x.a),
            _ => {
                if (x.a, x.b) < (self.a, self.b) {
                    self.a = x.a;
                    self.b = x.b;
                }
            }
        }
    }
}

/// The user function of the tool's mixed reduction (`MPI_User_function`).
///
/// # Safety
///
/// Called by the MPI library with two buffers of `*len` elements of the
/// contiguous type [`reduce_mixed`] built, that is `*len` [`Mixed`]s.
unsafe extern "C" fn combine_mixed(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    _datatype: *mut sys::MPI_Datatype,
) {
    // Never unwind into the library (nothing below panics; a panic would
    // leave `inoutvec` as it is, and the agreement after the call is what
    // the ranks trust).
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the library passes a valid element count.
        let n = usize::try_from(unsafe { *len }).unwrap_or(0);
        if n == 0 || invec.is_null() || inoutvec.is_null() {
            return;
        }
        // SAFETY: both buffers hold `n` elements of the contiguous type of
        // three MPI_INT64_T built in `reduce_mixed`, laid out as `Mixed`
        // (repr(C), three i64, no padding), and do not overlap (MPI-4.1
        // section 6.9.5: the library passes distinct buffers).
        let (input, inout) = unsafe {
            (
                std::slice::from_raw_parts(invec.cast::<Mixed>(), n),
                std::slice::from_raw_parts_mut(inoutvec.cast::<Mixed>(), n),
            )
        };
        for (y, x) in inout.iter_mut().zip(input) {
            y.combine(x);
        }
    });
}

/// The type and operation of the tool's mixed reductions: a contiguous
/// type of three `MPI_INT64_T` and a user-defined commutative operation
/// on it ([`Mixed::combine`]). Made once, before the start agreement (so
/// that a rank that cannot make them says so there, and never makes a
/// reduction its peers make differently), freed at finalize.
#[derive(Debug)]
pub struct MixedOp {
    datatype: sys::MPI_Datatype,
    op: sys::MPI_Op,
}

// SAFETY: datatype and operation handles are process-wide identifiers (an
// integer in MPICH's ABI, a pointer to a library object in Open MPI's),
// not memory owned by a thread; the tool uses them on the application's
// thread inside MPI_Init and MPI_Finalize only.
unsafe impl Send for MixedOp {}

/// Makes the [`MixedOp`] (local calls).
pub(crate) fn mixed_op_create() -> Result<MixedOp> {
    let api = api()?;
    // SAFETY: reading shim constants.
    let (int64, mut datatype, mut op) =
        unsafe { (sys::MPIT_INT64_T, sys::MPIT_DATATYPE_NULL, sys::MPIT_MIN) };
    // SAFETY: a basic datatype and a valid out-pointer.
    let rc = unsafe { func!(api, PMPI_Type_contiguous)?(3, int64, &mut datatype) };
    check(api, "MPI_Type_contiguous", rc)?;
    let made = func!(api, PMPI_Type_commit)
        .and_then(|commit| {
            // SAFETY: the type made above, not yet committed.
            let rc = unsafe { commit(&mut datatype) };
            check(api, "MPI_Type_commit", rc)
        })
        .and_then(|()| {
            // SAFETY: `combine_mixed` has MPI_User_function's signature and
            // handles the type made above; commutative (`Mixed::combine`).
            let rc = unsafe { func!(api, PMPI_Op_create)?(Some(combine_mixed), 1, &mut op) };
            check(api, "MPI_Op_create", rc)
        });
    if let Err(e) = made {
        if let Ok(free) = func!(api, PMPI_Type_free) {
            // SAFETY: the type made above, freed once; its error is
            // secondary to the one returned.
            let _ = unsafe { free(&mut datatype) };
        }
        return Err(e);
    }
    Ok(MixedOp { datatype, op })
}

/// Frees a [`MixedOp`] (local calls); the first error is returned.
pub(crate) fn mixed_op_free(mut m: MixedOp) -> Result<()> {
    let api = api()?;
    // SAFETY: the operation made by `mixed_op_create`, freed once.
    let rc = unsafe { func!(api, PMPI_Op_free)?(&mut m.op) };
    let op = check(api, "MPI_Op_free", rc);
    // SAFETY: the type made by `mixed_op_create`, freed once.
    let rc = unsafe { func!(api, PMPI_Type_free)?(&mut m.datatype) };
    op.and(check(api, "MPI_Type_free", rc))
}

/// A reduction of [`Mixed`] elements, each with its own operation, onto
/// `root` (`PMPI_Reduce`) or to every rank (`PMPI_Allreduce`, `root`
/// `None`), with `m`'s user-defined operation on its contiguous type
/// (basic types only: no pair type, see [`ReduceOp`]).
pub(crate) fn reduce_mixed(
    comm: Comm,
    m: &MixedOp,
    send: &[Mixed],
    recv: &mut [Mixed],
    root: Option<i32>,
) -> Result<()> {
    reduce_as(comm, send, recv, m.datatype, m.op, root)
}

/// Gathers `send.len()` bytes of every rank onto `root` in rank order
/// (`PMPI_Gather` of MPI_BYTE); `recv` holds `size * send.len()` bytes on
/// `root` and is not used elsewhere.
pub(crate) fn gather_bytes(comm: Comm, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
    let api = api()?;
    let n = c_int::try_from(send.len()).map_err(|_| Error::BadValue {
        variable: "gather".into(),
        message: "too large".into(),
    })?;
    // SAFETY: `send` holds `n` bytes on every rank (the callers' contract:
    // the same length everywhere); on `root`, `recv` holds `n` bytes a
    // rank of `comm` (checked by the caller); collective over `comm`.
    let rc = unsafe {
        func!(api, PMPI_Gather)?(
            send.as_ptr().cast::<c_void>() as *mut c_void,
            n,
            sys::MPIT_BYTE,
            recv.as_mut_ptr().cast(),
            n,
            sys::MPIT_BYTE,
            root,
            comm.0,
        )
    };
    check(api, "MPI_Gather", rc)
}
