//! `Ciphers`, `MACs`, `KexAlgorithms` and `PubkeyAcceptedAlgorithms` from the user's ssh_config
//! decide what kharond offers a real sshd, as they decide what `ssh` offers.

use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{kharonctl, wait_until};

use crate::jumphost::{Lab, LabOptions};

/// Lines for sshd and for the user's Host blocks.
fn lists(cipher: &str) -> Vec<String> {
    vec![
        format!("Ciphers {cipher}"),
        "MACs hmac-sha2-256".to_owned(),
        "KexAlgorithms diffie-hellman-group14-sha256".to_owned(),
    ]
}

#[test]
fn the_users_algorithm_lists_are_what_kharond_offers() {
    // sshd takes only aes128-ctr. kharon's own default list contains it, so a connection that
    // fails below can only fail because the user's list was applied.
    let mut lab = Lab::new(LabOptions {
        sshd_options: lists("aes128-ctr"),
        host_options: lists("aes256-gcm@openssh.com"),
        ..Default::default()
    });
    lab.start_daemon();
    let (code, _, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0, "sshd offers no cipher from the user's list:\n{}", lab.daemon().log());
    // The reply can reach us before the line reaches the log.
    wait_until(Duration::from_secs(5), || lab.daemon().log().contains("No common Cipher algorithm"));
    let log = lab.daemon().log();
    assert!(log.contains("No common Cipher algorithm"), "{log}");
    assert!(log.contains("aes256-gcm@openssh.com") && log.contains("aes128-ctr"), "{log}");
    // The daemon is still there, and the chain shows why it failed.
    let chain = failed_chain(&lab);
    assert_eq!(chain["state"], "failed", "{chain}");

    // The user fixes the list (the way the hardening guides write it) and reloads.
    reload_and_route(&lab, lists("chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-ctr"));
}

/// The chain's status once it has failed (waited for, bounded).
fn failed_chain(lab: &Lab) -> serde_json::Value {
    wait_until(Duration::from_secs(5), || lab.chain_status()["state"] == "failed");
    lab.chain_status()
}

/// Rewrites the user's Host blocks with `host_options`, reloads, and routes a request.
fn reload_and_route(lab: &Lab, host_options: Vec<String>) {
    lab.write_ssh_config(&LabOptions { host_options, ..Default::default() });
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert!(reload.success(), "{}", reload.stderr);
    assert_eq!(lab.hello().unwrap(), "hello from target");
}

#[test]
fn a_typo_in_an_algorithm_list_stops_the_daemon_at_start_naming_the_line() {
    let lab = Lab::new(LabOptions { host_options: lists("aes256-gmc@openssh.com"), ..Default::default() });
    let text = std::fs::read_to_string(&lab.ssh_config).unwrap();
    let line = 1 + text.lines().position(|l| l.contains("Ciphers")).expect("the Ciphers line");
    let args = lab.daemon_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exited = Kharond::try_start(&lab.env, &args, &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    let expected = format!(
        "{}:{line}: Ciphers: unknown cipher \"aes256-gmc@openssh.com\" (`ssh -Q cipher` lists them)",
        lab.ssh_config.display()
    );
    assert!(exited.stderr.contains(&expected), "{}\nwanted: {expected}", exited.stderr);
}

#[test]
fn pubkey_accepted_algorithms_decides_which_keys_may_sign_in() {
    // The lab's key is ed25519: a list without it leaves kharond nothing to offer.
    let only_rsa = vec!["PubkeyAcceptedAlgorithms rsa-sha2-512,rsa-sha2-256".to_owned()];
    let mut lab = Lab::new(LabOptions { host_options: only_rsa, ..Default::default() });
    lab.start_daemon();
    let (code, _, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0, "the only key is not an accepted type:\n{}", lab.daemon().log());
    let chain = failed_chain(&lab);
    let error = chain["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("its type is not in PubkeyAcceptedAlgorithms"), "{chain}");
    // sshd never saw a signature from it.
    assert!(!lab.hops[0].log().contains("Accepted publickey"), "{}", lab.hops[0].log());

    // `+ssh-rsa`, the usual line for an old jump host, keeps every other type.
    reload_and_route(&lab, vec!["PubkeyAcceptedAlgorithms +ssh-rsa".to_owned()]);
}
