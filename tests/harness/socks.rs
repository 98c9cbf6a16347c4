//! A raw SOCKS5 client for protocol tests: it sends exactly the bytes a test gives it, so
//! malformed greetings and requests can be tried against the real daemon.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Opens a TCP connection with a read timeout, so a test never blocks forever.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to kharond");
    s.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
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
    let mut s = connect(addr);
    s.write_all(&[5, 1, 0]).expect("greeting");
    let mut method = [0u8; 2];
    s.read_exact(&mut method).expect("method reply");
    assert_eq!(method, [5, 0]);
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).expect("request");
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
