//! kharonctl: the command-line client of kharond (and, later, of Lieutenant and the clusters).
//!
//! # Layout
//! - [`cmd`]: one file per subcommand. [`daemon`]: the control-socket client (only user of tonic).
//! - [`context`]: merged settings handed to every subcommand. [`output`]: tables and JSON.

mod cmd;
mod context;
mod daemon;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kharon_shared::config::Overrides;

use crate::context::Context;

#[derive(Parser, Debug)]
#[command(
    name = "kharonctl",
    version,
    about = "Control kharond, the SOCKS5 proxy that routes cluster hosts through their SSH jump hosts",
    after_help = "Examples:\n  kharonctl status\n  kharonctl route api.c-example.vshnmanaged.net\n  \
        kharonctl route api.c-example.vshnmanaged.net -o json\n  kharonctl reload\n\n\
        Exit codes: 0 success; 1 the command failed; 2 bad usage or settings; 3 kharond is not running."
)]
struct Cli {
    /// kharond's control socket [env: KHARON_CONTROL_SOCKET] [default: $XDG_RUNTIME_DIR/kharon/kharond.sock]
    #[arg(long, global = true, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Config file (TOML) [env: KHARON_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the daemon, its listener, inventory age and the health of every jump host chain
    Status(cmd::status::Args),
    /// Make kharond re-read its inventory and ssh config (connections stay up)
    Reload(cmd::reload::Args),
    /// Show how a host would be routed and which rule decided
    Route(cmd::route::Args),
}

/// Exit codes; listed in `--help`.
mod exit {
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const NOT_RUNNING: u8 = 3;
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let overrides = Overrides {
        config: cli.config.clone(),
        control_socket: cli.control_socket.clone(),
        ..Default::default()
    };
    let ctx = match Context::load(&overrides) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("kharonctl: {e}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kharonctl: cannot start the async runtime: {e}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Status(args) => cmd::status::run(args, &ctx).await,
            Command::Reload(args) => cmd::reload::run(args, &ctx).await,
            Command::Route(args) => cmd::route::run(args, &ctx).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kharonctl: {e:#}");
            if matches!(e.downcast_ref::<daemon::Error>(), Some(daemon::Error::NotRunning { .. })) {
                ExitCode::from(exit::NOT_RUNNING)
            } else {
                ExitCode::from(exit::FAILED)
            }
        }
    }
}
