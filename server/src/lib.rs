//! `tenure`: serve a tenure database over etcd's v3 gRPC API, or inspect one that is not open.
//!
//! The command is this library's [`main_with_args`], so the same code runs as the standalone
//! binary (`src/main.rs`) and inside the Python wheel (`tenure` / `python -m tenure`).
//!
//! Exit codes: 0 success; 1 the database could not be opened or served (already open, corrupt,
//! storage error, listener could not be bound), or a file could not be read or written; 2 bad
//! command line (clap); 3 (`get`) no key matched; 4 (`snapshot restore|status`) the saved
//! snapshot's checksum does not match.

mod auth;
mod authority;
mod backup;
mod bounds;
mod decode_refusals;
mod gateway;
mod hpack;
mod http;
mod inspect;
mod maintenance;
mod max_connections;
mod metrics;
mod metrics_grpc;
mod serve;
mod snapshot_budget;
mod tls;

// etcd's v3 services live in the core (feature `serve`, shared mode serves them too); the
// server's own files reach them by their old paths.
use tenure::etcd::serve::{convert, coordination, errors, service, watch};

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The etcd API version `tenure serve` reports in Maintenance.Status (what clients check
/// features against).
pub use tenure::etcd::serve::maintenance::ETCD_API_VERSION;

#[derive(Parser)]
#[command(
    name = "tenure",
    version,
    about = "Serve a tenure database over etcd's v3 gRPC API, or inspect one offline",
    after_help = "Exit codes: 0 ok, 1 the database could not be opened or served (or a file \
                  could not be read or written), 2 bad usage, 3 `get` found no key, \
                  4 a saved snapshot's checksum does not match."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Own FILE and serve it to any etcd v3 client (etcdctl, Go clientv3, etcd-client, jetcd)
    Serve(Box<serve::Args>),
    /// List the leases of a database that is not open: ID, TTL, attached keys
    Leases {
        /// The database file
        file: PathBuf,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Print a key (or every key under a prefix) of a database that is not open
    Get {
        /// The database file
        file: PathBuf,
        /// The key, or the prefix with --prefix
        key: String,
        /// Every key starting with KEY
        #[arg(long)]
        prefix: bool,
        /// The keys as they were at this revision (etcdctl's --rev; 0: the current one)
        #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
        rev: i64,
        /// One JSON object per line
        #[arg(long)]
        json: bool,
    },
    /// Every key and lease of a database that is not open, as JSON lines
    Dump {
        /// The database file
        file: PathBuf,
    },
    /// Counts and revision of a database that is not open
    Stats {
        /// The database file
        file: PathBuf,
        /// One JSON object
        #[arg(long)]
        json: bool,
    },
    /// Back up a database that is not open (FILE OUT), or restore or inspect a saved snapshot
    Snapshot(SnapshotCmd),
}

/// `tenure snapshot FILE OUT`, `tenure snapshot restore SAVED OUT`, `tenure snapshot status SAVED`.
#[derive(clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "FILE OUT writes a consistent copy of FILE (a database no process has open; \
                  for a served one use `etcdctl snapshot save`) to OUT, atomically.\n\
                  A saved snapshot is a tenure file or a file written by `etcdctl snapshot save` \
                  from `tenure serve` (its trailing SHA-256 is checked and stripped).\n\
                  Exit codes: 0 ok, 1 a file could not be read or written (or is not a tenure \
                  snapshot), 2 bad usage, 4 checksum mismatch."
)]
struct SnapshotCmd {
    #[command(subcommand)]
    action: Option<SnapshotAction>,
    /// The database file (no process may have it open)
    #[arg(required = true)]
    file: Option<PathBuf>,
    /// Where to write the copy (replaced atomically if it exists)
    #[arg(required = true)]
    out: Option<PathBuf>,
    /// One JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum SnapshotAction {
    /// Turn a saved snapshot into a database file OUT (which must not exist)
    Restore {
        /// The saved snapshot
        saved: PathBuf,
        /// The database file to create
        out: PathBuf,
    },
    /// Revision, keys, leases and size of a saved snapshot (its checksum is checked)
    Status {
        /// The saved snapshot
        saved: PathBuf,
        /// One JSON object
        #[arg(long)]
        json: bool,
    },
}

/// Runs the `tenure` command line with `args` as `std::env::args_os()` gives them (the program
/// name first) and returns the exit code. It never exits the process (usage errors and `--help`
/// print and return their code), so an embedding host such as the Python wheel gets control
/// back; stdout is flushed before it returns.
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let code = match Cli::try_parse_from(args) {
        Ok(cli) => code_of(run(cli)),
        Err(e) => {
            // Help and version go to stdout with 0; usage errors to stderr with 2.
            let _ = e.print();
            u8::try_from(e.exit_code()).unwrap_or(2)
        }
    };
    let _ = std::io::stdout().flush();
    code
}

/// The number inside `code`: std has no getter, but every code here was made from a `u8`.
fn code_of(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|&n| ExitCode::from(n) == code)
        .unwrap_or(1)
}

fn run(cli: Cli) -> ExitCode {
    match cli.cmd {
        Cmd::Serve(args) => serve::run(*args),
        Cmd::Leases { file, json } => inspect::leases(&file, json),
        Cmd::Get {
            file,
            key,
            prefix,
            rev,
            json,
        } => inspect::get(&file, &key, prefix, rev, json),
        Cmd::Dump { file } => inspect::dump(&file),
        Cmd::Stats { file, json } => inspect::stats(&file, json),
        Cmd::Snapshot(s) => match (s.action, s.file, s.out) {
            (Some(SnapshotAction::Restore { saved, out }), _, _) => backup::restore(&saved, &out),
            (Some(SnapshotAction::Status { saved, json }), _, _) => backup::status(&saved, json),
            (None, Some(file), Some(out)) => backup::snapshot(&file, &out, s.json),
            // clap requires FILE and OUT without a subcommand.
            (None, _, _) => ExitCode::from(2),
        },
    }
}
