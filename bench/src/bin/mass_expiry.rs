//! Mass expiry: `--leases` leases (default 100 000), one key each, all with the same deadline,
//! plus `--others` (default 1 000) long leases that a second thread keeps renewing.
//!
//! A `ManualClock` makes the deadline exactly one instant: everything is granted at clock time
//! 0 with a 10 s TTL, then the clock advances 10 s. Measured: the wall time from `advance`
//! until every expired lease (revoked with its key) has arrived on `expired()`, and the latency
//! of the renews of the other leases due during that window (p50 / p99 / max), one renew due
//! every `--renew-every-us` (default 1 000 µs: each of the 1 000 leases renewed once a second),
//! latency counted from when it was due.
//!
//! File modes build the population with Buffered(100 ms), close, and reopen in the mode under
//! test on the same clock (Recovery::Wall: the manual wall clock did not move, so every lease
//! comes back with its full TTL).
//!
//! `cargo run --profile profiling -p tenure-bench --bin mass_expiry -- --mode memory|buffered|immediate`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use tenure::{Clock, ManualClock, Tenure, WatchOptions};
use tenure_bench::{open, parse_args, summary_us, Mode, Scratch};

#[derive(Parser)]
struct Args {
    #[arg(long, value_enum, default_value_t = Mode::Buffered)]
    mode: Mode,
    /// Leases (one key each) expiring at one instant.
    #[arg(long, default_value_t = 100_000)]
    leases: usize,
    /// Long leases kept renewed meanwhile.
    #[arg(long, default_value_t = 1_000)]
    others: usize,
    /// One renew of the others due every this many µs.
    #[arg(long, default_value_t = 1000)]
    renew_every_us: u64,
}

const TTL: Duration = Duration::from_secs(10);

fn populate(db: &Tenure, n: usize, others: usize) {
    for id in 1..=n as i64 {
        db.grant_with_id(id, TTL).expect("grant");
        db.put(format!("mass/{id:09}"), "value-16-bytes..", Some(id.into()))
            .expect("put");
    }
    for id in n as i64 + 1..=(n + others) as i64 {
        db.grant_with_id(id, TTL * 1000).expect("grant");
    }
}

/// Waits until everything written so far is committed (a marker's put reaches a watcher only
/// after the commit that holds it and every earlier write).
fn settle(db: &Tenure) {
    let mut w = db
        .watch("bench/settled", WatchOptions::default())
        .expect("watch");
    db.put("bench/settled", "", None).expect("put marker");
    w.recv_timeout(Duration::from_secs(120))
        .expect("marker delivered");
}

fn main() {
    let args: Args = parse_args(include_str!("mass_expiry.rs"));
    let (mode, n, others) = (args.mode, args.leases, args.others);

    let scratch = Scratch::new(None);
    let path = scratch.dir.join("mass.tenure");
    let clock = ManualClock::new();
    let dyn_clock = || Some(clock.clone() as Arc<dyn Clock>);
    let db = if mode == Mode::Memory {
        let db = open(mode, &path, dyn_clock());
        populate(&db, n, others);
        db
    } else {
        let db = open(Mode::Buffered, &path, dyn_clock());
        populate(&db, n, others);
        db.close().expect("close after populating");
        drop(db);
        let db = open(mode, &path, dyn_clock());
        settle(&db);
        db
    };
    assert_eq!(db.stats().leases as usize, n + others);
    let rx = db.expired();

    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    // The renewer works to a schedule, one renew every `--renew-every-us`, and a renew's
    // latency is measured from when it was due, not from when the call began: a renewer held
    // up for 80 ms then owes 80 ms worth of renews, each counted as late as it was
    // (no coordinated omission). `service` is the time inside the call alone.
    let every = Duration::from_micros(args.renew_every_us);
    let renewer = {
        let (db, stop, measuring) = (db.clone(), stop.clone(), measuring.clone());
        thread::spawn(move || {
            // (due, latency from due, time inside the call), once measuring has begun.
            let mut samples: Vec<(Instant, Duration, Duration)> = Vec::new();
            let mut due = Instant::now();
            let mut ids = (n as i64 + 1..=(n + others) as i64).cycle();
            while !stop.load(Ordering::Relaxed) {
                while Instant::now() < due {
                    std::hint::spin_loop();
                }
                let on = measuring.load(Ordering::Relaxed);
                let t = Instant::now();
                db.renew(ids.next().expect("cycle"))
                    .expect("renew of a long lease");
                let done = Instant::now();
                if on {
                    samples.push((due, done - due, done - t));
                }
                due += every;
            }
            samples
        })
    };

    // Let the renewer run for a moment before the deadline, then cross it.
    thread::sleep(Duration::from_millis(50));
    measuring.store(true, Ordering::SeqCst);
    let start = Instant::now();
    clock.advance(TTL);
    let mut got = 0;
    let mut keys = 0;
    while got < n {
        let batch = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("every lease expires");
        got += batch.len();
        keys += batch.iter().map(|l| l.keys.len()).sum::<usize>();
    }
    let all_revoked = start.elapsed();
    // Let a renewer that was held up catch up on what fell due in the window, then stop it.
    thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::SeqCst);
    let samples = renewer.join().expect("renewer");
    let end = start + all_revoked;
    let window: Vec<_> = samples
        .iter()
        .filter(|(due, _, _)| *due >= start && *due <= end)
        .collect();
    assert!(!window.is_empty(), "renews fell due during the expiry");
    let renews = window.len();
    let mut lat: Vec<Duration> = window.iter().map(|s| s.1).collect();
    let mut service: Vec<Duration> = window.iter().map(|s| s.2).collect();
    assert_eq!(got, n, "exactly the short leases expire");
    assert_eq!(keys, n, "each expired lease had its key deleted");
    let stats = db.stats();
    assert_eq!(stats.leases as usize, others);
    db.close().expect("close");
    println!(
        "mass_expiry mode={mode} leases={n} others={others} all_revoked_ms={:.1} renews={renews} {} {}",
        all_revoked.as_secs_f64() * 1e3,
        summary_us("renew", &mut lat),
        summary_us("renew_service", &mut service),
    );
}
