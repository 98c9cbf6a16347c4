//! Runs the daemon: the SOCKS listener, the control server and the signals (SIGHUP reloads,
//! SIGINT/SIGTERM drain and stop) until shutdown. The only file that knows every component;
//! tests and `main` call [`run`] with listeners that are already bound.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::sys::stat::{Mode, umask};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::signal::unix::{SignalKind, signal};
use tracing::{info, warn};

use crate::routing::in_force::Trigger;

use crate::control::service::Control;
use crate::proxy::listener;
use crate::state::State;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "another kharond is already running: its control socket {} answers; stop it first \
         (`systemctl --user stop kharond` or kill it) or pass a different --control-socket",
        path.display()
    )]
    AlreadyRunning { path: PathBuf },
    #[error("cannot create control socket {}", path.display())]
    Bind { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Paths(#[from] kharon_common::paths::Error),
    #[error("cannot install signal handlers: {0}")]
    Signals(std::io::Error),
    #[error("control server failed")]
    Control(#[from] tonic::transport::Error),
}

/// Creates the control socket: parent directory 0700 and ours, socket 0600. A socket that still
/// answers belongs to a live daemon and is left alone; one of ours that does not is stale and
/// replaced. Anything else at the path (a file, a directory, a symlink, a FIFO, another user's
/// socket) is an error and stays untouched: a mistyped --control-socket must never delete data.
/// No one else can swap the path between the check and the removal: the directory is ours and
/// not writable by others (checked first).
pub async fn bind_control_socket(path: &Path) -> Result<UnixListener, Error> {
    kharon_common::paths::check_socket_path(path)?;
    if let Some(dir) = path.parent() {
        kharon_common::paths::prepare_private_dir(dir)?;
    }
    if kharon_common::paths::check_own_socket(path)? {
        if UnixStream::connect(path).await.is_ok() {
            return Err(Error::AlreadyRunning { path: path.to_owned() });
        }
        info!("removing stale control socket {}", path.display());
        std::fs::remove_file(path).map_err(|source| Error::Bind { path: path.to_owned(), source })?;
    }
    // umask decides the mode bind() gives the socket (0600 here); narrow it before anyone can connect.
    let old = umask(Mode::S_IXUSR | Mode::S_IRWXG | Mode::S_IRWXO);
    let bound = UnixListener::bind(path);
    umask(old);
    bound.map_err(|source| Error::Bind { path: path.to_owned(), source })
}

/// Serves until `shutdown` resolves or SIGINT/SIGTERM arrives; then stops accepting, drains open
/// connections briefly and removes the control socket.
pub async fn run(
    state: Arc<State>,
    socks: TcpListener,
    control: UnixListener,
    owns_control_socket: bool,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), Error> {
    let mut hangup = signal(SignalKind::hangup()).map_err(Error::Signals)?;
    let mut interrupt = signal(SignalKind::interrupt()).map_err(Error::Signals)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(Error::Signals)?;

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let control_server = tonic::transport::Server::builder()
        .add_service(Control::new(Arc::clone(&state)).into_service())
        .serve_with_incoming_shutdown(
            crate::process::backoff::unix_incoming(control),
            stopped(stop_rx.clone()),
        );
    let control_task = tokio::spawn(control_server);
    let socks_task = tokio::spawn(listener::run(socks, Arc::clone(&state), stopped(stop_rx.clone())));

    info!(listen = %state.listen, control = %state.control_socket.display(), "kharond ready");
    notify_ready();

    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            _ = interrupt.recv() => { info!("SIGINT: stopping"); break }
            _ = terminate.recv() => { info!("SIGTERM: stopping"); break }
            // A task of its own: a slow reload must not hold up SIGTERM (reload.rs bounds it).
            // Its outcome is logged where every reload's is (routing/in_force.rs).
            _ = hangup.recv() => {
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    let _ = state.reload(Trigger::Signal).await;
                });
            }
        }
    }
    let _ = stop_tx.send(true);
    let _ = socks_task.await;
    let served = control_task.await;
    // A socket the service manager created is its to remove (it keeps listening for us).
    if owns_control_socket {
        let _ = std::fs::remove_file(&state.control_socket);
    }
    info!("kharond stopped");
    match served {
        Ok(result) => result.map_err(Error::from),
        Err(_) => Ok(()),
    }
}

/// Tells systemd (Type=notify) that we are ready; a no-op elsewhere.
fn notify_ready() {
    if std::env::var_os("NOTIFY_SOCKET").is_some()
        && let Err(e) = sd_notify::notify(&[sd_notify::NotifyState::Ready])
    {
        warn!("cannot notify systemd: {e}");
    }
}
