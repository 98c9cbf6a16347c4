//! The SOCKS5 server handshake: greeting, RFC 1929 username/password when configured, the
//! CONNECT request, and the replies. Strict: every field is checked ([`wire`]), every refusal is
//! answered with its RFC code, and nothing the client sent is logged or echoed, except a short
//! escaped prefix of a refused host name.
//!
//! It reads exactly the bytes each message has (see [`wire`]), so bytes a client pipelines after
//! its request stay in the socket for the relay. The deadline is the caller's
//! ([`proxy::accept`](crate::proxy::accept)); BIND and UDP ASSOCIATE are "command not supported".

mod wire;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::credentials::{Credentials, matches};
use crate::target::{self, Target, Unreachable};
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
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof => Error::CutShort,
            _ => Error::Io(e),
        }
    }
}

/// Runs greeting, authentication and request; on success the client waits for our reply.
/// A refusal is written before the error is returned.
pub async fn negotiate<S>(client: &mut S, auth: Option<&Credentials>) -> Result<Target, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = Vec::with_capacity(64);
    let greeting = read_message(client, &mut buf, wire::greeting).await?;
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
        let credentials = read_message(client, &mut buf, wire::credentials).await?;
        let accepted = matches(expected, &buf[credentials.username], &buf[credentials.password]);
        // Vec does not clear what it frees: the password would stay in the heap until reused.
        buf.fill(0);
        if !accepted {
            client.write_all(&wire::AUTH_FAILURE).await?;
            return Err(Error::AuthRejected);
        }
        client.write_all(&wire::AUTH_SUCCESS).await?;
    }

    let request = read_message(client, &mut buf, wire::request).await?;
    let target = match request.address {
        Address::Ip(ip) => Target::from_addr(SocketAddr::new(ip, request.port)),
        Address::Name(range) => Target::from_host(&buf[range], request.port),
    };
    match target {
        Ok(target) => Ok(target),
        Err(e) => {
            client.write_all(&wire::failure_reply(wire::failure_code(Unreachable::Host))).await?;
            Err(e.into())
        }
    }
}

/// Reads one message into `buf`, never past its end, and parses it. A violation is answered
/// here (when it has an answer) before it is returned.
async fn read_message<S, T>(
    client: &mut S,
    buf: &mut Vec<u8>,
    parse: fn(&[u8]) -> Result<Parse<T>, Violation>,
) -> Result<T, Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    buf.clear();
    loop {
        match parse(buf) {
            Ok(Parse::Done(message)) => return Ok(message),
            Ok(Parse::Need(more)) => {
                let start = buf.len();
                buf.resize(start + more, 0);
                let n = client.read(&mut buf[start..]).await?;
                buf.truncate(start + n);
                if n == 0 {
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
    client.write_all(&wire::success_reply(bound)).await
}

/// Tells the client why its connection failed.
pub async fn reply_failure<S: AsyncWrite + Unpin>(
    client: &mut S,
    failure: Unreachable,
) -> std::io::Result<()> {
    client.write_all(&wire::failure_reply(wire::failure_code(failure))).await
}
