//! The proxy-protocol side of a client connection, independent of which protocol it speaks:
//! tell the protocol from the first byte, run its handshake, and hand back a [`Request`] (the
//! [`Target`] plus a way to answer "success" or why it is [`Unreachable`]).
//!
//! Two protocols share the port: SOCKS5 ([`socks`], first byte 0x05) and HTTP
//! (first byte a letter), where the request line tells `CONNECT host:port`
//! ([`http::connect`]), a proxy request like a SOCKS one, from the PAC fetch ([`http`]).
//! Every other client is answered in its own protocol where it has one and kharond knows it:
//! SOCKS4 and 4A (first byte 0x04, [`socks4`]) get their "rejected" reply; an HTTP request of any
//! method, even one in lower case, gets an HTTP answer. Bytes of no protocol kharond knows (a TLS
//! handshake from an `https://` proxy URL, say) are closed without an answer, which their client
//! would not understand; the log says what they looked like and what to use.
//!
//! # One deadline
//! The deadline is taken once, at accept: waiting for the first byte, the SOCKS5 greeting,
//! authentication and request, or the HTTP request head (CONNECT or PAC), all share it, so a
//! silent or trickling client is dropped after `handshake_timeout_secs`, never later.

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::time::Instant;
use zeroize::Zeroizing;

use crate::observe::failures::Notice;
use crate::proxy::credentials::{Caller, Credentials};
use crate::proxy::http;
use crate::proxy::linger::{LINGER, linger};
pub use crate::proxy::protocol::Protocol;
use crate::proxy::socks;
use crate::proxy::socks4;
use crate::routing::target::{Shown, Target, Unreachable};

/// What the first bytes of a connection turned out to be.
pub enum Accepted {
    /// A proxy request, handshake done, waiting for its answer.
    Proxy(Request),
    /// An absolute-form HTTP request (plain HTTP proxying), admitted: the first of a session.
    Forward(http::forward::Session),
    /// An HTTP request that is not a proxy request (the PAC file), its head read.
    Http(http::PacRequest),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("client did not finish its handshake within handshake_timeout_secs ({timeout:?})")]
    Deadline { timeout: Duration, silent: bool },
    #[error("client closed the connection before sending anything")]
    Closed,
    #[error(transparent)]
    Socks(#[from] socks::Error),
    #[error(transparent)]
    Socks4(#[from] socks4::Refused),
    #[error("client speaks neither SOCKS5 nor HTTP: {0}")]
    Unknown(Unknown),
    #[error(transparent)]
    Connect(#[from] http::connect::Error),
    #[error(transparent)]
    Forward(#[from] http::forward::Refused),
    #[error("reading from the client")]
    Io(#[from] std::io::Error),
}

/// The first bytes of a client that speaks no protocol kharond knows, and what to use instead.
#[derive(Debug)]
pub struct Unknown {
    first: Shown,
    tls: bool,
    listen: SocketAddr,
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "it began with {}", self.first)?;
        if self.tls {
            write!(f, ", a TLS handshake (an https:// proxy URL?): kharond's port is no HTTPS proxy")?;
        }
        write!(f, "; use socks5h://{0} or http://{0}", self.listen)
    }
}

/// How many of an unknown client's first bytes the log shows.
const UNKNOWN_SHOWN: usize = 16;
/// The first byte of a TLS record carrying a handshake (RFC 8446 §5.1: ContentType 22).
const TLS_HANDSHAKE: u8 = 22;

/// What the handshake found.
enum Handshake {
    /// The target, and what the client sent after its request.
    Proxy(Target, Protocol, Vec<u8>),
    Forward(Box<http::forward::Forward>, Vec<u8>),
    Http(http::request::Reply),
}

/// A client whose request was read and which now waits for our answer.
pub struct Request {
    pub target: Target,
    client: TcpStream,
    protocol: Protocol,
    /// What the client sent after its request, without waiting for our answer (a TLS
    /// ClientHello, say): read with the request, it goes upstream first.
    early: Vec<u8>,
}

/// The most the first read takes: a SOCKS greeting (at most 257 bytes) and usually the request
/// a client pipelines with it, or the start of an HTTP head. Under 1 KiB: glibc serves larger
/// requests from its large bins, after consolidating its fast bins (`relay/spare.rs`).
const FIRST_READ: usize = 512;

/// Reads the client's handshake, whatever its protocol, within `deadline`. A refusal (bad
/// input, wrong password) has been answered and the connection closed when this returns it.
/// `caller` is the connection's two ends, for the login gate and the log of a failed login.
pub async fn accept(
    mut client: TcpStream,
    caller: Caller,
    auth: Option<&Credentials>,
    deadline: Instant,
    timeout: Duration,
) -> Result<Accepted, Error> {
    // It may hold a password or a Proxy-Authorization: wiped when dropped. Outside the handshake,
    // so that a deadline can tell a client that sent nothing from one that stopped half-way.
    let mut received = Zeroizing::new(Vec::with_capacity(FIRST_READ));
    let handshake = async {
        if client.read_buf(&mut *received).await? == 0 {
            return Err(Error::Closed);
        }
        match received[0] {
            socks::VERSION => {
                let target = socks::negotiate(&mut client, &mut received, auth, caller).await?;
                return Ok(Handshake::Proxy(target, Protocol::Socks5, received.to_vec()));
            }
            socks4::VERSION => {
                return Err(socks4::refuse(&mut client, &mut received, caller.local).await?.into());
            }
            first if !http::looks_like_http(first) => {
                let shown = &received[..received.len().min(UNKNOWN_SHOWN)];
                let (first, tls) = (Shown::of(shown), first == TLS_HANDSHAKE);
                return Err(Error::Unknown(Unknown { first, tls, listen: caller.local }));
            }
            _ => {}
        }
        match http::read_head(&mut client, &mut received, auth).await? {
            (http::Head::Answer(reply), _) => Ok(Handshake::Http(reply)),
            (http::Head::Connect(decided), early) => {
                match http::connect::admit(decided, auth, caller).await {
                    Ok(target) => Ok(Handshake::Proxy(target, Protocol::HttpConnect, early)),
                    Err(e) => {
                        http::connect::refuse(&mut client, &e).await?;
                        Err(e.into())
                    }
                }
            }
            (http::Head::Forward(decided), early) => match admit_forward(decided, auth, caller).await {
                Ok(forward) => Ok(Handshake::Forward(forward, early)),
                Err(refused) => {
                    http::forward::answer::refuse(&mut client, &refused).await?;
                    Err(refused.into())
                }
            },
        }
    };
    let outcome = tokio::time::timeout_at(deadline, handshake).await;
    match outcome {
        Err(_) => Err(Error::Deadline { timeout, silent: received.is_empty() }),
        Ok(Ok(Handshake::Http(reply))) => Ok(Accepted::Http(http::PacRequest::new(client, reply))),
        Ok(Ok(Handshake::Proxy(target, protocol, early))) => {
            Ok(Accepted::Proxy(Request { target, client, protocol, early }))
        }
        Ok(Ok(Handshake::Forward(first, early))) => {
            Ok(Accepted::Forward(http::forward::Session { client, input: Zeroizing::new(early), first }))
        }
        Ok(Err(e)) => {
            if e.answered() {
                linger(&mut client, deadline.min(Instant::now() + LINGER)).await;
            }
            Err(e)
        }
    }
}

/// A decided absolute-form request, once its credentials passed the gated check (which may wait
/// its turn: credentials.rs).
async fn admit_forward(
    decided: Result<Box<http::forward::Forward>, http::forward::Refused>,
    auth: Option<&Credentials>,
    caller: Caller,
) -> Result<Box<http::forward::Forward>, http::forward::Refused> {
    let forward = decided?;
    http::authorization::check(auth, forward.credentials.as_ref(), caller).await?;
    Ok(forward)
}

impl Error {
    /// Whether the client was told why (and so should get a moment to read it before we close).
    fn answered(&self) -> bool {
        match self {
            Error::Socks(e) => e.answered(),
            Error::Connect(_) | Error::Forward(_) | Error::Socks4(_) => true,
            Error::Deadline { .. } | Error::Closed | Error::Unknown(_) | Error::Io(_) => false,
        }
    }

    /// Whether the log of failures explains it (`observe/failures.rs`): not when the client just
    /// went away, was challenged for the password it sends only when asked, or when its own check
    /// warns of it (a wrong password).
    pub fn notice(&self) -> Notice {
        match self {
            Error::Deadline { silent, .. } => {
                if *silent {
                    Notice::Quiet
                } else {
                    Notice::Explain
                }
            }
            Error::Closed | Error::Io(_) => Notice::Quiet,
            Error::Socks(e) => e.notice(),
            Error::Connect(e) => e.notice(),
            Error::Forward(e) => e.notice(),
            Error::Socks4(_) | Error::Unknown(_) => Notice::Explain,
        }
    }
}

impl Request {
    /// The protocol the request came in: SOCKS5 or HTTP CONNECT.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// Tells the client its connection is up (`bound` is our side of it, for protocols that
    /// report one) and hands back the stream to relay on, with what the client already sent
    /// past its request (to go upstream first).
    pub async fn succeed(mut self, bound: SocketAddr) -> std::io::Result<(TcpStream, Vec<u8>)> {
        match self.protocol {
            Protocol::Socks5 => socks::reply_success(&mut self.client, bound).await?,
            // A request read over HTTP is answered in HTTP (only CONNECT makes a `Request`).
            Protocol::HttpConnect | Protocol::Http | Protocol::Forward => {
                http::connect::reply_success(&mut self.client).await?
            }
        }
        Ok((self.client, self.early))
    }

    /// Tells the client why its connection failed, then closes it. `why` names the route and
    /// what failed on it, for protocols that can say more than a code (HTTP); it is not even
    /// formatted for those that cannot (SOCKS5).
    pub async fn fail(mut self, failure: Unreachable, why: &(dyn fmt::Display + Sync)) {
        let answered = match self.protocol {
            Protocol::Socks5 => socks::reply_failure(&mut self.client, failure).await,
            Protocol::HttpConnect | Protocol::Http | Protocol::Forward => {
                http::connect::reply_failure(&mut self.client, &self.target, failure, why).await
            }
        };
        // The client may already be gone; there is no one left to tell.
        if answered.is_ok() {
            linger(&mut self.client, Instant::now() + LINGER).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (client.expect("connect"), server.expect("accept").0)
    }

    #[tokio::test]
    async fn a_connect_head_shares_the_one_deadline_and_its_payload_stays_for_the_relay() {
        let (mut client, server) = tcp_pair().await;
        let timeout = Duration::from_millis(300);
        client.write_all(b"CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n").await.unwrap();
        let accepted = accept(server, Caller::TEST, None, Instant::now() + timeout, timeout).await;
        let deadline = matches!(accepted, Err(Error::Deadline { silent: false, .. }));
        assert!(deadline, "an unfinished head outlived the deadline");

        let (mut client, server) = tcp_pair().await;
        client.write_all(b"CONNECT API.example:443 HTTP/1.1\r\n\r\nhello").await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let Ok(Accepted::Proxy(request)) = accept(server, Caller::TEST, None, deadline, timeout).await else {
            panic!("not a proxy request")
        };
        assert_eq!(request.target, Target::Name("api.example".into(), 443));
        let (mut relay, early) = request.succeed("127.0.0.1:1".parse().unwrap()).await.unwrap();
        // Read with the head, or still in the socket: either way it reaches the relay, in order.
        let mut payload = early;
        let mut rest = vec![0u8; 5 - payload.len()];
        let read = tokio::time::timeout(Duration::from_secs(10), relay.read_exact(&mut rest)).await;
        read.expect("the payload was lost").unwrap();
        payload.extend_from_slice(&rest);
        assert_eq!(&payload, b"hello");
        let mut answer = [0u8; 39];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"HTTP/1.1 200 Connection established\r\n\r\n");
    }

    #[tokio::test]
    async fn other_protocols_are_answered_in_their_own_or_closed_and_the_error_says_why() {
        let timeout = Duration::from_millis(300);
        let accept_after = |bytes: &'static [u8]| async move {
            let (mut client, server) = tcp_pair().await;
            client.write_all(bytes).await.unwrap();
            let accepted = accept(server, Caller::TEST, None, Instant::now() + timeout, timeout).await;
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(Duration::from_secs(5), client.read_to_end(&mut answer)).await;
            (accepted, answer)
        };
        let (accepted, answer) = accept_after(b"\x04\x01\x00\x50\x00\x00\x00\x01\x00a.example\x00").await;
        let Err(e @ Error::Socks4(_)) = accepted else { panic!("SOCKS4A not refused") };
        assert_eq!(answer, [0, 91, 0, 80, 0, 0, 0, 1]);
        assert_eq!(e.notice(), Notice::Explain);
        assert!(e.to_string().contains("use socks5h://127.0.0.1:12000"), "{e}");

        let (accepted, answer) = accept_after(b"\x16\x03\x01\x00\x10").await;
        let Err(e @ Error::Unknown(_)) = accepted else { panic!("TLS bytes not refused") };
        assert!(answer.is_empty());
        assert!(e.to_string().contains("TLS handshake"), "{e}");

        let (accepted, _) = accept_after(b"connect a.example:443 HTTP/1.1\r\n\r\n").await;
        let Ok(Accepted::Http(request)) = accepted else { panic!("lower-case connect not answered in HTTP") };
        let refusal = request.refusal().unwrap_or_default();
        assert!(
            refusal.starts_with("HTTP request answered 501 Not Implemented: method names are case-sensitive")
        );

        // A client that sends nothing is no failure to explain; one that stops half-way is.
        let (accepted, _) = accept_after(b"").await;
        assert!(
            matches!(&accepted, Err(e @ Error::Deadline { silent: true, .. }) if e.notice() == Notice::Quiet)
        );
        let (accepted, _) = accept_after(b"\x05\x01").await;
        assert!(
            matches!(&accepted, Err(e @ Error::Deadline { silent: false, .. }) if e.notice() == Notice::Explain)
        );
    }
}
