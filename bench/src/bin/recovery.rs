//! Open / recovery time: a file with `--leases` leases (default 1 000 000) and as many keys,
//! one per lease, built with `Durability::Buffered(100 ms)` and closed; then the time of
//! `Tenure::builder().path(..).open()` (which reads every row and rebuilds the lessor, heap and
//! key index) is measured `--runs` times (default 3) and the median printed. The page cache is
//! warm (the file was just written); with `--drop-caches 1` the kernel's caches are dropped
//! before each open when this process may (root, writable /proc/sys/vm/drop_caches).
//!
//! Then the same after a crash with a full log interval to replay: the file is opened with the
//! write-ahead log (one 2 MiB region: as much as the two default 1 MiB regions can hold
//! unapplied), `--log-pairs` grant+put pairs (default 9 900: 19 800 records of 104 bytes, 98 % of the region;
//! the bench checks that none was checkpointed, so all are replayed) are
//! acknowledged with `Durability::Immediate`, and the file and its log are copied while the
//! engine is open: what a kill -9 leaves. Each run opens a fresh copy of that image (redb's
//! repair, then the replay of every record) and the median is printed as `crash_open_*`.
//!
//! `cargo run --profile profiling -p tenure-bench --bin recovery`

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use tenure::{Durability, Tenure};
use tenure_bench::{open, parse_args, Mode, Scratch};

#[derive(Parser)]
struct Args {
    /// Leases (one key each) in the file.
    #[arg(long, default_value_t = 1_000_000)]
    leases: i64,
    /// Opens timed (the median is printed).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// 1: drop the kernel's caches before each open (where this process may).
    #[arg(long, default_value_t = 0)]
    drop_caches: u32,
    /// Where the files go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Grant+put pairs in the log replayed after a crash.
    #[arg(long, default_value_t = 9_900)]
    log_pairs: i64,
}

fn main() {
    let args: Args = parse_args(include_str!("recovery.rs"));
    let (pairs, n, runs, drop_caches) = (args.log_pairs, args.leases, args.runs, args.drop_caches);
    let scratch = Scratch::new(args.dir);
    let path = scratch.dir.join("recovery.tenure");
    let _ = std::fs::remove_file(&path);

    let t = Instant::now();
    {
        let db = open(Mode::Buffered, &path, None);
        for id in 1..=n {
            let lease = db.grant(Duration::from_secs(36_000)).expect("grant");
            db.put(format!("svc/{id:010}"), "10.0.0.1:8080", Some(lease))
                .expect("put");
        }
        db.close().expect("close");
    }
    let built = t.elapsed();
    let size = std::fs::metadata(&path).expect("file").len();

    // Each run opens the file once with the write-ahead log (the default: the open commits the
    // log's new id) and once without it (`write_ahead_log(false)`: the open only reads).
    let (mut times, mut times_no_log) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for log in [true, false] {
            if drop_caches == 1 {
                let _ = std::process::Command::new("sync").status();
                if std::fs::write("/proc/sys/vm/drop_caches", "3").is_err() {
                    eprintln!("recovery: cannot drop caches here; measuring with a warm cache");
                }
            }
            let t = Instant::now();
            let db = Tenure::builder()
                .path(&path)
                .durability(Durability::Buffered(tenure_bench::FLUSH))
                .write_ahead_log(log)
                .open()
                .expect("reopen");
            if log { &mut times } else { &mut times_no_log }.push(t.elapsed());
            let s = db.stats();
            assert_eq!(
                (s.leases, s.keys),
                (n as u64, n as u64),
                "everything recovered"
            );
            db.close().expect("close");
        }
    }
    times.sort();
    times_no_log.sort();
    let ms = |t: &[Duration], i: usize| t[i].as_secs_f64() * 1e3;
    println!(
        "recovery leases={n} keys={n} file_mb={:.1} build_s={:.1} open_median_ms={:.0} open_min_ms={:.0} open_max_ms={:.0} open_no_log_median_ms={:.0} open_no_log_min_ms={:.0} drop_caches={drop_caches}",
        size as f64 / 1048576.0,
        built.as_secs_f64(),
        ms(&times, times.len() / 2),
        ms(&times, 0),
        ms(&times, times.len() - 1),
        ms(&times_no_log, times_no_log.len() / 2),
        ms(&times_no_log, 0),
    );

    let image = scratch.dir.join("recovery-crash.tenure");
    let log_bytes = {
        let db = Tenure::builder()
            .path(&path)
            .log_region_size(2 << 20)
            .open()
            .expect("open with the log");
        for id in 0..pairs {
            let lease = db.grant(Duration::from_secs(36_000)).expect("grant");
            db.put(format!("crash/{id:010}"), "10.0.0.1:8080", Some(lease))
                .expect("put");
        }
        std::fs::copy(&path, &image).expect("copy the file");
        std::fs::copy(wal(&path), wal(&image)).expect("copy the log");
        db.close().expect("close");
        let (bytes, records) = used_log(&std::fs::read(wal(&image)).expect("read the log"));
        assert_eq!(
            records,
            2 * pairs as usize,
            "every record is in the first region, none checkpointed: lower --log-pairs"
        );
        bytes
    };
    let copy = scratch.dir.join("recovery-crash-run.tenure");
    let mut times = Vec::new();
    for _ in 0..runs {
        std::fs::copy(&image, &copy).expect("copy the image");
        std::fs::copy(wal(&image), wal(&copy)).expect("copy the image's log");
        let t = Instant::now();
        let db = Tenure::open(&copy).expect("open the crash image");
        times.push(t.elapsed());
        let s = db.stats();
        let total = (n + pairs) as u64;
        assert_eq!((s.leases, s.keys), (total, total), "everything recovered");
        db.close().expect("close");
    }
    times.sort();
    println!(
        "recovery crash_image leases={} log_records={} log_kib={} crash_open_median_ms={:.0} crash_open_min_ms={:.0} crash_open_max_ms={:.0}",
        n + pairs,
        2 * pairs,
        log_bytes / 1024,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
    );
}

/// The log beside a database file.
fn wal(path: &std::path::Path) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".wal");
    p.into()
}

/// Bytes and number of records at the start of a log's first region (format in
/// docs/DESIGN.md: a 4 KiB header; each record a u32 length, 12 more bytes of head, the
/// payload, a u32 crc, padding).
fn used_log(log: &[u8]) -> (usize, usize) {
    let (mut pos, mut n) = (4096, 0);
    while pos + 4 <= log.len() {
        let len = u32::from_le_bytes(log[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        if len == 0 {
            break;
        }
        pos += (16 + len + 4 + 7) & !7;
        n += 1;
    }
    (pos - 4096, n)
}
