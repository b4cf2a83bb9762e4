//! Revision history's budget rows of issue 24 (BENCHMARKS.md, "Revision history: the budget").
//!
//! `--run past-read`: a file (`Durability::Buffered`) with `--keys` keys, each put `--versions`
//! times (txns of 100 puts, one revision per txn), brought into the file; then rounds of
//! `--reads` random keys read three ways, interleaved key by key: `get` (the present, from
//! memory), `get_at` the current revision, and `get_at` the revision of the first version (the
//! oldest retained one, from the file's history). Prints the p50/p99 of each in ns and the
//! past/current ratio of the p50s.
//!
//! `--run open`: a file with `--keys` keys × `--versions` versions (auto-compaction off, so
//! every version is retained), closed, then opened `--runs` times. Prints each open's time
//! and the close's after it (a clean close checksums the file, K15), the file size and bytes per retained key version (`--defragment`: also after defragmenting);
//! `--keep FILE` builds the file there once and reuses it in later runs.
//!
//! `--run compaction`: a file (auto-compaction off) with `--keys` keys × `--versions` versions
//! (`--batch 1`: one revision per put), reopened with the putter's durability (`--putter`,
//! default `immediate`); a putter thread puts without pause while `compact` removes every
//! version but the last and the compactor carries it out on the file (`wait_compacted`).
//! The same putter runs for `--secs` seconds before, as the baseline. Prints the put latencies
//! (p50/p99/max of the first 20 000 000 puts of each phase) and how long the compaction took.
//!
//! `cargo run --profile profiling -p tenure-bench --bin history -- --run open --keys 1000000`

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use rand::Rng;
use tenure::{AutoCompaction, Durability, Op, Tenure, Txn};
use tenure_bench::{parse_args, quantile, summary_us, Scratch, FLUSH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Run {
    /// A read at a past revision next to one of the present.
    PastRead,
    /// Open of a file with history.
    Open,
    /// Put latency while compaction removes the history.
    Compaction,
}

#[derive(Parser)]
struct Args {
    /// What to measure.
    #[arg(long, value_enum)]
    run: Run,
    /// Keys.
    #[arg(long, default_value_t = 100_000)]
    keys: usize,
    /// Versions (puts) of each key.
    #[arg(long, default_value_t = 10)]
    versions: usize,
    /// Puts per txn while populating (each txn is one revision).
    #[arg(long, default_value_t = 100)]
    batch: usize,
    /// Durability of the putter during compaction (`immediate`: fsynced commits).
    #[arg(long, value_parser = ["immediate", "buffered"], default_value = "immediate")]
    putter: String,
    /// Bytes of each value.
    #[arg(long, default_value_t = 32)]
    value_size: usize,
    /// Reads per way and round (past-read).
    #[arg(long, default_value_t = 200_000)]
    reads: usize,
    /// Rounds (past-read) or opens (open).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Seconds of the baseline putter (compaction).
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// After the opens of `--run open`, defragment the file and print its size (this rewrites
    /// a `--keep` file).
    #[arg(long)]
    defragment: bool,
    /// Build the file of `--run open` here once and reuse it.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Where the files go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
}

fn main() {
    let args: Args = parse_args(include_str!("history.rs"));
    let scratch = Scratch::new(args.dir.clone());
    let path = scratch.dir.join("history.tenure");
    match args.run {
        Run::PastRead => past_read(&args, &path),
        Run::Open => open(&args, args.keep.as_deref().unwrap_or(&path)),
        Run::Compaction => compaction(&args, &path),
    }
}

fn names(keys: usize) -> Vec<Vec<u8>> {
    (0..keys)
        .map(|i| format!("history/k{i:08}").into_bytes())
        .collect()
}

/// Puts every key `versions` times, in txns of `batch` puts (a lone put for 1); returns the
/// revision after the first version of every key.
fn populate(db: &Tenure, names: &[Vec<u8>], args: &Args) -> i64 {
    let (versions, value_size) = (args.versions, args.value_size);
    let mut first = 0;
    for v in 0..versions {
        let mut value = format!("v{v:04}-").into_bytes();
        value.resize(value_size.max(value.len()), b'x');
        for chunk in names.chunks(args.batch.max(1)) {
            if let [k] = chunk {
                db.put(k, &value, None).expect("populate");
                continue;
            }
            let ops: Vec<Op> = chunk.iter().map(|k| Op::put(k, &value, None)).collect();
            db.txn(Txn::new().then(ops)).expect("populate");
        }
        if v == 0 {
            first = db.revision().expect("revision");
        }
    }
    first
}

fn past_read(args: &Args, path: &Path) {
    let db = Tenure::builder()
        .path(path)
        .durability(Durability::Buffered(FLUSH))
        .auto_compaction(AutoCompaction::Off)
        .open()
        .expect("open");
    let names = names(args.keys);
    let first = populate(&db, &names, args);
    db.flush_to_file().expect("flush");
    let current = db.revision().expect("revision");
    let mut rng = rand::rng();
    for round in 0..args.runs {
        let (mut now, mut at_current, mut past) = (
            Vec::with_capacity(args.reads),
            Vec::with_capacity(args.reads),
            Vec::with_capacity(args.reads),
        );
        for _ in 0..args.reads {
            let k = &names[rng.random_range(0..args.keys)];
            let t = Instant::now();
            let a = db.get(k).expect("get");
            now.push(t.elapsed());
            let t = Instant::now();
            let b = db.get_at(k, current).expect("get_at current");
            at_current.push(t.elapsed());
            let t = Instant::now();
            let c = db.get_at(k, first).expect("get_at past");
            past.push(t.elapsed());
            assert_eq!(a, b, "the present read two ways");
            assert_eq!(c.expect("retained").version, 1, "the first version");
        }
        let p = |s: &mut Vec<Duration>| {
            s.sort_unstable();
            (quantile(s, 0.50).as_nanos(), quantile(s, 0.99).as_nanos())
        };
        let ((n50, n99), (c50, c99), (p50, p99)) = (p(&mut now), p(&mut at_current), p(&mut past));
        println!(
            "history past_read round={round} keys={} versions={} get_p50_ns={n50} get_p99_ns={n99} \
             get_at_current_p50_ns={c50} get_at_current_p99_ns={c99} get_at_past_p50_ns={p50} \
             get_at_past_p99_ns={p99} past_over_get={:.2} past_over_get_at_current={:.2}",
            args.keys,
            args.versions,
            p50 as f64 / n50 as f64,
            p50 as f64 / c50 as f64,
        );
    }
    db.close().expect("close");
}

fn open_file(path: &Path) -> Tenure {
    Tenure::builder()
        .path(path)
        .auto_compaction(AutoCompaction::Off)
        .open()
        .expect("open")
}

fn open(args: &Args, path: &Path) {
    if !path.exists() {
        let t = Instant::now();
        let db = Tenure::builder()
            .path(path)
            .durability(Durability::Buffered(FLUSH))
            .auto_compaction(AutoCompaction::Off)
            .open()
            .expect("create");
        populate(&db, &names(args.keys), args);
        db.close().expect("close");
        println!(
            "history open_build keys={} versions={} secs={:.1}",
            args.keys,
            args.versions,
            t.elapsed().as_secs_f64()
        );
    }
    let bytes = std::fs::metadata(path).expect("file").len();
    let versions = (args.keys * args.versions) as f64;
    for run in 0..args.runs {
        let t = Instant::now();
        let db = open_file(path);
        let took = t.elapsed();
        let revision = db.revision().expect("revision");
        let size = db.storage_size().expect("size");
        let t = Instant::now();
        db.close().expect("close");
        let closing = t.elapsed();
        println!(
            "history open run={run} keys={} versions={} revision={revision} open_s={:.3} \
             close_s={:.3} file_bytes={bytes} in_use_bytes={} bytes_per_version={:.1}",
            args.keys,
            args.versions,
            took.as_secs_f64(),
            closing.as_secs_f64(),
            size.in_use_bytes,
            bytes as f64 / versions,
        );
    }
    if !args.defragment {
        return;
    }
    let db = open_file(path);
    let size = db.defragment().expect("defragment");
    db.close().expect("close");
    println!(
        "history open_defragmented file_bytes={} in_use_bytes={} bytes_per_version={:.1}",
        size.file_bytes,
        size.in_use_bytes,
        size.file_bytes as f64 / versions,
    );
}

/// The most put latencies a putter keeps (16 bytes each): a `buffered` putter runs as fast as
/// the CPU allows for as long as the compaction takes, and unbounded samples once took 24 GB.
const MAX_SAMPLES: usize = 20_000_000;

/// Puts without pause until `stop`; the first `MAX_SAMPLES` puts' latencies and how many puts.
fn putter(db: Arc<Tenure>, stop: Arc<AtomicBool>) -> thread::JoinHandle<(Vec<Duration>, u64)> {
    thread::spawn(move || {
        let mut samples = Vec::new();
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let k = format!("putter/{:04}", i % 1000);
            let t = Instant::now();
            db.put(k, b"value-of-the-putter", None).expect("put");
            if samples.len() < MAX_SAMPLES {
                samples.push(t.elapsed());
            }
            i += 1;
        }
        (samples, i)
    })
}

fn compaction(args: &Args, path: &Path) {
    let names = names(args.keys);
    let t = Instant::now();
    let db = Tenure::builder()
        .path(path)
        .durability(Durability::Buffered(FLUSH))
        .auto_compaction(AutoCompaction::Off)
        .open()
        .expect("create");
    populate(&db, &names, args);
    db.close().expect("close");
    let built = t.elapsed();
    let durability = match args.putter.as_str() {
        "buffered" => Durability::Buffered(FLUSH),
        _ => Durability::Immediate,
    };
    let db = Arc::new(
        Tenure::builder()
            .path(path)
            .durability(durability)
            .auto_compaction(AutoCompaction::Off)
            .open()
            .expect("open"),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let p = putter(db.clone(), stop.clone());
    thread::sleep(Duration::from_secs_f64(args.secs));
    stop.store(true, Ordering::Relaxed);
    let (mut baseline, puts_before) = p.join().expect("putter");

    let stop = Arc::new(AtomicBool::new(false));
    let p = putter(db.clone(), stop.clone());
    let t = Instant::now();
    let to = db.revision().expect("revision");
    db.compact(to).expect("compact").expect("compaction taken");
    db.wait_compacted().expect("wait_compacted");
    let took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (mut during, puts_during) = p.join().expect("putter");
    let size = db.storage_size().expect("size");
    db.close().expect("close");
    println!(
        "history compaction putter={} keys={} versions={} removed={} build_s={:.1} compaction_s={:.3} \
         puts_before={} {} puts_during={} {} file_bytes={} in_use_bytes={}",
        args.putter,
        args.keys,
        args.versions,
        args.keys * (args.versions - 1),
        built.as_secs_f64(),
        took.as_secs_f64(),
        puts_before,
        summary_us("before", &mut baseline),
        puts_during,
        summary_us("during", &mut during),
        size.file_bytes,
        size.in_use_bytes,
    );
}
