//! Shared helpers of the tenure benchmark binaries: argument parsing, engine modes, percentiles
//! and resident memory. Each binary prints one `key=value` line per result; BENCHMARKS.md says
//! which command produced which figure.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use tenure::{Clock, Durability, Tenure};

/// Where an engine keeps its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// No file.
    Memory,
    /// A file, `Durability::Buffered(100 ms)`.
    Buffered,
    /// A file, `Durability::Immediate` (fsync per group commit).
    Immediate,
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "memory" => Ok(Mode::Memory),
            "buffered" => Ok(Mode::Buffered),
            "immediate" => Ok(Mode::Immediate),
            other => Err(format!(
                "unknown mode {other:?} (memory | buffered | immediate)"
            )),
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Memory => "memory",
            Mode::Buffered => "buffered",
            Mode::Immediate => "immediate",
        })
    }
}

/// The buffered flush interval every benchmark uses.
pub const FLUSH: Duration = Duration::from_millis(100);

/// Opens an engine in `mode` (the file is `path`, ignored in memory) on `clock` if given.
pub fn open(mode: Mode, path: &Path, clock: Option<Arc<dyn Clock>>) -> Tenure {
    let mut b = Tenure::builder();
    b = match mode {
        Mode::Memory => b.in_memory(),
        Mode::Buffered => b.path(path).durability(Durability::Buffered(FLUSH)),
        Mode::Immediate => b.path(path).durability(Durability::Immediate),
    };
    if let Some(c) = clock {
        b = b.clock(c);
    }
    b.open().expect("open the engine")
}

/// `--name value` options with defaults; unknown options are refused.
#[derive(Debug)]
pub struct Args {
    pairs: Vec<(String, String)>,
}

impl Args {
    /// Parses `std::env::args()`; `known` lists the accepted option names (without `--`).
    pub fn parse(known: &[&str]) -> Args {
        let mut pairs = Vec::new();
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            let Some(name) = a.strip_prefix("--") else {
                panic!("unexpected argument {a:?}; options: {known:?}");
            };
            assert!(
                known.contains(&name),
                "unknown option --{name}; options: {known:?}"
            );
            let v = it
                .next()
                .unwrap_or_else(|| panic!("--{name} needs a value"));
            pairs.push((name.to_string(), v));
        }
        Args { pairs }
    }

    /// The option's value, or `default`.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> T
    where
        T::Err: std::fmt::Debug,
    {
        match self.pairs.iter().rev().find(|(n, _)| n == name) {
            Some((_, v)) => v.parse().unwrap_or_else(|e| panic!("--{name} {v}: {e:?}")),
            None => default,
        }
    }

    /// A comma-separated list option.
    pub fn list<T>(&self, name: &str, default: &[T]) -> Vec<T>
    where
        T: FromStr + Clone,
        T::Err: std::fmt::Debug,
    {
        match self.pairs.iter().rev().find(|(n, _)| n == name) {
            Some((_, v)) => v
                .split(',')
                .map(|x| x.parse().unwrap_or_else(|e| panic!("--{name} {x}: {e:?}")))
                .collect(),
            None => default.to_vec(),
        }
    }
}

/// The `q`-quantile (0..=1) of sorted samples, nearest rank.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    assert!(!sorted.is_empty(), "no samples");
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// p50 / p99 / max of `samples` (sorted in place), in microseconds, as `key=value` pairs.
pub fn summary_us(prefix: &str, samples: &mut [Duration]) -> String {
    samples.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    format!(
        "{prefix}_p50_us={:.1} {prefix}_p99_us={:.1} {prefix}_max_us={:.1}",
        us(quantile(samples, 0.50)),
        us(quantile(samples, 0.99)),
        us(*samples.last().expect("non-empty")),
    )
}

/// Resident set size of this process, bytes (`VmRSS` of Linux `/proc/self/status`).
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS in /proc/self/status")
        * 1024
}

/// A scratch directory for benchmark files: `--dir` if given, else a new temporary one.
#[derive(Debug)]
pub struct Scratch {
    _tmp: Option<tempfile::TempDir>,
    /// The directory.
    pub dir: PathBuf,
}

impl Scratch {
    /// Uses `dir` (created if missing) or a temporary directory removed on drop.
    pub fn new(dir: Option<PathBuf>) -> Scratch {
        match dir {
            Some(d) => {
                std::fs::create_dir_all(&d).expect("create the scratch dir");
                Scratch { _tmp: None, dir: d }
            }
            None => {
                let t = tempfile::tempdir().expect("tempdir");
                Scratch {
                    dir: t.path().to_path_buf(),
                    _tmp: Some(t),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_uses_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(quantile(&v, 0.5), Duration::from_millis(50));
        assert_eq!(quantile(&v, 0.99), Duration::from_millis(99));
        assert_eq!(quantile(&v, 1.0), Duration::from_millis(100));
        assert_eq!(quantile(&v[..1], 0.99), Duration::from_millis(1));
    }

    #[test]
    fn modes_parse_and_print_round_trip() {
        for m in [Mode::Memory, Mode::Buffered, Mode::Immediate] {
            assert_eq!(m.to_string().parse::<Mode>(), Ok(m));
        }
        assert!("disk".parse::<Mode>().is_err());
    }
}
