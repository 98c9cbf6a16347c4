//! Bad SOCKS input: each gets a clear refusal (or a close), never a hang, and the daemon keeps
//! serving other clients afterwards.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, inventory, socks};

fn start(env: &Env, extra: &[&str]) -> Kharond {
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let mut args = vec!["--inventory", inv.to_str().unwrap()];
    args.extend_from_slice(extra);
    Kharond::start(env, &args)
}

/// After each bad client, a good one must still get through.
fn assert_still_serving(daemon: &Kharond, server: &HttpServer) {
    let (code, mut s) = socks::connect_by_name(daemon.socks_addr(), "localhost", server.port());
    assert_eq!(code, 0, "daemon stopped serving good clients\n{}", daemon.log());
    s.write_all(b"GET /hello HTTP/1.0\r\n\r\n").unwrap();
    assert!(String::from_utf8_lossy(&socks::read_all(&mut s)).ends_with("hello from ok"));
}

fn send(daemon: &Kharond, bytes: &[u8]) -> Vec<u8> {
    let mut s = socks::connect(daemon.socks_addr());
    s.write_all(bytes).unwrap();
    socks::read_all(&mut s)
}

#[test]
fn malformed_greetings_and_requests_are_refused() {
    let env = Env::new();
    let daemon = start(&env, &[]);
    let server = HttpServer::start("ok");

    // SOCKS4 and an HTTP request on the SOCKS port: closed without a SOCKS5 reply.
    assert!(send(&daemon, &[4, 1, 0, 80, 127, 0, 0, 1, 0]).is_empty());
    // An HTTP request from a DNS-rebinding page (foreign Host): refused, no SOCKS bytes.
    let reply = send(&daemon, b"GET /proxy.pac HTTP/1.1\r\nHost: evil.example:12000\r\n\r\n");
    assert!(reply.starts_with(b"HTTP/1.1 403"), "{}", String::from_utf8_lossy(&reply));
    assert!(!String::from_utf8_lossy(&reply).contains("FindProxyForURL"));
    assert_still_serving(&daemon, &server);

    // Zero methods: no acceptable method.
    assert_eq!(send(&daemon, &[5, 0]), [5, 0xff]);
    // Only GSSAPI offered.
    assert_eq!(send(&daemon, &[5, 1, 1]), [5, 0xff]);
    assert_still_serving(&daemon, &server);

    // Empty domain name.
    let reply = send(&daemon, &[5, 1, 0, 5, 1, 0, 3, 0, 0, 80]);
    assert_eq!(&reply[..2], [5, 0]);
    assert_eq!(reply.get(3), Some(&4), "empty name: host unreachable expected: {reply:?}");
    // 255-byte name: parsed, refused as not a DNS name (longer than 253).
    let mut req = vec![5, 1, 0, 5, 1, 0, 3, 255];
    req.extend(std::iter::repeat_n(b'a', 255));
    req.extend_from_slice(&80u16.to_be_bytes());
    let reply = send(&daemon, &req);
    assert_eq!(reply.get(3), Some(&4), "expected host unreachable: {reply:?}");
    // BIND and UDP ASSOCIATE: command not supported.
    for cmd in [2u8, 3] {
        let reply = send(&daemon, &[5, 1, 0, 5, cmd, 0, 1, 127, 0, 0, 1, 0, 80]);
        assert_eq!(reply.get(3), Some(&7), "cmd {cmd}: {reply:?}");
    }
    // Unknown address type.
    let reply = send(&daemon, &[5, 1, 0, 5, 1, 0, 9, 0, 0]);
    assert_eq!(reply.get(3), Some(&8), "{reply:?}");
    // Wrong version in the request.
    let reply = send(&daemon, &[5, 1, 0, 4, 1, 0, 1, 127, 0, 0, 1, 0, 80]);
    assert_eq!(reply, [5, 0], "only the method choice, then close");
    assert_still_serving(&daemon, &server);
}

#[test]
fn bytes_trickled_one_at_a_time_still_work() {
    let env = Env::new();
    let daemon = start(&env, &[]);
    let server = HttpServer::start("ok");
    let mut s = socks::connect(daemon.socks_addr());
    s.set_nodelay(true).unwrap();
    let mut bytes = vec![5, 1, 0, 5, 1, 0, 3, 9];
    bytes.extend_from_slice(b"localhost");
    bytes.extend_from_slice(&server.port().to_be_bytes());
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
fn a_silent_client_is_dropped_at_the_handshake_deadline() {
    let env = Env::new();
    let config = env.write("config.toml", "handshake_timeout_secs = 1\n");
    let daemon = start(&env, &["--config", config.to_str().unwrap()]);
    let server = HttpServer::start("ok");
    let mut s = socks::connect(daemon.socks_addr());
    s.write_all(&[5]).unwrap();
    let started = Instant::now();
    assert!(socks::read_all(&mut s).is_empty());
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(5), "closed after {waited:?}");
    assert_still_serving(&daemon, &server);
}

#[test]
fn username_password_is_enforced_when_configured() {
    let env = Env::new();
    let config = env.write("config.toml", "[socks]\nusername = \"kh\"\npassword = \"s3cret\"\n");
    let daemon = start(&env, &["--config", config.to_str().unwrap()]);
    let server = HttpServer::start("ok");
    // No-auth offered only: refused.
    assert_eq!(send(&daemon, &[5, 1, 0]), [5, 0xff]);
    // Wrong password: 01 != 00 and close.
    let mut wrong = vec![5, 2, 0, 2, 1, 2];
    wrong.extend_from_slice(b"kh");
    wrong.push(5);
    wrong.extend_from_slice(b"wrong");
    let reply = send(&daemon, &wrong);
    assert_eq!(&reply[..2], [5, 2], "password method chosen even though no-auth was offered");
    assert_eq!(reply[2], 1);
    assert_ne!(reply[3], 0);
    // curl with the right credentials.
    let out = std::process::Command::new("curl")
        .args(["-sS", "--fail", "-x"])
        .arg(format!("socks5h://kh:s3cret@{}", daemon.socks_addr()))
        .arg(format!("http://localhost:{}/hello", server.port()))
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello from ok",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!daemon.log().contains("s3cret"), "password logged");
    assert!(!daemon.log().contains("wrong"), "attempted password logged");
}
