//! The two ways to reach a target: [`direct`] (resolve here, connect over TCP) and
//! [`via_jumphost`] (a direct-tcpip channel from the chain's last hop, which resolves the name).
//! Which one a target takes is [`route`](crate::routing::route)'s business.
//!
//! Knows nothing of SOCKS: a failure carries an [`std::io::ErrorKind`] the caller maps to a reply.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::routing::target::Target;
use crate::ssh;

/// A deadline that never comes in practice, for a timeout too large to add to `now`.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365);

/// An open connection to the target.
pub enum Upstream {
    Tcp(TcpStream),
    Tunnel(ssh::Tunnel),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot resolve {host}: {source}")]
    Resolve { host: String, source: std::io::Error },
    #[error("{host} has no address")]
    NoAddress { host: String },
    #[error("connecting to {addr} timed out after {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("connecting to {addr}: {source}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    /// The SSH engine's errors already name the jump host (or the ssh_config file:line).
    #[error(transparent)]
    Jumphost(ssh::Error),
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Resolve { .. } | Error::NoAddress { .. } => ErrorKind::NotFound,
            Error::Timeout { .. } => ErrorKind::TimedOut,
            Error::Connect { source, .. } => source.kind(),
            Error::Jumphost(source) => source.io_kind(),
        }
    }
}

/// Resolves the target here and connects to the first address that answers, all within `timeout`.
pub async fn direct(target: &Target, timeout: Duration) -> Result<Upstream, Error> {
    // Config bounds the timeout; an unrepresentable deadline still must not panic a connection.
    let now = tokio::time::Instant::now();
    let deadline = now.checked_add(timeout).unwrap_or_else(|| now + FAR_FUTURE);
    let addrs: Vec<SocketAddr> = match target {
        Target::Ip(addr) => vec![*addr],
        Target::Name(host, port) => {
            let lookup = tokio::net::lookup_host((host.as_str(), *port));
            match tokio::time::timeout_at(deadline, lookup).await {
                Err(_) => return Err(Error::Timeout { addr: target.to_string(), timeout }),
                Ok(Err(source)) => return Err(Error::Resolve { host: host.clone(), source }),
                Ok(Ok(addrs)) => addrs.collect(),
            }
        }
    };
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => return Err(Error::Timeout { addr: target.to_string(), timeout }),
            Ok(Ok(stream)) => {
                // Interactive protocols (kubectl exec, TLS handshakes) suffer from Nagle + delayed ACK.
                let _ = stream.set_nodelay(true);
                return Ok(Upstream::Tcp(stream));
            }
            Ok(Err(source)) => last = Some(Error::Connect { addr, source }),
        }
    }
    Err(last.unwrap_or(Error::NoAddress { host: target.host() }))
}

/// Opens a channel through `jumphost`'s chain; the last hop resolves the name.
pub async fn via_jumphost(
    pool: &ssh::Pool,
    jumphost: &str,
    target: &Target,
    timeout: Duration,
) -> Result<Upstream, Error> {
    let host = target.host();
    match tokio::time::timeout(timeout, pool.connect(jumphost, &host, target.port())).await {
        Err(_) => Err(Error::Timeout { addr: format!("{target} via {jumphost}"), timeout }),
        Ok(Err(source)) => Err(Error::Jumphost(source)),
        Ok(Ok(tunnel)) => Ok(Upstream::Tunnel(tunnel)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timeout_too_large_for_a_deadline_still_connects() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = Target::Ip(listener.local_addr().unwrap());
        assert!(direct(&target, Duration::MAX).await.is_ok());
    }
}
