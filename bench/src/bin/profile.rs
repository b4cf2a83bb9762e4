//! One fixture of an etcd lessor workload (as in `core/benches/lessor.rs`: a fresh engine on a
//! file, Buffered(100 ms), IDs 1..=size, TTLs in [1000, 2000) s), for profilers. The measured
//! part runs inside a function named `profiled_<workload>` so that a profiler can be limited to
//! it, e.g.
//!
//! `valgrind --tool=callgrind --toggle-collect='*profiled_renew*' target/profiling/profile --workload renew --size 100000`
//!
//! `find_expired` expires on the engine's thread: collect `*expire*` there instead. `open`
//! reopens a file of `--size` leases with one key each (built with Buffered on first use and
//! kept at `--file`). Prints the wall time of the measured part (meaningless under valgrind,
//! useful under perf).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tenure::{Clock, ManualClock, Tenure, WatchOptions};
use tenure_bench::{open, parse_args, Mode, Scratch};

#[derive(Parser)]
struct Args {
    /// What is measured.
    #[arg(long, default_value = "renew",
          value_parser = ["grant", "renew", "revoke", "find_expired", "open"])]
    workload: String,
    /// Leases in the fixture.
    #[arg(long, default_value_t = 100_000)]
    size: u64,
    /// Passes of the measured part (`renew`, `open`).
    #[arg(long, default_value_t = 1)]
    passes: u64,
    #[arg(long, value_enum, default_value_t = Mode::Buffered)]
    mode: Mode,
    /// The file `open` reopens (built on first use).
    #[arg(long, default_value = "target/bench/profile-open.tenure")]
    file: PathBuf,
    /// `spin`: wait for the fixture's commit by polling instead of blocking.
    #[arg(long, default_value = "block", value_parser = ["block", "spin"])]
    settle: String,
    /// `off`: commits go to redb directly (`write_ahead_log(false)`).
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    wal: String,
}

fn settle(db: &Tenure, spin: bool) {
    if spin {
        // Waits for the marker's commit without blocking: the thread keeps its CPU (and its
        // caches) instead of being woken, perhaps on the other core.
        let rev = db.put("bench/settled", "", None).expect("put marker");
        while db.durable_revision() < rev {
            std::hint::spin_loop();
        }
        return;
    }
    let mut w = db
        .watch("bench/settled", WatchOptions::default())
        .expect("watch");
    db.put("bench/settled", "", None).expect("put marker");
    w.recv_timeout(Duration::from_secs(120))
        .expect("marker delivered");
}

fn ttls(n: u64, min: u64, max: u64) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(7);
    (0..n)
        .map(|_| Duration::from_secs(rng.random_range(min..max)))
        .collect()
}

#[inline(never)]
fn profiled_grant(db: &Tenure, ttls: &[Duration]) {
    for (j, t) in ttls.iter().enumerate() {
        db.grant_with_id(j as i64 + 1, *t).expect("grant");
    }
}

#[inline(never)]
fn profiled_renew(db: &Tenure, n: u64, passes: u64) {
    for _ in 0..passes {
        for j in 1..=n as i64 {
            db.renew(j).expect("renew");
        }
    }
}

#[inline(never)]
fn profiled_revoke(db: &Tenure, n: u64) {
    for j in 1..=n as i64 {
        db.revoke(j).expect("revoke");
    }
}

#[inline(never)]
fn profiled_open(path: &std::path::Path) -> Tenure {
    Tenure::builder()
        .path(path)
        .durability(tenure::Durability::Buffered(tenure_bench::FLUSH))
        .open()
        .expect("reopen")
}

#[inline(never)]
fn profiled_find_expired(db: &Tenure, clock: &ManualClock, due: usize) {
    let rx = db.expired();
    clock.advance(Duration::from_secs(1000));
    let mut got = 0;
    while got < due {
        got += rx
            .recv_timeout(Duration::from_secs(600))
            .expect("due leases")
            .len();
    }
}

fn main() {
    let args: Args = parse_args(include_str!("profile.rs"));
    let (workload, n, passes, mode) = (args.workload, args.size, args.passes, args.mode);
    let spin = args.settle == "spin";
    if workload == "open" {
        let path = args.file;
        if !path.exists() {
            std::fs::create_dir_all(path.parent().expect("a parent dir")).expect("mkdir");
            let db = open(Mode::Buffered, &path, None);
            for id in 1..=n as i64 {
                let lease = db.grant(Duration::from_secs(36_000)).expect("grant");
                db.put(format!("svc/{id:010}"), "10.0.0.1:8080", Some(lease))
                    .expect("put");
            }
            db.close().expect("close");
        }
        for _ in 0..passes {
            let t0 = Instant::now();
            let db = profiled_open(&path);
            println!(
                "open size={n} measured_ms={:.2}",
                t0.elapsed().as_secs_f64() * 1e3
            );
            db.close().expect("close");
        }
        return;
    }
    let scratch = Scratch::new(None);
    let path = scratch.dir.join("profile.tenure");
    let clock = ManualClock::new();
    // The criterion benches run grant/renew/revoke on the real clock, find_expired on a manual one.
    let manual = (workload == "find_expired").then(|| clock.clone() as Arc<dyn Clock>);
    let db = if args.wal == "off" {
        let mut b = Tenure::builder().path(&path).write_ahead_log(false);
        b = match mode {
            Mode::Memory => b.in_memory(),
            Mode::Buffered => b.durability(tenure::Durability::Buffered(tenure_bench::FLUSH)),
            Mode::Immediate => b,
        };
        if let Some(c) = manual {
            b = b.clock(c);
        }
        b.open().expect("open the engine")
    } else {
        open(mode, &path, manual)
    };
    let t = Instant::now();
    match workload.as_str() {
        "grant" => profiled_grant(&db, &ttls(n, 1000, 2000)),
        "renew" | "revoke" => {
            let ttls = ttls(n, 1000, 2000);
            for (j, t) in ttls.iter().enumerate() {
                db.grant_with_id(j as i64 + 1, *t).expect("grant");
            }
            if mode != Mode::Memory {
                settle(&db, spin);
            }
            let t0 = Instant::now();
            if workload == "renew" {
                profiled_renew(&db, n, passes);
            } else {
                profiled_revoke(&db, n);
            }
            let el = t0.elapsed();
            println!(
                "{workload} size={n} measured_ms={:.2} ns_per_op={:.1}",
                el.as_secs_f64() * 1e3,
                el.as_nanos() as f64 / (n * if workload == "renew" { passes } else { 1 }) as f64
            );
            db.close().expect("close");
            return;
        }
        "find_expired" => {
            let ttls = ttls(n, 500, 1500);
            let due = ttls
                .iter()
                .filter(|t| **t <= Duration::from_secs(1000))
                .count();
            for (j, t) in ttls.iter().enumerate() {
                db.grant_with_id(j as i64 + 1, *t).expect("grant");
            }
            if mode != Mode::Memory {
                settle(&db, spin);
            }
            let t0 = Instant::now();
            profiled_find_expired(&db, &clock, due);
            println!(
                "{workload} size={n} due={due} measured_ms={:.2}",
                t0.elapsed().as_secs_f64() * 1e3
            );
            db.close().expect("close");
            return;
        }
        other => panic!("unknown workload {other}"),
    }
    println!(
        "{workload} size={n} measured_ms={:.2}",
        t.elapsed().as_secs_f64() * 1e3
    );
    db.close().expect("close");
}
