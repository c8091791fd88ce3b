//! Communicators a Fortran program creates are tracked like C ones: Open
//! MPI's Fortran bindings call PMPI_* directly, so the interposer wraps the
//! Fortran entry points too; MPICH's call the C functions, and each
//! communicator is still tracked exactly once.

mod common;

use common::*;
use std::collections::BTreeMap;

/// `basics N` creates two communicators per iteration (MPI_COMM_SPLIT and
/// MPI_COMM_DUP) and frees both. Every one of them is accounted for exactly
/// once per rank: seen by the sampler (created, then freed) or freed before
/// the next sample (`objects_short_lived` of the close record).
#[test]
fn fortran_communicators_are_tracked_exactly_once() {
    const ITERATIONS: u64 = 30;
    let Some(basics) = fortran_example("fortran_communicators_are_tracked_exactly_once") else {
        return;
    };
    let tmp = tempdir();
    let (plain, tooled, dir) = run_both(2, &basics, &[&ITERATIONS.to_string()], tmp.path());
    assert_same_stdout(&plain, &tooled, |_| false);
    for log in read_run_dir(&dir, 2) {
        let mut events: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for r in log.of_type("object") {
            events
                .entry(r["object"].as_str().unwrap().to_string())
                .or_default()
                .push(r["event"].as_str().unwrap().to_string());
        }
        let sampled = events.keys().filter(|k| k.starts_with("comm")).count() as u64;
        for (object, seen) in &events {
            if object.starts_with("comm") {
                assert_eq!(
                    seen,
                    &["created", "freed"],
                    "{object} in {}",
                    log.path.display()
                );
            }
        }
        let close = log.of_type("close").next().expect("close record");
        let short = close["objects_short_lived"]
            .as_u64()
            .expect("objects_short_lived");
        assert_eq!(close["objects_untracked"], 0);
        assert_eq!(
            sampled + short,
            2 * ITERATIONS,
            "{}: {sampled} communicators sampled + {short} short-lived",
            log.path.display()
        );
    }
}
