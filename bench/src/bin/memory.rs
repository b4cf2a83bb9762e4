//! Memory per lease, in memory (no file): the resident set grows by how much when `--leases`
//! (default 1 000 000) leases are granted, without keys (`--keys 0`) or with one key each
//! (`--keys 1`, key `k/NNNNNNNNNN`, 8-byte value)? Prints the RSS delta divided by the lease
//! count. Run once per variant: each is its own process, so freed memory of one cannot hide
//! growth of the other.
//!
//! `cargo run --profile profiling -p tenure-bench --bin memory -- --keys 0` (then `--keys 1`)

use std::time::Duration;

use clap::Parser;
use tenure::Tenure;
use tenure_bench::{parse_args, rss_bytes};

#[derive(Parser)]
struct Args {
    /// Leases granted.
    #[arg(long, default_value_t = 1_000_000)]
    leases: u64,
    /// Keys per lease: 0 or 1.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1))]
    keys: u32,
}

fn main() {
    let args: Args = parse_args(include_str!("memory.rs"));
    let (n, keys) = (args.leases, args.keys);

    let db = Tenure::in_memory().expect("open");
    // Warm up the engine's buffers so the baseline includes the fixed cost.
    let l = db.grant(Duration::from_secs(3600)).expect("grant");
    db.put("warm", "up", Some(l)).expect("put");
    db.revoke(l).expect("revoke");
    let before = rss_bytes();
    for i in 0..n {
        let lease = db.grant(Duration::from_secs(3600)).expect("grant");
        if keys == 1 {
            db.put(format!("k/{i:010}"), "value-8b", Some(lease))
                .expect("put");
        }
    }
    let after = rss_bytes();
    let stats = db.stats();
    assert_eq!(stats.leases, n);
    assert_eq!(stats.keys, n * u64::from(keys));
    println!(
        "memory leases={n} keys_per_lease={keys} rss_before_mb={:.1} rss_after_mb={:.1} bytes_per_lease={:.0}",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        (after - before) as f64 / n as f64
    );
    drop(db);
}
