//! etcd's lessor benchmarks (`server/lease/lessor_bench_test.go`), mirrored through tenure's
//! public API on a redb file in a temporary directory with `Durability::Buffered(100 ms)`.
//!
//! Every workload keeps etcd's shape: a fresh engine per fixture of `size` leases, the fixture
//! built outside the timed region, and the result reported per lease (per 50 expired leases for
//! `find_expired`, which is what one etcd `findExpiredLeases(50)` call returns). Criterion's
//! "iteration" is therefore one lease (or one group of 50); `iter_custom` runs whole fixtures
//! and scales the timed total to the number of iterations criterion asked for.
//!
//! Grants use explicit IDs 1..=size via `grant_with_id`, as etcd's `le.Grant(LeaseID(j), ttl)`
//! does. TTLs are random in [1000, 2000) s, as etcd's `randomTTL(n, minTTL, maxTTL)`.
//!
//! Run: `cargo bench -p tenure --bench lessor` (see BENCHMARKS.md). Under `cargo test`
//! (no `--bench` argument) every workload runs once on a small fixture, as a smoke test.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tenure::{Durability, ManualClock, Tenure, WatchOptions};

/// etcd's `minTTL` / `maxTTL`, seconds: long enough that nothing expires during a fixture.
const MIN_TTL: u64 = 1000;
const MAX_TTL: u64 = 2000;
/// etcd's `findExpiredLimit`: FindExpired is reported per this many expired leases.
const FIND_EXPIRED_LIMIT: f64 = 50.0;
const FLUSH: Duration = Duration::from_millis(100);

/// Whether this run measures (`cargo bench` passes `--bench`) or only smoke-tests.
fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The fixture size actually used: etcd's size when measuring, a small one under `cargo test`.
fn fixture_size(size: u64) -> u64 {
    if measuring() {
        size
    } else {
        size.min(200)
    }
}

struct Fixture {
    db: Tenure,
    // Dropped after `db` (fields drop in order): the engine closes before its file goes.
    _dir: tempfile::TempDir,
}

/// A fresh engine on a new file, Buffered(100 ms), optionally on a manual clock.
fn fixture(clock: Option<Arc<ManualClock>>) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = Tenure::builder()
        .path(dir.path().join("bench.tenure"))
        .durability(Durability::Buffered(FLUSH));
    if let Some(c) = clock {
        b = b.clock(c);
    }
    Fixture {
        db: b.open().expect("open"),
        _dir: dir,
    }
}

fn memory_fixture(clock: Arc<ManualClock>) -> Fixture {
    Fixture {
        db: Tenure::builder().clock(clock).open().expect("open"),
        _dir: tempfile::tempdir().expect("tempdir"),
    }
}

/// Waits until everything written so far is committed, so that the setup's flush does not run
/// inside the timed region: a put of a marker key is delivered to a watcher only after the
/// commit that holds it, and that commit holds every earlier pending write.
fn settle(db: &Tenure) {
    let mut w = db
        .watch("bench/settled", WatchOptions::default())
        .expect("watch");
    db.put("bench/settled", "", None).expect("put marker");
    w.recv_timeout(Duration::from_secs(60))
        .expect("the marker's commit must be delivered");
}

fn random_ttls(n: u64, min: u64, max: u64, seed: u64) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(seed);
    (0..n)
        .map(|_| Duration::from_secs(rng.random_range(min..max)))
        .collect()
}

/// Runs whole fixtures until at least `iters` units were timed; returns the timed total scaled
/// to exactly `iters` units. `run` returns (timed duration, units timed).
fn scaled(iters: u64, mut run: impl FnMut() -> (Duration, f64)) -> Duration {
    let (mut timed, mut units) = (Duration::ZERO, 0.0);
    while units < iters as f64 {
        let (t, n) = run();
        assert!(n > 0.0, "a fixture must time at least one unit");
        timed += t;
        units += n;
    }
    timed.mul_f64(iters as f64 / units)
}

fn grant_all(db: &Tenure, ttls: &[Duration]) {
    for (j, ttl) in ttls.iter().enumerate() {
        db.grant_with_id(j as i64 + 1, *ttl).expect("grant");
    }
}

fn configure<'a>(
    c: &'a mut Criterion,
    name: &str,
    measurement: Duration,
) -> criterion::BenchmarkGroup<'a, criterion::measurement::WallTime> {
    let mut g = c.benchmark_group(name);
    g.sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(measurement);
    g
}

/// etcd `benchmarkLessorGrant`: time to grant `size` leases into a fresh lessor, per lease.
fn grant(c: &mut Criterion) {
    let mut g = configure(c, "grant", Duration::from_secs(4));
    for size in [1_000u64, 100_000] {
        let n = fixture_size(size);
        let ttls = random_ttls(n, MIN_TTL, MAX_TTL, 1);
        g.bench_with_input(BenchmarkId::from_parameter(size), &ttls, |b, ttls| {
            b.iter_custom(|iters| {
                scaled(iters, || {
                    let f = fixture(None);
                    let start = Instant::now();
                    grant_all(&f.db, ttls);
                    (start.elapsed(), ttls.len() as f64)
                })
            })
        });
    }
    g.finish();
}

/// etcd's Renew and Revoke shape: grant `size` leases (untimed, committed), then time `op` on
/// each of them once, per lease.
fn each_granted_lease(c: &mut Criterion, name: &str, seed: u64, op: fn(&Tenure, i64)) {
    let mut g = configure(c, name, Duration::from_secs(4));
    for size in [1_000u64, 100_000] {
        let n = fixture_size(size);
        let ttls = random_ttls(n, MIN_TTL, MAX_TTL, seed);
        g.bench_with_input(BenchmarkId::from_parameter(size), &ttls, |b, ttls| {
            b.iter_custom(|iters| {
                scaled(iters, || {
                    let f = fixture(None);
                    grant_all(&f.db, ttls);
                    settle(&f.db);
                    let start = Instant::now();
                    for j in 1..=ttls.len() as i64 {
                        op(&f.db, j);
                    }
                    (start.elapsed(), ttls.len() as f64)
                })
            })
        });
    }
    g.finish();
}

/// etcd `benchmarkLessorRenew`: renew each of `size` granted leases once, per lease.
fn renew(c: &mut Criterion) {
    each_granted_lease(c, "renew", 2, |db, id| {
        db.renew(id).expect("renew");
    });
}

/// etcd `benchmarkLessorRevoke`: revoke each of `size` granted leases (no keys), per lease.
fn revoke(c: &mut Criterion) {
    each_granted_lease(c, "revoke", 3, |db, id| db.revoke(id).expect("revoke"));
}

/// etcd `benchmarkLessorFindExpired`: about half of `size` leases are due at once; the cost of
/// finding, revoking and delivering them on `expired()`, per 50 leases.
///
/// etcd grants TTLs in [-500, 500) s so half are already expired; here TTLs are in
/// [500, 1500) s on a `ManualClock` at 0 and the clock advances 1000 s: a lease is due iff its
/// TTL ≤ 1000 s. Timed: from `advance` until every due lease has arrived on `expired()`.
fn find_expired_fixture(
    f: &Fixture,
    clock: &ManualClock,
    ttls: &[Duration],
    persist: bool,
) -> (Duration, f64) {
    let step = Duration::from_secs(1000);
    let due = ttls.iter().filter(|t| **t <= step).count();
    let rx = f.db.expired().unwrap();
    grant_all(&f.db, ttls);
    if persist {
        settle(&f.db);
    }
    let start = Instant::now();
    clock.advance(step);
    let mut got = 0;
    while got < due {
        let batch = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every due lease must be delivered");
        got += batch.len();
    }
    let t = start.elapsed();
    if std::env::var_os("BENCH_DEBUG").is_some() {
        eprintln!(
            "find_expired fixture: {} leases, {due} due, {t:?}",
            ttls.len()
        );
    }
    assert_eq!(got, due, "exactly the due leases expire");
    (t, due as f64 / FIND_EXPIRED_LIMIT)
}

fn find_expired(c: &mut Criterion) {
    let mut g = configure(c, "find_expired", Duration::from_secs(6));
    for size in [10_000u64, 100_000] {
        let n = fixture_size(size);
        let ttls = random_ttls(n, 500, 1500, 4);
        g.bench_with_input(BenchmarkId::from_parameter(size), &ttls, |b, ttls| {
            b.iter_custom(|iters| {
                scaled(iters, || {
                    let clock = ManualClock::new();
                    let f = fixture(Some(clock.clone()));
                    find_expired_fixture(&f, &clock, ttls, true)
                })
            })
        });
    }
    g.finish();

    // The same workload in memory: the lessor's own cost, without the buffered commit that
    // `expired()` delivery waits for on a file (ARCHITECTURE: delivered after the commit).
    let mut g = configure(c, "find_expired_in_memory", Duration::from_secs(4));
    for size in [10_000u64, 100_000] {
        let n = fixture_size(size);
        let ttls = random_ttls(n, 500, 1500, 4);
        g.bench_with_input(BenchmarkId::from_parameter(size), &ttls, |b, ttls| {
            b.iter_custom(|iters| {
                scaled(iters, || {
                    let clock = ManualClock::new();
                    let f = memory_fixture(clock.clone());
                    find_expired_fixture(&f, &clock, ttls, false)
                })
            })
        });
    }
    g.finish();
}

criterion_group!(lessor, grant, renew, revoke, find_expired);
criterion_main!(lessor);
