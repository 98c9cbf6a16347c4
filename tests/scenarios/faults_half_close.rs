//! Half-close both ways on both paths (docs/performance.md, item 6): whichever side shuts down its
//! sending half first, what the other side still sends arrives complete and in order, through the
//! direct path (splice) and through a jump host.
//!
//! The client closing first on the direct path is `direct::half_close_still_delivers_the_answer`.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::pattern;
use kharon_e2e::{Env, inventory, socks};

use crate::jumphost::{Lab, LabOptions, TARGET};

const LEN: usize = 1 << 20;

/// A target for one connection that reads until the client's EOF, then answers with 1 MiB.
fn answers_after_eof() -> (u16, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut req = Vec::new();
            let _ = s.read_to_end(&mut req);
            let _ = s.write_all(&pattern(LEN));
            let _ = tx.send(req);
        }
    });
    (port, rx)
}

/// A target for one connection that greets, shuts down its sending half at once, then reads
/// everything the client sends until EOF.
fn closes_first() -> (u16, mpsc::Receiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let _ = s.write_all(b"bye");
            let _ = s.shutdown(Shutdown::Write);
            let mut got = Vec::new();
            let _ = s.read_to_end(&mut got);
            let _ = tx.send(got);
        }
    });
    (port, rx)
}

fn client_closes_first(mut s: TcpStream, rx: mpsc::Receiver<Vec<u8>>) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(b"question").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let answer = socks::read_all(&mut s);
    assert_eq!(answer.len(), LEN);
    assert!(answer == pattern(LEN), "the answer differs");
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), b"question");
}

fn target_closes_first(mut s: TcpStream, rx: mpsc::Receiver<Vec<u8>>) {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // The target's EOF arrives while our half is still open …
    assert_eq!(socks::read_all(&mut s), b"bye");
    // … and what we send after it still reaches the target, all of it.
    s.write_all(&pattern(LEN)).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    let got = rx.recv_timeout(Duration::from_secs(30)).expect("the target got our EOF");
    assert_eq!(got.len(), LEN);
    assert!(got == pattern(LEN), "what the target received differs");
}

#[test]
fn the_target_closing_first_on_the_direct_path_still_gets_the_rest() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    let (port, rx) = closes_first();
    let (code, s) = socks::connect_by_name(daemon.socks_addr(), "localhost", port);
    assert_eq!(code, 0);
    target_closes_first(s, rx);
}

#[test]
fn half_close_either_way_through_a_jump_host() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();

    let (port, rx) = answers_after_eof();
    let (code, s) = socks::connect_by_name(lab.daemon().socks_addr(), TARGET, port);
    assert_eq!(code, 0, "{}", lab.daemon().log());
    client_closes_first(s, rx);

    let (port, rx) = closes_first();
    let (code, s) = socks::connect_by_name(lab.daemon().socks_addr(), TARGET, port);
    assert_eq!(code, 0, "{}", lab.daemon().log());
    target_closes_first(s, rx);
}
