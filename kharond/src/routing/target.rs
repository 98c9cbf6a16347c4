//! What a client asked to reach, whatever proxy protocol it spoke, and the checks every host
//! passes before it is routed: IP literals become addresses, names must be DNS names. Also the
//! other side of it: why a target could not be reached ([`Unreachable`]), in words every proxy
//! protocol can answer with.
//!
//! The protocols (`socks`, `http::connect`) and what routes and dials (`proxy::handshake`, `route`, `dial`)
//! all use this module, and it uses nothing of theirs: it needs only std, so the fuzz crate
//! compiles it as it is.

use std::fmt;
use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};

/// Longest DNS name (RFC 1035), without the trailing dot.
const MAX_NAME: usize = 253;
/// How much of a refused host a log line shows: enough to recognise it, too little to carry
/// much of whatever a hostile client put there.
const SHOWN_PREFIX: usize = 32;

/// What the client asked to reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A host name (socks5h): routed by suffix, resolved by us or by the last jump host.
    Name(String, u16),
    /// An address the client resolved itself, or an IP literal sent as a name.
    Ip(SocketAddr),
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("invalid target host {0} (not a DNS name or IP address)")]
    BadName(Shown),
    #[error("client asked for port 0")]
    PortZero,
}

/// A short, escaped prefix of untrusted bytes, for a log line.
#[derive(Debug, PartialEq, Eq)]
pub struct Shown(String);

impl Shown {
    pub fn of(bytes: &[u8]) -> Self {
        let prefix = &bytes[..bytes.len().min(SHOWN_PREFIX)];
        let mut shown = format!("\"{}\"", prefix.escape_ascii());
        if bytes.len() > SHOWN_PREFIX {
            shown.push_str(&format!("… ({} bytes)", bytes.len()));
        }
        Shown(shown)
    }
}

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Target {
    /// An address the client resolved itself.
    pub fn from_addr(addr: SocketAddr) -> Result<Self, Error> {
        if addr.port() == 0 {
            return Err(Error::PortZero);
        }
        Ok(Target::Ip(addr))
    }

    /// A host as the client sent it (untrusted bytes): an IP literal, bracketed or not, becomes
    /// an address; anything else must be a DNS name of letters, digits, `-` and `_` labels, and
    /// is lowercased without its trailing dot so the router sees one spelling.
    pub fn from_host(host: &[u8], port: u16) -> Result<Self, Error> {
        if port == 0 {
            return Err(Error::PortZero);
        }
        // Only ASCII can be a name or a literal; anything else (including non-UTF-8) is refused below.
        let text = std::str::from_utf8(host).ok();
        if let Some(ip) = text.and_then(parse_ip_literal) {
            return Ok(Target::Ip(SocketAddr::new(ip, port)));
        }
        let trimmed = host.strip_suffix(b".").unwrap_or(host);
        let valid = !trimmed.is_empty()
            && trimmed.len() <= MAX_NAME
            && trimmed.split(|b| *b == b'.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
            });
        match std::str::from_utf8(trimmed) {
            Ok(name) if valid => Ok(Target::Name(name.to_ascii_lowercase(), port)),
            _ => Err(Error::BadName(Shown::of(host))),
        }
    }

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

/// Why a target could not be reached, in words every proxy protocol can answer with (a SOCKS5
/// reply code, an HTTP status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    General,
    NotAllowed,
    Network,
    Host,
    Refused,
    TimedOut,
}

impl From<ErrorKind> for Unreachable {
    /// The one mapping from "how the dial failed" to what the client is told, for both paths.
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::ConnectionRefused => Unreachable::Refused,
            ErrorKind::NetworkUnreachable => Unreachable::Network,
            ErrorKind::HostUnreachable | ErrorKind::NotFound | ErrorKind::AddrNotAvailable => {
                Unreachable::Host
            }
            ErrorKind::TimedOut => Unreachable::TimedOut,
            ErrorKind::PermissionDenied => Unreachable::NotAllowed,
            _ => Unreachable::General,
        }
    }
}

fn parse_ip_literal(text: &str) -> Option<IpAddr> {
    let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
    bare.parse().ok()
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(name, port) => write!(f, "{name}:{port}"),
            Target::Ip(addr) => write!(f, "{addr}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Result<Target, Error> {
        Target::from_host(s.as_bytes(), 443)
    }

    #[test]
    fn names_are_normalised_and_ip_literals_recognised() {
        assert_eq!(name("API.Example.COM.").unwrap(), Target::Name("api.example.com".into(), 443));
        assert_eq!(name("10.1.2.3").unwrap(), Target::Ip("10.1.2.3:443".parse().unwrap()));
        assert_eq!(name("[::1]").unwrap(), Target::Ip("[::1]:443".parse().unwrap()));
        assert_eq!(name("::1").unwrap(), Target::Ip("[::1]:443".parse().unwrap()));
        let longest = format!("{}a", "a.".repeat(126));
        assert_eq!(longest.len(), 253);
        assert!(matches!(name(&longest), Ok(Target::Name(..))));
    }

    #[test]
    fn malformed_names_are_refused() {
        for bad in [
            "",
            ".",
            "a..b",
            "a b",
            "nul\0x",
            "é.example",
            &"a".repeat(64),
            &format!("{}.x", "a.".repeat(127)),
        ] {
            assert!(matches!(name(bad), Err(Error::BadName(_))), "{bad:?} accepted");
        }
        assert!(matches!(Target::from_host(b"\xff\xfe.example", 443), Err(Error::BadName(_))));
        assert_eq!(Target::from_host(b"a.b", 0), Err(Error::PortZero));
        assert_eq!(Target::from_addr("127.0.0.1:0".parse().unwrap()), Err(Error::PortZero));
    }

    #[test]
    fn dial_failures_map_to_what_the_client_is_told() {
        assert_eq!(Unreachable::from(ErrorKind::ConnectionRefused), Unreachable::Refused);
        assert_eq!(Unreachable::from(ErrorKind::TimedOut), Unreachable::TimedOut);
        assert_eq!(Unreachable::from(ErrorKind::NetworkUnreachable), Unreachable::Network);
        assert_eq!(Unreachable::from(ErrorKind::NotFound), Unreachable::Host);
        assert_eq!(Unreachable::from(ErrorKind::HostUnreachable), Unreachable::Host);
        assert_eq!(Unreachable::from(ErrorKind::PermissionDenied), Unreachable::NotAllowed);
        assert_eq!(Unreachable::from(ErrorKind::Other), Unreachable::General);
    }

    #[test]
    fn a_refused_name_is_shown_short_and_escaped() {
        let Err(Error::BadName(shown)) = Target::from_host(b"evil\n\x1b[31m\xff", 80) else { panic!() };
        assert_eq!(shown.to_string(), r#""evil\n\x1b[31m\xff""#);
        let long = [b'\n'; 200];
        let Err(e) = Target::from_host(&long, 80) else { panic!() };
        let line = e.to_string();
        assert!(line.contains("(200 bytes)"), "{line}");
        assert!(line.len() < 32 * 2 + 80, "{line}");
        assert!(!line.contains('\n'), "{line}");
    }
}
