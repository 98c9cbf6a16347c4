//! From settings to a serving daemon, in the three steps a start takes and a test can take one by
//! one (`kharond/tests/in_process.rs`):
//!
//! 1. [`Loaded::load`]: the descriptor limit, the routing table and the ssh config; nothing is
//!    bound yet, so a bad file fails before a port is taken.
//! 2. [`Listeners::bind`]: the SOCKS listener and the control socket, or the ones systemd handed
//!    over (socket activation); a second daemon is recognised here.
//! 3. [`serve`]: the shared [`State`], the start-time preflight beside serving, then
//!    [`daemon::run`] until shutdown.
//!
//! [`start`] is the three in a row, as `main` calls it. Every way a start can fail is one
//! [`Error`] variant, and [`Error::exit_code`] is the one place that maps them to exit codes.

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kharon_config::{Config, Source, SshWindow};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::cli::Cli;
use crate::daemon;
use crate::desktop;
use crate::process;
use crate::proxy;
use crate::routing::in_force::{Generation, InForce};
use crate::routing::loaded::{self, InventorySource, LoadedInventory};
use crate::state::{self, State};

/// Exit codes; `--help` lists them (cli.rs).
pub mod exit {
    /// The daemon failed while running.
    pub const RUNTIME: u8 = 1;
    /// Settings, inventory or ssh config are unusable.
    pub const CONFIG: u8 = 2;
    /// The listen port or control socket is taken, or another daemon runs.
    pub const UNAVAILABLE: u8 = 3;
}

/// Why the daemon did not start, or stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] kharon_config::Error),
    /// The inventory cannot be read; `hint` names the other way in. Not a `source()`: the hint
    /// follows the cause.
    #[error("{}{hint}", kharon_common::errors::Chain(cause))]
    Inventory { cause: loaded::Error, hint: &'static str },
    #[error(transparent)]
    SshConfig(kharon_ssh::Error),
    #[error(transparent)]
    Activation(#[from] process::activation::Error),
    #[error(
        "kharond is already running: its control socket {} answers and {listen} is taken \
         (`kharonctl status` shows it); stop it first, or start this one with another --listen and \
         --control-socket",
        control.display()
    )]
    AlreadyRunning { control: PathBuf, listen: std::net::SocketAddr },
    #[error(
        "cannot listen on {addr} (from {origin}); is another proxy or kharond using that port? pick \
         another with --listen"
    )]
    Listen { addr: std::net::SocketAddr, origin: Source, source: std::io::Error },
    #[error(transparent)]
    ControlSocket(daemon::Error),
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Listener(std::io::Error),
    #[error(transparent)]
    Daemon(daemon::Error),
}

impl Error {
    /// The exit code this failure ends the process with ([`exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) | Error::Inventory { .. } | Error::SshConfig(_) | Error::Activation(_) => {
                exit::CONFIG
            }
            Error::ControlSocket(daemon::Error::AlreadyRunning { .. }) => exit::UNAVAILABLE,
            Error::ControlSocket(_) => exit::CONFIG,
            Error::AlreadyRunning { .. } | Error::Listen { .. } => exit::UNAVAILABLE,
            Error::Runtime(_) | Error::Listener(_) | Error::Daemon(_) => exit::RUNTIME,
        }
    }
}

/// Runs the daemon as `kharond` does with these flags, until SIGINT or SIGTERM.
pub async fn start(cli: &Cli) -> Result<(), Error> {
    let config = Config::load(&cli.overrides())?;
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    let loaded = Loaded::load(&config)?;
    let listeners = Listeners::bind(&config).await?;
    serve(&config, loaded, listeners, std::future::pending()).await
}

/// What the files say, read and checked before anything is bound.
pub struct Loaded {
    source: InventorySource,
    own_hosts: kharon_routing::trust::OwnHosts,
    anchors: kharon_routing::anchor::Anchors,
    inventory: LoadedInventory,
    pool: kharon_ssh::Pool,
    /// Where the pool announces the questions its jump hosts ask a person, and the desktop they
    /// are shown on; none without a desktop session or with `desktop_notifications = false`.
    questions: Option<(UnboundedReceiver<Arc<kharon_ssh::Question>>, desktop::Session)>,
    max_connections: usize,
    /// How long one reload may take (`reload_deadline_secs`).
    reload_deadline: Duration,
}

impl Loaded {
    /// Raises the descriptor limit, loads the routing table and the ssh config, and resolves every
    /// jump host the table names (their errors are logged: routing through them fails until fixed).
    pub fn load(config: &Config) -> Result<Self, Error> {
        // Before anything opens descriptors of its own; every later one counts against this.
        let wanted = config
            .max_connections
            .as_ref()
            .map_or(proxy::listener::MAX_CONNECTIONS, |m| m.value.min(proxy::listener::MAX_CONNECTIONS));
        let max_connections = process::fd_limit::connection_limit(wanted);

        let source = match &config.inventory {
            // Absolute: status and kharonctl (in another directory) name the file it is.
            Some(file) => {
                InventorySource::File(std::path::absolute(&file.value).unwrap_or_else(|_| file.value.clone()))
            }
            None => InventorySource::Cache(kharon_routing::cache::path(&config.cache_dir.value)),
        };
        let own_hosts = config.own_hosts();
        let read = loaded::read_at_start(&source, &own_hosts).map_err(|cause| {
            // The cache error already says to run `kharonctl update`; add the other way in.
            let hint = match &source {
                InventorySource::Cache(_) => {
                    "; or start with --inventory FILE (a Lieutenant /clusters JSON such as \
                     contrib/examples/inventory.json)"
                }
                InventorySource::File(_) => "",
            };
            Error::Inventory { cause, hint }
        })?;
        let env: HashMap<String, String> = std::env::vars().collect();
        let home = env.get("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
        let system_ssh_config = system_ssh_config(&config.ssh_config, &env);
        let (announce, questions) = match desktop_session(config, &env) {
            Some(session) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                (Some(tx), Some((rx, session)))
            }
            None => (None, None),
        };
        let pool = kharon_ssh::Pool::new(kharon_ssh::PoolSettings {
            ssh_config: config.ssh_config.value.clone(),
            system_ssh_config,
            home,
            env,
            connect_timeout: config.connect_timeout.value,
            engine: engine_settings(config),
            sleep_clock: kharon_ssh::SleepClock::system(),
            questions: announce,
        })
        .map_err(Error::SshConfig)?;
        // The jump hosts' HostNames anchor their clusters' dynamic names: resolved before the
        // table is compiled, which decides which jump hosts the check below resolves for good.
        let anchors = config.anchors();
        let jumphosts = read.jumphosts();
        let with_host_names = read.anchors(&anchors, &jumphosts, &|jumphost| pool.host_name(jumphost));
        let inventory = read.compile(&with_host_names);
        if inventory.missing {
            tracing::warn!(
                "{} to fetch the clusters from Lieutenant ({} does not exist, so every host goes direct \
                 until then; kharond picks them up without a restart)",
                kharon_routing::cache::NO_INVENTORY_YET,
                source.path().display()
            );
        }
        let report = inventory.table.report();
        tracing::info!(
            source = %source.path().display(),
            clusters = report.clusters_total,
            routed = report.clusters_routed,
            suffixes = report.include_suffixes,
            conflicts = report.conflicts.len(),
            refused = report.refused.len(),
            "routing table loaded"
        );
        loaded::log_report(&inventory.table);

        // The engine's errors name the jump host themselves; routing through it fails until fixed.
        for (_, error) in pool.validate(inventory.table.jumphosts()) {
            tracing::warn!(
                "{}; connections routed through it will fail",
                kharon_common::errors::Chain(&error)
            );
        }
        let reload_deadline = config.reload_deadline.value;
        Ok(Loaded {
            source,
            own_hosts,
            anchors,
            inventory,
            pool,
            questions,
            max_connections,
            reload_deadline,
        })
    }
}

/// The SSH engine's settings the config file chooses (`ssh_window`, `answer_wait_secs`); the rest
/// are the engine's defaults.
fn engine_settings(config: &Config) -> kharon_ssh::Settings {
    let mut engine = kharon_ssh::Settings::default();
    engine.flow.policy = match config.ssh_window.value {
        SshWindow::Adaptive => kharon_ssh::WindowPolicy::Adaptive,
        SshWindow::Fixed(bytes) => kharon_ssh::WindowPolicy::Fixed(bytes),
    };
    engine.login.answer_wait = config.answer_wait.value;
    engine
}

/// The desktop session a jump host's questions are shown on, unless the config file turns that
/// off (`desktop_notifications = false`) or kharond runs outside one (`desktop::session`).
fn desktop_session(config: &Config, env: &HashMap<String, String>) -> Option<desktop::Session> {
    if !config.desktop_notifications.value {
        tracing::debug!(
            "desktop notifications are off (desktop_notifications = false in {})",
            config.desktop_notifications.source
        );
        return None;
    }
    let session = desktop::Session::detect(env);
    if session.is_none() {
        tracing::debug!(
            "no desktop session (DBUS_SESSION_BUS_ADDRESS is not set): a jump host's questions show in \
             `kharonctl status` and this log only"
        );
    }
    session
}

/// The system-wide ssh config kharond reads after the user's: none when an ssh config was named
/// (`--ssh-config`, `KHARON_SSH_CONFIG`, `ssh_config =`), as `ssh -F FILE` reads no other file;
/// else `/etc/ssh/ssh_config`, or what `KHARON_SYSTEM_SSH_CONFIG` names (README, "What kharond
/// reads of ssh's configuration").
fn system_ssh_config(
    ssh_config: &kharon_config::Setting<PathBuf>,
    env: &HashMap<String, String>,
) -> Option<PathBuf> {
    (ssh_config.source == Source::Default).then(|| {
        env.get(SYSTEM_SSH_CONFIG_VAR)
            .filter(|v| !v.is_empty())
            .map_or_else(|| PathBuf::from(SYSTEM_SSH_CONFIG), PathBuf::from)
    })
}

/// Where ssh keeps its system-wide client config (ssh_config(5), "FILES").
const SYSTEM_SSH_CONFIG: &str = "/etc/ssh/ssh_config";
/// Test-only: another system-wide ssh config than [`SYSTEM_SSH_CONFIG`].
const SYSTEM_SSH_CONFIG_VAR: &str = "KHARON_SYSTEM_SSH_CONFIG";

/// The SOCKS listener and the control socket, bound.
pub struct Listeners {
    socks: TcpListener,
    control: UnixListener,
    control_path: PathBuf,
    /// Whether the control socket is ours to remove at the end (not when systemd created it).
    owns_control_socket: bool,
}

impl Listeners {
    /// Binds what `config` names, or takes the listeners systemd handed over in their place.
    pub async fn bind(config: &Config) -> Result<Self, Error> {
        let activated = process::activation::take()?;
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
                let addr = std_listener.local_addr().map_err(Error::Listener)?;
                // The unit decides the address, not --listen; the loopback rule holds all the same.
                config.check_listener(addr, Source::SocketActivation)?;
                tracing::info!(%addr, "using the SOCKS listener passed by the service manager");
                TcpListener::from_std(std_listener).map_err(Error::Listener)?
            }
            None => match TcpListener::bind(listen).await {
                Ok(listener) => listener,
                // Started twice (the port is the first thing both want): say it is kharond, not a guess.
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && tokio::net::UnixStream::connect(&config.control_socket.value).await.is_ok() =>
                {
                    return Err(Error::AlreadyRunning {
                        control: config.control_socket.value.clone(),
                        listen,
                    });
                }
                Err(source) => {
                    return Err(Error::Listen { addr: listen, origin: config.listen.source.clone(), source });
                }
            },
        };
        let (control, control_path, owns_control_socket) = match activated.control {
            Some(std_listener) => {
                let path = std_listener
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(PathBuf::from))
                    .unwrap_or_else(|| config.control_socket.value.clone());
                (UnixListener::from_std(std_listener).map_err(Error::Listener)?, path, false)
            }
            None => {
                let path = config.control_socket.value.clone();
                let listener = daemon::bind_control_socket(&path).await.map_err(Error::ControlSocket)?;
                (listener, path, true)
            }
        };
        Ok(Listeners { socks, control, control_path, owns_control_socket })
    }

    /// The SOCKS listener's real address (the configured port may have been 0).
    pub fn socks_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.socks.local_addr()
    }
}

/// Serves on `listeners` until `shutdown` resolves or SIGINT/SIGTERM arrives.
pub async fn serve(
    config: &Config,
    loaded: Loaded,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let Listeners { socks, control, control_path, owns_control_socket } = listeners;
    let listen = socks.local_addr().map_err(Error::Listener)?;
    let me = kharon_common::paths::uid();
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
        max_connections: loaded.max_connections,
        trim: process::trim::TrimSettings::default(),
    };
    let Loaded { source, own_hosts, anchors, inventory, pool, questions, reload_deadline, .. } = loaded;
    let routes = InForce::new(source, own_hosts, anchors, Generation { inventory, pool }, reload_deadline);
    let state = Arc::new(State::new(routes, proxy, listen, control_path));
    if let Some((questions, session)) = questions {
        tokio::spawn(desktop::run(Arc::clone(&state.logins), questions, session));
    }
    // What will fail (a jump host no Host block names that does not resolve, no ssh-agent and no
    // usable key) is said at start, not at the first connection through it; beside serving, not
    // before it: the lookups wait for DNS (up to their deadline when offline or with hundreds of
    // jump hosts), and nothing that works should wait for them.
    tokio::spawn({
        let state = Arc::clone(&state);
        async move {
            state.routes.preflight().await;
        }
    });
    daemon::run(state, socks, control, owns_control_socket, shutdown).await.map_err(Error::Daemon)
}
