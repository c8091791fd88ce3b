//! The hot path: what the interposer calls around each blocking collective.

use super::*;

/// A tuned call in progress: returned by [`before`], given to [`after`].
pub type Ticket = TunedCall<'static, RealMpi>;

/// What a counted call holds until [`after`]: the communicator's state,
/// its entry, the search and the communicator.
type Counted<'t, M> = (AtomicRefMut<'t, CommState<M>>, &'t Entry<M>, usize, Comm);

/// A tuned call in progress on a tuner that lives for `'t` ([`Ticket`]:
/// the process's). It holds the tuner and the collective's switch, so
/// that [`after`] finds them without looking them up again.
pub struct TunedCall<'t, M: TuningMpi> {
    tuner: &'t Tuner<M>,
    switch: &'t Switch<M::Var>,
    /// `None`: nothing to count after the call.
    state: Option<Counted<'t, M>>,
    timed: bool,
    /// This call runs a value other than the default: its variable is
    /// written before and after it (read only for timed calls, to charge
    /// them the writes).
    switched: bool,
    /// Where the call runs.
    place: Place,
}

/// Where a tuned call runs: the application's communicator, or
/// ([`ByComms`]) a candidate communicator the tuner made over its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// The bits of the communicator to call on instead of the
    /// application's (0: the application's).
    on: u64,
    /// That communicator's algorithm is right only for a commutative
    /// operation.
    commutative_only: bool,
}

impl Place {
    /// The application's communicator.
    const HERE: Place = Place {
        on: 0,
        commutative_only: false,
    };

    /// The communicator to call on instead of the application's, if any
    /// (a candidate communicator of [`ByComms`]).
    #[inline]
    pub fn on(&self) -> Option<Comm> {
        (self.on != 0).then(|| Comm::from_bits(self.on))
    }

    /// Whether the communicator of [`Place::on`] may run this call only if
    /// its operation is commutative (the caller runs it on the
    /// application's communicator otherwise: the operation is the same on
    /// every rank, so is that choice).
    #[inline]
    pub fn commutative_only(&self) -> bool {
        self.commutative_only
    }
}

impl<'t, M: TuningMpi> TunedCall<'t, M> {
    /// A call that runs untimed and is not counted after (the default
    /// without a search, or a quiet call of a decided one).
    #[inline(always)]
    fn uncounted(tuner: &'t Tuner<M>, switch: &'t Switch<M::Var>) -> Self {
        TunedCall {
            tuner,
            switch,
            state: None,
            timed: false,
            switched: false,
            place: Place::HERE,
        }
    }

    /// Whether the caller should time the call.
    #[inline]
    pub fn timed(&self) -> bool {
        self.timed
    }

    /// Where the call runs.
    #[inline]
    pub fn place(&self) -> Place {
        self.place
    }
}

/// Before a blocking collective on `comm` moving `bytes` (one rank's
/// contribution): sets the algorithm this call must use. `None` when
/// tuning is off for this collective (nothing to do after).
///
/// `bytes` is `None` when the library would not give the size of the
/// call's datatype (`MPI_Type_size` failed): this rank cannot tell the
/// call's size bin, which its peers know. It counts the call in the bin of
/// the collective's last call on the communicator (right when the
/// application repeats a size, as it mostly does), and stops tuning, which
/// its peers learn at their next agreed point (`Tuner::unsized_call`).
///
/// `key`: the call's [`CallKey`], when the interposer can give one (a
/// predefined datatype, whose handle always names the same type): the
/// call is remembered for [`quick`].
#[inline(always)]
pub fn before(
    collective: Collective,
    comm: Comm,
    bytes: Option<u64>,
    key: Option<CallKey>,
) -> Option<Ticket> {
    if !ON.load(Relaxed) {
        return None;
    }
    TUNER.get()?.before(collective, comm, bytes, key)
}

/// The steady state in one comparison: when this call of `collective` on
/// `comm` has the key of the collective's last keyed call ([`before`]) and
/// its search has quiet calls left (a decided search between its check
/// points), takes one of them, sets its algorithm, and returns what the
/// caller needs to run it; the caller then calls [`after_quick`]. `None`
/// sends the call to [`before`], which looks everything up (nothing
/// changed here first).
#[inline(always)]
pub fn quick(collective: Collective, comm: Comm, key: CallKey) -> Option<Quick> {
    if !ON.load(Relaxed) {
        return None;
    }
    TUNER.get()?.quick(collective, comm, key)
}

/// After a call that [`quick`] took: the variable back to the library's
/// default (see [`after`]), and the call is over.
#[inline(always)]
pub fn after_quick(collective: Collective) {
    if let Some(t) = TUNER.get() {
        t.after_quick(collective);
    }
}

/// A call [`quick`] took: what it moves and where it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quick {
    /// The bytes of the key's call (one rank's contribution).
    pub bytes: u64,
    /// Where it runs.
    pub place: Place,
}

/// After the call [`before`] prepared, with its duration if it was timed.
///
/// The variable goes back to the library's default first: outside a tuned
/// call the library's own internal collectives (a communicator's context
/// id is agreed with an allreduce, `MPI_Finalize` runs collectives, and so
/// do the tool's own reductions) read the same variable, and each rank's
/// last tuned call may have been on a different communicator.
///
/// A timed call that ran another value than the default is charged for
/// its writes (`Switch::switch_ns`, fixed at start): for calls of a
/// few hundred nanoseconds the switch itself could cost more than a faster
/// algorithm saves, and the search must see that. (Timing the write here
/// instead would charge the clock's own cost: two clock reads of 25 ns
/// around a 5 ns write on MPICH 4.0.2, counted twice, would make every
/// candidate of an 8-byte allreduce look 15% slower than it is.)
#[inline(always)]
pub fn after(ticket: Ticket, ns: Option<u64>) {
    ticket.tuner.after(ticket, ns);
}

/// A call the tuner ran on a candidate communicator ([`ByComms`]) failed
/// with `code` (`message`: the library's words). Tuning stops on this rank
/// (its peers learn it at their next agreed point); the interposer hands
/// the error to the application's handler on its own communicator, as if
/// the call had failed there.
#[cold]
pub fn call_failed(collective: Collective, message: &str) {
    let Some(t) = TUNER.get() else { return };
    t.call_failed(collective, message);
}

/// Mode `safe`: the interposer could not take the datatype of a
/// reduction apart (`message`: why) and ran the call on the library's
/// default without counting it, as it does for a floating-point one.
/// Tuning stops on this rank; its peers learn it at their next agreed
/// point. (A datatype the standard calls valid does not fail there on one
/// rank only, where the ranks' counts would part.)
#[cold]
pub fn unclassified_call(collective: Collective, message: &str) {
    let Some(t) = TUNER.get() else { return };
    if !t.stop.swap(true, AcqRel) {
        t.tell(
            Some(collective),
            What::CallFailed(format!(
                "the datatype of a call of {} could not be taken apart ({message}): the call ran \
                 the library's default, and tuning stops on every rank at the next agreed point",
                collective.name()
            )),
        );
    }
}

/// The application frees `comm` (every rank of it does): its tuning
/// communicator goes with it, and its entry is free for a new one.
pub fn comm_freeing(comm: Comm) {
    let Some(t) = TUNER.get() else { return };
    t.comm_freeing(comm);
}

impl<M: TuningMpi> Tuner<M> {
    /// [`before`] on this tuner.
    #[inline(always)]
    pub(crate) fn before(
        &self,
        collective: Collective,
        comm: Comm,
        bytes: Option<u64>,
        key: Option<CallKey>,
    ) -> Option<TunedCall<'_, M>> {
        let switch = self.switches[collective as usize].as_ref()?;
        self.enter(collective);
        let default = switch.default;
        let recent = &self.recent[collective as usize];
        let Some((index, entry)) = self.entry(comm) else {
            recent.slot.store(NO_SLOT, Relaxed);
            self.set(switch, default);
            return Some(TunedCall::uncounted(self, switch));
        };
        let bin = match bytes {
            Some(bytes) => self.bins.of(bytes),
            None => self.unsized_call(entry, collective),
        };
        entry.last_bin[collective as usize].store(bin as u32, Relaxed);
        let k = collective as usize * self.bins.len() + bin;
        match (key, bytes) {
            (Some(key), Some(bytes)) => {
                recent.comm.store(comm.to_bits(), Relaxed);
                for (r, k) in recent.key.iter().zip(key) {
                    r.store(k, Relaxed);
                }
                recent.bytes.store(bytes, Relaxed);
                recent
                    .slot
                    .store(((index as u64) << 32) | k as u64, Relaxed);
            }
            _ => recent.slot.store(NO_SLOT, Relaxed),
        }
        if let Some(place) = self.quiet_call(switch, entry, k) {
            let mut ticket = TunedCall::uncounted(self, switch);
            ticket.place = place;
            return Some(ticket);
        }
        let Ok(mut st) = entry.state.try_borrow_mut() else {
            // Another thread holds this communicator: erroneous, and the
            // algorithm cannot be chosen consistently any more.
            self.stop.store(true, Release);
            return Some(TunedCall::uncounted(self, switch));
        };
        Self::settle(entry, &mut st, k);
        let choice = st.searches[k].choice();
        let value = switch.target.candidates[choice].1;
        let on = if self.by_comms.is_some() {
            self.candidate_comm(entry, &mut st, comm, switch, choice)
        } else {
            self.set(switch, value);
            0
        };
        let timed = st.searches[k].wants_time();
        Some(TunedCall {
            tuner: self,
            switch,
            state: Some((st, entry, k, comm)),
            timed,
            switched: value != default && self.by_comms.is_none(),
            place: Place {
                on,
                commutative_only: switch
                    .commutative_only
                    .checked_shr(choice as u32)
                    .unwrap_or(0)
                    & 1
                    != 0,
            },
        })
    }

    /// [`quick`] on this tuner: the key and communicator of the
    /// collective's last keyed call, then [`Tuner::quiet_call`] on the
    /// search that call found. (The entry is still the communicator's:
    /// [`Tuner::comm_freeing`] forgets its calls first.)
    #[inline(always)]
    pub(crate) fn quick(&self, collective: Collective, comm: Comm, key: CallKey) -> Option<Quick> {
        let recent = self.recent.get(collective as usize)?;
        let slot = recent.slot.load(Relaxed);
        if slot == NO_SLOT
            || recent.comm.load(Relaxed) != comm.to_bits()
            || recent.key[0].load(Relaxed) != key[0]
            || recent.key[1].load(Relaxed) != key[1]
            || recent.key[2].load(Relaxed) != key[2]
        {
            return None;
        }
        let switch = self.switches.get(collective as usize)?.as_ref()?;
        let entry = self.entries.get((slot >> 32) as usize)?;
        let place = self.quiet_call(switch, entry, (slot & u64::from(u32::MAX)) as usize)?;
        self.enter(collective);
        Some(Quick {
            bytes: recent.bytes.load(Relaxed),
            place,
        })
    }

    /// [`after_quick`] on this tuner.
    #[inline(always)]
    pub(crate) fn after_quick(&self, collective: Collective) {
        if let Some(Some(switch)) = self.switches.get(collective as usize) {
            self.set(switch, switch.default);
        }
        self.in_flight.store(0, Relaxed);
    }

    /// A tuned call begins: flags it, and stops tuning if another one is
    /// under way (an erroneous program, see `in_flight`).
    #[inline(always)]
    fn enter(&self, collective: Collective) {
        let overlapping = self.in_flight.load(Relaxed) != 0;
        self.in_flight.store(1, Relaxed);
        if overlapping && !self.stop.swap(true, AcqRel) {
            self.tell(Some(collective), What::Concurrent);
        }
    }

    /// Steady state: takes one of the quiet calls of search `k` of
    /// `entry` ([`Search::quiet`]), a call that changes nothing but the
    /// counts, and sets its algorithm; returns where the call runs. `None`
    /// (and nothing changed) when none is left: the call goes the long
    /// way.
    #[inline(always)]
    fn quiet_call(&self, switch: &Switch<M::Var>, entry: &Entry<M>, k: usize) -> Option<Place> {
        let slot = entry.quiet.get(k)?;
        let quiet = slot.load(Relaxed);
        if quiet as u32 == 0 {
            return None;
        }
        slot.store(quiet - 1, Relaxed);
        let c = (quiet >> 32) as usize;
        if self.by_comms.is_some() {
            let on = entry
                .dups
                .get(switch.target.collective as usize * self.stride + c)
                .map_or(0, |d| d.load(Relaxed));
            let commutative_only =
                switch.commutative_only.checked_shr(c as u32).unwrap_or(0) & 1 != 0;
            return Some(Place {
                on,
                commutative_only,
            });
        }
        // Candidate 0, the default, without reading the candidates.
        let value = match c {
            0 => switch.default,
            c => switch
                .target
                .candidates
                .get(c)
                .map_or(switch.default, |c| c.1),
        };
        self.set(switch, value);
        Some(Place::HERE)
    }

    /// [`after`] on this tuner.
    #[inline(always)]
    pub(crate) fn after(&self, ticket: TunedCall<'_, M>, ns: Option<u64>) {
        let mut ns = ns;
        let switch = ticket.switch;
        self.set(switch, switch.default);
        if let (true, Some(n)) = (ticket.switched, ns.as_mut()) {
            *n = n.saturating_add(switch.switch_ns);
        }
        if let Some((mut st, entry, k, comm)) = ticket.state {
            if let Some(mine) = st.searches[k].count(ns) {
                self.agree(entry, comm, &mut st, k, mine);
            }
            Self::refill(entry, &mut st, k);
        }
        self.in_flight.store(0, Relaxed);
    }

    /// [`call_failed`] on this tuner.
    #[cold]
    pub(crate) fn call_failed(&self, collective: Collective, message: &str) {
        self.stop.store(true, Release);
        self.tell(
            Some(collective),
            What::CallFailed(format!(
                "{} failed on a candidate communicator: {message}; the application's error \
                 handler has the error, and tuning stops on every rank at the next agreed point",
                collective.name()
            )),
        );
    }

    /// [`comm_freeing`] on this tuner.
    pub(crate) fn comm_freeing(&self, comm: Comm) {
        let bits = comm.to_bits();
        for r in &self.recent {
            if r.comm.load(Relaxed) == bits {
                r.slot.store(NO_SLOT, Relaxed);
            }
        }
        let high = self.high.load(Acquire);
        let Some(e) = self.entries[..high]
            .iter()
            .find(|e| e.bits.load(Acquire) == bits)
        else {
            return;
        };
        e.bits.store(TOMBSTONE, Release);
        match e.state.try_borrow_mut() {
            Ok(mut st) => {
                Self::settle_all(e, &mut st);
                self.emit_measurements(&st);
                for d in e.dups.iter() {
                    d.store(0, Relaxed);
                }
                for err in free_comms(&mut st) {
                    self.mpi
                        .say(format_args!("mpit-tuner[rank {}]: {err}", self.world_rank));
                }
                drop(st);
                e.bits.store(FREE, Release);
            }
            // In use by another thread: stays a tombstone until finalize.
            Err(_) => self.stop.store(true, Release),
        }
    }
}

/// Frees a communicator's private and candidate communicators (collective
/// over it: the application is freeing it, or finalizing); a message per
/// failure.
pub(super) fn free_comms<M: TuningMpi>(st: &mut CommState<M>) -> Vec<String> {
    let mut messages = Vec::new();
    let dups = st.dups.iter_mut().filter_map(Option::take);
    for (mut p, what) in st
        .private
        .take()
        .map(|p| (p, "tuning"))
        .into_iter()
        .chain(dups.map(|p| (p, "candidate")))
    {
        if let Err(err) = p.free() {
            messages.push(format!("freeing a {what} communicator: {err}"));
        }
    }
    messages
}
