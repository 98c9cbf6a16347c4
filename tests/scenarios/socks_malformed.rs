//! Bad SOCKS input: each gets its RFC answer (or a close), never a hang, and the daemon keeps
//! serving other clients afterwards. Good input in awkward shapes (1-byte segments, everything
//! in one segment) works.

use std::io::{Read, Write};
use std::net::Shutdown;
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::socks::{Close, assert_still_serving, connect_request, exchange};
use kharon_e2e::{Env, inventory, socks};

fn start(env: &Env) -> Kharond {
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    Kharond::start(env, &["--inventory", inv.to_str().unwrap()])
}

/// The reply code of a no-auth CONNECT sent in one segment; `None` if no request reply came.
fn reply_code(daemon: &Kharond, request: &[u8]) -> Option<u8> {
    let reply = exchange(daemon.socks_addr(), &[&[5, 1, 0][..], request].concat());
    assert_eq!(reply.get(..2), Some(&[5, 0][..]), "method choice expected: {reply:?}");
    reply.get(3).copied()
}

#[test]
fn malformed_greetings_and_requests_are_refused() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");

    // SOCKS4 on the SOCKS port: its own protocol's "rejected" (91), no SOCKS5 reply
    // (client_matrix.rs has the rest).
    assert_eq!(exchange(daemon.socks_addr(), &[4, 1, 0, 80, 127, 0, 0, 1, 0]), [0, 91, 0, 80, 127, 0, 0, 1]);
    // An HTTP request from a DNS-rebinding page (foreign Host): refused, no SOCKS bytes.
    let reply = exchange(daemon.socks_addr(), b"GET /proxy.pac HTTP/1.1\r\nHost: evil.example:12000\r\n\r\n");
    assert!(reply.starts_with(b"HTTP/1.1 403"), "{}", String::from_utf8_lossy(&reply));
    assert!(!String::from_utf8_lossy(&reply).contains("FindProxyForURL"));
    assert_still_serving(&daemon, &server, None);

    // Zero methods, or only GSSAPI / only username-password offered: no acceptable method.
    for greeting in [&[5, 0][..], &[5, 1, 1], &[5, 1, 2]] {
        assert_eq!(exchange(daemon.socks_addr(), greeting), [5, 0xff], "{greeting:?}");
    }
    assert_still_serving(&daemon, &server, None);

    // Names that are no DNS name: the same clean refusal, host unreachable.
    let port = server.port();
    for name in [&b""[..], b"nul\0.example", b"\xff\xfe.example", b"caf\xc3\xa9.example", &[b'a'; 255]] {
        assert_eq!(reply_code(&daemon, &connect_request(name, port)), Some(4), "{name:?}");
    }
    // Port 0.
    assert_eq!(reply_code(&daemon, &connect_request(b"localhost", 0)), Some(4));
    assert_eq!(reply_code(&daemon, &[5, 1, 0, 1, 127, 0, 0, 1, 0, 0]), Some(4));
    // Reserved byte not 0: general failure.
    assert_eq!(reply_code(&daemon, &[5, 1, 1, 1, 127, 0, 0, 1, 0, 80]), Some(1));
    // BIND and UDP ASSOCIATE: command not supported.
    for cmd in [2u8, 3] {
        assert_eq!(reply_code(&daemon, &[5, cmd, 0, 1, 127, 0, 0, 1, 0, 80]), Some(7), "cmd {cmd}");
    }
    // Unknown address type.
    assert_eq!(reply_code(&daemon, &[5, 1, 0, 9, 0, 0]), Some(8));
    // Wrong version in the request: only the method choice, then close.
    assert_eq!(reply_code(&daemon, &[4, 1, 0, 1, 127, 0, 0, 1, 0, 80]), None);
    assert_still_serving(&daemon, &server, None);
}

#[test]
fn a_request_cut_short_gets_no_reply() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let request = connect_request(b"localhost", server.port());
    // Cut inside the name, and inside the port.
    for cut in [7, request.len() - 1] {
        let mut s = socks::connect(daemon.socks_addr());
        s.write_all(&[&[5, 1, 0][..], &request[..cut]].concat()).unwrap();
        s.shutdown(Shutdown::Write).unwrap();
        assert_eq!(socks::read_all(&mut s), [5, 0], "cut at {cut}: nothing was attempted, nothing to answer");
    }
    assert_still_serving(&daemon, &server, None);
}

#[test]
fn bytes_trickled_one_at_a_time_still_work() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let mut s = socks::connect(daemon.socks_addr());
    s.set_nodelay(true).unwrap();
    let bytes = [&[5, 1, 0][..], &connect_request(b"localhost", server.port())].concat();
    for b in &bytes {
        s.write_all(&[*b]).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut reply = [0u8; 12];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(&reply[..2], [5, 0]);
    assert_eq!(reply[3], 0, "{reply:?}");
}

#[test]
fn greeting_request_and_payload_in_one_segment_lose_no_byte() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let mut s = socks::connect(daemon.socks_addr());
    let segment = [
        &[5, 1, 0][..],
        &connect_request(b"localhost", server.port()),
        b"GET /hello HTTP/1.0\r\nConnection: close\r\n\r\n",
    ]
    .concat();
    s.write_all(&segment).unwrap();
    let reply = socks::read_all(&mut s);
    assert_eq!(reply.get(..4), Some(&[5, 0, 5, 0][..]), "{reply:?}");
    assert!(
        String::from_utf8_lossy(&reply).ends_with("hello from ok"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    assert_still_serving(&daemon, &server, None);
}

/// A pipelining client refused with bytes still unread must read the refusal and a clean close,
/// not a reset (which many TCP stacks answer by dropping what the client had not read yet).
#[test]
fn a_refused_pipelining_client_gets_its_answer_and_a_clean_close() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let closed_port = kharon_e2e::free_port();
    let payload = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    // Refused after the dial (nothing listens), and refused in the handshake (bad name).
    for (request, code) in [(connect_request(b"localhost", closed_port), 5), (connect_request(b"a b", 80), 4)]
    {
        let mut s = socks::connect(daemon.socks_addr());
        s.write_all(&[&[5, 1, 0][..], &request, payload].concat()).unwrap();
        let (reply, close) = socks::read_to_close(&mut s);
        assert_eq!(reply.get(3), Some(&code), "{reply:?}");
        assert_eq!(close, Close::Clean, "code {code}: the daemon reset the connection");
    }
    assert_still_serving(&daemon, &server, None);
}
