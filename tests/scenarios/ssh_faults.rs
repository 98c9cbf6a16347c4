//! Jump hosts that die, freeze or come back, and clients that stop reading (docs/performance.md,
//! items 1, 2, 3, 5; docs/ssh-engine.md, "Slow readers"):
//! kharond must answer every SOCKS request in bounded time, detect dead sessions within
//! ServerAliveInterval × CountMax, and recover without a restart.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use kharon_e2e::wait_until;

use crate::jumphost::{Lab, LabOptions};

/// ServerAlive 1 s × 3 (detection in ≈ 3 s) and a short ConnectTimeout per hop.
fn fast_keepalive() -> Vec<String> {
    vec!["ServerAliveInterval 1".into(), "ServerAliveCountMax 3".into(), "ConnectTimeout 3".into()]
}

#[test]
fn killed_jump_host_is_redialled_after_restart() {
    let mut lab = Lab::new(LabOptions { host_options: fast_keepalive(), ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");

    lab.hops[0].kill();
    // The session's end is noticed (EOF) without any request.
    assert!(
        wait_until(Duration::from_secs(5), || lab.chain_status()["state"] != "connected"),
        "{}",
        lab.chain_status()
    );
    // While it is down, requests fail fast with an error reply, not a hang.
    let (code, elapsed, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0);
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let status = lab.chain_status();
    assert_eq!(status["state"], "failed", "{status}");
    assert!(status["last_error"].as_str().unwrap_or("").contains("hop 1/1 hop1"), "{status}");
    // The error says when it happened, and `status` shows its age.
    let now_ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let at = status["last_error_ms"].as_u64().unwrap_or(0);
    assert!(at > 0 && at <= now_ms && now_ms - at < 30_000, "{status}");
    let table = kharon_e2e::kharonctl::run(&lab.env, &["status"]).stdout;
    let row = table.lines().find(|l| l.contains("hop 1/1 hop1")).unwrap_or_default();
    assert!(row.contains(" ago)"), "{table}");

    lab.hops[0].restart();
    lab.wait_backoff_over();
    // The next request succeeds, same daemon, and the old error is history, not state.
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let status = lab.chain_status();
    assert_eq!(status["state"], "connected", "{status}");
    assert_eq!((&status["last_error"], &status["last_error_ms"]), (&"".into(), &0.into()), "{status}");
    let table = kharon_e2e::kharonctl::run(&lab.env, &["status"]).stdout;
    assert!(!table.contains("hop 1/1 hop1"), "{table}");
}

#[test]
fn frozen_jump_host_is_detected_by_keepalive_and_clients_never_hang() {
    let mut lab = Lab::new(LabOptions { host_options: fast_keepalive(), ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");

    lab.hops[0].stop();
    let frozen = Instant::now();
    // Before keepalive (1 s × 3) gives up, status already shows that the chain does not answer,
    // and says so instead of waiting for it.
    let chain = lab.chain_status();
    assert_eq!(chain["state"], "connected", "{chain}");
    assert_eq!(chain["probe_failed"], "no answer within 1s", "{chain}");
    assert!(chain["round_trip_us"].is_null(), "{chain}");
    // A request on the frozen session gets an error reply within the connect timeout (10 s).
    let (code, elapsed, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0, "a frozen jump host cannot have connected us");
    assert!(elapsed <= Duration::from_secs(11), "reply took {elapsed:?}");
    // Keepalive 1 s × 3 (or the probe after the failed open) drops the session.
    assert!(
        wait_until(Duration::from_secs(12), || lab.chain_status()["state"] != "connected"),
        "{}",
        lab.chain_status()
    );
    eprintln!("frozen session dropped after {:?}", frozen.elapsed());
    // New dials hit a frozen listener: bounded by ConnectTimeout 3, an error reply, no hang.
    lab.wait_backoff_over();
    let (code, elapsed, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0);
    assert!(elapsed <= Duration::from_secs(11), "reply took {elapsed:?}");

    lab.hops[0].cont();
    let recovered = wait_until(Duration::from_secs(40), || lab.hello().is_ok());
    assert!(recovered, "no recovery after SIGCONT: {}\n{}", lab.chain_status(), lab.daemon().log());
}

#[test]
fn middle_hop_dying_is_reported_with_its_name() {
    let mut lab = Lab::new(LabOptions { hops: 3, host_options: fast_keepalive(), ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    // A response in progress when the hop dies: its client is told (a reset), and does not get an
    // end of stream it could take for the whole response.
    let (code, _, mut held) = lab.socks_connect(lab.target.port());
    assert_eq!(code, 0);
    held.write_all(b"GET /hold/4096/30 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    held.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut first = vec![0u8; 4096];
    let got = held.read(&mut first).unwrap();
    assert!(got > 0);

    lab.hops[1].kill();
    let mut rest = Vec::new();
    let broken = held.read_to_end(&mut rest);
    assert!(
        matches!(&broken, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the client of a channel whose session died got {broken:?} after {} bytes",
        got + rest.len()
    );
    assert!(
        wait_until(Duration::from_secs(8), || lab.chain_status()["state"] != "connected"),
        "{}",
        lab.chain_status()
    );
    lab.wait_backoff_over();
    let (code, elapsed, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0);
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    let error = lab.chain_status()["last_error"].as_str().unwrap_or("").to_owned();
    // hop 1 still answers; hop 2 cannot be reached from it. The error names hop 2 and where it is configured.
    let config = lab.ssh_config.display().to_string();
    assert!(error.contains("hop 2/3 hop2") && error.contains(&format!("{config}:")), "{error}");

    lab.hops[1].restart();
    lab.wait_backoff_over();
    assert_eq!(lab.hello().unwrap(), "hello from target");
}

#[test]
fn slow_reader_does_not_stall_other_connections_on_the_same_jump_host() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");

    // Connection A asks for 2 GiB and never reads.
    let (code, _, mut a) = lab.socks_connect(lab.target.port());
    assert_eq!(code, 0);
    write!(a, "GET /bytes/{} HTTP/1.1\r\nHost: x\r\n\r\n", 2u64 << 30).unwrap();
    let mut first = [0u8; 1];
    a.read_exact(&mut first).unwrap();
    let started = Instant::now();
    // Connection B: several requests on the same session while A is stuck. Each must finish in
    // bounded time; the relay drops A once it has read nothing for the stall limit.
    // Runs past the time A's buffers fill plus the pump's grace, so A's channel gets closed.
    let mut worst = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(7) {
        let t = Instant::now();
        assert_eq!(lab.hello().unwrap(), "hello from target");
        worst = worst.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("slowest request beside a stalled reader: {worst:?} (test ran {:?})", started.elapsed());
    // The tunnel pump gives a stopped reader 3 s (ssh::tunnel::GRACE) before closing its channel.
    assert!(worst < Duration::from_secs(8), "{worst:?}");
    // A was given up: reading it now ends (after what was buffered) well short of 2 GiB.
    a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    while let Ok(n) = a.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    assert!(total < 1 << 30, "A read {total} bytes");
    assert!(lab.daemon().log().contains("the client read nothing for"), "{}", lab.daemon().log());
}
