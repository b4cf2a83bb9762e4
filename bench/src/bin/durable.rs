//! Durable throughput: `Durability::Immediate` (every call returns after its fsynced commit;
//! concurrent callers share commits). Each of `--threads` threads (default 1,8,64, run one
//! after another on a fresh file) loops for `--secs` seconds doing one op = `grant` followed by
//! a `put` of a key attached to that lease (two durable writes). Prints ops/s (grant+put pairs),
//! writes per commit and the mean time per commit.
//!
//! Before and after the engine runs it times the disk itself with what a log append does: a
//! 256-byte append into a preallocated, zero-filled, fsynced file in the same directory (as the
//! write-ahead log is), made durable by each way Linux offers (`--probe`, default all of them,
//! interleaved in rounds so a change of load hits each alike): `fdatasync` (pwrite then
//! fdatasync), `rwf_dsync` (one pwritev2 with RWF_DSYNC), `o_dsync` (pwrite
//! on an O_DSYNC descriptor), `o_direct` (O_DIRECT|O_DSYNC, the append rewrites its 4 KiB
//! block: what the log does where the file system takes O_DIRECT, else `fdatasync`). Each
//! mode's p50 gives a ceiling: one thread waits for two syncs per pair, so it cannot exceed
//! 1/(2 x p50) pairs/s (printed as `ceiling_pairs_per_s`).
//!
//! `--paths log,redb` (the default: both, back to back for each thread count) picks the commit
//! path: `log` = the write-ahead log (one durable append per commit, the default of the
//! engine), `redb` = `write_ahead_log(false)` (one durable redb transaction per commit).
//!
//! `cargo run --profile profiling -p tenure-bench --bin durable -- --threads 1,8,64 --secs 3`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use clap::Parser;
use tenure::{Durability, Tenure};
use tenure_bench::{parse_args, summary_us, Scratch};

#[derive(Parser)]
struct Args {
    /// Thread counts, one run each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [1, 8, 64])]
    threads: Vec<usize>,
    /// Seconds per run.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Where the files go [default: a temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Commit paths, each run per thread count (comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = ["log", "redb"], default_values = ["log", "redb"])]
    paths: Vec<String>,
    /// Disk probe modes (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = PROBES,
        default_values = PROBES,
    )]
    probe: Vec<String>,
}

/// The ways `--probe` makes an append durable.
const PROBES: [&str; 4] = ["fdatasync", "rwf_dsync", "o_dsync", "o_direct"];

/// Bytes appended per probe write: about one group commit of a few small writes.
const APPEND: usize = 256;
/// Size of the probe file (appends wrap around in it).
const PROBE_FILE: usize = 4 << 20;
/// Probe writes per mode and round, and rounds.
const PER_ROUND: usize = 100;
const ROUNDS: usize = 5;

/// A 4 KiB-aligned buffer (O_DIRECT needs one).
struct Aligned(*mut u8);

impl Aligned {
    fn new() -> Aligned {
        let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
        // SAFETY: a non-zero size; freed with the same layout in Drop.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!p.is_null(), "allocation");
        Aligned(p)
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: 4096 bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.0, 4096) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("layout");
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.0, layout) };
    }
}

/// One way of making an append durable, on its own preallocated probe file.
struct Probe {
    mode: String,
    file: File,
    offset: usize,
    buf: Aligned,
    lat: Vec<Duration>,
}

impl Probe {
    fn new(dir: &Path, mode: &str) -> Probe {
        let path = dir.join(format!("probe-{mode}"));
        {
            let f = File::create(&path).expect("probe file");
            f.write_all_at(&vec![0u8; PROBE_FILE], 0).expect("fill");
            f.sync_all().expect("sync");
        }
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        match mode {
            "fdatasync" | "rwf_dsync" => {}
            "o_dsync" => {
                o.custom_flags(libc::O_DSYNC);
            }
            "o_direct" => {
                o.custom_flags(libc::O_DSYNC | libc::O_DIRECT);
            }
            other => panic!("unknown --probe mode {other:?}"),
        }
        let file = o.open(&path).expect("open probe file");
        let _ = std::fs::remove_file(&path);
        Probe {
            mode: mode.to_string(),
            file,
            offset: 0,
            buf: Aligned::new(),
            lat: Vec::new(),
        }
    }

    /// Appends `APPEND` bytes and makes them durable; records the time taken.
    fn append(&mut self, n: u8) {
        if self.offset + APPEND > PROBE_FILE {
            self.offset = 0;
        }
        let at = self.offset;
        let block = at & !4095;
        let t = Instant::now();
        match self.mode.as_str() {
            "fdatasync" | "o_dsync" => {
                self.file
                    .write_all_at(&[n; APPEND], at as u64)
                    .expect("write");
                if self.mode == "fdatasync" {
                    self.file.sync_data().expect("fdatasync");
                }
            }
            "rwf_dsync" => {
                let data = [n; APPEND];
                let iov = libc::iovec {
                    iov_base: data.as_ptr() as *mut libc::c_void,
                    iov_len: APPEND,
                };
                // SAFETY: one valid iovec over `data`, which outlives the call.
                let r = unsafe {
                    libc::pwritev2(
                        self.file.as_raw_fd(),
                        &iov,
                        1,
                        at as libc::off_t,
                        libc::RWF_DSYNC,
                    )
                };
                assert_eq!(r, APPEND as isize, "pwritev2");
            }
            _ => {
                // O_DIRECT: rewrite the whole 4 KiB block that holds the append.
                let b = self.buf.bytes();
                b[at - block..at - block + APPEND].fill(n);
                self.file.write_all_at(b, block as u64).expect("write");
                if at - block + APPEND == 4096 {
                    b.fill(0);
                }
            }
        }
        self.lat.push(t.elapsed());
        self.offset += APPEND;
    }
}

/// Times a durable 256-byte append by each of `modes`, interleaved in rounds; prints one line
/// per mode (`when`: before or after the engine runs).
fn probe_disk(dir: &Path, modes: &[String], when: &str) {
    let mut probes: Vec<Probe> = modes.iter().map(|m| Probe::new(dir, m)).collect();
    for round in 0..ROUNDS {
        for p in &mut probes {
            for i in 0..PER_ROUND {
                p.append((round * PER_ROUND + i) as u8);
            }
        }
    }
    for p in &mut probes {
        let summary = summary_us("sync", &mut p.lat);
        let p50 = p.lat[p.lat.len() / 2].as_secs_f64();
        println!(
            "durable disk {when} mode={} append_bytes={APPEND} {summary} ceiling_pairs_per_s={:.0}",
            p.mode,
            1.0 / (2.0 * p50)
        );
    }
}

fn main() {
    let args: Args = parse_args(include_str!("durable.rs"));
    let (threads, paths, secs, modes) = (args.threads, args.paths, args.secs, args.probe);
    let scratch = Scratch::new(args.dir);

    probe_disk(&scratch.dir, &modes, "before");
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
            "durable path={commit_path} threads={t} ops={ops} ops_per_s={:.0} writes_per_s={:.0} commits={commits} writes_per_commit={:.1} us_per_commit={:.1}",
            ops as f64 / elapsed,
            2.0 * ops as f64 / elapsed,
            2.0 * ops as f64 / commits.max(1) as f64,
            elapsed * 1e6 / commits.max(1) as f64,
        );
    }
    probe_disk(&scratch.dir, &modes, "after");
}
