//! What the watchers cost a write: a put delivered to one watcher while `idle` other watchers
//! (single keys, prefixes and from-key ranges that never match) are registered, in memory, so
//! the write path is apply + hub delivery only. With the hub's index the cost stays flat as
//! `idle` grows (SPEC E15); a scan of every watcher per event would grow with it.
//!
//! Run: `cargo bench -p tenure --bench watch`. Under `cargo test` it runs once, small.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use tenure::etcd::WatchStart;
use tenure::{Tenure, WatchOptions, Watcher};

fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// `n` watchers that no write of the benchmark matches, of the three indexed shapes.
fn idle_watchers(db: &Tenure, n: usize) -> Vec<Watcher> {
    (0..n)
        .map(|i| {
            let (key, end) = match i % 3 {
                0 => (format!("idle/{i}"), String::new()),
                1 => (format!("idle/{i}/"), format!("idle/{i}0")),
                _ => (format!("zz/{i}"), "\0".to_string()),
            };
            match db
                .watch_range(key, end, WatchOptions::default())
                .expect("watch")
            {
                WatchStart::Started(w) => w,
                WatchStart::Compacted(r) => panic!("compacted at {r}"),
            }
        })
        .collect()
}

fn put_with_idle_watchers(c: &mut Criterion) {
    let mut g = c.benchmark_group("put_delivered");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    let sizes: &[usize] = if measuring() {
        &[0, 1_000, 10_000, 50_000]
    } else {
        &[0, 100]
    };
    for &idle in sizes {
        let db = Tenure::in_memory().expect("open");
        let _idle = idle_watchers(&db, idle);
        let mut hot = db.watch("hot", WatchOptions::default()).expect("watch");
        g.bench_with_input(BenchmarkId::from_parameter(idle), &idle, |b, _| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    db.put("hot", "v", None).expect("put");
                    hot.try_recv().expect("live").expect("delivered");
                }
                start.elapsed()
            })
        });
    }
    g.finish();
}

criterion_group!(watch, put_with_idle_watchers);
criterion_main!(watch);
