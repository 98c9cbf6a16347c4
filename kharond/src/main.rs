//! kharond: flags → settings → logging → inventory → listeners → [`daemon::run`].
//!
//! A startup problem is one line on stderr and a non-zero exit code, never a panic or a trace.
//!
//! # Layout
//! The subsystems, in the order a client connection meets them:
//! - [`proxy`]: the client side. The accept loop and its connection slots, which protocol a client
//!   speaks (SOCKS5, HTTP CONNECT, or `GET /proxy.pac`), its handshake and credentials, who may use
//!   it without a password ([`proxy::owner`]), and the per-connection spine
//!   ([`proxy::connection`]) that strings the other subsystems together.
//! - [`routing`]: where a request goes. The routing table in force (and the inventory it is read
//!   from, and how a reload replaces it), the lookup of a target in it, and the dial along the route.
//! - [`ssh`]: the SSH engine. ssh_config, known_hosts, the shared sessions per jump host chain,
//!   kept alive and re-established, and the channels a routed connection rides on.
//! - [`relay`]: moving bytes both ways until both directions are closed.
//! - [`observe`]: what connections are doing, recorded as they go: the open connections and
//!   per-route totals, traces on demand, which local process holds a client's socket.
//! - [`control`]: the gRPC control API `kharonctl` talks to, and the checks and fetches it runs
//!   through the daemon's own routing (`Test`, `FetchObject`).
//! - [`process`]: the process itself: its log, allocator, descriptor limit and memory, listeners
//!   handed over by systemd, the accept backoff, its man page.
//!
//! Two files stand beside them: [`state`], what every subsystem shares while the daemon runs, and
//! [`daemon`], the only one that knows them all and runs them until shutdown.

mod control;
mod daemon;
mod observe;
mod process;
mod proxy;
mod relay;
mod routing;
mod ssh;
mod state;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use kharon_shared::config::{Config, Overrides};

/// Exit codes; listed in `--help`.
mod exit {
    /// Settings, inventory or ssh config are unusable.
    pub const CONFIG: u8 = 2;
    /// The listen port or control socket is taken, or another daemon runs.
    pub const UNAVAILABLE: u8 = 3;
    /// The daemon failed while running.
    pub const RUNTIME: u8 = 1;
}

#[derive(Parser, Debug)]
#[command(
    name = "kharond",
    version = kharon_shared::VERSION,
    about = "Local SOCKS5 proxy that routes cluster hosts through their SSH jump hosts",
    long_about = "kharond listens for SOCKS5 clients (curl, kubectl, oc, browsers) and connects each \
        destination either directly or, when its name matches a cluster's domains, through that \
        cluster's SSH jump host chain from ~/.ssh/config. Routing comes from the Lieutenant \
        inventory cache (`kharonctl update`; until the first one every host goes direct) or from a \
        /clusters JSON file (--inventory). \
        kharonctl talks to it over the control socket.",
    after_help = "Examples:\n  kharond --inventory contrib/examples/inventory.json\n  \
        HTTPS_PROXY=socks5h://127.0.0.1:12000 curl https://api.c-example.vshnmanaged.net:6443/version\n  \
        browser proxy auto-config URL: http://localhost:12000/proxy.pac\n\n\
        Exit codes: 0 stopped cleanly; 1 failed while running; 2 bad settings, inventory or ssh config; \
        3 listen address or control socket already in use.\n\n\
        Logging: RUST_LOG (e.g. RUST_LOG=kharond=debug) or -v/-vv."
)]
struct Cli {
    /// Config file (TOML) [env: KHARON_CONFIG] [default: <config dir>/kharon/config.toml]
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// SOCKS5 listen address, IP:PORT or NAME:PORT (localhost:12000); non-loopback needs [socks] username/password [env: KHARON_LISTEN] [default: 127.0.0.1:12000]
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Route by this Lieutenant /clusters JSON file instead of the local cache [env: KHARON_INVENTORY]
    #[arg(long, value_name = "FILE")]
    inventory: Option<PathBuf>,
    /// ssh_config to read jump host chains from [env: KHARON_SSH_CONFIG] [default: ~/.ssh/config]
    #[arg(long, value_name = "FILE")]
    ssh_config: Option<PathBuf>,
    /// Control socket path [env: KHARON_CONTROL_SOCKET] [default: $XDG_RUNTIME_DIR/kharon/kharond.sock]
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,
    /// More logging: -v debug for kharond, -vv debug for everything
    #[arg(short, long, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Write the kharond(1) man page into DIR and exit (kharonctl man-pages writes kharonctl's)
    #[arg(long, value_name = "DIR")]
    man_pages: Option<PathBuf>,
    /// Test-only, hidden: the reload deadline in milliseconds instead of 30 s, so that a test of
    /// a reload stuck past it takes seconds.
    #[arg(long, value_name = "MS", hide = true)]
    test_reload_deadline_ms: Option<u64>,
}

/// Why the daemon stops with a non-zero exit code ([`exit`]), and the error it prints.
struct Exit {
    code: u8,
    error: anyhow::Error,
}

fn fail(code: u8) -> impl FnOnce(anyhow::Error) -> Exit {
    move |error| Exit { code, error }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(dir) = &cli.man_pages {
        return process::man_page::run(<Cli as clap::CommandFactory>::command(), dir);
    }
    process::logging::init(cli.verbose);
    process::malloc::tune();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("kharond: cannot start the async runtime: {e}");
            return ExitCode::from(exit::RUNTIME);
        }
    };
    let outcome = runtime.block_on(start(cli));
    // Dropping the runtime would wait for every blocking task, including a reload stuck on a
    // hung file; what is left after the drain is not worth waiting for.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Exit { code, error }) => {
            // Each cause once: many of our errors already quote their source.
            eprintln!("kharond: {}", kharon_shared::errors::shown(error.as_ref()));
            ExitCode::from(code)
        }
    }
}

/// How long the runtime may take to stop its tasks after `daemon::run` returned (connections had
/// their drain already).
const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

async fn start(cli: Cli) -> Result<(), Exit> {
    let test_reload_deadline_ms = cli.test_reload_deadline_ms;
    let overrides = Overrides {
        config: cli.config,
        listen: cli.listen,
        inventory: cli.inventory,
        ssh_config: cli.ssh_config,
        control_socket: cli.control_socket,
        ..Overrides::default()
    };
    let config = Config::load(&overrides).map_err(|e| fail(exit::CONFIG)(e.into()))?;
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    // Before anything opens descriptors of its own; every later one counts against this.
    let wanted = config
        .max_connections
        .as_ref()
        .map_or(proxy::listener::MAX_CONNECTIONS, |m| m.value.min(proxy::listener::MAX_CONNECTIONS));
    let max_connections = process::fd_limit::connection_limit(wanted);

    let source = match &config.inventory {
        // Absolute: status and kharonctl (in another directory) name the file it is.
        Some(file) => routing::table::Inventory::File(
            std::path::absolute(&file.value).unwrap_or_else(|_| file.value.clone()),
        ),
        None => routing::table::Inventory::Cache(kharon_shared::cache::path(&config.cache_dir.value)),
    };
    let own_hosts = config.own_hosts();
    let table = routing::table::load_at_start(&source, &own_hosts).map_err(|e| {
        // The cache error already says to run `kharonctl update`; add the other way in.
        let hint = match &source {
            routing::table::Inventory::Cache(_) => {
                "; or start with --inventory FILE (a Lieutenant /clusters JSON such as \
                 contrib/examples/inventory.json)"
            }
            routing::table::Inventory::File(_) => "",
        };
        fail(exit::CONFIG)(anyhow::anyhow!("{e}{hint}"))
    })?;
    if table.missing {
        tracing::warn!(
            "no inventory yet: {} does not exist, so every host goes direct; run `kharonctl update` \
             to fetch the clusters from Lieutenant (kharond picks them up without a restart)",
            source.path().display()
        );
    }
    let report = table.table.report();
    tracing::info!(
        source = %source.path().display(),
        clusters = report.clusters_total,
        routed = report.clusters_routed,
        suffixes = report.include_suffixes,
        conflicts = report.conflicts.len(),
        refused = report.refused.len(),
        "routing table loaded"
    );
    routing::table::log_report(&table.table);

    let env: HashMap<String, String> = std::env::vars().collect();
    let home = env.get("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
    let pool = ssh::Pool::new(ssh::PoolSettings {
        ssh_config: config.ssh_config.value.clone(),
        home,
        env,
        connect_timeout: config.connect_timeout.value,
    })
    .map_err(|e| fail(exit::CONFIG)(e.into()))?;
    // The engine's errors name the jump host themselves; routing through it fails until fixed.
    for (_, error) in pool.validate(&table.table.jumphosts()) {
        tracing::warn!("{error}; connections routed through it will fail");
    }

    // Listeners handed over by systemd (socket activation) take the place of our own.
    let activated = process::activation::take().map_err(|e| fail(exit::CONFIG)(e.into()))?;
    let listen = config.listen.value;
    if let Some(name) = &config.listen_name
        && activated.socks.is_none()
    {
        let all: Vec<String> = name.resolved.iter().map(ToString::to_string).collect();
        tracing::info!(
            "listen address {} (from {}) resolves to {}; using {listen}",
            name.name,
            config.listen.source,
            all.join(", ")
        );
    }
    let socks = match activated.socks {
        Some(std_listener) => {
            let addr = std_listener.local_addr().map_err(|e| fail(exit::RUNTIME)(e.into()))?;
            // The unit decides the address, not --listen; the loopback rule holds all the same.
            config
                .check_listener(addr, kharon_shared::config::Source::SocketActivation)
                .map_err(|e| fail(exit::CONFIG)(e.into()))?;
            tracing::info!(%addr, "using the SOCKS listener passed by the service manager");
            tokio::net::TcpListener::from_std(std_listener).map_err(|e| fail(exit::RUNTIME)(e.into()))?
        }
        None => match tokio::net::TcpListener::bind(listen).await {
            Ok(listener) => listener,
            // Started twice (the port is the first thing both want): say it is kharond, not a guess.
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && tokio::net::UnixStream::connect(&config.control_socket.value).await.is_ok() =>
            {
                return Err(fail(exit::UNAVAILABLE)(anyhow::anyhow!(
                    "kharond is already running: its control socket {} answers and {listen} is \
                     taken (`kharonctl status` shows it); stop it first, or start this one with \
                     another --listen and --control-socket",
                    config.control_socket.value.display()
                )));
            }
            Err(e) => {
                return Err(fail(exit::UNAVAILABLE)(anyhow::Error::new(e).context(format!(
                    "cannot listen on {listen} (from {}); is another proxy or kharond using that port? \
                     pick another with --listen",
                    config.listen.source
                ))));
            }
        },
    };
    let listen = socks.local_addr().map_err(|e| fail(exit::RUNTIME)(e.into()))?;
    let (control, control_path, owns_socket) = match activated.control {
        Some(std_listener) => {
            let path = std_listener
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(PathBuf::from))
                .unwrap_or_else(|| config.control_socket.value.clone());
            let listener = tokio::net::UnixListener::from_std(std_listener)
                .map_err(|e| fail(exit::RUNTIME)(e.into()))?;
            (listener, path, false)
        }
        None => {
            let path = config.control_socket.value.clone();
            let listener = daemon::bind_control_socket(&path).await.map_err(|e| {
                let code = match e {
                    daemon::Error::AlreadyRunning { .. } => exit::UNAVAILABLE,
                    _ => exit::CONFIG,
                };
                fail(code)(e.into())
            })?;
            (listener, path, true)
        }
    };

    let me = kharon_shared::paths::uid();
    let auth = config.socks_auth.as_ref().map(|s| {
        // The engineer's own clients get a login gate of their own (credentials.rs).
        let uids = proxy::owner::Uids::open(me).map(|(uids, why)| {
            if let Some(why) = why {
                tracing::warn!(
                    "{why}: until it can be opened, your own logins wait behind other clients' wrong guesses"
                );
            }
            uids
        });
        proxy::credentials::Credentials::new(&s.value, uids)
    });
    // Without a password every local user reaches the loopback listener: serve only our own.
    let owner_only = (auth.is_none() && !config.allow_other_users.value)
        .then(|| proxy::owner::OwnerOnly::new(me).map(Arc::new))
        .flatten();
    if auth.is_none() && config.allow_other_users.value {
        tracing::info!(
            "no [socks] password and allow_other_users = true (from {}): every local user can use the \
             proxy, with your SSH identity",
            config.allow_other_users.source
        );
    }
    let proxy = state::ProxySettings {
        auth,
        owner_only,
        handshake_timeout: config.handshake_timeout.value,
        connect_timeout: config.connect_timeout.value,
        max_connections,
    };
    let mut state = state::State::new(source, own_hosts, proxy, pool, listen, control_path, table);
    if let Some(ms) = test_reload_deadline_ms {
        state = state.with_reload_deadline(std::time::Duration::from_millis(ms));
    }
    let state = Arc::new(state);
    // What will fail (a jump host no Host block names that does not resolve, no ssh-agent and no
    // usable key) is said at start, not at the first connection through it; beside serving, not
    // before it: the lookups wait for DNS (up to their deadline when offline or with hundreds of
    // jump hosts), and nothing that works should wait for them.
    tokio::spawn({
        let state = Arc::clone(&state);
        async move {
            state.preflight().await;
        }
    });
    daemon::run(state, socks, control, owns_socket, std::future::pending())
        .await
        .map_err(|e| fail(exit::RUNTIME)(e.into()))
}
