//! One deadline from accept to request: a client that is silent, starts late or trickles its
//! handshake (SOCKS or the PAC request) is closed `handshake_timeout_secs` after it connected,
//! not after twice that, and the daemon keeps serving.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::socks::{Close, assert_still_serving, connect_request};
use kharon_e2e::{Env, inventory, socks};

const TIMEOUT: Duration = Duration::from_secs(4);
/// Generous for a loaded machine, and still well short of the 2 × TIMEOUT a second timer gave.
const SLACK: Duration = Duration::from_millis(2500);

fn start(env: &Env) -> Kharond {
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let config = env.write("config.toml", &format!("handshake_timeout_secs = {}\n", TIMEOUT.as_secs()));
    Kharond::start(env, &["--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()])
}

/// Sends `bytes` on a thread of its own: the first after `first_after`, then one per second,
/// until they run out or the daemon has closed.
fn trickle(s: &TcpStream, bytes: Vec<u8>, first_after: Duration) {
    let mut writer = s.try_clone().expect("clone socket");
    std::thread::spawn(move || {
        std::thread::sleep(first_after);
        for b in bytes {
            if writer.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
}

/// Waits for the daemon to close `s`; returns how long after `connected` it did.
fn closed_after(s: &mut TcpStream, connected: Instant) -> Duration {
    let (_, close) = socks::read_to_close(s);
    assert_ne!(close, Close::Open, "still open after the read timeout");
    connected.elapsed()
}

fn assert_closed_at_the_deadline(what: &str, waited: Duration) {
    assert!(waited >= TIMEOUT - Duration::from_millis(200), "{what}: closed early, after {waited:?}");
    assert!(waited < TIMEOUT + SLACK, "{what}: closed after {waited:?}, the deadline is {TIMEOUT:?}");
}

#[test]
fn a_silent_client_is_closed_at_the_deadline_not_twice_it() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let connected = Instant::now();
    let mut s = socks::connect(daemon.socks_addr());
    assert_closed_at_the_deadline("silent", closed_after(&mut s, connected));
    assert_still_serving(&daemon, &server, None);
}

#[test]
fn a_late_and_trickling_socks_client_is_closed_at_the_deadline() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let handshake = [&[5, 1, 0][..], &connect_request(b"localhost", server.port())].concat();
    let connected = Instant::now();
    let mut s = socks::connect(daemon.socks_addr());
    // The first byte just before the deadline, then one a second: the clock started at accept.
    trickle(&s, handshake.clone(), TIMEOUT - Duration::from_secs(1));
    assert_closed_at_the_deadline("late, then 1 byte/s", closed_after(&mut s, connected));

    let connected = Instant::now();
    let mut s = socks::connect(daemon.socks_addr());
    trickle(&s, handshake, Duration::ZERO);
    assert_closed_at_the_deadline("1 byte/s", closed_after(&mut s, connected));
    assert_still_serving(&daemon, &server, None);
}

#[test]
fn a_late_pac_request_gets_only_what_is_left_of_the_deadline() {
    let env = Env::new();
    let daemon = start(&env);
    let server = HttpServer::start("ok");
    let connected = Instant::now();
    let mut s = socks::connect(daemon.socks_addr());
    trickle(
        &s,
        b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
        TIMEOUT - Duration::from_secs(1),
    );
    assert_closed_at_the_deadline("late PAC request", closed_after(&mut s, connected));
    assert_still_serving(&daemon, &server, None);
}
