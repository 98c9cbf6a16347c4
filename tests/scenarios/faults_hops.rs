//! Frozen and killed jump hosts at each position of a 3-hop chain (docs/performance.md, items 1, 2, 5):
//! every request is answered with an error in bounded time while a hop is down, the chain's error
//! names the hop that failed, and the same daemon recovers once the hop is back.
//!
//! A frozen or killed single hop, the middle hop killed in a 3-hop chain, and a simulated wake
//! with a frozen hop are in `ssh_faults`; this file covers the other positions.

use std::time::{Duration, Instant};

use kharon_e2e::wait_until;

use crate::jumphost::{Lab, LabOptions};

/// ServerAlive 1 s × 3 and ConnectTimeout 3 s, as in `ssh_faults`.
fn fast_keepalive() -> Vec<String> {
    vec!["ServerAliveInterval 1".into(), "ServerAliveCountMax 3".into(), "ConnectTimeout 3".into()]
}

fn three_hops() -> Lab {
    let mut lab = Lab::new(LabOptions { hops: 3, host_options: fast_keepalive(), ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    lab
}

/// A request while hop `n` is down: an error reply within `limit`, never a hang.
fn refused_within(lab: &Lab, limit: Duration, what: &str) {
    let (code, elapsed, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0, "{what}: a request cannot have got through");
    assert!(elapsed <= limit, "{what}: the reply took {elapsed:?}");
}

/// Once the dead session is noticed and a redial failed, the chain's error names hop `n` of 3.
fn error_names_hop(lab: &Lab, n: usize, what: &str) {
    assert!(
        wait_until(Duration::from_secs(15), || lab.chain_status()["state"] != "connected"),
        "{what}: the session was not dropped: {}",
        lab.chain_status()
    );
    lab.wait_backoff_over();
    refused_within(lab, Duration::from_secs(11), what);
    let status = lab.chain_status();
    let error = status["last_error"].as_str().unwrap_or_default();
    assert!(error.contains(&format!("hop {n}/3 hop{n}")), "{what}: {status}");
    // Where the hop is configured, so the user knows which Host block to look at.
    assert!(error.contains(&format!("{}:", lab.ssh_config.display())), "{what}: {status}");
}

fn recovers(lab: &Lab, what: &str) {
    let since = Instant::now();
    let recovered = wait_until(Duration::from_secs(45), || lab.hello().is_ok());
    assert!(recovered, "{what}: no recovery: {}\n{}", lab.chain_status(), lab.daemon().log());
    eprintln!("{what}: recovered after {:?}", since.elapsed());
    assert_eq!(lab.chain_status()["state"], "connected");
}

#[test]
fn a_frozen_hop_at_each_position_of_three_is_named_and_the_chain_recovers() {
    let lab = three_hops();
    let pid = lab.daemon().pid();
    for n in 1..=3 {
        let what = format!("hop {n} frozen");
        lab.hops[n - 1].stop();
        refused_within(&lab, Duration::from_secs(11), &what);
        error_names_hop(&lab, n, &what);
        lab.hops[n - 1].cont();
        recovers(&lab, &what);
    }
    // The same daemon all along.
    assert_eq!(lab.daemon().pid(), pid);
}

#[test]
fn a_killed_first_or_last_hop_of_three_is_named_and_the_chain_recovers() {
    let mut lab = three_hops();
    // The middle hop: ssh_faults::middle_hop_dying_is_reported_with_its_name.
    for n in [1, 3] {
        let what = format!("hop {n} killed");
        lab.hops[n - 1].kill();
        error_names_hop(&lab, n, &what);
        lab.hops[n - 1].restart();
        lab.wait_backoff_over();
        recovers(&lab, &what);
    }
}
