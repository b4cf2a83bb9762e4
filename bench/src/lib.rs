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

/// `--name value` options with defaults. `--help` prints the binary's doc comment and exits 0;
/// an unknown option or a bad value prints one line and exits 2 (no panic, no backtrace).
#[derive(Debug)]
pub struct Args {
    pairs: Vec<(String, String)>,
}

/// Why the command line was not taken: `--help`, or a mistake (one line).
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `--help` or `-h`: the usage text.
    Help(String),
    /// A mistake, said in one line.
    Bad(String),
}

impl Args {
    /// Parses `std::env::args()`; `source` is the binary's own source (`include_str!` of its
    /// file: its `//!` comment is the usage) and `known` lists the accepted option names
    /// (without `--`).
    pub fn parse(source: &str, known: &[&str]) -> Args {
        let mut argv = std::env::args();
        let program = argv.next().unwrap_or_default();
        match Args::from_args(source, known, argv) {
            Ok(a) => a,
            Err(Refused::Help(usage)) => {
                print!("{usage}");
                std::process::exit(0)
            }
            Err(Refused::Bad(why)) => fail(&program, &why),
        }
    }

    /// [`Args::parse`] of `args` (without the program name), without exiting.
    pub fn from_args(
        source: &str,
        known: &[&str],
        args: impl IntoIterator<Item = String>,
    ) -> Result<Args, Refused> {
        let options = || {
            let names: Vec<String> = known.iter().map(|k| format!("--{k}")).collect();
            names.join(" ")
        };
        let mut pairs = Vec::new();
        let mut it = args.into_iter();
        while let Some(a) = it.next() {
            if a == "--help" || a == "-h" {
                return Err(Refused::Help(usage(source, known)));
            }
            let name = match a.strip_prefix("--") {
                Some(name) if known.contains(&name) => name,
                Some(_) => {
                    return Err(Refused::Bad(format!(
                        "unknown option {a:?} (options: {}; --help)",
                        options()
                    )))
                }
                None => {
                    return Err(Refused::Bad(format!(
                        "unexpected argument {a:?} (options: {}; --help)",
                        options()
                    )))
                }
            };
            let Some(v) = it.next() else {
                return Err(Refused::Bad(format!("--{name} needs a value")));
            };
            pairs.push((name.to_string(), v));
        }
        Ok(Args { pairs })
    }

    fn value(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The option's value, or `default`; a value that does not parse is an error naming it.
    pub fn try_get<T: FromStr>(&self, name: &str, default: T) -> Result<T, String>
    where
        T::Err: std::fmt::Display,
    {
        match self.value(name) {
            Some(v) => v.parse().map_err(|e| format!("--{name} {v:?}: {e}")),
            None => Ok(default),
        }
    }

    /// A comma-separated list option, or `default`.
    pub fn try_list<T>(&self, name: &str, default: &[T]) -> Result<Vec<T>, String>
    where
        T: FromStr + Clone,
        T::Err: std::fmt::Display,
    {
        match self.value(name) {
            Some(v) => v
                .split(',')
                .map(|x| x.parse().map_err(|e| format!("--{name} {x:?}: {e}")))
                .collect(),
            None => Ok(default.to_vec()),
        }
    }

    /// A comma-separated list option whose entries must each be one of `allowed`.
    pub fn try_choices(
        &self,
        name: &str,
        default: &[&str],
        allowed: &[&str],
    ) -> Result<Vec<String>, String> {
        let v: Vec<String> = self.try_list(
            name,
            &default.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
        )?;
        match v.iter().find(|x| !allowed.contains(&x.as_str())) {
            Some(x) => Err(format!(
                "--{name} {x:?}: not one of {}",
                allowed.join(" | ")
            )),
            None => Ok(v),
        }
    }

    /// [`Args::try_choices`] of one value, exiting with status 2 on a bad value.
    pub fn choice(&self, name: &str, default: &str, allowed: &[&str]) -> String {
        match self.value(name) {
            Some(v) if v.contains(',') || !allowed.contains(&v) => fail_here(&format!(
                "--{name} {v:?}: not one of {}",
                allowed.join(" | ")
            )),
            Some(v) => v.to_string(),
            None => default.to_string(),
        }
    }

    /// [`Args::try_choices`], exiting with status 2 on a bad value.
    pub fn choices(&self, name: &str, default: &[&str], allowed: &[&str]) -> Vec<String> {
        self.try_choices(name, default, allowed)
            .unwrap_or_else(|e| fail_here(&e))
    }

    /// [`Args::try_get`], exiting with status 2 on a bad value.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> T
    where
        T::Err: std::fmt::Display,
    {
        self.try_get(name, default)
            .unwrap_or_else(|e| fail_here(&e))
    }

    /// [`Args::try_list`], exiting with status 2 on a bad value.
    pub fn list<T>(&self, name: &str, default: &[T]) -> Vec<T>
    where
        T: FromStr + Clone,
        T::Err: std::fmt::Display,
    {
        self.try_list(name, default)
            .unwrap_or_else(|e| fail_here(&e))
    }
}

/// The usage: the `//!` comment at the top of `source` (Markdown as written), then the options.
fn usage(source: &str, known: &[&str]) -> String {
    let mut out = String::new();
    for line in source.lines().map_while(|l| l.strip_prefix("//!")) {
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    let names: Vec<String> = known.iter().map(|k| format!("--{k} VALUE")).collect();
    out.push_str(&format!(
        "\nOptions: {} (--help: this text)\n",
        names.join(", ")
    ));
    out
}

fn fail(program: &str, why: &str) -> ! {
    let name = Path::new(program)
        .file_name()
        .map_or_else(|| program.into(), |n| n.to_string_lossy());
    eprintln!("{name}: {why}");
    std::process::exit(2)
}

fn fail_here(why: &str) -> ! {
    fail(&std::env::args().next().unwrap_or_default(), why)
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

    const SOURCE: &str = "//! Does a thing with `--n` things.\n//!\n//! `cargo run`\n\nuse x;\n";

    fn args(v: &[&str]) -> Result<Args, Refused> {
        Args::from_args(SOURCE, &["n", "mode"], v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn help_is_the_doc_comment_and_the_options() {
        let Err(Refused::Help(u)) = args(&["--n", "3", "--help"]) else {
            panic!("no usage")
        };
        assert!(
            u.starts_with("Does a thing with `--n` things.\n\n`cargo run`\n"),
            "{u}"
        );
        assert!(u.contains("--n VALUE, --mode VALUE"), "{u}");
        assert!(!u.contains("use x"), "{u}");
        assert!(matches!(args(&["-h"]), Err(Refused::Help(_))));
    }

    #[test]
    fn mistakes_are_one_line_errors() {
        for bad in [&["--bogus", "1"][..], &["n"], &["--n"]] {
            match args(bad) {
                Err(Refused::Bad(m)) => assert!(!m.contains('\n') && !m.is_empty(), "{m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let a = args(&["--n", "x", "--mode", "disk"]).unwrap();
        let e = a.try_get::<u32>("n", 1).unwrap_err();
        assert!(e.starts_with("--n \"x\": ") && !e.contains('\n'), "{e}");
        assert!(a
            .try_get::<Mode>("mode", Mode::Memory)
            .unwrap_err()
            .contains("unknown mode"));
        assert!(a.try_list::<u32>("n", &[1]).is_err());
        let c = args(&["--mode", "a,c"]).unwrap();
        assert!(c
            .try_choices("mode", &["a"], &["a", "b"])
            .unwrap_err()
            .contains("\"c\": not one of a | b"));
        assert_eq!(
            c.try_choices("n", &["a"], &["a"]),
            Ok(vec!["a".to_string()])
        );
        assert_eq!(args(&[]).unwrap().try_get("n", 7u32), Ok(7));
    }
}
