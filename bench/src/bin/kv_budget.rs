//! Key-value budget of issue 24, on calls that exist before and after revision history, so the
//! same binary measures both trees (BENCHMARKS.md, "Revision history: the budget").
//!
//! Durable throughput: for each op of `--ops` (`put`: one put; `txn`: compare the key's version,
//! put it, else get it) and each thread count of `--threads`, a fresh file with
//! `Durability::Immediate` (every call returns after its fsynced commit; concurrent callers
//! share commits); each thread overwrites its own `--keys-per-thread` keys in turn for `--secs`
//! seconds. Prints ops/s.
//!
//! Latest-revision read: a file with `Durability::Buffered` holding `--read-keys` keys, each put
//! `--read-versions` times (txns of 100 puts), then `--reads` gets of random keys, each timed
//! alone. Prints p50/p99 in ns.
//!
//! `cargo run --profile profiling -p tenure-bench --bin kv_budget -- --threads 1,8,64 --secs 3`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use rand::Rng;
use tenure::{Compare, CompareOp, Durability, Op, Tenure, Txn};
use tenure_bench::{parse_args, quantile, Scratch, FLUSH};

#[derive(Parser)]
struct Args {
    /// Thread counts, one durable run each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 64])]
    threads: Vec<usize>,
    /// Durable ops, each run per thread count (comma-separated; empty: no durable runs).
    #[arg(long, value_delimiter = ',', value_parser = ["put", "txn"], default_values = ["put", "txn"])]
    ops: Vec<String>,
    /// Seconds per durable run.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Ops per thread instead of `--secs` (fixed work, for instruction counts under callgrind).
    #[arg(long)]
    count: Option<u64>,
    /// Keys each durable thread overwrites in turn.
    #[arg(long, default_value_t = 100)]
    keys_per_thread: usize,
    /// Keys of the read run (0: no read run).
    #[arg(long, default_value_t = 100_000)]
    read_keys: usize,
    /// Times each key of the read run is put.
    #[arg(long, default_value_t = 10)]
    read_versions: usize,
    /// Gets timed in the read run.
    #[arg(long, default_value_t = 1_000_000)]
    reads: usize,
    /// Size of each of the write-ahead log's two regions, in bytes [default: the library's].
    #[arg(long)]
    log_region: Option<u64>,
    /// Revisions kept by auto-compaction [default: the library's].
    #[arg(long)]
    retention: Option<u64>,
    /// Where the files go [default: a temporary directory].
    #[arg(long)]
    dir: Option<std::path::PathBuf>,
}

fn main() {
    let args: Args = parse_args(include_str!("kv_budget.rs"));
    let scratch = Scratch::new(args.dir.clone());
    for op in &args.ops {
        for &threads in &args.threads {
            let path = scratch.dir.join(format!("durable-{op}-{threads}.tenure"));
            let per_s = durable(&path, op, threads, &args);
            println!("kv_budget durable op={op} threads={threads} ops_per_s={per_s:.0}");
            remove(&path);
        }
    }
    if args.read_keys > 0 {
        let path = scratch.dir.join("read.tenure");
        let (p50, p99, mean) = latest_reads(&path, args.read_keys, args.read_versions, args.reads);
        println!(
            "kv_budget read_latest keys={} versions={} get_p50_ns={p50} get_p99_ns={p99} get_mean_ns={mean:.0}",
            args.read_keys, args.read_versions
        );
        remove(&path);
    }
}

/// The engine's files at `path` (the database and its write-ahead log) removed.
fn remove(path: &std::path::Path) {
    let _ = std::fs::remove_file(path);
    let mut wal = path.as_os_str().to_owned();
    wal.push(".wal");
    let _ = std::fs::remove_file(wal);
}

fn key(thread: usize, i: usize) -> Vec<u8> {
    format!("t{thread:03}/k{i:06}").into_bytes()
}

/// Durable `op`s per second over `secs` seconds with `threads` threads.
fn durable(path: &std::path::Path, op: &str, threads: usize, args: &Args) -> f64 {
    let (keys, count) = (args.keys_per_thread, args.count.unwrap_or(u64::MAX));
    let mut builder = Tenure::builder()
        .path(path)
        .durability(Durability::Immediate);
    if let Some(bytes) = args.log_region {
        builder = builder.log_region_size(bytes);
    }
    if let Some(revisions) = args.retention {
        builder = builder.auto_compaction(tenure::AutoCompaction::Revisions(revisions));
    }
    let db = Arc::new(builder.open().expect("open"));
    // Every key exists, so the txn's compare (version > 0) holds and it puts.
    for t in 0..threads {
        let puts: Vec<Op> = (0..keys).map(|i| Op::put(key(t, i), b"v0", None)).collect();
        for chunk in puts.chunks(100) {
            db.txn(Txn::new().then(chunk.to_vec())).expect("populate");
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(threads + 1));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (db, stop, start) = (db.clone(), stop.clone(), start.clone());
            let txn = op == "txn";
            thread::spawn(move || {
                let keys: Vec<Vec<u8>> = (0..keys).map(|i| key(t, i)).collect();
                start.wait();
                let mut n = 0u64;
                while n < count && !stop.load(Ordering::Relaxed) {
                    let k = &keys[n as usize % keys.len()];
                    if txn {
                        db.txn(
                            Txn::new()
                                .when([Compare::version(k, CompareOp::Greater, 0)])
                                .then([Op::put(k, b"value-of-a-txn", None)])
                                .otherwise([Op::get(k)]),
                        )
                        .expect("txn");
                    } else {
                        db.put(k, b"value-of-a-put", None).expect("put");
                    }
                    n += 1;
                }
                n
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    if args.count.is_none() {
        thread::sleep(Duration::from_secs_f64(args.secs));
        stop.store(true, Ordering::Relaxed);
    }
    let total: u64 = workers.into_iter().map(|w| w.join().expect("worker")).sum();
    let elapsed = began.elapsed().as_secs_f64();
    db.close().expect("close");
    total as f64 / elapsed
}

/// p50 and p99 (ns) and mean of `reads` gets of random keys of a populated file.
fn latest_reads(
    path: &std::path::Path,
    keys: usize,
    versions: usize,
    reads: usize,
) -> (u128, u128, f64) {
    let db = Tenure::builder()
        .path(path)
        .durability(Durability::Buffered(FLUSH))
        .open()
        .expect("open");
    let names: Vec<Vec<u8>> = (0..keys)
        .map(|i| format!("read/k{i:08}").into_bytes())
        .collect();
    for v in 0..versions {
        let value = format!("value-{v:04}-of-a-read-key");
        for chunk in names.chunks(100) {
            let ops: Vec<Op> = chunk.iter().map(|k| Op::put(k, &value, None)).collect();
            db.txn(Txn::new().then(ops)).expect("populate");
        }
    }
    db.flush_to_file().expect("flush");
    let mut rng = rand::rng();
    let mut samples = Vec::with_capacity(reads);
    for _ in 0..reads {
        let k = &names[rng.random_range(0..keys)];
        let t = Instant::now();
        let kv = db.get(k).expect("get");
        samples.push(t.elapsed());
        assert!(kv.is_some(), "every key is live");
    }
    db.close().expect("close");
    let mean = samples.iter().map(Duration::as_nanos).sum::<u128>() as f64 / reads as f64;
    samples.sort_unstable();
    (
        quantile(&samples, 0.50).as_nanos(),
        quantile(&samples, 0.99).as_nanos(),
        mean,
    )
}
