//! Agreed points: where every rank of a communicator reaches the same call
//! and one reduction combines the ranks' measurements, so that every rank
//! takes the same decision.

use super::*;

impl<M: TuningMpi> Tuner<M> {
    /// The first agreed point on a communicator: label and private
    /// communicator, agreed over the application's communicator (with
    /// errors returned while the tool uses it).
    #[cold]
    fn setup(&self, comm: Comm, st: &mut CommState<M>) {
        st.ready = true;
        let (rank, size) = match self.mpi.rank_size(comm) {
            Ok(rs) => rs,
            Err(e) => {
                // Local and without a collective: the peers will wait in
                // theirs. Only a broken library gets here.
                st.off = true;
                self.stop.store(true, Release);
                self.emit(st, None, 0, What::SetupFailed(e.to_string()));
                return;
            }
        };
        st.rank = rank;
        st.size = size;
        if size < i32::try_from(self.params.min_comm_size).unwrap_or(i32::MAX) {
            // The same size on every rank: off everywhere, no collective.
            st.off = true;
            return;
        }
        let (guard, swap_error) = self.mpi.errors_return(comm);
        let mut seq = self.mpi.sequence(comm, rank);
        if let Some(e) = swap_error {
            seq.fail("MPI_Comm_set_errhandler", &e);
        }
        let mut label = [0u8; 8];
        if rank == 0 {
            let n = self.labels.fetch_add(1, Relaxed);
            let value = (u64::try_from(self.world_rank).unwrap_or(0) << 32) | (n & 0xffff_ffff);
            label = value.to_le_bytes();
        }
        seq.bcast_bytes(&mut label, 0);
        st.label = u64::from_le_bytes(label);
        // From Open MPI 5.0, coll/han runs the collectives of a
        // communicator over several nodes, on sub-communicators it makes at
        // its first call (copying the forced algorithms of that moment):
        // such a communicator is not tuned.
        let one_node = match &self.by_comms {
            Some(b) if b.version >= (5, 0) => seq.all_equal(b.host),
            _ => true,
        };
        let private = self.mpi.create_private(&mut seq, comm);
        let verdict = seq.agree();
        if let Err(e) = self.mpi.restore(guard) {
            self.mpi.say(format_args!("mpit-tuner[rank {}]: while putting the application's error handler back on a communicator: {e}", self.world_rank));
        }
        match verdict {
            Verdict::AllOk if private.is_some() && !one_node => {
                st.private = private;
                st.off = true;
                self.emit(
                    st,
                    None,
                    0,
                    What::Excluded(
                        "this communicator spans several nodes: from Open MPI 5.0 its collectives \
                         run in coll/han, which copies the forced algorithms when it first runs, \
                         so it is not tuned"
                            .into(),
                    ),
                );
            }
            Verdict::AllOk if private.is_some() => {
                st.private = private;
                if self.by_comms.is_some() {
                    self.exclude_unsuitable(st);
                }
                self.warm_searches(st);
            }
            Verdict::AllOk => {
                st.off = true;
                self.emit(
                    st,
                    None,
                    0,
                    What::SetupFailed("no private communicator".into()),
                );
            }
            Verdict::Failed(why) => {
                if let Some(mut p) = private {
                    if let Err(e) = p.free() {
                        self.mpi.say(format_args!(
                            "mpit-tuner[rank {}]: freeing a tuning communicator: {e}",
                            self.world_rank
                        ));
                    }
                }
                st.off = true;
                let why = self.agreed(why);
                self.emit(st, None, 0, What::SetupFailed(why));
            }
        }
    }

    /// The part of a failed agreement every rank holds alike, for a
    /// communicator's record (identical on all its ranks). This rank's own
    /// failure, if it had one, goes to its standard error, where the
    /// others' records point.
    #[cold]
    fn agreed(&self, why: FailedOn) -> String {
        if let Some(mine) = &why.mine {
            self.mpi.say(format_args!(
                "mpit-tuner[rank {}]: collective tuning: {}",
                self.world_rank, mine.message
            ));
        }
        FailedOn { mine: None, ..why }.to_string()
    }

    /// [`ByComms`]: the candidates the library cannot run on a
    /// communicator of this size are left out of its searches (the size is
    /// the same on every rank, so is this).
    fn exclude_unsuitable(&self, st: &mut CommState<M>) {
        if self.by_comms.is_none() {
            return;
        }
        let bins = self.bins.len();
        for s in self.switches.iter().flatten() {
            let c = s.target.collective;
            for (i, (name, _)) in s.target.candidates.iter().enumerate().skip(1) {
                let Some(why) = crate::collectives::library::open_mpi_unsuitable(c, name, st.size)
                else {
                    continue;
                };
                for b in 0..bins {
                    st.searches[c as usize * bins + b].exclude(i);
                }
                let message = format!(
                    "{}: `{name}` {why}: not tried on this communicator of {} processes",
                    c.name(),
                    st.size
                );
                self.emit(st, Some(c), 0, What::Excluded(message));
            }
        }
    }

    /// [`ByComms`]: the communicator a call of `switch`'s collective with
    /// its candidate `i` runs on (its bits; 0: the application's `comm`),
    /// made now if it is the first. Every rank of `comm` gets here at the
    /// same call with the same `i` (the choice changes only at agreed
    /// points, and calls that need no new communicator do not come here),
    /// so the creation is a collective every rank makes: the collective's
    /// variable is set to candidate `i`, a communicator is created over
    /// `comm`'s group (it copies that algorithm), and the default is
    /// written back, with errors returned on `comm` meanwhile. Any rank's
    /// failure turns tuning off on this communicator on every rank.
    #[cold]
    #[inline(never)]
    pub(super) fn candidate_comm(
        &self,
        entry: &Entry<M>,
        st: &mut CommState<M>,
        comm: Comm,
        switch: &Switch<M::Var>,
        i: usize,
    ) -> u64 {
        let c = switch.target.collective;
        let slot = c as usize * self.stride + i;
        let made = entry.dups.get(slot).map_or(0, |d| d.load(Relaxed));
        if i == 0 || made != 0 || st.off || !st.ready || slot >= entry.dups.len() {
            return made;
        }
        let Some(by) = &self.by_comms else { return 0 };
        let Some((name, value)) = switch.target.candidates.get(i) else {
            return 0;
        };
        // Excluded at setup, so never chosen: a user's pin of it runs the
        // default.
        debug_assert!(crate::collectives::library::open_mpi_unsuitable(c, name, st.size).is_none());
        let before = self.mpi.elapsed();
        let (guard, swap_error) = self.mpi.errors_return(comm);
        let mut seq = self.mpi.sequence(comm, st.rank);
        if let Some(e) = swap_error {
            seq.fail("MPI_Comm_set_errhandler", &e);
        }
        let wrote = by
            .rules
            .as_ref()
            .map_or(Ok(()), |r| r.put(1))
            .and_then(|()| switch.var.put(*value));
        if let Err(e) = &wrote {
            seq.fail_local(format!("setting `{name}`: {e}"));
        }
        let private = self.mpi.create_private(&mut seq, comm);
        if let Err(e) = switch.var.put(switch.default) {
            seq.fail_local(format!("writing the default back: {e}"));
        }
        if let Some(Err(e)) = by.rules.as_ref().map(|r| r.put(0)) {
            seq.fail_local(format!("turning the dynamic rules off again: {e}"));
        }
        let verdict = seq.agree();
        if let Err(e) = self.mpi.restore(guard) {
            self.mpi.say(format_args!("mpit-tuner[rank {}]: while putting the application's error handler back on a communicator: {e}", self.world_rank));
        }
        st.other_ns += self.since(before) as f64;
        match (verdict, private) {
            (Verdict::AllOk, Some(p)) => {
                let bits = p.comm().to_bits();
                st.dups[slot] = Some(p);
                entry.dups[slot].store(bits, Relaxed);
                bits
            }
            (verdict, private) => {
                if let Some(mut p) = private {
                    if let Err(e) = p.free() {
                        self.mpi.say(format_args!(
                            "mpit-tuner[rank {}]: freeing a candidate communicator: {e}",
                            self.world_rank
                        ));
                    }
                }
                let why = match verdict {
                    Verdict::Failed(why) => self.agreed(why),
                    Verdict::AllOk => "no communicator was created".into(),
                };
                st.off = true;
                self.emit(
                    st,
                    None,
                    0,
                    What::SetupFailed(format!(
                        "creating the communicator of {} `{name}`: {why}",
                        c.name()
                    )),
                );
                0
            }
        }
    }

    /// Nanoseconds of this rank's clock since `before` (its
    /// [`TuningMpi::elapsed`] then): what a collective of the tool cost it.
    fn since(&self, before: std::time::Duration) -> u64 {
        u64::try_from(self.mpi.elapsed().saturating_sub(before).as_nanos()).unwrap_or(u64::MAX)
    }

    /// An agreed point of search `k`: one reduction, the same numbers on
    /// every rank, the same transition.
    pub(super) fn agree(
        &self,
        entry: &Entry<M>,
        comm: Comm,
        st: &mut CommState<M>,
        k: usize,
        mine: f64,
    ) {
        if !st.ready {
            let before = self.mpi.elapsed();
            self.setup(comm, st);
            st.other_ns += self.since(before) as f64;
        }
        let collective = COLLECTIVES[k / self.bins.len()];
        let bin = k % self.bins.len();
        if st.off {
            st.searches[k].agree(Agreed::settled(0.0, true));
            return;
        }
        let Some(private) = &st.private else { return };
        let stop = self.stop.load(Acquire);
        // The user's pending choice, as its maximum and (negated) minimum
        // over ranks: equal only when every rank holds the same request.
        let pin = self.switches[collective as usize]
            .as_ref()
            .map_or(0, |s| s.pin.load(Acquire));
        let pin = i64::try_from(pin).unwrap_or(0);
        // This rank's time since tuning started, negated: its maximum is
        // the least over ranks.
        let elapsed = i64::try_from(self.mpi.elapsed().as_nanos()).unwrap_or(i64::MAX);
        // What this rank spent in the last point here, negated: its
        // maximum is the least over ranks (item 6 of the search).
        let last_point = i64::try_from(st.point_ns).unwrap_or(i64::MAX);
        let other = std::mem::take(&mut st.other_ns).clamp(0.0, 9.0e18) as i64;
        let send = [
            mine.round().clamp(0.0, 9.0e18) as i64,
            i64::from(stop),
            pin,
            -pin,
            -elapsed,
            -last_point,
            -other,
        ];
        let mut recv = [0i64; 7];
        let mut seq = self.mpi.sequence(private.comm(), 0);
        let before = self.mpi.elapsed();
        seq.allreduce_i64(&send, &mut recv, ReduceOp::Max);
        st.point_ns = self.since(before);
        if seq.failed() {
            // MPI's state after an error is undefined. A library that
            // reports an error after taking part (what its peers, whose
            // call returned, most likely saw) has filled `recv`: go on with
            // it as they do, so that every rank makes the same transition
            // here, and stop: this rank sends stop from now on, so every
            // rank stops together at its next agreed point. Leaving this
            // communicator alone instead would leave its peers waiting in
            // their next reduction for a rank that never comes.
            self.stop.store(true, Release);
            let why = seq
                .into_pending()
                .map_or_else(|| "MPI_Allreduce failed".to_string(), |f| f.message);
            let why = format!(
                "{why}: going on with what it returned, as the other ranks do; tuning stops on \
                 every rank at the next agreed point"
            );
            self.emit(st, Some(collective), bin, What::ReductionFailed(why));
        }
        let agreed = Agreed {
            max_mean_ns: recv[0] as f64,
            stop: recv[1] != 0,
            min_elapsed_ns: -(recv[4] as f64),
            point_ns: -(recv[5] as f64),
            other_ns: -(recv[6] as f64),
        };
        let agreed_pin =
            (!agreed.stop && recv[2] == -recv[3] && recv[2] > 0).then(|| recv[2] as u64);
        for event in st.searches[k].agree(agreed).into_iter().flatten() {
            self.emit(st, Some(collective), bin, What::Search(event));
        }
        let c = collective as usize;
        if let Some(pin) = agreed_pin.filter(|p| st.pinned[c] != *p) {
            self.pin(entry, st, collective, pin, bin);
        }
    }

    /// Every rank of the communicator agreed on the user's choice `pin` for
    /// `collective` at this point (of the search of bin `bin`): every
    /// search of that collective on the communicator is pinned, here, on
    /// every rank alike. Logged for the bins that had calls.
    fn pin(
        &self,
        entry: &Entry<M>,
        st: &mut CommState<M>,
        collective: Collective,
        pin: u64,
        bin: usize,
    ) {
        let candidate = (pin & ((1 << PIN_CANDIDATE_BITS) - 1)) as usize;
        let key = pin >> PIN_CANDIDATE_BITS;
        st.pinned[collective as usize] = pin;
        let bins = self.bins.len();
        for b in 0..bins {
            let k = collective as usize * bins + b;
            // Its quiet calls counted, and its slot emptied: the next call
            // on that bin runs the pinned candidate.
            Self::settle(entry, st, k);
            let search = &mut st.searches[k];
            let called = search.calls() > 0 || b == bin;
            let event = search.pin(candidate, key);
            if let Some(event) = event.filter(|_| called) {
                self.emit(st, Some(collective), b, What::Search(event));
            }
        }
    }
}
