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
