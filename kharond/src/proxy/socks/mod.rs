//! The SOCKS5 server handshake: greeting, RFC 1929 username/password when configured, the
//! CONNECT request, and the replies. Strict: every field is checked (`wire`), every refusal is
//! answered with its RFC code, and nothing the client sent is logged or echoed, except a short
//! escaped prefix of a refused host name.
//!
//! It reads whatever the client has sent, not byte by byte: a greeting and a request take one
//! read each, where reading exactly each field would take five (`bench/conn_cost.sh` counts a
//! connection's system calls by name). So it may read past a message: the bytes after
//! one message are where the next one starts, and the bytes a client pipelines after its request
//! are handed back for the relay to send first. The deadline is the caller's
//! ([`handshake::accept`](crate::proxy::handshake::accept)); BIND and UDP ASSOCIATE are "command not supported".

mod wire;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::observe::failures::Notice;
use crate::proxy::credentials::{Caller, Credentials};
use crate::routing::target::{self, Target, Unreachable};
pub use wire::VERSION;
use wire::{Address, Parse, Violation};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Protocol(#[from] Violation),
    #[error("client offered no authentication method that kharond accepts (it needs {0})")]
    NoAcceptableMethod(&'static str),
    #[error("client sent a wrong SOCKS username or password")]
    AuthRejected,
    #[error("client closed the connection in the middle of a SOCKS message")]
    CutShort,
    #[error(transparent)]
    Target(#[from] target::Error),
    #[error("SOCKS connection: {0}")]
    Io(std::io::Error),
}

impl Error {
    /// Whether the client was told why (and so should get a moment to read it before we close).
    pub fn answered(&self) -> bool {
        match self {
            Error::Protocol(violation) => violation.answer().is_some(),
            Error::NoAcceptableMethod(_) | Error::AuthRejected | Error::Target(_) => true,
            Error::CutShort | Error::Io(_) => false,
        }
    }

    /// Whether the log of failures explains it: a wrong password has its own WARN
    /// (`credentials.rs`), a client that left needs no explaining.
    pub fn notice(&self) -> Notice {
        match self {
            Error::Protocol(_) | Error::NoAcceptableMethod(_) | Error::Target(_) => Notice::Explain,
            Error::AuthRejected => Notice::Warned,
            Error::CutShort | Error::Io(_) => Notice::Quiet,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Error::CutShort,
            _ => Error::Io(e),
        }
    }
}

/// The least room a read offers: a whole greeting or request fits.
const READ: usize = 512;

/// Runs greeting, authentication and request; on success the client waits for our reply.
/// `buf` holds what was already read from the client (it starts with the greeting); on success it
/// holds what the client sent after its request, for the relay. A refusal is written before the
/// error is returned. `caller` is who asks, for the login gate and the log of a failed login.
pub async fn negotiate<S>(
    client: &mut S,
    buf: &mut Vec<u8>,
    auth: Option<&Credentials>,
    caller: Caller,
) -> Result<Target, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (greeting, len) = read_message(client, buf, wire::greeting).await?;
    buf.drain(..len);
    // With a password configured, no-auth is never chosen, even when offered too.
    let method = match auth {
        Some(_) if greeting.password => wire::METHOD_PASSWORD,
        None if greeting.none => wire::METHOD_NONE,
        _ => {
            client.write_all(&wire::NO_ACCEPTABLE_METHOD).await?;
            return Err(Error::NoAcceptableMethod(match auth {
                Some(_) => "username/password (0x02), as [socks] username and password are set",
                None => "no authentication (0x00)",
            }));
        }
    };
    client.write_all(&[wire::VERSION, method]).await?;

    if let Some(expected) = auth {
        let (credentials, len) = read_message(client, buf, wire::credentials).await?;
        // Through the gate that keeps guessing slow (credentials.rs).
        let accepted = expected
            .check(&buf[credentials.username.clone()], &buf[credentials.password.clone()], caller)
            .await;
        // Vec does not clear what it frees or moves: the password would stay in the heap.
        buf[..len].fill(0);
        buf.drain(..len);
        if !accepted {
            client.write_all(&wire::AUTH_FAILURE).await?;
            return Err(Error::AuthRejected);
        }
        client.write_all(&wire::AUTH_SUCCESS).await?;
    }

    let (request, len) = read_message(client, buf, wire::request).await?;
    let target = match request.address {
        Address::Ip(ip) => Target::from_addr(SocketAddr::new(ip, request.port)),
        Address::Name(range) => Target::from_host(&buf[range], request.port),
    };
    buf.drain(..len);
    match target {
        Ok(target) => Ok(target),
        Err(e) => {
            client.write_all(&wire::failure_reply(wire::failure_code(Unreachable::Host))).await?;
            Err(e.into())
        }
    }
}

/// Reads until `buf` starts with a whole message, and parses it: the message and its length.
/// Each read takes what the client sent into at least [`READ`] bytes of room (or what the message
/// still needs), so `buf` stays within a few times a message's size. A violation is answered here (when it has an answer) before it is
/// returned.
async fn read_message<S, T>(
    client: &mut S,
    buf: &mut Vec<u8>,
    parse: fn(&[u8]) -> Result<Parse<T>, Violation>,
) -> Result<(T, usize), Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    loop {
        match parse(buf) {
            Ok(Parse::Done(message, len)) => return Ok((message, len)),
            Ok(Parse::Need(more)) => {
                buf.reserve(more.max(READ));
                if client.read_buf(buf).await? == 0 {
                    return Err(Error::CutShort);
                }
            }
            Err(violation) => {
                if let Some(answer) = violation.answer() {
                    client.write_all(&answer).await?;
                }
                return Err(violation.into());
            }
        }
    }
}

/// Tells the client its connection is up.
pub async fn reply_success<S: AsyncWrite + Unpin>(client: &mut S, bound: SocketAddr) -> std::io::Result<()> {
    client.write_all(wire::success_reply(bound).as_ref()).await
}

/// Tells the client why its connection failed.
pub async fn reply_failure<S: AsyncWrite + Unpin>(
    client: &mut S,
    failure: Unreachable,
) -> std::io::Result<()> {
    client.write_all(&wire::failure_reply(wire::failure_code(failure))).await
}
