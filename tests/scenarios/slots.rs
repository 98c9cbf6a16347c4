//! Connection slots, when every one is taken (kharond/src/listener.rs): connections that never
//! finish their SOCKS handshake (any local user can open them) make room for a new client, the
//! oldest first; a connection whose handshake has finished is never closed for that, and with
//! all slots established a new client waits until one closes.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kharon_e2e::echo::EchoServer;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, procfs, socks, wait_until};

const SLOTS: usize = 32;

fn start(env: &Env) -> Kharond {
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    // A handshake deadline far beyond the test, so only eviction can close a silent client.
    let config =
        env.write("config.toml", &format!("max_connections = {SLOTS}\nhandshake_timeout_secs = 600\n"));
    Kharond::start(env, &["--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()])
}

fn round_trip(s: &mut TcpStream, message: &[u8]) {
    s.write_all(message).expect("send through kharond");
    let mut got = vec![0u8; message.len()];
    s.read_exact(&mut got).expect("echo through kharond");
    assert_eq!(got, message);
}

/// A SOCKS CONNECT to the echo server that succeeds and carries data.
fn established(daemon: &Kharond, echo: &EchoServer) -> TcpStream {
    let (code, mut s) = socks::connect_by_ip(daemon.socks_addr(), echo.addr());
    assert_eq!(code, 0, "CONNECT failed\n{}", daemon.log());
    round_trip(&mut s, b"hello");
    s
}

/// kharond's descriptor count once it holds still (the start-up readiness probe's connection may
/// still be open right after start, which once made the baseline one too high); bounded.
fn settled_fds(daemon: &Kharond) -> usize {
    let mut last = procfs::open_fds(daemon.pid());
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(50));
        let now = procfs::open_fds(daemon.pid());
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

/// Whether the peer has closed `s` (EOF or reset) without sending anything; does not wait.
fn closed_now(s: &TcpStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let closed = match s.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => panic!("a silent client got bytes"),
        Err(e) if e.kind() == ErrorKind::WouldBlock => false,
        Err(_) => true,
    };
    s.set_nonblocking(false).unwrap();
    closed
}

#[test]
fn silent_connections_give_way_to_a_new_client_oldest_first() {
    let env = Env::new();
    let daemon = start(&env);
    let echo = EchoServer::start();
    let baseline = settled_fds(&daemon);

    let silent: Vec<TcpStream> = (0..SLOTS).map(|_| socks::connect(daemon.socks_addr())).collect();
    assert!(
        wait_until(Duration::from_secs(10), || procfs::open_fds(daemon.pid()) >= baseline + SLOTS),
        "kharond did not accept all {SLOTS} silent connections\n{}",
        daemon.log()
    );

    let mut good = established(&daemon, &echo);
    assert!(
        wait_until(Duration::from_secs(10), || closed_now(&silent[0])),
        "the oldest silent connection should have been closed to make room"
    );
    let still_open = silent[1..].iter().filter(|s| !closed_now(s)).count();
    assert_eq!(still_open, SLOTS - 1, "only the oldest silent connection is closed");
    round_trip(&mut good, b"still served");
}

#[test]
fn established_connections_are_never_evicted_and_a_new_client_waits_for_one_to_close() {
    let env = Env::new();
    let daemon = start(&env);
    let echo = EchoServer::start();
    let mut open: Vec<TcpStream> = (0..SLOTS).map(|_| established(&daemon, &echo)).collect();

    // Slots are all established: the new client's greeting gets no answer yet.
    let mut waiting = socks::connect(daemon.socks_addr());
    waiting.write_all(&[5, 1, 0]).unwrap();
    waiting.set_read_timeout(Some(Duration::from_millis(1500))).unwrap();
    let mut method = [0u8; 2];
    match waiting.read(&mut method) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("a client beyond {SLOTS} established connections was answered: {other:?}"),
    }
    for s in &mut open {
        round_trip(s, b"not evicted");
    }

    drop(open.pop());
    waiting.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    waiting.read_exact(&mut method).expect("served once a slot is free");
    assert_eq!(method, [5, 0]);
    waiting.write_all(&socks::request_ip(echo.addr())).unwrap();
    let mut reply = [0u8; 10];
    waiting.read_exact(&mut reply).unwrap();
    assert_eq!(reply[1], 0, "CONNECT succeeds: {reply:?}");
    round_trip(&mut waiting, b"served at last");
    for s in &mut open {
        round_trip(s, b"still not evicted");
    }
}
