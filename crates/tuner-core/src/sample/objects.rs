//! The table of live MPI objects (communicators, windows) whose bound
//! performance variables the helper thread samples.
//!
//! The application's threads and the helper thread share it without locks
//! or allocation. Creation wrappers [`ObjectTable::register`] an object (a
//! compare-and-swap on a free slot); the helper allocates PVAR handles for
//! new objects and reads them. Before the application frees an object,
//! [`ObjectTable::retire`] marks its slot retired, waits for a read of that
//! slot already under way to finish (a few `MPI_T_pvar_read` calls at most,
//! never a whole sampling interval), and frees its handles itself, so no
//! handle outlives its object and the helper never reads a dead one.
//!
//! Each slot's `busy` flag and `state` form a Dekker pair: the helper sets
//! `busy` and then checks `state`; `retire` sets `state` and then checks
//! `busy`. With sequentially consistent ordering at least one of them sees
//! the other, so either the helper backs off or `retire` waits for it.

use mpit::{Comm, HandleBits, Object, PvarHandle, SessionHandle, Win};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

/// How many PVAR handles one object may carry.
pub const MAX_HANDLES_PER_OBJECT: usize = 32;

const FREE: u8 = 0;
const CLAIMED: u8 = 1;
const NEW: u8 = 2;
const ACTIVE: u8 = 3;
const RETIRED: u8 = 4;
const DEAD: u8 = 5;

const KIND_COMM: u8 = 1;
const KIND_WIN: u8 = 2;

/// One object's slot.
#[derive(Debug)]
struct Slot {
    state: AtomicU8,
    kind: AtomicU8,
    raw: AtomicU64,
    id: AtomicU64,
    busy: AtomicBool,
    session: AtomicU64,
    nhandles: AtomicUsize,
    handles: [AtomicU64; MAX_HANDLES_PER_OBJECT],
    started: AtomicU64,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: AtomicU8::new(FREE),
            kind: AtomicU8::new(0),
            raw: AtomicU64::new(0),
            id: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            session: AtomicU64::new(0),
            nhandles: AtomicUsize::new(0),
            handles: std::array::from_fn(|_| AtomicU64::new(0)),
            started: AtomicU64::new(0),
        }
    }
}

/// A new or live object as the helper sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tracked {
    /// The slot number.
    pub slot: usize,
    /// A process-unique id (0 is `MPI_COMM_WORLD`).
    pub id: u64,
    /// The object.
    pub object: Object,
}

/// Fixed-capacity, lock-free table of tracked objects.
#[derive(Debug)]
pub struct ObjectTable {
    slots: Box<[Slot]>,
    /// One past the highest slot ever claimed: scans stop there, so an
    /// application with few live objects pays for few slots, not for the
    /// table's capacity.
    high_water: AtomicUsize,
    next_id: AtomicU64,
    dropped: AtomicU64,
    short_lived: AtomicU64,
}

impl ObjectTable {
    /// A table for up to `capacity` live objects (allocated here, once).
    pub fn new(capacity: usize) -> ObjectTable {
        ObjectTable {
            slots: (0..capacity.max(1)).map(|_| Slot::new()).collect(),
            high_water: AtomicUsize::new(0),
            next_id: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            short_lived: AtomicU64::new(0),
        }
    }

    /// The slots claimed at least once (a registration in progress on
    /// another thread may be missed; the helper finds it at its next tick,
    /// and a thread that registered an object sees its own slot).
    fn used(&self) -> &[Slot] {
        let n = self.high_water.load(Acquire).min(self.slots.len());
        &self.slots[..n]
    }

    /// Records a new object. Lock-free and allocation-free; when the table
    /// is full the object is not monitored and [`ObjectTable::dropped`]
    /// counts it.
    pub fn register(&self, object: Object) {
        let (kind, raw) = match encode(object) {
            Some(k) => k,
            None => return,
        };
        // Already tracked (a Fortran wrapper and the C one it calls both
        // report the same object).
        let tracked = self.used().iter().any(|s| {
            matches!(s.state.load(Acquire), NEW | ACTIVE)
                && s.kind.load(Relaxed) == kind
                && s.raw.load(Relaxed) == raw
        });
        if tracked {
            return;
        }
        for (i, slot) in self.slots.iter().enumerate() {
            // A load first: a compare-and-swap on a busy slot would take
            // its cache line exclusively for nothing.
            if slot.state.load(Relaxed) == FREE
                && slot
                    .state
                    .compare_exchange(FREE, CLAIMED, Acquire, Relaxed)
                    .is_ok()
            {
                slot.kind.store(kind, Relaxed);
                slot.raw.store(raw, Relaxed);
                slot.id.store(self.next_id.fetch_add(1, Relaxed), Relaxed);
                slot.nhandles.store(0, Relaxed);
                slot.started.store(0, Relaxed);
                self.high_water.fetch_max(i + 1, AcqRel);
                slot.state.store(NEW, Release);
                return;
            }
        }
        self.dropped.fetch_add(1, Relaxed);
    }

    /// Called before the application frees `object`: no read of it is under
    /// way when this returns, and its PVAR handles are stopped and freed.
    /// Returns whether the object was tracked.
    pub fn retire(&self, object: Object) -> bool {
        let Some((kind, raw)) = encode(object) else {
            return false;
        };
        for slot in self.used().iter() {
            let mut state = slot.state.load(Acquire);
            // The helper may turn NEW into ACTIVE between the load and the
            // compare-and-swap: retry then, or the object would be reported
            // untracked while its handles stay live (found by the stress
            // test in tests/object_table_stress.rs).
            let claimed = loop {
                if !((state == NEW || state == ACTIVE)
                    && slot.kind.load(Relaxed) == kind
                    && slot.raw.load(Relaxed) == raw)
                {
                    break false;
                }
                match slot.state.compare_exchange(state, RETIRED, SeqCst, SeqCst) {
                    Ok(_) => break true,
                    Err(now) => state = now,
                }
            };
            if claimed {
                // Freed before the helper ever saw it (the common case for
                // short-lived objects): if no activation is under way, none
                // can start any more (it would see RETIRED), so the slot is
                // free again at once rather than at the helper's next tick.
                // Without this, an application creating and freeing more
                // objects per sampling interval than the table has slots
                // fills it, and every creation then scans it in vain.
                if state == NEW && !slot.busy.load(SeqCst) {
                    free_handles(slot);
                    slot.state.store(FREE, Release);
                    self.short_lived.fetch_add(1, Relaxed);
                    return true;
                }
                let mut spins = 0u32;
                while slot.busy.load(SeqCst) {
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
                free_handles(slot);
                slot.state.store(DEAD, Release);
                return true;
            }
        }
        false
    }

    /// Objects registered since the helper last looked (state NEW).
    pub fn new_objects(&self) -> impl Iterator<Item = Tracked> + '_ {
        self.tracked(NEW)
    }

    /// Objects whose handles are allocated (state ACTIVE).
    pub fn active_objects(&self) -> impl Iterator<Item = Tracked> + '_ {
        self.tracked(ACTIVE)
    }

    fn tracked(&self, wanted: u8) -> impl Iterator<Item = Tracked> + '_ {
        self.used()
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.state.load(Acquire) == wanted)
            .map(|(i, s)| Tracked {
                slot: i,
                id: s.id.load(Relaxed),
                object: decode(s.kind.load(Relaxed), s.raw.load(Relaxed)),
            })
    }

    /// Runs `f` on a NEW object while it cannot be retired, to allocate its
    /// handles: `f` returns (session, handles, started bits). Afterwards the
    /// object is ACTIVE, or, if the application retired it meanwhile, its
    /// handles were freed by `retire`. Returns false if the object was
    /// retired before `f` could run.
    pub fn activate(
        &self,
        tracked: Tracked,
        f: impl FnOnce() -> (SessionHandle, Vec<(PvarHandle, bool)>),
    ) -> bool {
        let slot = &self.slots[tracked.slot];
        slot.busy.store(true, SeqCst);
        // With `busy` set and the state NEW, the slot cannot change: check
        // the object too, since a scan may have read the id and the handle
        // of two successive occupants.
        if slot.state.load(SeqCst) != NEW
            || slot.id.load(Relaxed) != tracked.id
            || decode(slot.kind.load(Relaxed), slot.raw.load(Relaxed)) != tracked.object
        {
            slot.busy.store(false, SeqCst);
            return false;
        }
        let (session, handles) = f();
        slot.session.store(session.to_bits(), Relaxed);
        let mut started = 0u64;
        let n = handles.len().min(MAX_HANDLES_PER_OBJECT);
        for (i, (h, s)) in handles.into_iter().take(n).enumerate() {
            // The table owns the handle from here on: `retire` frees it.
            slot.handles[i].store(h.to_bits(), Relaxed);
            if s {
                started |= 1 << i;
            }
        }
        slot.started.store(started, Relaxed);
        slot.nhandles.store(n, Relaxed);
        let _ = slot.state.compare_exchange(NEW, ACTIVE, SeqCst, SeqCst);
        slot.busy.store(false, SeqCst);
        true
    }

    /// Runs `f` with the handles of an ACTIVE object while it cannot be
    /// retired. Returns `None` if it was retired (or replaced) meanwhile.
    pub fn with_handles<R>(
        &self,
        tracked: Tracked,
        f: impl FnOnce(SessionHandle, &mut dyn Iterator<Item = PvarHandle>) -> R,
    ) -> Option<R> {
        let slot = &self.slots[tracked.slot];
        slot.busy.store(true, SeqCst);
        let result = if slot.state.load(SeqCst) == ACTIVE && slot.id.load(Relaxed) == tracked.id {
            let n = slot.nhandles.load(Relaxed);
            let session = SessionHandle::from_bits(slot.session.load(Relaxed));
            let mut handles = slot.handles[..n]
                .iter()
                .map(|h| PvarHandle::from_bits(h.load(Relaxed)));
            Some(f(session, &mut handles))
        } else {
            None
        };
        slot.busy.store(false, SeqCst);
        result
    }

    /// Objects freed by the application since the last call (id and
    /// object); their slots become free again.
    pub fn reap(&self, out: &mut Vec<(u64, Object)>) {
        for slot in self.used().iter() {
            if slot.state.load(Acquire) == DEAD {
                out.push((
                    slot.id.load(Relaxed),
                    decode(slot.kind.load(Relaxed), slot.raw.load(Relaxed)),
                ));
                slot.state.store(FREE, Release);
            }
        }
    }

    /// Frees the handles of every object still tracked (at finalize, after
    /// the helper thread stopped).
    pub fn retire_all(&self) {
        for slot in self.used().iter() {
            let state = slot.state.load(Acquire);
            if (state == NEW || state == ACTIVE)
                && slot
                    .state
                    .compare_exchange(state, RETIRED, SeqCst, SeqCst)
                    .is_ok()
            {
                while slot.busy.load(SeqCst) {
                    std::thread::yield_now();
                }
                free_handles(slot);
                slot.state.store(DEAD, Release);
            }
        }
    }

    /// How many objects could not be tracked because the table was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// How many objects were freed before the helper saw them (they lived
    /// less than one sampling interval, and were never sampled).
    pub fn short_lived(&self) -> u64 {
        self.short_lived.load(Relaxed)
    }

    /// How many objects are tracked now (NEW or ACTIVE).
    pub fn live(&self) -> usize {
        self.used()
            .iter()
            .filter(|s| matches!(s.state.load(Relaxed), NEW | ACTIVE))
            .count()
    }
}

fn free_handles(slot: &Slot) {
    let n = slot.nhandles.swap(0, SeqCst);
    if n == 0 {
        return;
    }
    let session = SessionHandle::from_bits(slot.session.load(Relaxed));
    let started = slot.started.load(Relaxed);
    for (i, h) in slot.handles[..n].iter().enumerate() {
        let handle = PvarHandle::from_bits(h.load(Relaxed));
        let stopped = started & (1 << i) == 0 || handle.stop(session).is_ok();
        let freed = handle.free(session).is_ok();
        if !(stopped && freed) {
            // This runs on the application's thread (inside MPI_Comm_free):
            // no message here, a count that the finalize record reports.
            FREE_FAILURES.fetch_add(1, Relaxed);
        }
    }
}

/// PVAR handles of tracked objects that the library refused to stop or
/// free (see [`free_failures`]).
static FREE_FAILURES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many handles of tracked objects the library refused to stop or free
/// so far in this process.
pub fn free_failures() -> u64 {
    FREE_FAILURES.load(Relaxed)
}

fn encode(object: Object) -> Option<(u8, u64)> {
    match object {
        Object::None => None,
        Object::Comm(c) => Some((KIND_COMM, c.to_bits())),
        Object::Win(w) => Some((KIND_WIN, w.to_bits())),
    }
}

fn decode(kind: u8, raw: u64) -> Object {
    match kind {
        KIND_COMM => Object::Comm(Comm::from_bits(raw)),
        KIND_WIN => Object::Win(Win::from_bits(raw)),
        _ => Object::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm(i: u64) -> Object {
        Object::Comm(Comm::from_bits(i))
    }

    #[test]
    fn objects_freed_before_the_helper_saw_them_free_their_slot_at_once() {
        let table = ObjectTable::new(8);
        table.register(comm(1)); // MPI_COMM_WORLD, seen by the helper
        let world = table.new_objects().next().unwrap();
        assert!(table.activate(world, || (SessionHandle::from_bits(0), Vec::new())));
        // Far more create/free pairs than slots, with no helper tick.
        for i in 0..10_000 {
            table.register(comm(100 + i));
            assert!(table.retire(comm(100 + i)));
        }
        assert_eq!(table.dropped(), 0);
        assert_eq!(table.live(), 1);
        // An object the helper activated goes through DEAD and is reaped.
        table.register(comm(7));
        let seven = table.new_objects().next().unwrap();
        assert!(table.activate(seven, || (SessionHandle::from_bits(0), Vec::new())));
        assert!(table.retire(comm(7)));
        let mut reaped = Vec::new();
        table.reap(&mut reaped);
        assert_eq!(reaped, vec![(seven.id, comm(7))]);
        assert_eq!(table.short_lived(), 10_000);
    }

    #[test]
    fn an_object_reported_twice_is_tracked_once() {
        let table = ObjectTable::new(8);
        table.register(comm(7));
        table.register(comm(7));
        assert_eq!(table.live(), 1);
        assert!(table.retire(comm(7)));
        assert!(!table.retire(comm(7)));
        assert_eq!(table.short_lived(), 1);
    }

    #[test]
    fn scans_cover_only_the_slots_ever_used() {
        // A large table with few live objects: creation and free must not
        // walk every slot (walking them costs 0.5 us per communicator
        // created).
        let table = ObjectTable::new(1024);
        for i in 0..1000 {
            table.register(comm(100 + i));
            table.register(comm(5000 + i));
            assert!(table.retire(comm(100 + i)));
            assert!(table.retire(comm(5000 + i)));
        }
        assert_eq!(table.used().len(), 2);
        table.register(comm(1));
        table.register(comm(2));
        table.register(comm(3));
        assert_eq!(table.used().len(), 3);
        assert_eq!(table.live(), 3);
        assert_eq!(table.new_objects().count(), 3);
        assert!(table.retire(comm(3)));
        assert!(!table.retire(comm(3)));
    }

    #[test]
    fn a_full_table_counts_what_it_drops() {
        let table = ObjectTable::new(2);
        for i in 0..5 {
            table.register(comm(100 + i));
        }
        assert_eq!(table.live(), 2);
        assert_eq!(table.dropped(), 3);
    }
}
