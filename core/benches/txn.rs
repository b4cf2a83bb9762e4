//! The embedded transaction (`Tenure::txn`) on an in-memory engine: what one apply costs when
//! no disk is involved, so the apply path itself (compares, validation, the ops, the response)
//! is what is measured.
//!
//! Run: `cargo bench -p tenure --bench txn`. Under `cargo test` (no `--bench` argument) each
//! workload runs once, as a smoke test.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, SamplingMode};
use tenure::{Compare, CompareOp, Op, Tenure, Txn};

/// Keys the workloads cycle through (a live key space of this size).
const KEYS: usize = 1024;

fn keys() -> Vec<Vec<u8>> {
    (0..KEYS)
        .map(|i| format!("bench/{i:05}").into_bytes())
        .collect()
}

fn configure(c: &mut Criterion) -> criterion::BenchmarkGroup<'_, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group("txn_in_memory");
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    g
}

fn txn(c: &mut Criterion) {
    let db = Tenure::in_memory().expect("open");
    let keys = keys();
    for k in &keys {
        db.put(k, "v", None).expect("put");
    }
    let mut g = configure(c);
    let mut i = 0usize;
    let mut next = || {
        i = (i + 1) % KEYS;
        &keys[i]
    };
    // The recipes' shape: a compare on the key's revision, a put when it holds, a get otherwise.
    g.bench_function("cas_put", |b| {
        b.iter_batched(
            || {
                let k = next().clone();
                let rev = db.get(&k).expect("get").expect("live").mod_revision;
                Txn::new()
                    .when([Compare::mod_revision(&k, CompareOp::Equal, rev)])
                    .then([Op::put(&k, "w", None)])
                    .otherwise([Op::get(&k)])
            },
            |t| db.txn(t).expect("txn"),
            BatchSize::SmallInput,
        )
    });
    // A compare that fails: only the read branch runs (no revision moves).
    g.bench_function("failed_compare_get", |b| {
        b.iter_batched(
            || {
                let k = next().clone();
                Txn::new()
                    .when([Compare::version(&k, CompareOp::Equal, 0)])
                    .then([Op::put(&k, "w", None)])
                    .otherwise([Op::get(&k)])
            },
            |t| db.txn(t).expect("txn"),
            BatchSize::SmallInput,
        )
    });
    // Several ops: two puts, a delete of a key put back in the next iteration, a small range.
    g.bench_function("four_ops", |b| {
        b.iter_batched(
            || {
                let (a, d) = (next().clone(), next().clone());
                Txn::new()
                    .when([Compare::version(&a, CompareOp::Greater, 0)])
                    .then([
                        Op::put(&a, "x", None),
                        Op::put(&d, "y", None),
                        Op::delete(&d),
                        Op::range("bench/0000", Some(4)),
                    ])
                    .otherwise([Op::put(&a, "x", None)])
            },
            |t| db.txn(t).expect("txn"),
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, txn);
criterion_main!(benches);
