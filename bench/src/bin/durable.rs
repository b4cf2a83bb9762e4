//! Durable throughput: `Durability::Immediate` (every call returns after its fsynced commit;
//! concurrent callers share commits). Each of `--threads` threads (default 1,8,64, run one
//! after another on a fresh file) loops for `--secs` seconds doing one op = `grant` followed by
//! a `put` of a key attached to that lease (two durable writes). Prints ops/s (grant+put pairs)
//! and writes per commit. First it times the disk itself: `fdatasync` after a 4 KiB write to a
//! file in the same directory (p50 / p99 of 200), the floor under every durable commit.
//!
//! `--paths log,redb` (the default: both, back to back for each thread count) picks the commit
//! path: `log` = the write-ahead log (one append + `fdatasync` per commit, the default of the
//! engine), `redb` = `write_ahead_log(false)` (one durable redb transaction per commit).
//!
//! `cargo run --profile profiling -p tenure-bench --bin durable -- --threads 1,8,64 --secs 3`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;

use tenure::{Durability, Tenure};
use tenure_bench::{summary_us, Args, Scratch};

/// p50 / p99 / max of `fdatasync` after a 4 KiB write, on a file in `dir`.
fn disk_sync_latency(dir: &std::path::Path) -> String {
    let path = dir.join("fsync-probe");
    let f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .expect("probe file");
    f.write_all_at(&[0u8; 65536], 0).expect("write");
    f.sync_all().expect("sync");
    let mut lat = Vec::with_capacity(200);
    for i in 0..200u64 {
        f.write_all_at(&[i as u8; 4096], (i % 16) * 4096)
            .expect("write");
        let t = Instant::now();
        f.sync_data().expect("fdatasync");
        lat.push(t.elapsed());
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    summary_us("fdatasync", &mut lat)
}

fn main() {
    let args = Args::parse(&["threads", "secs", "dir", "paths"]);
    let threads: Vec<usize> = args.list("threads", &[1, 8, 64]);
    let paths: Vec<String> = args.list("paths", &["log".to_string(), "redb".to_string()]);
    let secs: f64 = args.get("secs", 3.0);
    let dir: String = args.get("dir", String::new());
    let scratch = Scratch::new((!dir.is_empty()).then(|| dir.into()));

    println!("durable disk {}", disk_sync_latency(&scratch.dir));
    for (&t, commit_path) in threads
        .iter()
        .flat_map(|t| paths.iter().map(move |p| (t, p)))
    {
        let path = scratch
            .dir
            .join(format!("durable-{t}-{commit_path}.tenure"));
        let _ = std::fs::remove_file(&path);
        let db = Tenure::builder()
            .path(&path)
            .durability(Durability::Immediate)
            .write_ahead_log(match commit_path.as_str() {
                "log" => true,
                "redb" => false,
                other => panic!("unknown --paths entry {other:?} (log | redb)"),
            })
            .open()
            .expect("open the engine");
        let stop = Arc::new(AtomicBool::new(false));
        let barrier = Arc::new(Barrier::new(t + 1));
        let workers: Vec<_> = (0..t)
            .map(|w| {
                let (db, stop, barrier) = (db.clone(), stop.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    let mut ops = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let lease = db.grant(Duration::from_secs(3600)).expect("grant");
                        db.put(
                            format!("durable/{w}/{ops}"),
                            "value-16-bytes..",
                            Some(lease),
                        )
                        .expect("put");
                        ops += 1;
                    }
                    ops
                })
            })
            .collect();
        let c0 = db.stats().commits;
        barrier.wait();
        let start = Instant::now();
        thread::sleep(Duration::from_secs_f64(secs));
        stop.store(true, Ordering::Relaxed);
        let ops: u64 = workers.into_iter().map(|h| h.join().expect("worker")).sum();
        let elapsed = start.elapsed().as_secs_f64();
        let commits = db.stats().commits - c0;
        db.close().expect("close");
        println!(
            "durable path={commit_path} threads={t} ops={ops} ops_per_s={:.0} writes_per_s={:.0} commits={commits} writes_per_commit={:.1}",
            ops as f64 / elapsed,
            2.0 * ops as f64 / elapsed,
            2.0 * ops as f64 / commits.max(1) as f64,
        );
    }
}
