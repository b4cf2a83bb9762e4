//! The standalone `tenure` binary: the library's command line (see `lib.rs` for exit codes).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(tenure_server::main_with_args(std::env::args_os()))
}
