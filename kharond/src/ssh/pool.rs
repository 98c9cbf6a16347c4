//! STUB — being written by a helper. The public surface below is the contract the daemon uses.

use std::collections::HashMap;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::config;

/// What the pool needs to know, fixed at start (a reload re-reads the ssh config file).
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub ssh_config: PathBuf,
    pub home: PathBuf,
    /// Environment the SSH engine may consult (`SSH_AUTH_SOCK`, `${VAR}` expansion). Captured once.
    pub env: HashMap<String, String>,
    /// Upper bound for dialling a chain plus opening the channel.
    pub connect_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] config::Error),
    #[error("routed connections are not implemented yet")]
    NotImplemented,
}

impl Error {
    /// How the failure looks from the SOCKS client's side.
    pub fn io_kind(&self) -> std::io::ErrorKind {
        std::io::ErrorKind::Other
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainState {
    Idle,
    Connecting,
    Connected,
    Failed,
}

/// What `Status` shows for one jump host chain.
#[derive(Debug, Clone)]
pub struct ChainHealth {
    pub jumphost: String,
    /// "user@host:port", first to last.
    pub hops: Vec<String>,
    pub state: ChainState,
    pub since: SystemTime,
    pub last_error: Option<String>,
    pub open_channels: u32,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub next_retry: Option<SystemTime>,
}

/// A relayed channel to the target. Counts bytes and open channels for its chain.
pub struct Tunnel {
    _private: (),
}

impl AsyncRead for Tunnel {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        _buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The shared SSH sessions, keyed by jump host.
pub struct Pool {
    settings: PoolSettings,
}

impl Pool {
    /// Reads the ssh config. An unreadable or invalid file is an error here, at start.
    pub fn new(settings: PoolSettings) -> Result<Arc<Self>, Error> {
        Ok(Arc::new(Self { settings }))
    }

    /// Re-reads the ssh config; sessions whose chain did not change stay up.
    pub fn reload(&self) -> Result<(), Error> {
        let _ = &self.settings;
        Ok(())
    }

    /// Checks every given jump host resolves to a chain; returns the errors (for `Status`/`Reload`).
    pub fn validate(&self, jumphosts: &[String]) -> Vec<(String, Error)> {
        let _ = jumphosts;
        Vec::new()
    }

    /// Opens a direct-tcpip channel from `jumphost`'s last hop to `host:port`, dialling the chain
    /// first if needed. `host` is sent as a name: the last hop resolves it.
    pub async fn connect(&self, jumphost: &str, host: &str, port: u16) -> Result<Tunnel, Error> {
        let _ = (jumphost, host, port);
        Err(Error::NotImplemented)
    }

    pub fn status(&self) -> Vec<ChainHealth> {
        Vec::new()
    }
}
