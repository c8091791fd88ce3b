//! Stress test of the lock-free object table: application threads create
//! and free communicators while a helper thread activates, reads and reaps
//! them, for many randomized iterations (deterministic seeds, no timing).
//!
//! No MPI runs here (this test binary links none): the table's handle frees
//! go through `mpit`, which finds no MPI library in the process and returns
//! `Error::NoMpi` without calling C, so every handle the table frees is
//! counted by [`objects::free_failures`]. That count is what proves each
//! handle was freed exactly once.

use mpit::{Comm, HandleBits, Object, PvarHandle, SessionHandle};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Mutex;
use tuner_core::sample::objects::{self, ObjectTable, Tracked};

const APP_THREADS: u64 = 4;
/// Objects each application thread keeps alive at most at once.
const LIVE_PER_THREAD: usize = 6;
const OPS_PER_THREAD: u64 = if cfg!(miri) { 300 } else { 40_000 };
const SESSION_BITS: u64 = 0x5e55;

use mpit_testkit::rng::Rng;

/// The raw handle of thread `t`'s `k`-th communicator (fits an `int`).
fn raw(t: u64, k: u64) -> u64 {
    ((t + 1) << 20) | k
}

fn comm(raw: u64) -> Object {
    Object::Comm(Comm::from_bits(raw))
}

fn raw_of(object: Object) -> u64 {
    match object {
        Object::Comm(c) => c.to_bits(),
        other => panic!("only communicators are registered, saw {other:?}"),
    }
}

/// How many PVAR handles the helper gives an object (0 to 4).
fn handles_for(raw: u64) -> usize {
    (raw % 5) as usize
}

/// The bits of an object's `i`-th handle: derived from the object, so a
/// read that mixed two objects' slots (a torn entry) is caught.
fn handle_bits(raw: u64, i: usize) -> u64 {
    raw * 64 + i as u64 + 1
}

#[test]
fn concurrent_create_free_and_scan_keep_the_table_consistent() {
    assert!(
        mpit::comm_world().is_err(),
        "this test must run without MPI: the table would free made-up handles"
    );
    let capacity = (APP_THREADS as usize) * LIVE_PER_THREAD + 8;
    let table = ObjectTable::new(capacity);
    let done = AtomicBool::new(false);
    let registered = AtomicU64::new(0);
    // Objects whose retire said "not tracked": the table was full when
    // they were created (slots of dead objects wait for the helper's reap).
    let untracked = AtomicU64::new(0);
    // Helper-side records.
    let activated_handles = AtomicU64::new(0);
    let reaped: Mutex<Vec<(u64, Object)>> = Mutex::new(Vec::new());
    let seen_ids: Mutex<HashMap<u64, u64>> = Mutex::new(HashMap::new());

    std::thread::scope(|s| {
        let mut apps = Vec::new();
        for t in 0..APP_THREADS {
            let table = &table;
            let registered = &registered;
            let untracked = &untracked;
            apps.push(s.spawn(move || {
                let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15 ^ (t + 1));
                let mut live: Vec<u64> = Vec::new();
                let mut next = 1u64;
                for _ in 0..OPS_PER_THREAD {
                    let create =
                        live.is_empty() || (live.len() < LIVE_PER_THREAD && rng.below(2) == 0);
                    if create {
                        let r = raw(t, next);
                        next += 1;
                        table.register(comm(r));
                        if rng.below(8) == 0 {
                            // A Fortran wrapper and the C one both report it.
                            table.register(comm(r));
                        }
                        registered.fetch_add(1, Relaxed);
                        live.push(r);
                    } else {
                        let r = live.swap_remove(rng.below(live.len() as u64) as usize);
                        if !table.retire(comm(r)) {
                            untracked.fetch_add(1, Relaxed);
                        }
                        assert!(!table.retire(comm(r)), "object {r:#x} retired twice");
                    }
                    if rng.below(16) == 0 {
                        std::thread::yield_now();
                    }
                }
                for r in live {
                    if !table.retire(comm(r)) {
                        untracked.fetch_add(1, Relaxed);
                    }
                }
            }));
        }

        // The helper thread: activate new objects, read active ones, reap.
        s.spawn(|| {
            let mut rng = Rng::new(0xdead_beef);
            let mut out = Vec::new();
            loop {
                let finished = done.load(SeqCst);
                out.clear();
                table.reap(&mut out);
                reaped.lock().unwrap().extend(out.iter().copied());
                let new: Vec<Tracked> = table.new_objects().collect();
                for tracked in new {
                    let r = raw_of(tracked.object);
                    let n = handles_for(r);
                    let activated = table.activate(tracked, || {
                        let handles = (0..n)
                            .map(|i| (PvarHandle::from_bits(handle_bits(r, i)), i % 2 == 0))
                            .collect();
                        (SessionHandle::from_bits(SESSION_BITS), handles)
                    });
                    if activated {
                        // A scan may read the id and the object of two
                        // successive occupants of a slot; `activate` refuses
                        // such a torn entry, so what it accepted is exact.
                        let prev = seen_ids.lock().unwrap().insert(tracked.id, r);
                        assert_eq!(prev, None, "id {} activated twice", tracked.id);
                        activated_handles.fetch_add(n as u64, SeqCst);
                    }
                }
                let active: Vec<Tracked> = table.active_objects().collect();
                for tracked in active {
                    let r = raw_of(tracked.object);
                    table.with_handles(tracked, |session, handles| {
                        assert_eq!(session.to_bits(), SESSION_BITS);
                        let bits: Vec<u64> = handles.map(|h| h.to_bits()).collect();
                        let want: Vec<u64> =
                            (0..handles_for(r)).map(|i| handle_bits(r, i)).collect();
                        assert_eq!(bits, want, "torn entry for object {r:#x}");
                    });
                }
                if finished {
                    break;
                }
                if rng.below(4) == 0 {
                    std::thread::yield_now();
                }
            }
        });

        // Once the application threads are done, the helper makes one last
        // round and stops.
        for app in apps {
            if let Err(panic) = app.join() {
                done.store(true, SeqCst);
                std::panic::resume_unwind(panic);
            }
        }
        done.store(true, SeqCst);
    });

    // Every object is retired; the helper's last round reaped the dead.
    let mut out = Vec::new();
    table.reap(&mut out);
    let mut reaped = reaped.into_inner().unwrap();
    reaped.extend(out);
    assert_eq!(table.live(), 0);
    // An object reported twice while the table is full is dropped twice.
    assert!(
        table.dropped() >= untracked.load(SeqCst),
        "an object was lost: not tracked, yet not counted as dropped"
    );
    let ids: HashSet<u64> = reaped.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.len(), reaped.len(), "an object was reaped twice");
    let seen = seen_ids.into_inner().unwrap();
    // A reaped object was activated under its own id, or freed while its
    // activation was under way (which then backed off).
    for (id, object) in &reaped {
        if let Some(r) = seen.get(id) {
            assert_eq!(*r, raw_of(*object), "reaped id {id} names another object");
        }
    }
    assert_eq!(
        reaped.len() as u64 + table.short_lived() + untracked.load(SeqCst),
        registered.load(SeqCst),
        "every object ends reaped, freed before the helper saw it, or dropped"
    );
    assert_eq!(
        objects::free_failures(),
        activated_handles.load(SeqCst),
        "each activated handle freed exactly once"
    );
}
