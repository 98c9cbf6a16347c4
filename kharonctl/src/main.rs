//! kharonctl: the command-line client of kharond, of Lieutenant (login, the inventory) and of the
//! clusters themselves (kubeconfigs, shells, OpenShift logins, emergency credentials).
//!
//! # Layout
//! - [`cmd`]: one file per command (`cmd/clusters/`: one per action of `clusters NAME`, and what
//!   only those actions share); commands import nothing from each other, what several share lives
//!   in the modules below.
//! - [`context`]: merged settings handed to every command. [`output`]: tables and JSON, counts
//!   and units. [`duration`]: durations as flags take them (`30`, `1s`, `2m`).
//!   [`exit`]: the exit codes `--help` lists. [`broken_pipe`]: ending quietly when the reader of
//!   our output goes away. [`dotenv`]: commodore's `.env`, found and read for `context`.
//! - [`daemon`]: the control-socket client (only user of tonic), and what a partial reload left out.
//! - [`lieutenant`]: the Lieutenant HTTP client, and [`lieutenant::oidc`]: logging in to it and
//!   the 0600 token cache. [`browser`]: opening the browser and answering the login redirect it
//!   brings back.
//! - [`catalog`]: the clusters of the inventory: loading, filtering, finding one by id, and the
//!   fuzzy [`catalog::picker`].
//! - [`kube`]: building and merging kubeconfigs, where they are written, and the OpenShift tokens
//!   their exec entries hand out ([`kube::openshift_login`]).
//! - [`emergency`]: emergency credentials: the key, the Passbolt client, OpenPGP, the buckets.
//! - [`completion`]: dynamic shell completion (cluster ids from the cache). [`service`]: systemd and
//!   launchd files for `service-install`.
//!
//! Errors follow `kharon_common::errors`: a message never repeats its cause; `main` prints the
//! whole chain of a failed command once (`errors::shown`) and picks its exit code ([`exit`]).

mod broken_pipe;
mod browser;
mod catalog;
mod cmd;
mod completion;
mod context;
mod daemon;
mod dotenv;
mod duration;
mod emergency;
mod exit;
mod kube;
mod lieutenant;
mod output;
mod service;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};
use kharon_config::Overrides;

use crate::context::Context;

#[derive(Parser, Debug)]
#[command(
    name = "kharonctl",
    version = kharon_common::VERSION,
    about = "Control kharond, the SOCKS5 proxy that routes cluster hosts through their SSH jump hosts",
    after_help = "Examples:\n  kharonctl status\n  kharonctl route api.c-example.vshnmanaged.net\n  \
        kharonctl route api.c-example.vshnmanaged.net -o json\n  \
        kharonctl route api.c-example.vshnmanaged.net --trace\n  kharonctl connections --watch\n  \
        kharonctl reload\n  \
        kharonctl login\n  kharonctl login-jump bastion\n  kharonctl update\n  kharonctl config\n  kharonctl switch\n\n\
        A cluster id may be given as any part of it that only one cluster has; when several have it, \
        a picker opens on a terminal.\n\n\
        Exit codes: 0 success; 1 the command failed, a cluster id no cluster has included (the closest \
        ids are suggested); 2 bad usage or settings, or a part of a cluster id \
        that several clusters match while output is not a terminal (they are listed); 3 kharond is not \
        running (no control socket, or a stale one a killed kharond left); 4 reload (and update) only partly applied: the routing table is in, but the new ssh \
        config could not be read or refuses some jump hosts; 141 the reader of the output went away \
        (`kharonctl clusters | head`)."
)]
struct Cli {
    /// kharond's control socket [env: KHARON_CONTROL_SOCKET] [default: $XDG_RUNTIME_DIR/kharon/kharond.sock]
    #[arg(long, global = true, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// Config file (TOML) [env: KHARON_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    // The help text is clap's: a bare URL reads better on a terminal than a Markdown link.
    #[allow(rustdoc::bare_urls)]
    /// Lieutenant API URL [env: LIEUTENANT_URL, then COMMODORE_API_URL, also from commodore's .env in this directory or a parent] [default: https://api.syn.vshn.net]
    #[arg(long, global = true, value_name = "URL")]
    lieutenant_url: Option<String>,
    /// OIDC client id, instead of the one Lieutenant announces [env: COMMODORE_OIDC_CLIENT, also from .env]
    #[arg(long, global = true, value_name = "ID")]
    oidc_client: Option<String>,
    /// OIDC discovery URL, instead of the one Lieutenant announces [env: COMMODORE_OIDC_DISCOVERY_URL, also from .env]
    #[arg(long, global = true, value_name = "URL")]
    oidc_discovery_url: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show the daemon, its listener, inventory age and the health of every jump host chain
    ///
    /// Each connected chain is probed while you wait (at most 1 s): a keepalive to its last jump
    /// host, whose round trip crosses every hop. "no answer within 1s" on a connected chain
    /// means a jump host or the network to it stopped answering; keepalive will drop the
    /// session shortly.
    Status(cmd::status::Args),
    /// Make kharond re-read its inventory and ssh config (connections stay up)
    Reload(cmd::reload::Args),
    /// Show how a host would be routed and which rule decided; --trace: the next connection to it, step by step
    Route(cmd::route::Args),
    /// List every connection kharond holds: client program and pid, destination, route, state, bytes, age
    Connections(cmd::connections::Args),
    /// Check every cluster's API, console and OAuth endpoint through its real path (jump host chain, TLS)
    Test(cmd::test::Args),
    /// Log in to Lieutenant (browser, or --device) and cache the tokens
    ///
    /// The tokens go to kharonctl's cache (tokens.json in the cache dir, 0600) and, when commodore's
    /// token cache exists ($XDG_CACHE_HOME/commodore/token), to its entry for this Lieutenant too,
    /// so that `commodore` needs no login of its own; its other entries are left as they are.
    /// kharonctl never creates commodore's cache.
    Login(cmd::login::Args),
    /// Answer what a jump host asks beyond your key (a one-time password, a password) for kharond
    LoginJump(cmd::login_jump::Args),
    /// Remove the cached Lieutenant tokens
    ///
    /// Removes kharonctl's tokens for the Lieutenant in use, or for every Lieutenant with --all.
    /// Commodore's token cache is left as it is (it is commodore's login too); as long as it holds a
    /// token for that Lieutenant, kharonctl goes on using it, and refreshing it, and says so.
    Logout(cmd::logout::Args),
    /// Fetch the inventory from Lieutenant, update the local cache and reload kharond
    ///
    /// The bearer is commodore's static token COMMODORE_API_TOKEN when it is set (in the
    /// environment or commodore's .env; the token, or a file holding it) and not expired: then no
    /// cache is read and no login started, as with commodore's own commands. Otherwise it is the
    /// freshest usable token of kharonctl's cache and commodore's ($XDG_CACHE_HOME/commodore/token)
    /// for this Lieutenant; when neither is usable, each is refreshed in turn, and only when that
    /// fails too does a login start (browser, or --device).
    /// Every message names the cache file it speaks of. The Lieutenant is --lieutenant-url, else
    /// LIEUTENANT_URL, else COMMODORE_API_URL (from the environment, else from the .env file
    /// commodore reads: in this directory or the nearest parent), else lieutenant_url in the config
    /// file; `kharonctl config` shows which.
    Update(cmd::update::Args),
    /// Show the effective settings and where each came from
    Config(cmd::config::Args),
    /// List clusters, or act on one: kubeconfig, shell, kubectl, oc, console, token, login, emergency-credentials
    Clusters(cmd::clusters::Args),
    /// Print or write a kubeconfig with one context per cluster, or merge it into yours
    Kubeconfig(cmd::kubeconfig::Args),
    /// Make a cluster the current kube context (`-`: the previous one; no id: pick on the terminal)
    Switch(cmd::switch::Args),
    /// Run kharond under the user's service manager (systemd user unit or launchd agent)
    ServiceInstall(cmd::service_install::Args),
    /// Stop kharond's service and remove the files service-install wrote
    ServiceUninstall(cmd::service_install::UninstallArgs),
    /// Print the shell completion script (bash, zsh, fish); cluster ids complete from the cache
    Completions(cmd::completions::Args),
    /// Write the man pages of kharonctl and its subcommands into a directory
    ManPages(cmd::man_pages::Args),
}

fn main() -> ExitCode {
    broken_pipe::quiet_on_closed_output();
    // Completion requests (`COMPLETE=bash kharonctl …`) are answered and exit here, before anything
    // else can print (docs/dependencies.md, "clap_complete").
    clap_complete::CompleteEnv::with_factory(Cli::command)
        .bin(completion::BIN)
        .completer(completion::completer())
        .complete();
    let cli = Cli::parse();
    // Packaging runs this in build sandboxes without a HOME or config: it needs neither.
    if let Command::ManPages(args) = &cli.command {
        return cmd::man_pages::run(args, Cli::command());
    }
    let overrides = Overrides {
        config: cli.config.clone(),
        control_socket: cli.control_socket.clone(),
        lieutenant_url: cli.lieutenant_url.clone(),
        oidc_client: cli.oidc_client.clone(),
        oidc_discovery_url: cli.oidc_discovery_url.clone(),
        ..Default::default()
    };
    let ctx = match Context::load(&overrides) {
        Ok(ctx) => ctx,
        Err(e) => {
            eprintln!("kharonctl: {}", kharon_common::errors::shown(&e));
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
            Command::Connections(args) => cmd::connections::run(args, &ctx).await,
            Command::Test(args) => cmd::test::run(args, &ctx).await,
            Command::Login(args) => cmd::login::run(args, &ctx).await,
            Command::LoginJump(args) => cmd::login_jump::run(args, &ctx).await,
            Command::Logout(args) => cmd::logout::run(args, &ctx).await,
            Command::Update(args) => cmd::update::run(args, &ctx).await,
            Command::Config(args) => cmd::config::run(args, &ctx).await,
            Command::Clusters(args) => cmd::clusters::run(args, &ctx).await,
            Command::Kubeconfig(args) => cmd::kubeconfig::run(args, &ctx).await,
            Command::Switch(args) => cmd::switch::run(args, &ctx).await,
            Command::ServiceInstall(args) => cmd::service_install::run(args, &ctx).await,
            Command::ServiceUninstall(args) => cmd::service_install::run_uninstall(args, &ctx).await,
            Command::Completions(args) => cmd::completions::run(args, &ctx).await,
            Command::ManPages(_) => unreachable!("man-pages returns before the context is loaded"),
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            // Each cause once, escaped: an error can carry data (a daemon's or a server's text, an id).
            eprintln!("kharonctl: {}", kharon_common::errors::shown(e.as_ref()));
            if matches!(e.downcast_ref::<daemon::Error>(), Some(daemon::Error::NotRunning { .. })) {
                ExitCode::from(exit::NOT_RUNNING)
            } else if matches!(e.downcast_ref::<catalog::Error>(), Some(catalog::Error::Ambiguous { .. })) {
                // Like a usage error: the command line did not say which cluster.
                ExitCode::from(exit::USAGE)
            } else {
                ExitCode::from(exit::FAILED)
            }
        }
    }
}
