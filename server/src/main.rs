//! `tenure`: serve a tenure database over etcd's v3 gRPC API, or inspect one that is not open.
//!
//! Exit codes: 0 success; 1 the database could not be opened or served (already open, corrupt,
//! storage error, listener could not be bound); 2 bad command line (clap); 3 (`get`) no key
//! matched.

mod convert;
mod coordination;
mod inspect;
mod serve;
mod service;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The etcd API version `tenure serve` reports in Maintenance.Status (what clients check
/// features against).
pub const ETCD_API_VERSION: &str = "3.5.0";

#[derive(Parser)]
#[command(
    name = "tenure",
    version,
    about = "Serve a tenure database over etcd's v3 gRPC API, or inspect one offline",
    after_help = "Exit codes: 0 ok, 1 the database could not be opened or served, \
                  2 bad usage, 3 `get` found no key."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Own FILE and serve it to any etcd v3 client (etcdctl, Go clientv3, etcd-client, jetcd)
    Serve(serve::Args),
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Serve(args) => serve::run(args),
        Cmd::Leases { file, json } => inspect::leases(&file, json),
        Cmd::Get {
            file,
            key,
            prefix,
            json,
        } => inspect::get(&file, &key, prefix, json),
        Cmd::Dump { file } => inspect::dump(&file),
        Cmd::Stats { file, json } => inspect::stats(&file, json),
    }
}
