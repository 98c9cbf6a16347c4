//! The proxy-protocol side of a client connection, independent of which protocol it speaks:
//! tell the protocol from the first byte, run its handshake, and hand back a [`Request`] (the
//! [`Target`] plus a way to answer "success" or a [`Failure`]).
//!
//! # One deadline
//! The deadline is taken once, at accept: waiting for the first byte, the SOCKS5 greeting,
//! authentication and request (or the PAC request, which gets what is left of it) all share it,
//! so a silent or trickling client is dropped after `handshake_timeout_secs`, never later.
//!
//! Only SOCKS5 ([`socks`](crate::socks)) is spoken today; a second protocol on the same port
//! (HTTP CONNECT) is one more [`Protocol`] variant whose handshake returns the same [`Request`].

pub mod auth;
pub mod target;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use kharon_shared::config::SocksAuth;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::http;
use crate::socks;
pub use target::Target;

/// After a refusal, how long the client gets to read it and close before we do. Closing with
/// unread input (a pipelined request or payload) sends a reset, and many TCP stacks drop
/// received-but-unread data on a reset, so the client might never see why it was refused.
const LINGER: Duration = Duration::from_secs(1);
/// The most input discarded while lingering: a client that keeps sending is not waited for.
const LINGER_BYTES: usize = 64 * 1024;

/// What the first bytes of a connection turned out to be.
pub enum Accepted {
    /// A proxy request, handshake done, waiting for its answer.
    Proxy(Request),
    /// An HTTP request that is not a proxy request (the PAC file); nothing of it was read yet.
    Http(TcpStream),
}

/// Why a target could not be reached, in words every proxy protocol can answer with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    General,
    NotAllowed,
    NetworkUnreachable,
    HostUnreachable,
    ConnectionRefused,
    TimedOut,
}

impl From<ErrorKind> for Failure {
    /// The one mapping from "how the dial failed" to what the client is told, for both paths.
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::ConnectionRefused => Failure::ConnectionRefused,
            ErrorKind::NetworkUnreachable => Failure::NetworkUnreachable,
            ErrorKind::HostUnreachable | ErrorKind::NotFound | ErrorKind::AddrNotAvailable => {
                Failure::HostUnreachable
            }
            ErrorKind::TimedOut => Failure::TimedOut,
            ErrorKind::PermissionDenied => Failure::NotAllowed,
            _ => Failure::General,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("client did not finish its handshake within handshake_timeout_secs ({0:?})")]
    Deadline(Duration),
    #[error("client closed the connection before sending anything")]
    Closed,
    #[error(transparent)]
    Socks(#[from] socks::Error),
    #[error("reading from the client: {0}")]
    Io(#[from] std::io::Error),
}

/// The protocol a request arrived in, which decides how it is answered.
enum Protocol {
    Socks5,
}

/// A client whose request was read and which now waits for our answer.
pub struct Request {
    pub target: Target,
    client: TcpStream,
    protocol: Protocol,
}

/// Reads the client's handshake, whatever its protocol, within `deadline`. A refusal (bad
/// input, wrong password) has been answered and the connection closed when this returns it.
pub async fn accept(
    mut client: TcpStream,
    auth: Option<&SocksAuth>,
    deadline: Instant,
    timeout: Duration,
) -> Result<Accepted, Error> {
    let handshake = async {
        let mut first = [0u8; 1];
        if client.peek(&mut first).await? == 0 {
            return Err(Error::Closed);
        }
        // A browser fetching the PAC file speaks HTTP on this same port.
        if http::looks_like_http(first[0]) {
            return Ok(None);
        }
        Ok(Some(socks::negotiate(&mut client, auth).await?))
    };
    let outcome = tokio::time::timeout_at(deadline, handshake).await;
    match outcome {
        Err(_) => Err(Error::Deadline(timeout)),
        Ok(Ok(None)) => Ok(Accepted::Http(client)),
        Ok(Ok(Some(target))) => Ok(Accepted::Proxy(Request { target, client, protocol: Protocol::Socks5 })),
        Ok(Err(e)) => {
            if matches!(&e, Error::Socks(e) if e.answered()) {
                linger(&mut client, deadline.min(Instant::now() + LINGER)).await;
            }
            Err(e)
        }
    }
}

impl Request {
    /// Tells the client its connection is up (`bound` is our side of it, for protocols that
    /// report one) and hands back the stream to relay on.
    pub async fn succeed(mut self, bound: SocketAddr) -> std::io::Result<TcpStream> {
        match self.protocol {
            Protocol::Socks5 => socks::reply_success(&mut self.client, bound).await?,
        }
        Ok(self.client)
    }

    /// Tells the client why its connection failed, then closes it.
    pub async fn fail(mut self, failure: Failure) {
        let answered = match self.protocol {
            Protocol::Socks5 => socks::reply_failure(&mut self.client, failure).await,
        };
        // The client may already be gone; there is no one left to tell.
        if answered.is_ok() {
            linger(&mut self.client, Instant::now() + LINGER).await;
        }
    }
}

/// Closes our side after a refusal was written, then discards what the client still sends
/// until it closes too, `until` passes or [`LINGER_BYTES`] were discarded: see [`LINGER`].
async fn linger(client: &mut TcpStream, until: Instant) {
    if client.shutdown().await.is_err() {
        return;
    }
    let discard = async {
        let mut buf = [0u8; 4096];
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => discarded += n,
            }
        }
    };
    let _ = tokio::time::timeout_at(until, discard).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dial_failures_map_to_what_the_client_is_told() {
        assert_eq!(Failure::from(ErrorKind::ConnectionRefused), Failure::ConnectionRefused);
        assert_eq!(Failure::from(ErrorKind::TimedOut), Failure::TimedOut);
        assert_eq!(Failure::from(ErrorKind::NetworkUnreachable), Failure::NetworkUnreachable);
        assert_eq!(Failure::from(ErrorKind::NotFound), Failure::HostUnreachable);
        assert_eq!(Failure::from(ErrorKind::HostUnreachable), Failure::HostUnreachable);
        assert_eq!(Failure::from(ErrorKind::PermissionDenied), Failure::NotAllowed);
        assert_eq!(Failure::from(ErrorKind::Other), Failure::General);
    }
}
