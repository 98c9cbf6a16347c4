//! A raw SOCKS5 client for protocol tests: it sends exactly the bytes a test gives it, so
//! malformed greetings and requests can be tried against the real daemon.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::kharond::Kharond;
use crate::servers::HttpServer;

/// How long a client reads before it gives up, unless it waits for a person.
const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a client that waits for a person (a jump host's question, answered by the test) reads
/// before it gives up: past the test's own steps on a loaded 2-core machine, within the 90 s a
/// question stays open.
pub const WAITING_FOR_A_PERSON: Duration = Duration::from_secs(75);

/// Opens a TCP connection with a read timeout, so a test never blocks forever.
pub fn connect(addr: SocketAddr) -> TcpStream {
    connect_within(addr, READ_TIMEOUT)
}

/// [`connect`] with a read timeout of `wait`.
fn connect_within(addr: SocketAddr, wait: Duration) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to kharond");
    s.set_read_timeout(Some(wait)).expect("timeout");
    s
}

/// A complete no-auth CONNECT to an IP address; returns the reply code (0 = success) and the stream.
pub fn connect_by_ip(addr: SocketAddr, target: SocketAddr) -> (u8, TcpStream) {
    let mut s = connect(addr);
    s.write_all(&[5, 1, 0]).expect("greeting");
    let mut method = [0u8; 2];
    s.read_exact(&mut method).expect("method reply");
    assert_eq!(method, [5, 0]);
    s.write_all(&request_ip(target)).expect("request");
    (read_reply(&mut s), s)
}

/// The bytes of a CONNECT request for an IP address.
pub fn request_ip(target: SocketAddr) -> Vec<u8> {
    let mut req = vec![5, 1, 0];
    match target.ip() {
        std::net::IpAddr::V4(ip) => {
            req.push(1);
            req.extend_from_slice(&ip.octets());
        }
        std::net::IpAddr::V6(ip) => {
            req.push(4);
            req.extend_from_slice(&ip.octets());
        }
    }
    req.extend_from_slice(&target.port().to_be_bytes());
    req
}

/// Reads a CONNECT reply in full; returns its code.
fn read_reply(s: &mut TcpStream) -> u8 {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).expect("reply head");
    let rest = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        _ => 0,
    };
    let mut tail = vec![0u8; rest];
    s.read_exact(&mut tail).expect("reply address");
    head[1]
}

/// Reads until EOF or the read timeout; returns what arrived.
pub fn read_all(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// A complete no-auth CONNECT by name; returns the reply code (0 = success) and the stream.
pub fn connect_by_name(addr: SocketAddr, host: &str, port: u16) -> (u8, TcpStream) {
    connect_by_name_as(addr, None, host, port)
}

/// A complete CONNECT by name, with RFC 1929 `(username, password)` when given.
pub fn connect_by_name_as(
    addr: SocketAddr,
    auth: Option<(&str, &str)>,
    host: &str,
    port: u16,
) -> (u8, TcpStream) {
    handshake_by_name(connect(addr), auth, host, port)
}

/// [`connect_by_name`] for a client that waits for a person: it reads for
/// [`WAITING_FOR_A_PERSON`].
pub fn connect_by_name_waiting(addr: SocketAddr, host: &str, port: u16) -> (u8, TcpStream) {
    handshake_by_name(connect_within(addr, WAITING_FOR_A_PERSON), None, host, port)
}

/// The greeting, the credentials when given, and a CONNECT by name on `s`.
fn handshake_by_name(mut s: TcpStream, auth: Option<(&str, &str)>, host: &str, port: u16) -> (u8, TcpStream) {
    let method = if auth.is_some() { 2 } else { 0 };
    s.write_all(&[5, 1, method]).expect("greeting");
    let mut chosen = [0u8; 2];
    s.read_exact(&mut chosen).expect("method reply");
    assert_eq!(chosen, [5, method]);
    if let Some((user, password)) = auth {
        s.write_all(&auth_message(1, user.as_bytes(), password.as_bytes())).expect("credentials");
        let mut status = [0u8; 2];
        s.read_exact(&mut status).expect("auth status");
        assert_eq!(status, [1, 0], "credentials refused");
    }
    s.write_all(&connect_request(host.as_bytes(), port)).expect("request");
    let mut head = [0u8; 4];
    s.read_exact(&mut head).expect("reply head");
    let rest = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        _ => 0,
    };
    let mut tail = vec![0u8; rest];
    s.read_exact(&mut tail).expect("reply address");
    (head[1], s)
}

/// Sends `bytes` in one write (a pipelining client) and returns everything answered until close.
pub fn exchange(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    exchange_on(connect(addr), bytes)
}

/// [`exchange`] for a client that waits for a person: it reads for [`WAITING_FOR_A_PERSON`].
pub fn exchange_waiting(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    exchange_on(connect_within(addr, WAITING_FOR_A_PERSON), bytes)
}

fn exchange_on(mut s: TcpStream, bytes: &[u8]) -> Vec<u8> {
    s.write_all(bytes).expect("send");
    read_all(&mut s)
}

/// How the daemon ended a connection, as the client saw it.
#[derive(Debug, PartialEq, Eq)]
pub enum Close {
    /// A FIN: everything the daemon sent arrived and the connection ended cleanly.
    Clean,
    /// A reset, which on many TCP stacks discards what the client had not read yet.
    Reset,
    /// Still open when the read timeout ran out.
    Open,
}

/// Reads until the connection ends; returns what arrived and how it ended.
pub fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, Close) {
    let mut out = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (out, Close::Clean),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return (out, Close::Open);
            }
            Err(_) => return (out, Close::Reset),
        }
    }
}

/// RFC 1929 `VER ULEN UNAME PLEN PASSWD` with any version and lengths taken from the slices.
pub fn auth_message(version: u8, user: &[u8], password: &[u8]) -> Vec<u8> {
    let mut m = vec![version, user.len() as u8];
    m.extend_from_slice(user);
    m.push(password.len() as u8);
    m.extend_from_slice(password);
    m
}

/// A CONNECT request by name, with the name as raw bytes (any bytes, valid or not).
pub fn connect_request(name: &[u8], port: u16) -> Vec<u8> {
    let mut m = vec![5, 1, 0, 3, name.len() as u8];
    m.extend_from_slice(name);
    m.extend_from_slice(&port.to_be_bytes());
    m
}

/// After a bad client, a good one (with `auth` when the daemon wants it) still gets through.
pub fn assert_still_serving(daemon: &Kharond, server: &HttpServer, auth: Option<(&str, &str)>) {
    let (code, mut s) = connect_by_name_as(daemon.socks_addr(), auth, "localhost", server.port());
    assert_eq!(code, 0, "daemon stopped serving good clients\n{}", daemon.log());
    s.write_all(b"GET /hello HTTP/1.0\r\nConnection: close\r\n\r\n").expect("request through the proxy");
    let reply = read_all(&mut s);
    assert!(String::from_utf8_lossy(&reply).contains("hello from "), "{}", String::from_utf8_lossy(&reply));
}
