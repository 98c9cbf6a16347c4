//! SOCKS4 and its 4A extension on the proxy port: recognised, so that their clients (socat,
//! `curl -x socks4a://`, `nc -X 4`, older Java settings) get a refusal in their own protocol rather
//! than a connection closed without a word, and the log says what to use instead.
//!
//! kharond serves SOCKS5 only, with one set of checks: SOCKS4 carries no password (only a user id
//! nobody can check), no IPv6 and, without 4A, no host name at all, only an IPv4 address the client
//! resolved itself, which a cluster name behind a jump host never has. `socks5h://` carries all
//! of them.
//!
//! The protocol is "SOCKS: A protocol for TCP proxy across firewalls" (Ying-Da Lee, NEC), with
//! "SOCKS 4A: A Simple Extension to SOCKS 4 Protocol" (same author):
//! - request: `VN=4 CD DSTPORT(2) DSTIP(4) USERID NUL`; with 4A, a `DSTIP` of `0.0.0.x` (`x` not
//!   0) says a host name follows: `… USERID NUL HOSTNAME NUL`;
//! - reply: `VN=0 CD DSTPORT(2) DSTIP(4)`, where `CD` 91 is "request rejected or failed". The
//!   client ignores the port and address; kharond sends back the request's, which curl prints
//!   ("Can't complete SOCKS4 connection to 10.1.2.3:443").
//!
//! The whole request is read (within the handshake's deadline) before the answer, so the log can
//! name what the client asked for, and nothing the client sent is left unread.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::routing::target::Shown;

/// The version byte a SOCKS4 request starts with.
pub const VERSION: u8 = 4;

/// The reply code "request rejected or failed".
pub const REJECTED: u8 = 91;

/// The longest user id or host name read; longer is refused without waiting for its end.
const MAX_FIELD: usize = 255;

/// What a SOCKS4 client asked for, as far as it said.
#[derive(Debug, PartialEq, Eq)]
pub enum Asked {
    /// SOCKS4: an address the client resolved itself.
    Address(Ipv4Addr, u16),
    /// SOCKS4A: a host name (escaped, shortened).
    Name(Shown, u16),
    /// A request longer than kharond reads, or one the client did not finish.
    Unread,
}

/// A SOCKS4 client, refused (and answered, when it waited for an answer).
#[derive(Debug, thiserror::Error)]
pub struct Refused {
    asked: Asked,
    /// The address the client reached, for the hint.
    listen: SocketAddr,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.asked {
            Asked::Address(ip, port) => write!(f, "a SOCKS4 client asked for {ip}:{port}")?,
            Asked::Name(name, port) => write!(f, "a SOCKS4A client asked for {name}:{port}")?,
            Asked::Unread => write!(f, "a SOCKS4 client sent a request kharond does not read")?,
        }
        write!(
            f,
            "; kharond speaks SOCKS5 only, answered 91 (rejected): use socks5h://{0} (curl -x \
             socks5h://{0}; for ssh: ProxyCommand nc -X 5 -x {0} %h %p), or http://{0} as an HTTP proxy",
            self.listen
        )
    }
}

/// The outcome of looking at the bytes of a request read so far.
#[derive(Debug, PartialEq, Eq)]
enum Parse {
    /// The whole request, and what it asked for.
    Done(Asked),
    /// More bytes are needed.
    Need,
}

/// Parses the request in `buf` (it starts with [`VERSION`]).
fn parse(buf: &[u8]) -> Parse {
    let Some(header) = buf.get(..8) else { return Parse::Need };
    let port = u16::from_be_bytes([header[2], header[3]]);
    let ip = Ipv4Addr::new(header[4], header[5], header[6], header[7]);
    let Some(user_end) = field_end(&buf[8..]) else {
        return if buf.len() - 8 > MAX_FIELD { Parse::Done(Asked::Unread) } else { Parse::Need };
    };
    // 4A: 0.0.0.x with x not 0 says a host name follows the user id.
    let [0, 0, 0, x] = ip.octets() else { return Parse::Done(Asked::Address(ip, port)) };
    if x == 0 {
        return Parse::Done(Asked::Address(ip, port));
    }
    let name_start = 8 + user_end + 1;
    match field_end(&buf[name_start..]) {
        Some(len) => Parse::Done(Asked::Name(Shown::of(&buf[name_start..name_start + len]), port)),
        None if buf.len() - name_start > MAX_FIELD => Parse::Done(Asked::Unread),
        None => Parse::Need,
    }
}

/// Where a NUL-terminated field of at most [`MAX_FIELD`] bytes ends in `bytes`, if it does.
fn field_end(bytes: &[u8]) -> Option<usize> {
    bytes.iter().take(MAX_FIELD + 1).position(|b| *b == 0)
}

/// Reads the rest of a SOCKS4 request (`buf` holds its start) and answers it "rejected". The
/// error says what the client asked for and what to use instead (`listen`: the address it
/// reached). A client that closes before its request ends gets no answer.
pub async fn refuse<S>(
    client: &mut S,
    buf: &mut Vec<u8>,
    listen: SocketAddr,
) -> Result<Refused, std::io::Error>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let asked = loop {
        match parse(buf) {
            Parse::Done(asked) => break asked,
            Parse::Need => {
                buf.reserve(MAX_FIELD);
                if client.read_buf(buf).await? == 0 {
                    return Err(std::io::ErrorKind::UnexpectedEof.into());
                }
            }
        }
    };
    client.write_all(&rejection(buf)).await?;
    Ok(Refused { asked, listen })
}

/// The "rejected" reply to a request that starts `buf`, with its port and address.
fn rejection(buf: &[u8]) -> [u8; 8] {
    let mut reply = [0, REJECTED, 0, 0, 0, 0, 0, 0];
    if let Some(port_and_ip) = buf.get(2..8) {
        reply[2..].copy_from_slice(port_and_ip);
    }
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(ip: [u8; 4], port: u16, user: &[u8], name: Option<&[u8]>) -> Vec<u8> {
        let mut r = vec![VERSION, 1];
        r.extend_from_slice(&port.to_be_bytes());
        r.extend_from_slice(&ip);
        r.extend_from_slice(user);
        r.push(0);
        if let Some(name) = name {
            r.extend_from_slice(name);
            r.push(0);
        }
        r
    }

    #[test]
    fn socks4_and_4a_requests_are_read_to_their_end() {
        let v4 = request([10, 1, 2, 3], 443, b"alice", None);
        assert_eq!(parse(&v4), Parse::Done(Asked::Address(Ipv4Addr::new(10, 1, 2, 3), 443)));
        let v4a = request([0, 0, 0, 1], 80, b"", Some(b"api.c1.example"));
        assert_eq!(parse(&v4a), Parse::Done(Asked::Name(Shown::of(b"api.c1.example"), 80)));
        // 0.0.0.0 is an address, not the 4A marker.
        let zero = request([0, 0, 0, 0], 80, b"", None);
        assert_eq!(parse(&zero), Parse::Done(Asked::Address(Ipv4Addr::UNSPECIFIED, 80)));
        for whole in [&v4, &v4a] {
            for cut in 0..whole.len() {
                assert_eq!(parse(&whole[..cut]), Parse::Need, "cut at {cut}");
            }
        }
    }

    #[test]
    fn fields_longer_than_kharond_reads_end_the_request_there() {
        let long = [b'a'; MAX_FIELD + 1];
        assert_eq!(
            parse(&request([1, 2, 3, 4], 80, &long, None)[..8 + MAX_FIELD + 1]),
            Parse::Done(Asked::Unread)
        );
        let v4a = request([0, 0, 0, 9], 80, b"u", Some(&long));
        assert_eq!(parse(&v4a[..v4a.len() - 1]), Parse::Done(Asked::Unread));
    }

    #[test]
    fn a_hostile_name_is_shown_escaped_and_the_hint_names_socks5h() {
        let v4a = request([0, 0, 0, 1], 80, b"", Some(b"a\x1b[31m\nb"));
        let Parse::Done(asked) = parse(&v4a) else { panic!("complete") };
        let refused = Refused { asked, listen: "127.0.0.1:12000".parse().unwrap() };
        let text = refused.to_string();
        assert!(!text.contains('\x1b') && !text.contains('\n'), "{text}");
        assert!(text.starts_with("a SOCKS4A client asked for \"a\\x1b[31m\\nb\":80; "), "{text}");
        assert!(text.contains("use socks5h://127.0.0.1:12000"), "{text}");
    }

    #[tokio::test]
    async fn the_client_is_answered_rejected_after_its_whole_request() {
        let (mut client, mut server) = tokio::io::duplex(1024);
        let whole = request([0, 0, 0, 1], 443, b"bob", Some(b"api.c1.example"));
        let mut buf = whole[..1].to_vec();
        client.write_all(&whole[1..]).await.unwrap();
        let listen = "127.0.0.1:1".parse().unwrap();
        let refused = refuse(&mut server, &mut buf, listen).await.expect("answered");
        assert_eq!(refused.asked, Asked::Name(Shown::of(b"api.c1.example"), 443));
        let mut answer = [0u8; 8];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer, [0, 91, 1, 187, 0, 0, 0, 1]);
    }
}
