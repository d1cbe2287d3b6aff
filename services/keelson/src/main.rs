//! `keelson`: one binary for the whole mesh. Each subcommand starts one
//! service (or all of them, `all-in-one`) or runs an operator command.

mod cli;
mod commands;
mod memory;
mod options;
mod settings;

use std::process::ExitCode;

use clap::Parser as _;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keelson: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(commands::run(cli));
    // Every server has stopped by now; what is left on the blocking pool
    // (a database driver's worker thread, a file read) must not hold the
    // exit back.
    runtime.shutdown_timeout(EXIT_GRACE);
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("keelson: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// How long the exit waits for blocking work left behind.
const EXIT_GRACE: std::time::Duration = std::time::Duration::from_millis(200);
