//! Shared helpers of the tenure benchmark binaries: argument parsing (clap, with the binary's
//! doc comment as its help), engine modes, percentiles
//! and resident memory. Each binary prints one `key=value` line per result; BENCHMARKS.md says
//! which command produced which figure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ColorChoice, Parser, ValueEnum};
use tenure::{Clock, Durability, Tenure};

/// Where an engine keeps its data (`--mode memory|buffered|immediate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// No file.
    Memory,
    /// A file, `Durability::Buffered(100 ms)`.
    Buffered,
    /// A file, `Durability::Immediate` (fsync per group commit).
    Immediate,
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

/// Why the command line was not taken: `--help`, or a mistake (one line).
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// `--help` or `-h`: the usage text.
    Help(String),
    /// A mistake, said in one line.
    Bad(String),
}

/// Parses `std::env::args()` into the binary's options `A` (clap). `source` is the binary's
/// own source (`include_str!` of its file): its `//!` comment is the help. `--help` prints it
/// and exits 0; an unknown option or a bad value prints one line (`NAME: what`) on stderr and
/// exits 2, with no usage dump, panic or backtrace.
pub fn parse_args<A: Parser>(source: &str) -> A {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let program = argv.first().map_or_else(
        || "bench".to_string(),
        |p| {
            Path::new(p)
                .file_name()
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        },
    );
    match try_parse_args(source, argv) {
        Ok(a) => a,
        Err(Refused::Help(usage)) => {
            println!("{}", usage.trim_end());
            std::process::exit(0)
        }
        Err(Refused::Bad(why)) => {
            eprintln!("{program}: {why}");
            std::process::exit(2)
        }
    }
}

/// [`parse_args`] of `argv` (the program name first), without exiting.
pub fn try_parse_args<A: Parser>(
    source: &str,
    argv: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<A, Refused> {
    // The last of a repeated option wins, as in the shell scripts that call these binaries.
    let mut cmd = A::command()
        .about(doc_comment(source))
        .args_override_self(true)
        .color(ColorChoice::Never);
    let options: Vec<String> = cmd
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|&l| l != "help")
        .map(|l| format!("--{l}"))
        .collect();
    cmd.try_get_matches_from_mut(argv)
        .and_then(|m| A::from_arg_matches(&m))
        .map_err(|e| match e.kind() {
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Refused::Help(e.to_string()),
            kind => {
                // clap's first paragraph says what is wrong (and the possible values); the
                // rest is tips and a usage dump.
                let text = e.to_string();
                let first: Vec<&str> = text
                    .lines()
                    .map(str::trim)
                    .take_while(|l| !l.is_empty())
                    .collect();
                let first = first.join(" ");
                let what = first.strip_prefix("error: ").unwrap_or(&first);
                Refused::Bad(match kind {
                    ErrorKind::UnknownArgument => {
                        format!("{what} (options: {}; --help)", options.join(" "))
                    }
                    _ => format!("{what} (--help)"),
                })
            }
        })
}

/// The `//!` comment at the top of `source`, Markdown as written.
fn doc_comment(source: &str) -> String {
    let mut out = String::new();
    for line in source.lines().map_while(|l| l.strip_prefix("//!")) {
        out.push_str(line.strip_prefix(' ').unwrap_or(line));
        out.push('\n');
    }
    out.trim_end().to_string()
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
            assert_eq!(Mode::from_str(&m.to_string(), false), Ok(m));
        }
        assert!(Mode::from_str("disk", false).is_err());
    }

    const SOURCE: &str = "//! Does a thing with `--n` things.\n//!\n//! `cargo run`\n\nuse x;\n";

    #[derive(Debug, Parser)]
    struct Options {
        #[arg(long, default_value_t = 1)]
        n: u32,
        #[arg(long, value_enum, default_value_t = Mode::Memory)]
        mode: Mode,
        #[arg(long, value_delimiter = ',', value_parser = ["a", "b"], default_values = ["a"])]
        pick: Vec<String>,
    }

    fn args(v: &[&str]) -> Result<Options, Refused> {
        try_parse_args(SOURCE, std::iter::once("prog").chain(v.iter().copied()))
    }

    #[test]
    fn help_is_the_doc_comment_and_the_options() {
        for help in ["--help", "-h"] {
            let Err(Refused::Help(u)) = args(&["--n", "3", help]) else {
                panic!("no usage")
            };
            assert!(
                u.starts_with("Does a thing with `--n` things.\n\n`cargo run`\n"),
                "{u}"
            );
            assert!(u.contains("--n <N>") && u.contains("--mode <MODE>"), "{u}");
            assert!(!u.contains("use x"), "{u}");
        }
    }

    #[test]
    fn mistakes_are_one_line_errors() {
        for bad in [
            &["--bogus", "1"][..],
            &["n"],
            &["--n"],
            &["--n", "x"],
            &["--mode", "disk"],
            &["--pick", "a,c"],
        ] {
            match args(bad) {
                Err(Refused::Bad(m)) => assert!(!m.contains('\n') && !m.is_empty(), "{m}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
        let Err(Refused::Bad(m)) = args(&["--bogus", "1"]) else {
            panic!("accepted")
        };
        assert!(
            m.contains("--bogus") && m.contains("--n --mode --pick"),
            "{m}"
        );
        let Err(Refused::Bad(m)) = args(&["--pick", "a,c"]) else {
            panic!("accepted")
        };
        assert!(
            m.contains("'c'") && m.contains("[possible values: a, b]"),
            "{m}"
        );
    }

    #[test]
    fn defaults_lists_and_the_last_of_a_repeated_option() {
        let a = args(&[]).unwrap();
        assert_eq!(
            (a.n, a.mode, a.pick),
            (1, Mode::Memory, vec!["a".to_string()])
        );
        let a = args(&[
            "--n",
            "2",
            "--n",
            "7",
            "--pick",
            "b,a",
            "--mode",
            "immediate",
        ])
        .unwrap();
        assert_eq!(
            (a.n, a.mode, a.pick),
            (7, Mode::Immediate, vec!["b".to_string(), "a".to_string()])
        );
    }
}
