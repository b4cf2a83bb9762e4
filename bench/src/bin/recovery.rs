//! Open / recovery time: a file with `--leases` leases (default 1 000 000) and as many keys,
//! one per lease, built with `Durability::Buffered(100 ms)` and closed; then the time of
//! `Tenure::builder().path(..).open()` (which reads every row and rebuilds the lessor, heap and
//! key index) is measured `--runs` times (default 3) and the median printed. The page cache is
//! warm (the file was just written); with `--drop-caches 1` the kernel's caches are dropped
//! before each open when this process may (root, writable /proc/sys/vm/drop_caches).
//!
//! `cargo run --profile profiling -p tenure-bench --bin recovery`

use std::time::{Duration, Instant};

use tenure::{Durability, Tenure};
use tenure_bench::{open, Args, Mode, Scratch};

fn main() {
    let args = Args::parse(&["leases", "runs", "drop-caches", "dir"]);
    let n: i64 = args.get("leases", 1_000_000);
    let runs: usize = args.get("runs", 3);
    let drop_caches: u32 = args.get("drop-caches", 0);
    let dir: String = args.get("dir", String::new());
    let scratch = Scratch::new((!dir.is_empty()).then(|| dir.into()));
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

    let mut times = Vec::new();
    for _ in 0..runs {
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
            .open()
            .expect("reopen");
        times.push(t.elapsed());
        let s = db.stats();
        assert_eq!(
            (s.leases, s.keys),
            (n as u64, n as u64),
            "everything recovered"
        );
        db.close().expect("close");
    }
    times.sort();
    println!(
        "recovery leases={n} keys={n} file_mb={:.1} build_s={:.1} open_median_ms={:.0} open_min_ms={:.0} open_max_ms={:.0} drop_caches={drop_caches}",
        size as f64 / 1048576.0,
        built.as_secs_f64(),
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
    );
}
