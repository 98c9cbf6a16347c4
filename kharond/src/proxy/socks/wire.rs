//! SOCKS5 (RFC 1928) and its username/password subnegotiation (RFC 1929) on the wire: what each
//! client message must look like, and the bytes of each answer. No I/O.
//!
//! Each parser looks at the bytes read so far from the start of one message and either decides
//! (a message and its length, or a [`Violation`]) or says how many more bytes the message has *at
//! least* ([`Parse::Need`]). Bytes past the message are not looked at: the reader may read more
//! than one message at once, and what a client pipelines after its request belongs to the relay.
//!
//! A version byte is judged as soon as it arrives (another protocol's framing is unknown); every
//! other field once its message is complete, so a message cut short is never answered.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;

use crate::routing::target::Unreachable;

pub const VERSION: u8 = 5;
const AUTH_VERSION: u8 = 1;
const CONNECT: u8 = 1;

const ATYP_IPV4: u8 = 1;
const ATYP_DOMAIN: u8 = 3;
const ATYP_IPV6: u8 = 4;

/// Authentication methods (RFC 1928 §3).
pub const METHOD_NONE: u8 = 0x00;
pub const METHOD_PASSWORD: u8 = 0x02;
const METHOD_NO_ACCEPTABLE: u8 = 0xff;

/// Reply codes (RFC 1928 §6).
const REP_SUCCEEDED: u8 = 0x00;
const REP_GENERAL: u8 = 0x01;
const REP_NOT_ALLOWED: u8 = 0x02;
const REP_NETWORK_UNREACHABLE: u8 = 0x03;
const REP_HOST_UNREACHABLE: u8 = 0x04;
const REP_CONNECTION_REFUSED: u8 = 0x05;
/// RFC 1928 has no timeout code; curl and others understand "TTL expired" as one.
const REP_TTL_EXPIRED: u8 = 0x06;
const REP_COMMAND_NOT_SUPPORTED: u8 = 0x07;
const REP_ADDRESS_TYPE_NOT_SUPPORTED: u8 = 0x08;

/// The method-selection answer when nothing offered is acceptable.
pub const NO_ACCEPTABLE_METHOD: [u8; 2] = [VERSION, METHOD_NO_ACCEPTABLE];
/// RFC 1929 status answers: 0 is success, anything else failure.
pub const AUTH_SUCCESS: [u8; 2] = [AUTH_VERSION, 0];
pub const AUTH_FAILURE: [u8; 2] = [AUTH_VERSION, 1];

/// The smallest request: header, a domain's length byte (of an empty name) and the port.
const MIN_REQUEST: usize = 4 + 1 + 2;

/// The outcome of looking at the bytes of one message read so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Parse<T> {
    /// The message, and how many bytes it took.
    Done(T, usize),
    /// The message has at least this many more bytes (never 0).
    Need(usize),
}

/// A client message that breaks the protocol, and how it is answered.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum Violation {
    #[error("client does not speak SOCKS5 (version byte {0:#04x})")]
    NotSocks5(u8),
    #[error("client offered no authentication method")]
    NoMethods,
    #[error("RFC 1929 subnegotiation version {0:#04x}, must be 0x01")]
    AuthVersion(u8),
    #[error("client sent an empty username")]
    EmptyUsername,
    #[error("client sent an empty password")]
    EmptyPassword,
    #[error("request version {0:#04x}, must be 0x05")]
    RequestVersion(u8),
    #[error("request reserved byte {0:#04x}, must be 0x00")]
    Reserved(u8),
    #[error("command {0:#04x} not supported, only CONNECT (0x01)")]
    Command(u8),
    #[error("address type {0:#04x} unknown")]
    AddressType(u8),
}

impl Violation {
    /// What the client is told before the connection is closed; `None`: closed without a word,
    /// since a client that does not speak the protocol would not understand one.
    pub fn answer(&self) -> Option<Vec<u8>> {
        match self {
            Violation::NotSocks5(_) | Violation::RequestVersion(_) => None,
            Violation::NoMethods => Some(NO_ACCEPTABLE_METHOD.to_vec()),
            Violation::AuthVersion(_) | Violation::EmptyUsername | Violation::EmptyPassword => {
                Some(AUTH_FAILURE.to_vec())
            }
            Violation::Reserved(_) => Some(failure_reply(REP_GENERAL).to_vec()),
            Violation::Command(_) => Some(failure_reply(REP_COMMAND_NOT_SUPPORTED).to_vec()),
            Violation::AddressType(_) => Some(failure_reply(REP_ADDRESS_TYPE_NOT_SUPPORTED).to_vec()),
        }
    }
}

/// Which of the methods we speak a greeting offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Greeting {
    pub none: bool,
    pub password: bool,
}

/// RFC 1929 credentials, as ranges of the message's bytes (no copy of the password is made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: Range<usize>,
    pub password: Range<usize>,
}

/// The address of a CONNECT request, still untrusted: a name as raw bytes (a range of the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Ip(IpAddr),
    Name(Range<usize>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    pub address: Address,
    pub port: u16,
}

/// `VER NMETHODS METHODS…`
pub fn greeting(buf: &[u8]) -> Result<Parse<Greeting>, Violation> {
    match buf {
        [] => Ok(Parse::Need(2)),
        [version, ..] if *version != VERSION => Err(Violation::NotSocks5(*version)),
        [_] => Ok(Parse::Need(1)),
        [_, count, methods @ ..] => {
            let count = usize::from(*count);
            if methods.len() < count {
                return Ok(Parse::Need(count - methods.len()));
            }
            if count == 0 {
                return Err(Violation::NoMethods);
            }
            let methods = &methods[..count];
            let greeting = Greeting {
                none: methods.contains(&METHOD_NONE),
                password: methods.contains(&METHOD_PASSWORD),
            };
            Ok(Parse::Done(greeting, 2 + count))
        }
    }
}

/// `VER ULEN UNAME PLEN PASSWD` (RFC 1929 §2).
pub fn credentials(buf: &[u8]) -> Result<Parse<Credentials>, Violation> {
    let Some(&version) = buf.first() else { return Ok(Parse::Need(3)) };
    if version != AUTH_VERSION {
        return Err(Violation::AuthVersion(version));
    }
    let Some(&ulen) = buf.get(1) else { return Ok(Parse::Need(2)) };
    let plen_at = 2 + usize::from(ulen);
    let Some(&plen) = buf.get(plen_at) else { return Ok(Parse::Need(plen_at + 1 - buf.len())) };
    let end = plen_at + 1 + usize::from(plen);
    if buf.len() < end {
        return Ok(Parse::Need(end - buf.len()));
    }
    if ulen == 0 {
        return Err(Violation::EmptyUsername);
    }
    if plen == 0 {
        return Err(Violation::EmptyPassword);
    }
    Ok(Parse::Done(Credentials { username: 2..plen_at, password: plen_at + 1..end }, end))
}

/// `VER CMD RSV ATYP DST.ADDR DST.PORT` (RFC 1928 §4).
pub fn request(buf: &[u8]) -> Result<Parse<ConnectRequest>, Violation> {
    let Some(&version) = buf.first() else { return Ok(Parse::Need(MIN_REQUEST)) };
    if version != VERSION {
        return Err(Violation::RequestVersion(version));
    }
    let [_, command, reserved, atyp, ..] = *buf else { return Ok(Parse::Need(MIN_REQUEST - buf.len())) };
    let address_len = match atyp {
        ATYP_IPV4 => 4,
        ATYP_IPV6 => 16,
        ATYP_DOMAIN => match buf.get(4) {
            Some(&len) => 1 + usize::from(len),
            None => return Ok(Parse::Need(MIN_REQUEST - buf.len())),
        },
        // Its length is unknown, so this is judged before the rest arrives.
        other => return Err(Violation::AddressType(other)),
    };
    let end = 4 + address_len + 2;
    if buf.len() < end {
        return Ok(Parse::Need(end - buf.len()));
    }
    if reserved != 0 {
        return Err(Violation::Reserved(reserved));
    }
    if command != CONNECT {
        return Err(Violation::Command(command));
    }
    let raw = &buf[4..4 + address_len];
    let address = match atyp {
        ATYP_IPV4 => Address::Ip(IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(raw).unwrap_or_default()))),
        ATYP_IPV6 => Address::Ip(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(raw).unwrap_or_default()))),
        _ => Address::Name(5..4 + address_len),
    };
    let port = u16::from_be_bytes([buf[end - 2], buf[end - 1]]);
    Ok(Parse::Done(ConnectRequest { address, port }, end))
}

/// The longest success reply: header, an IPv6 address and the port.
const MAX_SUCCESS: usize = 4 + 16 + 2;

/// `VER 00 RSV ATYP BND.ADDR BND.PORT`: the connection is up. Built on the stack: one per
/// connection, and too small to be worth an allocation.
pub fn success_reply(bound: SocketAddr) -> impl AsRef<[u8]> {
    struct Reply([u8; MAX_SUCCESS], usize);
    impl AsRef<[u8]> for Reply {
        fn as_ref(&self) -> &[u8] {
            &self.0[..self.1]
        }
    }
    let mut reply = [0u8; MAX_SUCCESS];
    reply[..3].copy_from_slice(&[VERSION, REP_SUCCEEDED, 0]);
    let end = match bound.ip() {
        IpAddr::V4(ip) => {
            reply[3] = ATYP_IPV4;
            reply[4..8].copy_from_slice(&ip.octets());
            8
        }
        IpAddr::V6(ip) => {
            reply[3] = ATYP_IPV6;
            reply[4..20].copy_from_slice(&ip.octets());
            20
        }
    };
    reply[end..end + 2].copy_from_slice(&bound.port().to_be_bytes());
    Reply(reply, end + 2)
}

/// A failure reply; the bound address carries no meaning in it and is all zeros.
pub fn failure_reply(code: u8) -> [u8; 10] {
    [VERSION, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0]
}

/// The reply code for a failure to reach the target.
pub fn failure_code(failure: Unreachable) -> u8 {
    match failure {
        Unreachable::General => REP_GENERAL,
        Unreachable::NotAllowed => REP_NOT_ALLOWED,
        Unreachable::Network => REP_NETWORK_UNREACHABLE,
        Unreachable::Host => REP_HOST_UNREACHABLE,
        Unreachable::Refused => REP_CONNECTION_REFUSED,
        Unreachable::TimedOut => REP_TTL_EXPIRED,
    }
}
