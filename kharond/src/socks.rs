//! The SOCKS5 side of a connection (fast-socks5 glue): greeting, optional RFC 1929 auth and the
//! request, all under one deadline, turned into a [`Target`]; then the reply.
//!
//! It knows nothing of how a target is reached. BIND and UDP ASSOCIATE are answered "command not
//! supported". fast-socks5 has no handshake timeout and accepts any UTF-8 as a domain
//! (crates.md §2.3), so both are handled here.

use std::fmt;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use fast_socks5::server::{Socks5ServerProtocol, SocksServerError, states};
use fast_socks5::util::target_addr::TargetAddr;
use fast_socks5::{ReplyError, Socks5Command};
use kharon_shared::config::SocksAuth;
use tokio::net::TcpStream;

/// Longest DNS name (RFC 1035), without the trailing dot.
const MAX_NAME: usize = 253;

/// What the client asked to reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A host name (socks5h): routed by suffix, resolved by us or by the last jump host.
    Name(String, u16),
    /// An address the client resolved itself, or an IP literal sent as a name.
    Ip(SocketAddr),
}

impl Target {
    pub fn port(&self) -> u16 {
        match self {
            Target::Name(_, port) => *port,
            Target::Ip(addr) => addr.port(),
        }
    }

    /// The host part as the router and the jump host see it.
    pub fn host(&self) -> String {
        match self {
            Target::Name(name, _) => name.clone(),
            Target::Ip(addr) => addr.ip().to_string(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(name, port) => write!(f, "{name}:{port}"),
            Target::Ip(addr) => write!(f, "{addr}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("client did not finish the SOCKS handshake within {0:?}")]
    Deadline(Duration),
    #[error("client authentication failed")]
    AuthRejected,
    #[error("client asked for {0:?}, only CONNECT is supported")]
    Unsupported(Socks5Command),
    #[error("invalid target host {0:?}")]
    BadName(String),
    #[error("client sent port 0")]
    PortZero,
    #[error("SOCKS protocol error: {0}")]
    Protocol(#[from] SocksServerError),
}

/// A client whose request was read and which now waits for our reply.
pub struct Request {
    proto: Socks5ServerProtocol<TcpStream, states::CommandRead>,
    pub target: Target,
}

/// Runs greeting, authentication and request under one deadline.
pub async fn handshake(
    stream: TcpStream,
    auth: Option<&SocksAuth>,
    deadline: Duration,
) -> Result<Request, Error> {
    match tokio::time::timeout(deadline, negotiate(stream, auth)).await {
        Ok(result) => result,
        Err(_) => Err(Error::Deadline(deadline)),
    }
}

async fn negotiate(stream: TcpStream, auth: Option<&SocksAuth>) -> Result<Request, Error> {
    let authenticated = match auth {
        None => Socks5ServerProtocol::accept_no_auth(stream).await?,
        Some(expected) => {
            // Constant-time comparison is not needed on a loopback listener; what matters is
            // never echoing or logging what the client sent.
            let check = |user: String, pass: String| user == expected.username && pass == expected.password;
            match Socks5ServerProtocol::accept_password_auth(stream, check).await {
                Ok((proto, _)) => proto,
                Err(SocksServerError::AuthenticationRejected) => return Err(Error::AuthRejected),
                Err(e) => return Err(e.into()),
            }
        }
    };
    let (proto, command, target) = authenticated.read_command().await?;
    if command != Socks5Command::TCPConnect {
        // The client still gets its answer; a failed reply write changes nothing for us.
        let _ = proto.reply_error(&ReplyError::CommandNotSupported).await;
        return Err(Error::Unsupported(command));
    }
    let target = match target_of(target) {
        Ok(target) => target,
        Err(e) => {
            let _ = proto.reply_error(&ReplyError::HostUnreachable).await;
            return Err(e);
        }
    };
    Ok(Request { proto, target })
}

/// Normalises what fast-socks5 parsed: IP literals sent as names become addresses; names are
/// checked for DNS syntax (fast-socks5 accepts any UTF-8, including NUL and empty strings).
fn target_of(addr: TargetAddr) -> Result<Target, Error> {
    let (name, port) = match addr {
        TargetAddr::Ip(addr) if addr.port() == 0 => return Err(Error::PortZero),
        TargetAddr::Ip(addr) => return Ok(Target::Ip(addr)),
        TargetAddr::Domain(name, port) => (name, port),
    };
    if port == 0 {
        return Err(Error::PortZero);
    }
    let bare = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(&name);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(Target::Ip(SocketAddr::new(ip, port)));
    }
    let trimmed = name.strip_suffix('.').unwrap_or(&name);
    let valid = !trimmed.is_empty()
        && trimmed.len() <= MAX_NAME
        && trimmed.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if !valid {
        return Err(Error::BadName(name.chars().take(80).collect()));
    }
    Ok(Target::Name(trimmed.to_ascii_lowercase(), port))
}

impl Request {
    /// Tells the client its connection is up and hands back the stream to relay on.
    pub async fn reply_success(self, bound: SocketAddr) -> Result<TcpStream, Error> {
        Ok(self.proto.reply_success(bound).await?)
    }

    /// Tells the client why its connection failed.
    pub async fn reply_error(self, code: ReplyError) {
        // The client may already be gone; there is no one left to tell.
        let _ = self.proto.reply_error(&code).await;
    }
}

/// The one mapping from "how it failed" to a SOCKS reply code, for both paths.
pub fn reply_code(kind: ErrorKind) -> ReplyError {
    match kind {
        ErrorKind::ConnectionRefused => ReplyError::ConnectionRefused,
        ErrorKind::NetworkUnreachable => ReplyError::NetworkUnreachable,
        ErrorKind::HostUnreachable | ErrorKind::NotFound | ErrorKind::AddrNotAvailable => {
            ReplyError::HostUnreachable
        }
        // RFC 1928 has no timeout code; curl and others understand 0x06 as one.
        ErrorKind::TimedOut => ReplyError::TtlExpired,
        ErrorKind::PermissionDenied => ReplyError::ConnectionNotAllowed,
        _ => ReplyError::GeneralFailure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Result<Target, Error> {
        target_of(TargetAddr::Domain(s.to_owned(), 443))
    }

    #[test]
    fn names_are_normalised_and_ip_literals_recognised() {
        assert_eq!(name("API.Example.COM.").unwrap(), Target::Name("api.example.com".into(), 443));
        assert_eq!(name("10.1.2.3").unwrap(), Target::Ip("10.1.2.3:443".parse().unwrap()));
        assert_eq!(name("[::1]").unwrap(), Target::Ip("[::1]:443".parse().unwrap()));
        assert_eq!(name("::1").unwrap(), Target::Ip("[::1]:443".parse().unwrap()));
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in ["", ".", "a..b", "a b", "nul\0x", &"a".repeat(64), &format!("{}.x", "a.".repeat(127))] {
            assert!(matches!(name(bad), Err(Error::BadName(_))), "{bad:?} accepted");
        }
        assert!(matches!(target_of(TargetAddr::Domain("a.b".into(), 0)), Err(Error::PortZero)));
    }

    #[test]
    fn failures_map_to_their_reply_codes() {
        // ReplyError has no PartialEq; its wire byte is what clients see anyway.
        let code = |kind| reply_code(kind).as_u8();
        assert_eq!(code(ErrorKind::ConnectionRefused), 0x05);
        assert_eq!(code(ErrorKind::TimedOut), 0x06);
        assert_eq!(code(ErrorKind::NetworkUnreachable), 0x03);
        assert_eq!(code(ErrorKind::NotFound), 0x04);
        assert_eq!(code(ErrorKind::PermissionDenied), 0x02);
        assert_eq!(code(ErrorKind::Other), 0x01);
    }
}
