//! A simulated MPI for the tuner's tests: [`SimMpi`], one per rank, over a
//! shared [`World`] in which ranks are threads of this process.
//!
//! The tool's collectives rendezvous: the `k`-th collective a rank makes on
//! a communicator meets the `k`-th of every other rank (MPI orders a
//! communicator's collectives), whatever the threads' schedule. A reduction
//! combines element-wise (max, min, sum), a broadcast takes the root's
//! bytes, an agreement is the minimum `mpit::collective` reduces, and a
//! private communicator gets a number the world hands out when the last
//! rank arrives. Every result depends only on what the ranks contributed,
//! never on the order they arrived in. Two ranks that make different
//! collectives at the same position, or a rank that waits for peers that
//! will never come (every live rank waiting, or the others gone), break
//! the world: every rank's thread panics with the reason.
//!
//! Every communicator spans every rank. Private communicators are counted
//! per rank: made, freed (through [`TuningComm::free`]) and dropped without
//! a free, so the tests can tell that each is released once. The clock of a
//! rank is what its script says ([`SimMpi::advance`]); its standard error is
//! kept ([`World::said`]).

use crate::collectives::library::{Collective, Target};
use crate::collectives::mpi::{AlgorithmVar, Sequence, TuningComm, TuningMpi};
use crate::collectives::{Bins, ByComms, Fallback, Params, Tuner};
use mpit::collective::{Failure, ReduceOp, Verdict};
use mpit::{Comm, CvarInfo, HandleBits, MpiError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// The bit of an application communicator's bits that makes it an
/// intercommunicator.
pub(super) const INTER: u64 = 1 << 30;
/// Private communicators are numbered from here.
const PRIVATE_BASE: u64 = 0x7000_0000;

/// The calls a failure can be reported for, by number, and the name of a
/// failure that is not an MPI call's: `mpit::collective`'s.
use mpit::collective::LOCAL;

/// What a collective does with the contributions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Reduce(ReduceOp),
    Bcast(i32),
    Create,
}

struct Pending {
    kind: Kind,
    acc: Vec<i64>,
    arrived: usize,
    /// Ranks blocked on it (counted in `Inner::waiting`).
    waiters: usize,
}

struct Done {
    result: Vec<i64>,
    readers: usize,
}

/// A private communicator of one rank.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Released {
    /// Freed through [`TuningComm::free`] (more than once: a double free).
    pub(super) frees: u32,
    /// Dropped without a free.
    pub(super) dropped: bool,
}

#[derive(Default)]
struct Inner {
    pending: HashMap<(u64, u64), Pending>,
    done: HashMap<(u64, u64), Done>,
    /// Per (communicator, rank), the position of its next collective.
    next: HashMap<(u64, usize), u64>,
    made: u64,
    privates: HashMap<(u64, usize), Released>,
    /// Threads that may still make collectives, and those blocked in one.
    live: usize,
    waiting: usize,
    broken: Option<String>,
    said: Vec<(usize, String)>,
}

/// The ranks' shared world.
pub(super) struct World {
    ranks: usize,
    inner: Mutex<Inner>,
    cv: Condvar,
}

/// A thread of the world: when it ends (or unwinds), the world knows it
/// makes no more collectives.
pub(super) struct Presence<'w>(&'w World);

impl Drop for Presence<'_> {
    fn drop(&mut self) {
        let mut g = self.0.lock();
        g.live -= 1;
        if g.waiting > 0 && g.waiting >= g.live && g.broken.is_none() {
            g.broken = Some(format!(
                "deadlock: {} ranks wait in a collective that a rank that ended never made",
                g.waiting
            ));
            self.0.cv.notify_all();
        }
    }
}

impl World {
    /// A world of `ranks` ranks, driven by `threads` threads that make
    /// collectives (each must hold a [`World::presence`] while it runs).
    pub(super) fn new(ranks: usize, threads: usize) -> Arc<World> {
        Arc::new(World {
            ranks,
            inner: Mutex::new(Inner {
                live: threads,
                ..Inner::default()
            }),
            cv: Condvar::new(),
        })
    }

    /// Marks the calling thread as one of the world's until it drops this.
    pub(super) fn presence(&self) -> Presence<'_> {
        Presence(self)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every rank's private communicators: (communicator, rank) and how
    /// each was released.
    pub(super) fn privates(&self) -> HashMap<(u64, usize), Released> {
        self.lock().privates.clone()
    }

    /// The lines the ranks said on their standard error.
    pub(super) fn said(&self) -> Vec<(usize, String)> {
        self.lock().said.clone()
    }

    /// The next collective of `rank` on `comm` (where it has rank
    /// `comm_rank`): waits for every rank's, returns the result.
    fn rendezvous(
        &self,
        comm: u64,
        rank: usize,
        comm_rank: i32,
        kind: Kind,
        data: &[i64],
    ) -> Vec<i64> {
        let mut g = self.lock();
        let position = {
            let n = g.next.entry((comm, rank)).or_insert(0);
            *n += 1;
            *n - 1
        };
        let key = (comm, position);
        if let Some(why) = g.broken.clone() {
            drop(g);
            panic!("{why}");
        }
        let p = g.pending.entry(key).or_insert_with(|| Pending {
            kind,
            acc: match kind {
                Kind::Reduce(ReduceOp::Max) => vec![i64::MIN; data.len()],
                Kind::Reduce(ReduceOp::Min) => vec![i64::MAX; data.len()],
                _ => vec![0; data.len()],
            },
            arrived: 0,
            waiters: 0,
        });
        if p.kind != kind || p.acc.len() != data.len() {
            let why = format!(
                "rank {rank} made {kind:?} of {} values as collective {position} of communicator \
                 {comm:#x}, where another rank made {:?} of {}",
                data.len(),
                p.kind,
                p.acc.len()
            );
            g.broken = Some(why.clone());
            self.cv.notify_all();
            drop(g);
            panic!("{why}");
        }
        match kind {
            Kind::Reduce(op) => {
                for (a, &x) in p.acc.iter_mut().zip(data) {
                    *a = match op {
                        ReduceOp::Max => (*a).max(x),
                        ReduceOp::Min => (*a).min(x),
                        ReduceOp::Sum => a.wrapping_add(x),
                    };
                }
            }
            Kind::Bcast(root) if root == comm_rank => p.acc.copy_from_slice(data),
            Kind::Bcast(_) | Kind::Create => {}
        }
        p.arrived += 1;
        if p.arrived == self.ranks {
            let waiters = p.waiters;
            let acc = std::mem::take(&mut p.acc);
            g.pending.remove(&key);
            let result = match kind {
                Kind::Create => {
                    g.made += 1;
                    vec![(PRIVATE_BASE + g.made) as i64]
                }
                _ => acc,
            };
            g.waiting -= waiters;
            g.done.insert(
                key,
                Done {
                    result,
                    readers: self.ranks,
                },
            );
            self.cv.notify_all();
        }
        let mut counted = false;
        loop {
            if let Some(d) = g.done.get_mut(&key) {
                d.readers -= 1;
                let result = d.result.clone();
                if d.readers == 0 {
                    g.done.remove(&key);
                }
                return result;
            }
            if let Some(why) = g.broken.clone() {
                drop(g);
                panic!("{why}");
            }
            if !counted {
                counted = true;
                if let Some(p) = g.pending.get_mut(&key) {
                    p.waiters += 1;
                }
                g.waiting += 1;
                if g.waiting >= g.live {
                    g.broken = Some(format!(
                        "deadlock: every rank waits in a collective (rank {rank} in collective \
                         {position} of communicator {comm:#x})"
                    ));
                    self.cv.notify_all();
                    continue;
                }
            }
            g = self.cv.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// What goes wrong on one rank, and what its MPI costs it.
#[derive(Debug, Default, Clone)]
pub(super) struct Faults {
    /// This rank's allreduces (numbered from 0 over all communicators)
    /// that report an error after taking part.
    pub(super) failed_allreduces: Vec<u64>,
    /// This rank's private communicators (numbered from 0) the library
    /// will not create.
    pub(super) failed_creates: Vec<u64>,
    /// What each allreduce costs this rank (ns on its clock).
    pub(super) reduce_ns: u64,
    /// What each communicator it makes costs this rank (ns on its clock).
    pub(super) create_ns: u64,
}

/// One rank's MPI.
pub(super) struct SimMpi {
    rank: Arc<Rank>,
}

struct Rank {
    world: Arc<World>,
    rank: usize,
    clock_ns: AtomicU64,
    faults: Faults,
    allreduces: AtomicU64,
    creates: AtomicU64,
    /// The values this rank's algorithm variables hold now.
    vars: Mutex<Vec<(Collective, Arc<AtomicI64>)>>,
    /// Per communicator the tool made, the values its variables held
    /// then: the algorithms it runs (as Open MPI's communicators do).
    made_with: Mutex<HashMap<u64, Vec<(Collective, i64)>>>,
}

impl SimMpi {
    /// Rank `rank` of `world`.
    pub(super) fn new(world: &Arc<World>, rank: usize, faults: Faults) -> SimMpi {
        SimMpi {
            rank: Arc::new(Rank {
                world: world.clone(),
                rank,
                clock_ns: AtomicU64::new(0),
                faults,
                allreduces: AtomicU64::new(0),
                creates: AtomicU64::new(0),
                vars: Mutex::new(Vec::new()),
                made_with: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The algorithm of `collective` a communicator the tool made runs:
    /// the value its variable held when it was made.
    pub(super) fn runs_on(&self, comm: Comm, collective: Collective) -> Option<i64> {
        let made = self
            .rank
            .made_with
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        made.get(&comm.to_bits())?
            .iter()
            .find(|(c, _)| *c == collective)
            .map(|(_, v)| *v)
    }

    /// Moves this rank's clock on by `ns`.
    pub(super) fn advance(&self, ns: u64) {
        self.rank.clock_ns.fetch_add(ns, Relaxed);
    }

    /// This rank's clock: its calls, and what the tool's own collectives
    /// cost it (ns).
    pub(super) fn clock_ns(&self) -> u64 {
        self.rank.clock_ns.load(Relaxed)
    }
}

/// An error of the library, as `mpit` reports one.
fn mpi_error(call: &'static str) -> mpit::Error {
    mpit::Error::Mpi(MpiError {
        call,
        code: 15,
        name: "MPI_ERR_OTHER".into(),
        variable: None,
    })
}

impl TuningMpi for SimMpi {
    type Private = SimPrivate;
    type Seq = SimSeq;
    type Guard = ();
    type Var = SimVar;

    fn rank_size(&self, _comm: Comm) -> mpit::Result<(i32, i32)> {
        Ok((self.rank.rank as i32, self.rank.world.ranks as i32))
    }

    fn is_inter(&self, comm: Comm) -> mpit::Result<bool> {
        Ok(comm.to_bits() & INTER != 0)
    }

    fn errors_return(&self, _comm: Comm) -> ((), Option<mpit::Error>) {
        ((), None)
    }

    fn restore(&self, _guard: ()) -> mpit::Result<()> {
        Ok(())
    }

    fn sequence(&self, comm: Comm, rank: i32) -> SimSeq {
        SimSeq {
            rank: self.rank.clone(),
            comm: comm.to_bits(),
            comm_rank: rank,
            failure: None,
        }
    }

    fn create_private(&self, seq: &mut SimSeq, parent: Comm) -> Option<SimPrivate> {
        let r = &self.rank;
        let n = r.creates.fetch_add(1, Relaxed);
        let made = r
            .world
            .rendezvous(parent.to_bits(), r.rank, seq.comm_rank, Kind::Create, &[0]);
        r.clock_ns.fetch_add(r.faults.create_ns, Relaxed);
        if r.faults.failed_creates.contains(&n) {
            seq.fail("MPI_Comm_create_group", &mpi_error("MPI_Comm_create_group"));
            return None;
        }
        let bits = made[0] as u64;
        r.world
            .lock()
            .privates
            .insert((bits, r.rank), Released::default());
        let vars = r.vars.lock().unwrap_or_else(PoisonError::into_inner);
        let values = vars.iter().map(|(c, v)| (*c, v.load(Relaxed))).collect();
        r.made_with
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(bits, values);
        Some(SimPrivate {
            rank: r.clone(),
            bits,
            freed: false,
        })
    }

    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.rank.clock_ns.load(Relaxed))
    }

    fn say(&self, line: std::fmt::Arguments<'_>) {
        let r = &self.rank;
        r.world.lock().said.push((r.rank, line.to_string()));
    }
}

/// A rank's sequence of collectives on one communicator.
pub(super) struct SimSeq {
    rank: Arc<Rank>,
    comm: u64,
    comm_rank: i32,
    failure: Option<Failure>,
}

impl SimSeq {
    fn meet(&self, kind: Kind, data: &[i64]) -> Vec<i64> {
        self.rank
            .world
            .rendezvous(self.comm, self.rank.rank, self.comm_rank, kind, data)
    }
}

impl Sequence for SimSeq {
    fn fail(&mut self, call: &str, e: &mpit::Error) {
        if self.failure.is_none() {
            self.failure = Some(Failure {
                call: call.to_string(),
                class: match e {
                    mpit::Error::Mpi(m) => Some(m.code),
                    _ => None,
                },
                message: e.to_string(),
            });
        }
    }

    fn fail_local(&mut self, message: String) {
        if self.failure.is_none() {
            self.failure = Some(Failure {
                call: LOCAL.to_string(),
                class: None,
                message,
            });
        }
    }

    fn failed(&self) -> bool {
        self.failure.is_some()
    }

    fn bcast_bytes(&mut self, buf: &mut [u8], root: i32) -> bool {
        let data: Vec<i64> = buf.iter().map(|&b| i64::from(b)).collect();
        let got = self.meet(Kind::Bcast(root), &data);
        for (b, x) in buf.iter_mut().zip(got) {
            *b = x as u8;
        }
        true
    }

    fn allreduce_i64(&mut self, send: &[i64], recv: &mut [i64], op: ReduceOp) {
        let n = self.rank.allreduces.fetch_add(1, Relaxed);
        let got = self.meet(Kind::Reduce(op), send);
        recv.copy_from_slice(&got);
        self.rank
            .clock_ns
            .fetch_add(self.rank.faults.reduce_ns, Relaxed);
        if self.rank.faults.failed_allreduces.contains(&n) {
            // After taking part: the result is there, as the peers'.
            self.fail("MPI_Allreduce", &mpi_error("MPI_Allreduce"));
        }
    }

    fn all_equal(&mut self, x: i64) -> bool {
        let mut ends = [0i64; 2];
        self.allreduce_i64(&[x, !x], &mut ends, ReduceOp::Min);
        self.failed() || ends[0] == !ends[1]
    }

    fn agree(&mut self) -> Verdict {
        // The votes and their reading are mpit's own; only the reduction
        // is the simulated world's.
        let send = mpit::collective::vote(self.comm_rank, self.failure.as_ref());
        let recv = self.meet(Kind::Reduce(ReduceOp::Min), &send);
        let recv: [i64; 4] = recv
            .get(..4)
            .and_then(|r| r.try_into().ok())
            .expect("a reduction of four values gives four");
        mpit::collective::tally(&recv, self.failure.take(), |c| format!("error class {c}"))
    }

    fn into_pending(self) -> Option<Failure> {
        self.failure
    }
}

/// A private communicator of one rank.
pub(super) struct SimPrivate {
    rank: Arc<Rank>,
    bits: u64,
    freed: bool,
}

impl TuningComm for SimPrivate {
    fn comm(&self) -> Comm {
        assert!(!self.freed, "a freed private communicator was used");
        Comm::from_bits(self.bits)
    }

    fn free(&mut self) -> mpit::Result<()> {
        if !std::mem::replace(&mut self.freed, true) {
            let r = &self.rank;
            let mut g = r.world.lock();
            g.privates.entry((self.bits, r.rank)).or_default().frees += 1;
        }
        Ok(())
    }
}

impl Drop for SimPrivate {
    fn drop(&mut self) {
        if !self.freed {
            let r = &self.rank;
            let mut g = r.world.lock();
            g.privates.entry((self.bits, r.rank)).or_default().dropped = true;
        }
    }
}

/// An algorithm variable of one rank: the value the library runs.
pub(super) struct SimVar {
    name: String,
    value: Arc<AtomicI64>,
    /// A value the library refuses.
    refused: Option<i64>,
}

impl AlgorithmVar for SimVar {
    fn write_int(&self, value: i64) -> mpit::Result<()> {
        if self.refused == Some(value) {
            return Err(mpit::Error::SetNotNow {
                call: "MPI_T_cvar_write",
                variable: self.name.clone(),
            });
        }
        self.value.store(value, Relaxed);
        Ok(())
    }

    fn read_int(&self) -> mpit::Result<Option<i64>> {
        Ok(Some(self.value.load(Relaxed)))
    }

    fn var_name(&self) -> &str {
        &self.name
    }
}

/// A collective the simulated library lets the tuner switch.
#[derive(Debug, Clone)]
pub(super) struct Switchable {
    pub(super) collective: Collective,
    /// (name, value); the first is the default.
    pub(super) candidates: Vec<(&'static str, i64)>,
    /// A value this rank's library refuses.
    pub(super) refused: Option<i64>,
}

/// The target of `s`, as `setup` finds one.
pub(super) fn target(s: &Switchable) -> Target {
    Target {
        collective: s.collective,
        cvar: CvarInfo {
            index: s.collective as i32,
            name: format!(
                "MPIR_CVAR_{}_INTRA_ALGORITHM",
                s.collective.name().to_uppercase()
            ),
            description: String::new(),
            verbosity: mpit::Verbosity::UserBasic,
            datatype: mpit::Datatype::Int,
            enumeration: None,
            binding: mpit::Binding::NoObject,
            scope: mpit::Scope::AllEq,
        },
        candidates: s
            .candidates
            .iter()
            .map(|(n, v)| (n.to_string(), *v))
            .collect(),
    }
}

/// What one write of a variable costs in the simulation (ns).
pub(super) const WRITE_NS: u64 = 20;

/// A simulated Open MPI: an algorithm written reaches only the
/// communicators made after the write, so calls switch communicators
/// (`ByComms`).
#[derive(Debug, Clone, Copy)]
pub(super) struct OpenMpi {
    /// `(major, minor)`.
    pub(super) version: (u32, u32),
    /// The hash of this rank's host name.
    pub(super) host: i64,
}

/// A rank's tuner over `mpi`, switching `switchable` (writing variables
/// around calls, or with `open_mpi` switching communicators), with a table
/// of `comms` communicators and room for `events` events; and, per
/// collective, the value its variable holds (what a call on the
/// application's communicator runs).
pub(super) fn tuner(
    mpi: SimMpi,
    switchable: &[Switchable],
    params: Params,
    comms: usize,
    events: usize,
    open_mpi: Option<OpenMpi>,
) -> (Tuner<SimMpi>, Vec<(Collective, Arc<AtomicI64>)>) {
    let rank = mpi.rank.rank as i32;
    let mut held = Vec::new();
    let switches = switchable
        .iter()
        .map(|s| {
            let value = Arc::new(AtomicI64::new(s.candidates[0].1));
            held.push((s.collective, value.clone()));
            let t = target(s);
            let var = SimVar {
                name: t.cvar.name.clone(),
                value,
                refused: s.refused,
            };
            // Switching communicators writes nothing around calls.
            (t, var, if open_mpi.is_some() { 0 } else { WRITE_NS })
        })
        .collect();
    *mpi.rank.vars.lock().unwrap_or_else(PoisonError::into_inner) = held.clone();
    let tuner = Tuner::assemble(crate::collectives::tuner::Parts {
        mpi,
        switches,
        fallback: None::<Fallback<SimVar>>,
        by_comms: open_mpi.map(|o| ByComms::<SimVar>::simulated(o.version, o.host)),
        bins: Bins::default(),
        params,
        world_rank: rank,
        comms,
        events,
    })
    .expect("a simulated tuner switches at least one collective");
    (tuner, held)
}
