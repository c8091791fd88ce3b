//! The helper thread: sample, decide, log, sleep; until told to stop.

use super::*;
use crate::services::{Service, Tick};

/// Starts the helper thread; without one (the system refused a thread)
/// the rank still takes part in the collective finalize, with nothing to
/// report. A panic on the helper stops the tuner on this rank only.
pub(super) fn spawn(
    shared: &'static Shared,
    parts: Parts,
    config: &Config,
    start: Instant,
    rank: i32,
) -> (
    Option<std::thread::Thread>,
    crossbeam_channel::Receiver<HelperDone>,
) {
    let (tx, done) = crossbeam_channel::bounded(1);
    let config = config.clone();
    let spawned = std::thread::Builder::new()
        .name("mpit-tuner".into())
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                helper_loop(shared, parts, &config, start)
            }));
            match result {
                Ok(done) => {
                    // The receiver is gone only when finalize stopped
                    // waiting; it says so itself.
                    let _ = tx.send(done);
                }
                Err(_) => mpit::say_always!(
                    "mpit-tuner[rank {rank}]: internal error on the helper thread; the tuner stopped on this rank"
                ),
            }
        });
    let helper = match spawned {
        Ok(handle) => Some(handle.thread().clone()),
        Err(e) => {
            mpit::say_always!("mpit-tuner[rank {rank}]: cannot start the helper thread: {e}");
            None
        }
    };
    (helper, done)
}

/// What the helper thread owns while it runs.
pub(super) struct Parts {
    pub(super) services: Vec<Box<dyn Service>>,
    /// The library's variables, grown by refreshes.
    pub(super) catalogue: Catalogue,
    pub(super) log: LogWriter,
}

fn helper_loop(
    shared: &'static Shared,
    parts: Parts,
    config: &Config,
    start: Instant,
) -> HelperDone {
    let Parts {
        mut services,
        mut catalogue,
        mut log,
    } = parts;
    // The helper's own reference on MPI_T; the application's thread owns
    // the one that finalizes.
    let mpit = MpiT::init();
    let mut mpit = match mpit {
        Ok(m) => m,
        Err(e) => {
            log.record(&warning(
                0.0,
                &format!("MPI_T unavailable on the helper thread: {e}"),
            ));
            return HelperDone {
                services,
                catalogue,
                log,
                last: Arc::default(),
            };
        }
    };
    mpit.set_finalize_on_drop(false);
    let mut next = Instant::now();
    let mut next_refresh = config.refresh.map(|r| Instant::now() + r);
    let mut snapshot = shared.snapshot();
    loop {
        let stopping = shared.stop.load(Acquire);
        let mut tick = Tick {
            t: start.elapsed().as_secs_f64(),
            mpit: &mpit,
            catalogue: &catalogue,
            config,
            objects: &shared.objects,
            snapshot,
            log: &mut log,
        };
        crate::services::each_with_peers(&mut services, |s, peers| s.tick(&mut tick, peers));
        snapshot = tick.snapshot;
        // Published as it is (no copy): readers share it with the helper.
        shared.snapshot.store(Arc::clone(&snapshot));
        shared.ticks.fetch_add(1, Relaxed);
        answer_flush(shared, &mut log, start);
        if stopping {
            return HelperDone {
                services,
                catalogue,
                log,
                last: snapshot,
            };
        }
        if let Some(due) = next_refresh {
            if Instant::now() >= due {
                let objects = &shared.objects;
                refresh(
                    &mut services,
                    &mut catalogue,
                    &mpit,
                    config,
                    objects,
                    &mut log,
                    start,
                );
                next_refresh = config.refresh.map(|r| Instant::now() + r);
            }
        }
        next += config.interval;
        let now = Instant::now();
        if next < now {
            // Overran (a slow sample or a descheduled thread): skip ahead
            // rather than sample in a burst.
            next = now + config.interval;
        }
        while !shared.stop.load(Acquire) && !shared.flush.load(Acquire) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::park_timeout(next - now);
        }
        answer_flush(shared, &mut log, start);
    }
}

/// Re-enumerates the library's variables; the services hear of new PVARs.
fn refresh(
    services: &mut [Box<dyn Service>],
    catalogue: &mut Catalogue,
    mpit: &MpiT,
    config: &Config,
    objects: &ObjectTable,
    log: &mut LogWriter,
    start: Instant,
) {
    let t = start.elapsed().as_secs_f64();
    match catalogue.refresh(mpit) {
        Ok(growth) if growth.pvars > 0 => {
            let mut tick = Tick {
                t,
                mpit,
                catalogue,
                config,
                objects,
                snapshot: Arc::default(),
                log,
            };
            for s in services {
                s.catalogue_grew(&mut tick, growth.pvars);
            }
        }
        Ok(_) => {}
        Err(e) => log.record(&warning(
            t,
            &format!("re-enumerating variables failed: {e}"),
        )),
    }
}

/// A flush request (from the `MPI_Abort` wrapper): the abort is recorded,
/// the log written out and sealed (the process is about to be killed, and
/// a kill in the middle of a later write would cut its last line), and
/// only then the request counted as answered, so the wrapper never lets
/// the abort go ahead of the record.
fn answer_flush(shared: &Shared, log: &mut LogWriter, start: Instant) {
    if shared.flush.swap(false, AcqRel) {
        log.record(&Record::Warning(record::Warning::abort(
            start.elapsed().as_secs_f64(),
        )));
        log.seal();
        shared.flushed.fetch_add(1, Release);
    }
}

/// A warning when the sampling interval is short and the helper thread has
/// no core of its own: the rank may use only one CPU (Open MPI binds each
/// rank to a core by default), or there are at least as many ranks on the
/// node as CPUs this rank may use. Waking up every millisecond then
/// preempts a rank (a helper that wakes every 1 ms and does nothing slows
/// stencil3d by 7% on 2 busy ranks on 2 cores; with a free core, sampling
/// every 1 ms costs 0.6%: BENCHMARKS.md#stencil3d-every-1-ms-at-most-3-slower).
pub(super) fn no_spare_core_warning(
    interval: Duration,
    cpus: usize,
    local_ranks: Option<usize>,
) -> Option<String> {
    if interval >= Duration::from_millis(10) || cpus == 0 {
        return None;
    }
    let why = if cpus == 1 {
        "this rank may run on one CPU only (bound to a core), which its helper thread shares"
            .to_string()
    } else {
        match local_ranks {
            Some(local) if local >= cpus => format!(
                "{local} ranks on this node may use {cpus} CPUs, so the helper threads share the ranks' cores"
            ),
            _ => return None,
        }
    };
    Some(format!(
        "MPIT_TUNER_INTERVAL={:?}: {why}; waking up this often takes CPU time from the application (see BENCHMARKS.md: +7% on stencil3d at 1ms without any sampling work); use 10ms or more, or leave a core free for the helper",
        interval
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_intervals_without_a_spare_core_are_warned_about() {
        let ms = Duration::from_millis;
        // Bound to one core (Open MPI's default for small jobs).
        assert!(no_spare_core_warning(ms(1), 1, None)
            .unwrap()
            .contains("one CPU"));
        // As many ranks on the node as CPUs.
        let w = no_spare_core_warning(ms(5), 2, Some(2)).unwrap();
        assert!(w.contains("2 ranks on this node may use 2 CPUs"), "{w}");
        // A core to spare, a long interval, or nothing known: silent.
        assert!(no_spare_core_warning(ms(1), 2, Some(1)).is_none());
        assert!(no_spare_core_warning(ms(10), 1, Some(8)).is_none());
        assert!(no_spare_core_warning(ms(1), 4, None).is_none());
    }
}
