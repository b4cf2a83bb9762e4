//! Online snapshot under load (SPEC D8): a database of `--keys` keys (default 1 000 000, 16-byte
//! values; half of them attached to 1 000 leases) is snapshotted while `--threads` threads
//! (default 8) put keys with `Durability::Immediate` as fast as they are acknowledged. Prints
//! the writers' throughput for `--secs` seconds before the snapshot and during it, the
//! snapshot's duration, and the copy's revision, keys and size; first, how long
//! `storage_size` (Maintenance.Status's sizes) takes on that file.
//!
//! `cargo run --profile profiling -p tenure-bench --bin snapshot -- --keys 1000000 --threads 8`

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use tenure_bench::{open, parse_args, Mode, Scratch};

#[derive(Parser)]
struct Args {
    /// Keys in the database.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Writer threads.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Seconds of writes measured before the snapshot.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Where the files go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn main() {
    let args: Args = parse_args(include_str!("snapshot.rs"));
    let (keys, threads, secs) = (args.keys, args.threads, args.secs);
    let scratch = Scratch::new(args.dir);
    let path = scratch.dir.join("snapshot-src.tenure");
    let dest = scratch.dir.join("snapshot-copy.tenure");
    let _ = std::fs::remove_file(&path);

    let t = Instant::now();
    {
        let db = open(Mode::Buffered, &path, None);
        let leases: Vec<_> = (0..1000)
            .map(|_| db.grant(Duration::from_secs(3600)).expect("grant"))
            .collect();
        for i in 0..keys {
            let lease = (i % 2 == 0).then(|| leases[(i / 2 % 1000) as usize]);
            db.put(format!("key/{i:08}"), "value-16-bytes..", lease)
                .expect("put");
        }
        db.close().expect("close");
    }
    let size = std::fs::metadata(&path).expect("stat").len();
    println!(
        "snapshot setup keys={keys} file_bytes={size} build_s={:.1}",
        t.elapsed().as_secs_f64()
    );

    let db = open(Mode::Immediate, &path, None);
    // What `tenure serve` answers Maintenance.Status with (commits wait meanwhile).
    let t = Instant::now();
    let sizes = db.storage_size().expect("storage_size");
    println!(
        "snapshot storage_size_ms={:.1} file_bytes={} in_use_bytes={}",
        t.elapsed().as_secs_f64() * 1e3,
        sizes.file_bytes,
        sizes.in_use_bytes
    );
    let stop = AtomicBool::new(false);
    let writes = AtomicU64::new(0);
    thread::scope(|s| {
        for w in 0..threads {
            let (db, stop, writes) = (&db, &stop, &writes);
            s.spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    db.put(format!("load/{w}/{n:08}"), "value-16-bytes..", None)
                        .expect("put");
                    writes.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            });
        }
        // Warm-up, then the baseline.
        thread::sleep(Duration::from_secs_f64(secs / 3.0));
        let (w0, t0) = (writes.load(Ordering::Relaxed), Instant::now());
        thread::sleep(Duration::from_secs_f64(secs));
        let before = (writes.load(Ordering::Relaxed) - w0) as f64 / t0.elapsed().as_secs_f64();

        let (w1, t1) = (writes.load(Ordering::Relaxed), Instant::now());
        let info = db.snapshot(&dest).expect("snapshot");
        let took = t1.elapsed();
        let during = (writes.load(Ordering::Relaxed) - w1) as f64 / took.as_secs_f64();
        stop.store(true, Ordering::Relaxed);
        println!(
            "snapshot threads={threads} duration_ms={:.0} writes_per_s_before={before:.0} \
             writes_per_s_during={during:.0} during_over_before={:.2} revision={} keys={} \
             leases={} copy_bytes={}",
            took.as_secs_f64() * 1e3,
            during / before,
            info.revision,
            info.keys,
            info.leases,
            info.bytes
        );
    });
    db.close().expect("close");
    let _ = std::fs::remove_file(&dest);
}
