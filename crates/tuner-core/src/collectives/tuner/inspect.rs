//! What the tests read of a tuner's table (never on a call).

use super::*;
use crate::collectives::search::State;

/// A call [`Tuner::begin`] began.
pub(crate) enum Begun<'t, M: TuningMpi> {
    /// The quick path took it.
    Quick(Collective, Quick),
    /// [`Tuner::before`] did.
    Ticket(TunedCall<'t, M>),
    /// Not tuned.
    Untuned,
}

impl<M: TuningMpi> Begun<'_, M> {
    /// The communicator the call runs on instead of the application's.
    pub(crate) fn on(&self) -> Option<Comm> {
        match self {
            Begun::Quick(_, q) => q.place.on(),
            Begun::Ticket(t) => t.place().on(),
            Begun::Untuned => None,
        }
    }

    /// Whether the call is timed.
    pub(crate) fn timed(&self) -> bool {
        matches!(self, Begun::Ticket(t) if t.timed())
    }

    /// The bytes the quick path gave, if it took the call (its key's,
    /// unless calls overlapped: an erroneous program, see `Recent`).
    pub(crate) fn quick(&self) -> Option<u64> {
        match self {
            Begun::Quick(_, q) => Some(q.bytes),
            _ => None,
        }
    }
}

/// One entry of the table as a test sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    /// Free for a new communicator.
    Free,
    /// Freed while a call on it ran: kept until the tuner stops.
    Tombstone,
    /// Held by the communicator of these bits.
    Comm(u64),
}

impl<M: TuningMpi> Tuner<M> {
    /// A tuned call as the interposer begins it: [`Tuner::quick`] with
    /// the call's key (its bytes stand for the datatype and count; a
    /// sizeless call has none), else [`Tuner::before`]. [`Tuner::end`]
    /// ends it.
    pub(crate) fn begin(
        &self,
        collective: Collective,
        comm: Comm,
        bytes: Option<u64>,
    ) -> Begun<'_, M> {
        let key = bytes.map(|b| [b, 0, 0]);
        if let Some(q) = key.and_then(|k| self.quick(collective, comm, k)) {
            return Begun::Quick(collective, q);
        }
        match self.before(collective, comm, bytes, key) {
            Some(ticket) => Begun::Ticket(ticket),
            None => Begun::Untuned,
        }
    }

    /// Ends a call [`Tuner::begin`] began, which lasted `ns` (given to the
    /// search if it asked for the time).
    pub(crate) fn end(&self, begun: Begun<'_, M>, ns: u64) {
        match begun {
            Begun::Quick(collective, _) => self.after_quick(collective),
            Begun::Ticket(ticket) => {
                let timed = ticket.timed();
                self.after(ticket, timed.then_some(ns));
            }
            Begun::Untuned => {}
        }
    }

    /// The MPI of this tuner.
    pub(crate) fn mpi(&self) -> &M {
        &self.mpi
    }

    /// Every entry of the table, in order.
    pub(crate) fn slots(&self) -> Vec<Slot> {
        self.entries
            .iter()
            .map(|e| match e.bits.load(Acquire) {
                FREE => Slot::Free,
                TOMBSTONE => Slot::Tombstone,
                bits => Slot::Comm(bits),
            })
            .collect()
    }

    /// Entries ever claimed (the lookups scan this many).
    pub(crate) fn high_water(&self) -> usize {
        self.high.load(Acquire)
    }

    /// The entry of `comm`, if it has one.
    pub(crate) fn entry_of(&self, comm: Comm) -> Option<usize> {
        let bits = comm.to_bits();
        self.entries
            .iter()
            .position(|e| e.bits.load(Acquire) == bits)
    }

    /// The calls counted on `comm`'s entry since it claimed it, quiet ones
    /// included (`None`: no entry, or its state is borrowed right now).
    pub(crate) fn calls_on(&self, comm: Comm) -> Option<u64> {
        let e = &self.entries[self.entry_of(comm)?];
        let st = e.state.try_borrow().ok()?;
        Some(
            st.searches
                .iter()
                .zip(&st.given)
                .zip(e.quiet.iter())
                .map(|((s, &given), q)| {
                    s.calls() + u64::from(given.saturating_sub(q.load(Relaxed) as u32))
                })
                .sum(),
        )
    }

    /// The states of the searches of `comm` that saw calls.
    pub(crate) fn states_on(&self, comm: Comm) -> Option<Vec<State>> {
        let e = &self.entries[self.entry_of(comm)?];
        let st = e.state.try_borrow().ok()?;
        Some(
            st.searches
                .iter()
                .filter(|s| s.calls() > 0)
                .map(Search::state)
                .collect(),
        )
    }

    /// The private communicator of `comm`'s entry, if it made one.
    pub(crate) fn private_of(&self, comm: Comm) -> Option<Comm> {
        let e = &self.entries[self.entry_of(comm)?];
        let st = e.state.try_borrow().ok()?;
        st.private.as_ref().map(TuningComm::comm)
    }

    /// Events queued so far, lost ones included.
    pub(crate) fn sent_events(&self) -> u64 {
        self.sent.load(Relaxed)
    }
}

impl<V: AlgorithmVar> ByComms<V> {
    /// Open MPI `version`, with `coll_tuned_use_dynamic_rules` on from the
    /// start, on the host of hash `host`.
    pub(crate) fn simulated(version: (u32, u32), host: i64) -> ByComms<V> {
        ByComms {
            rules: None,
            version,
            host,
        }
    }
}
