//! The direct path: names that no cluster claims are resolved by kharond and connected directly,
//! byte for byte, with half-close honoured.

use std::io::{Read, Write};
use std::process::Command;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::{HttpServer, pattern};
use kharon_e2e::{Env, inventory, socks};

fn start(env: &Env) -> Kharond {
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    Kharond::start(env, &["--inventory", inv.to_str().unwrap()])
}

#[test]
fn curl_fetches_through_socks5h_byte_exact() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("direct");
    let out_file = env.path().join("payload");
    let len = 8 * 1024 * 1024 + 17;
    let status = Command::new("curl")
        .args(["-sS", "--fail", "-x", &daemon.proxy_url(), "-o"])
        .arg(&out_file)
        .arg(format!("http://localhost:{}/bytes/{len}", server.port()))
        .status()
        .expect("run curl");
    assert!(status.success(), "curl failed: {status}\n{}", daemon.log());
    let got = std::fs::read(&out_file).unwrap();
    assert_eq!(got.len(), len);
    assert!(got == pattern(len), "payload differs");

    let hello = Command::new("curl")
        .args(["-sS", "--fail", "-x", &daemon.proxy_url()])
        .arg(format!("http://localhost:{}/hello", server.port()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&hello.stdout), "hello from direct");
}

#[test]
fn ip_targets_and_refused_ports_get_the_right_reply() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ip");
    // IPv4 literal sent as a name goes direct.
    let (code, mut s) = socks::connect_by_name(daemon.socks_addr(), "127.0.0.1", server.port());
    assert_eq!(code, 0);
    s.write_all(b"GET /hello HTTP/1.0\r\n\r\n").unwrap();
    let reply = String::from_utf8_lossy(&socks::read_all(&mut s)).into_owned();
    assert!(reply.ends_with("hello from ip"), "{reply}");
    // A closed port: 0x05 connection refused.
    let closed = kharon_e2e::free_port();
    let (code, _) = socks::connect_by_name(daemon.socks_addr(), "localhost", closed);
    assert_eq!(code, 5, "expected connection refused");
    // An unresolvable name: 0x04 host unreachable.
    let (code, _) = socks::connect_by_name(daemon.socks_addr(), "no-such-host.invalid", 80);
    assert_eq!(code, 4, "expected host unreachable");
}

#[test]
fn ipv6_target_is_connected() {
    let listener = std::net::TcpListener::bind("[::1]:0").expect("IPv6 loopback [::1]");
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(b"v6 ok");
        }
    });
    let env = Env::new();
    let daemon = start(&env);
    let mut s = socks::connect(daemon.socks_addr());
    s.write_all(&[5, 1, 0]).unwrap();
    let mut m = [0u8; 2];
    s.read_exact(&mut m).unwrap();
    let mut req = vec![5, 1, 0, 4];
    req.extend_from_slice(&std::net::Ipv6Addr::LOCALHOST.octets());
    req.extend_from_slice(&port.to_be_bytes());
    s.write_all(&req).unwrap();
    let mut head = [0u8; 22];
    s.read_exact(&mut head).unwrap();
    assert_eq!(head[1], 0, "reply {head:?}");
    assert_eq!(socks::read_all(&mut s), b"v6 ok");
}

#[test]
fn half_close_still_delivers_the_answer() {
    let env = Env::new();
    let daemon = start(&env);
    // A target that reads until EOF, then answers with 1 MiB.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut req = Vec::new();
            let _ = s.read_to_end(&mut req);
            let _ = s.write_all(&pattern(1 << 20));
        }
    });
    let (code, mut s) = socks::connect_by_name(daemon.socks_addr(), "localhost", port);
    assert_eq!(code, 0);
    s.write_all(b"question").unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let got = socks::read_all(&mut s);
    assert_eq!(got.len(), 1 << 20);
    assert!(got == pattern(1 << 20));
}

#[test]
fn routed_target_whose_jump_host_is_down_is_refused_not_hung() {
    let env = Env::new();
    // jump-a has no Host block: as with `ssh jump-a`, the defaults and `Host *` apply, and
    // nothing listens where they point.
    let config = env.write(
        "home/.ssh/config",
        &format!("Host *\n  HostName 127.0.0.1\n  Port {}\n", kharon_e2e::free_port()),
    );
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let daemon = Kharond::start(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", config.to_str().unwrap()],
    );
    let started = std::time::Instant::now();
    let (code, _) = socks::connect_by_name(daemon.socks_addr(), "api.a.example", 6443);
    assert_ne!(code, 0, "a routed target with no usable jump host must not succeed");
    assert!(started.elapsed() < std::time::Duration::from_secs(12));
}
