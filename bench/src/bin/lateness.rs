//! Expiry lateness: `--leases` leases (default 100 000) whose deadlines are spread evenly over
//! `--spread-ms` (default 1000) on the real `SystemClock`. For each lease, lateness = the instant
//! its batch arrived on `expired()` minus its deadline. Prints p50 / p99 / max.
//!
//! The deadline of lease i is fixed first (`start + lead + spread * i / n`) and the TTL is
//! computed from it just before the grant, so the engine's deadline is at most the grant call's
//! own latency after it: lateness is over-estimated by that much, never under-estimated.
//!
//! `cargo run --profile profiling -p tenure-bench --bin lateness -- --mode memory|buffered|immediate`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use tenure_bench::{open, parse_args, summary_us, Mode, Scratch};

#[derive(Parser)]
struct Args {
    #[arg(long, value_enum, default_value_t = Mode::Memory)]
    mode: Mode,
    /// Leases granted.
    #[arg(long, default_value_t = 100_000)]
    leases: usize,
    /// The deadlines are spread evenly over this many ms.
    #[arg(long, default_value_t = 1000)]
    spread_ms: u64,
    /// Time between the start and the first deadline, ms [default: 30000 immediate, else 2000].
    #[arg(long)]
    lead_ms: Option<u64>,
    /// Threads granting the leases [default: 64 immediate, else 1].
    #[arg(long)]
    grant_threads: Option<usize>,
}

fn main() {
    let args: Args = parse_args(include_str!("lateness.rs"));
    let mode = args.mode;
    let n = args.leases;
    let spread = Duration::from_millis(args.spread_ms);
    // Immediate grants wait for an fsync each: grant from many threads (group commit) and
    // leave them more time before the first deadline.
    let default_threads = if mode == Mode::Immediate { 64 } else { 1 };
    let threads = args.grant_threads.unwrap_or(default_threads);
    let default_lead = if mode == Mode::Immediate {
        30_000
    } else {
        2_000
    };
    let lead = Duration::from_millis(args.lead_ms.unwrap_or(default_lead));

    let scratch = Scratch::new(None);
    let db = open(mode, &scratch.dir.join("lateness.tenure"), None);
    let rx = db.expired();

    let start = Instant::now() + Duration::from_millis(10);
    let deadline_of = move |id: usize| start + lead + spread.mul_f64((id - 1) as f64 / n as f64);
    let granted_late = Arc::new(AtomicBool::new(false));
    thread::scope(|s| {
        for t in 0..threads {
            let db = db.clone();
            let granted_late = granted_late.clone();
            s.spawn(move || {
                for id in (1 + t..=n).step_by(threads) {
                    let ttl = deadline_of(id).saturating_duration_since(Instant::now());
                    if ttl.is_zero() {
                        granted_late.store(true, Ordering::Relaxed);
                    }
                    db.grant_with_id(id as i64, ttl.max(Duration::from_millis(1)))
                        .expect("grant");
                }
            });
        }
    });
    let granted_at = start.elapsed();
    assert!(
        !granted_late.load(Ordering::Relaxed) && granted_at < lead,
        "granting took {granted_at:?}, past the first deadline ({lead:?}): raise --lead-ms"
    );

    let mut late = Vec::with_capacity(n);
    while late.len() < n {
        let batch = rx
            .recv_timeout(lead + spread + Duration::from_secs(60))
            .expect("every lease must expire");
        let now = Instant::now();
        for l in &batch {
            late.push(now.saturating_duration_since(deadline_of(l.id.get() as usize)));
        }
    }
    assert_eq!(late.len(), n, "each lease expires exactly once");
    let stats = db.stats();
    db.close().expect("close");
    println!(
        "lateness mode={mode} leases={n} spread_ms={} {} commits={}",
        spread.as_millis(),
        summary_us("late", &mut late),
        stats.commits
    );
}
