//! Publication of a sampler snapshot and its lock-free read: the helper
//! thread publishes its snapshot in an `ArcSwap` (`runtime::helper_loop`,
//! which refills the one published before the last in place when no reader
//! holds it, and swaps); readers take it with `load_full`
//! (`Shared::snapshot`) or borrow it with `load`. The publish benchmarks
//! here clone into a new `Arc`, the helper's path when a reader still
//! holds the old snapshot.
//!
//! The snapshot is realistic for Open MPI with a few communicators: 40
//! variables, half of them bound (4 elements), every metric filled.

use arc_swap::ArcSwap;
use criterion::{criterion_group, criterion_main, Criterion};
use mpit_tuner_benches::fixtures;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const VARS: usize = 40;

fn publish_and_read(c: &mut Criterion) {
    let snapshot = fixtures::snapshot(VARS);
    let shared = ArcSwap::from_pointee(snapshot.clone());
    let mut group = c.benchmark_group("snapshot");
    // What the helper does every tick.
    group.bench_function("publish/clone+store_40_vars", |b| {
        b.iter(|| shared.store(Arc::new(black_box(&snapshot).clone())))
    });
    // The store alone, the snapshot built beforehand.
    group.bench_function("publish/store_only", |b| {
        b.iter_batched(
            || Arc::new(snapshot.clone()),
            |s| shared.store(s),
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("read/load_full", |b| {
        b.iter(|| black_box(shared.load_full().seq))
    });
    group.bench_function("read/load_guard+get", |b| {
        b.iter(|| {
            let guard = shared.load();
            black_box(guard.get("mpool_var_3").map(|v| v.metric.value[0]))
        })
    });
    // Reads while another thread publishes every ~100 us (a helper at a
    // 100 us interval, far faster than the tuner's 1 ms minimum).
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(shared);
    let publisher = {
        let (stop, shared, snapshot) = (stop.clone(), shared.clone(), snapshot.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                shared.store(Arc::new(snapshot.clone()));
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        })
    };
    group.bench_function("read/load_full_while_publishing", |b| {
        b.iter(|| black_box(shared.load_full().seq))
    });
    group.finish();
    stop.store(true, Ordering::Relaxed);
    publisher.join().expect("the publisher thread");
}

criterion_group!(benches, publish_and_read);
criterion_main!(benches);
