//! Tests of the tuner over a simulated MPI ([`world`]): the table of
//! communicators under several threads ([`table`]) and the agreed protocol
//! of many ranks ([`sim`]). No MPI runs here.

mod sim;
mod table;
mod world;

use mpit_testkit::rng::Rng;

/// A hash of a few numbers (splitmix64 over them): the scripted noise of a
/// rank's call, the same whatever the schedule.
fn mix(xs: &[u64]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    for &x in xs {
        h = h.wrapping_add(x).wrapping_add(0x9e37_79b9_7f4a_7c15);
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
    }
    h
}

/// The outcome of a tuning store's choice kept unconfirmed (a `left`
/// record with `stored`): that choice, from the store, not searched, its
/// default the default's trial's, and then the default again when a check
/// point measured it slower.
#[test]
fn a_stored_choice_kept_unconfirmed_is_the_outcome_until_the_default_comes_back() {
    use vocab::record::{CollectiveEvent, CollectiveTuning};
    let record = |event, algorithm: &str, stored| {
        let mut r = CollectiveTuning::new(1.0, event);
        r.comm = "c0.0".into();
        r.comm_size = Some(4);
        r.collective = Some("bcast".into());
        r.bin = Some((0, Some(16)));
        r.algorithm = Some(algorithm.into());
        r.stored = stored;
        r.default_us = Some(35.0);
        r.time_us = (!stored).then_some(35.0);
        r
    };
    let mut o = super::Outcomes::default();
    o.add(&record(CollectiveEvent::Trial, "binomial", false));
    o.add(&record(
        CollectiveEvent::Left,
        "scatter_ring_allgather",
        true,
    ));
    let out = o.to_vec();
    assert_eq!(out.len(), 1, "{out:?}");
    let kept = &out[0];
    assert_eq!(kept.chosen.as_deref(), Some("scatter_ring_allgather"));
    assert_eq!(kept.default.as_deref(), Some("binomial"));
    assert!(kept.from_store, "{kept:?}");
    assert_eq!(kept.searches, 0);
    assert_eq!(kept.chosen_us, None);
    // Without the default's trial, no default is made up of the choice.
    let mut alone = super::Outcomes::default();
    alone.add(&record(
        CollectiveEvent::Left,
        "scatter_ring_allgather",
        true,
    ));
    assert_eq!(alone.to_vec()[0].default, None);
    // Measured slower at a check point: the default comes back.
    o.add(&record(CollectiveEvent::Left, "binomial", false));
    let back = &o.to_vec()[0];
    assert_eq!(back.chosen.as_deref(), Some("binomial"));
    assert!(!back.from_store);
    assert_eq!(back.searches, 0);
}
