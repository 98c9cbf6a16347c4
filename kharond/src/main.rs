//! `kharond`: flags → logging → [`kharond::start`] on a runtime → one line and an exit code.
//!
//! A startup problem is one line on stderr and a non-zero exit code, never a panic or a trace;
//! which code is [`kharond::Error::exit_code`]'s choice.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use kharond::{Cli, process};

/// How long the runtime may take to stop its tasks after the daemon returned (connections had
/// their drain already).
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(dir) = &cli.man_pages {
        return process::man_page::run(Cli::command(), dir);
    }
    process::logging::init(cli.verbose);
    process::malloc::tune();
    let outcome = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => {
            let outcome = runtime.block_on(kharond::start(&cli));
            // Dropping the runtime would wait for every blocking task, including a reload stuck on
            // a hung file; what is left after the drain is not worth waiting for.
            runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
            outcome
        }
        Err(e) => Err(kharond::Error::Runtime(e)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("kharond: {}", kharon_common::errors::shown(&error));
            ExitCode::from(error.exit_code())
        }
    }
}
