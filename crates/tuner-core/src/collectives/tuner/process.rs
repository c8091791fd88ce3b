//! The tuner of this process: prepared, started once every rank agreed,
//! read by the helper thread, stopped at finalize.

use super::*;

pub(super) static ON: AtomicBool = AtomicBool::new(false);
/// The running tuner's [`Params::exact_only`].
static EXACT_ONLY: AtomicBool = AtomicBool::new(false);
pub(super) static TUNER: OnceLock<Tuner> = OnceLock::new();

/// Prepares tuning `targets` in this process, each with its variable's
/// handle (kept for the life of the process, on an MPI_T reference that
/// the tool never finalizes) and what one write of it costs (ns; 0 where
/// nothing is written around calls: measuring, or switching communicators
/// with `by_comms` on Open MPI). Allocates the table; nothing in it can
/// fail on one rank only, so ranks that agreed on the same targets, bins
/// and parameters ([`signature`]) hold the same tuner. `None` when it
/// switches no collective. Started with [`activate`].
pub fn prepare(
    targets: Vec<(Target, Cvar<'static>, u64)>,
    fallback: Option<Fallback>,
    by_comms: Option<ByComms>,
    bins: Bins,
    params: Params,
    world_rank: i32,
) -> Option<Tuner> {
    Tuner::assemble(Parts {
        mpi: RealMpi::new(),
        switches: targets,
        fallback,
        by_comms,
        bins,
        params,
        world_rank,
        comms: MAX_COMMS,
        events: EVENT_QUEUE,
    })
}

/// What every rank must have the same of before tuning starts: the
/// collectives, their candidates' values, the bins and the parameters (a
/// hash; ranks that differ would reach different agreed points).
pub fn signature<'a>(
    targets: impl Iterator<Item = &'a Target>,
    bins: &Bins,
    params: &Params,
) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for t in targets {
        (t.collective as usize).hash(&mut h);
        for (_, v) in &t.candidates {
            v.hash(&mut h);
        }
    }
    bins.bounds.hash(&mut h);
    format!("{params:?}").hash(&mut h);
    h.finish()
}

/// What a tuner is made of: the variables [`prepare`] opened, or a test's
/// simulated ones.
pub(crate) struct Parts<M: TuningMpi> {
    /// Every MPI call the tuner makes of its own.
    pub(crate) mpi: M,
    /// The collectives tuned: each target, its variable, and what one write
    /// of it costs (ns; 0 when nothing is written around calls).
    pub(crate) switches: Vec<(Target, M::Var, u64)>,
    pub(crate) fallback: Option<Fallback<M::Var>>,
    pub(crate) by_comms: Option<ByComms<M::Var>>,
    pub(crate) bins: Bins,
    pub(crate) params: Params,
    pub(crate) world_rank: i32,
    /// Communicators tuned at once ([`MAX_COMMS`]).
    pub(crate) comms: usize,
    /// Events kept between two ticks of the helper.
    pub(crate) events: usize,
}

impl<M: TuningMpi> Tuner<M> {
    /// A tuner of `parts`, its table allocated; `None` when it switches no
    /// collective.
    pub(crate) fn assemble(parts: Parts<M>) -> Option<Tuner<M>> {
        let Parts {
            mpi,
            switches: opened,
            fallback,
            by_comms,
            bins,
            params,
            world_rank,
            comms,
            events,
        } = parts;
        let mut switches: Vec<Option<Switch<M::Var>>> = COLLECTIVES.iter().map(|_| None).collect();
        let fallback_ns = fallback.as_ref().map_or(0, |f| f.write_ns);
        for (target, cvar, write_ns) in opened {
            let i = target.collective as usize;
            let commutative_only = match by_comms {
                Some(_) => target
                    .candidates
                    .iter()
                    .enumerate()
                    .filter(|(_, (n, _))| {
                        crate::collectives::library::open_mpi_needs_commutative(
                            target.collective,
                            n,
                        )
                    })
                    .fold(0, |m, (i, _)| m | 1u32.checked_shl(i as u32).unwrap_or(0)),
                None => 0,
            };
            switches[i] = Some(Switch {
                var: Written::new(cvar, target.candidates[0].1),
                default: target.candidates[0].1,
                switch_ns: 2 * (write_ns + fallback_ns),
                target,
                pin: AtomicU64::new(0),
                commutative_only,
            });
        }
        if switches.iter().all(Option::is_none) {
            return None;
        }
        let mut fresh = Vec::with_capacity(COLLECTIVES.len() * bins.len());
        for s in &switches {
            let n = s.as_ref().map_or(1, |s| s.target.candidates.len());
            fresh.extend((0..bins.len()).map(|_| Search::new(params, n)));
        }
        let (tx, rx) = crossbeam_channel::bounded(events);
        // Candidate communicators: per collective, one slot per candidate of
        // the collective with the most (none without ByComms).
        let stride = match by_comms {
            Some(_) => switches
                .iter()
                .flatten()
                .map(|s| s.target.candidates.len())
                .max()
                .unwrap_or(0),
            None => 0,
        };
        let dups = COLLECTIVES.len() * stride;
        let entries = (0..comms)
            .map(|_| Entry {
                bits: AtomicU64::new(FREE),
                state: AtomicRefCell::new(CommState {
                    ready: false,
                    off: false,
                    label: 0,
                    rank: 0,
                    size: 0,
                    private: None,
                    dups: (0..dups).map(|_| None).collect(),
                    searches: fresh.clone(),
                    pinned: [0; COLLECTIVES.len()],
                    given: vec![0; fresh.len()],
                    point_ns: 0,
                    other_ns: 0.0,
                }),
                quiet: (0..fresh.len()).map(|_| AtomicU64::new(0)).collect(),
                dups: (0..dups).map(|_| AtomicU64::new(0)).collect(),
                last_bin: std::array::from_fn(|_| AtomicU32::new(0)),
            })
            .collect();
        Some(Tuner {
            mpi,
            switches,
            fallback,
            by_comms,
            stride,
            bins,
            params,
            fresh,
            entries,
            high: AtomicUsize::new(0),
            in_flight: AtomicU32::new(0),
            recent: std::array::from_fn(|_| Recent::new()),
            stop: AtomicBool::new(false),
            tx,
            rx,
            lost: AtomicU64::new(0),
            #[cfg(test)]
            sent: AtomicU64::new(0),
            world_rank,
            labels: AtomicU64::new(0),
            requests: Mutex::new(Vec::new()),
            warm: Vec::new(),
        })
    }
}

/// Starts a prepared tuner: the application's collectives go through it
/// from now on. Fails if one already runs in this process.
pub fn activate(tuner: Tuner) -> Result<&'static Tuner, String> {
    TUNER
        .set(tuner)
        .map_err(|_| "collective tuning was already started in this process".to_string())?;
    let exact_only = TUNER.get().is_some_and(|t| t.params.exact_only);
    EXACT_ONLY.store(exact_only, Relaxed);
    ON.store(true, Release);
    TUNER
        .get()
        .ok_or_else(|| "collective tuning did not start".to_string())
}

/// Whether tuning runs (one relaxed load: the interposer's test).
#[inline]
pub fn on() -> bool {
    ON.load(Relaxed)
}

/// Whether the tuner takes only calls whose result cannot depend on the
/// algorithm (mode `safe`): the interposer then runs a reduction of a
/// floating-point datatype (or with a user-defined operation) on the
/// library's default and does not hand it to [`before`]. Read after
/// [`on`] (set before it).
#[inline]
pub fn exact_only() -> bool {
    EXACT_ONLY.load(Relaxed)
}

/// The tuner, if it runs.
pub fn tuner() -> Option<&'static Tuner> {
    ON.load(Acquire).then(|| TUNER.get()).flatten()
}

/// The tuner started in this process, running or stopped (names of the
/// events drained after [`stop`]).
pub fn started() -> Option<&'static Tuner> {
    TUNER.get()
}

/// Events since the last call (the helper logs them on its tick).
pub fn events() -> impl Iterator<Item = TuneEvent> {
    TUNER.get().into_iter().flat_map(Tuner::drain)
}

/// The application wrote a control variable through MPI_T itself (the
/// preload sees its `MPI_T_cvar_write`; the tool's own writes go past it).
/// Each variable the tuner writes around calls is read back: one whose
/// value changed is the application's from now on. The tuner never writes
/// it again, this call's peers (which ran the same write, as an ALL_EQ
/// variable requires) do the same, and tuning stops on every rank at the
/// next agreed point. A write of the value set now changes nothing and is
/// not seen (between calls that is the value set at start).
#[cold]
pub fn application_wrote() {
    let Some(t) = tuner() else { return };
    t.application_wrote();
}

/// Stops tuning inside `MPI_Finalize`, before the library's own
/// finalization: every variable back to its default and the tuning
/// communicators freed. (The variables' handles stay open: they live in a
/// process-wide table, and `MPI_Finalize` frees them.) Returns messages for
/// the log.
pub fn stop() -> Vec<String> {
    if !ON.swap(false, AcqRel) {
        return Vec::new();
    }
    let Some(t) = TUNER.get() else {
        return Vec::new();
    };
    t.shutdown()
}

impl<M: TuningMpi> Tuner<M> {
    /// The events queued since the last call.
    pub(crate) fn drain(&self) -> crossbeam_channel::TryIter<'_, TuneEvent> {
        self.rx.try_iter()
    }

    /// [`application_wrote`] on this tuner.
    #[cold]
    pub(crate) fn application_wrote(&self) {
        let fallback = self.fallback.as_ref().map(|f| (&f.var, None));
        let switches = self
            .switches
            .iter()
            .flatten()
            .map(|s| (&s.var, Some(&s.target)));
        for (var, target) in switches.chain(fallback) {
            if var.foreign.load(Acquire) {
                continue;
            }
            let held = var.current.load(Relaxed);
            let message = match var.cvar.read_int() {
                Ok(Some(v)) if v == held => continue,
                Ok(Some(v)) => {
                    var.current.store(v, Relaxed);
                    let name = match target {
                        Some(t) => t.name_of(v),
                        None => crate::collectives::library::mpich_fallback_name(v),
                    };
                    let value = name.map_or_else(|| v.to_string(), |n| format!("`{n}` ({v})"));
                    format!("the application wrote {value} itself")
                }
                Ok(None) => "the application wrote it, and it reads back as no integer".into(),
                Err(e) => {
                    format!(
                        "the application wrote a variable, and reading this one back failed ({e})"
                    )
                }
            };
            var.foreign.store(true, Release);
            self.stop.store(true, Release);
            let message = format!(
                "{}: {message}: the tool never writes it again, and tuning stops on every rank \
                 at the next agreed point",
                var.name()
            );
            self.tell(
                target.map(|t| t.collective),
                What::ApplicationWrote(message),
            );
        }
    }

    /// [`stop`] on this tuner (once tuning is off: no call comes here any
    /// more).
    pub(crate) fn shutdown(&self) -> Vec<String> {
        let mut messages = Vec::new();
        let mut restore = |var: &Written<M::Var>, value: i64, what: &str| {
            if let Err(e) = var.put(value) {
                messages.push(format!("{}: could not write {what} back: {e}", var.name()));
            }
        };
        for s in self.switches.iter().flatten() {
            restore(&s.var, s.default, "the default");
        }
        if let Some(f) = &self.fallback {
            restore(&f.var, f.user, "the application's value");
        }
        for e in self.entries.iter() {
            match e.state.try_borrow_mut() {
                Ok(mut st) => {
                    Self::settle_all(e, &mut st);
                    if e.bits.load(Acquire) != FREE {
                        self.emit_measurements(&st);
                    }
                    for d in e.dups.iter() {
                        d.store(0, Relaxed);
                    }
                    messages.extend(free_comms(&mut st));
                }
                Err(_) => {
                    messages.push("a tuning communicator was still in use at finalize".into())
                }
            }
        }
        messages
    }
}
