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
    // The daemon is still there, and the chain shows why it failed, in ssh's words, with the line
    // that chose the list.
    let chain = failed_chain(&lab);
    assert_eq!(chain["state"], "failed", "{chain}");
    let error = chain["last_error"].as_str().unwrap_or_default();
    let text = std::fs::read_to_string(&lab.ssh_config).unwrap();
    let line = 1 + text.lines().position(|l| l.contains("Ciphers")).expect("the Ciphers line");
    let expected = format!(
        "no matching cipher found. Their offer: aes128-ctr; kharond offered aes256-gcm@openssh.com (Ciphers at \
         {}:{line}); if you accept it, add `Ciphers +aes128-ctr` to this host's block, as ssh needs too",
        lab.ssh_config.display()
    );
    assert!(error.contains(&expected), "{error}\nwanted: {expected}");

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
fn adding_an_algorithm_kharond_cannot_do_is_refused_at_start_and_at_reload_naming_the_line() {
    let umac = vec!["MACs +umac-128@openssh.com".to_owned()];
    let mut lab = Lab::new(LabOptions { host_options: umac.clone(), ..Default::default() });
    let text = std::fs::read_to_string(&lab.ssh_config).unwrap();
    let line = 1 + text.lines().position(|l| l.contains("MACs")).expect("the MACs line");
    let expected = format!(
        "{}:{line}: MACs: \"umac-128@openssh.com\" is an OpenSSH MAC that kharon's SSH library (russh) does not \
         implement, so kharond cannot offer it and would not reach a server that needs it; remove it from this line",
        lab.ssh_config.display()
    );
    let args = lab.daemon_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let exited = Kharond::try_start(&lab.env, &args, &[]).err().expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&expected), "{}\nwanted: {expected}", exited.stderr);

    // Written while kharond runs, the reload refuses it and the config read before stays.
    lab.write_ssh_config(&LabOptions::default());
    lab.start_daemon();
    lab.write_ssh_config(&LabOptions { host_options: umac, ..Default::default() });
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert!(!reload.success(), "a refused ssh config is a partial reload");
    assert!(reload.stderr.contains(&expected), "{}\nwanted: {expected}", reload.stderr);
    assert_eq!(lab.hello().unwrap(), "hello from target");
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

/// Whether this CPU has the AES and carry-less multiply instructions AES-GCM uses, read from the
/// kernel's view (`/proc/cpuinfo` flags) rather than the way kharond asks, so the two can disagree.
fn aes_gcm_accelerated() -> bool {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").expect("read /proc/cpuinfo");
    let has = |flag: &str| {
        cpuinfo
            .lines()
            .filter(|l| l.starts_with("flags") || l.starts_with("Features"))
            .any(|l| l.split_whitespace().any(|f| f == flag))
    };
    (has("aes") && has("pclmulqdq")) || (has("aes") && has("pmull"))
}

/// The cipher sshd (at LogLevel DEBUG) negotiated with its clients so far, one per connection.
fn negotiated_ciphers(sshd_log: &str) -> Vec<String> {
    sshd_log
        .lines()
        .filter_map(|l| l.split("kex: client->server cipher: ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Routes one request through a jump host whose sshd offers OpenSSH's default ciphers and logs
/// the negotiation; returns the cipher of kharond's session.
fn cipher_kharond_negotiates(host_options: Vec<String>) -> String {
    let mut lab = Lab::new(LabOptions {
        host_options,
        sshd_options: vec!["LogLevel DEBUG".into()],
        ..Default::default()
    });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let log = lab.hops[0].log();
    let ciphers = negotiated_ciphers(&log);
    // The harness's readiness probe never gets as far as a key exchange: one line, ours.
    assert_eq!(ciphers.len(), 1, "{log}");
    ciphers[0].clone()
}

#[test]
fn without_a_ciphers_line_kharond_negotiates_aes_gcm_where_the_cpu_accelerates_it() {
    let expected =
        if aes_gcm_accelerated() { "aes256-gcm@openssh.com" } else { "chacha20-poly1305@openssh.com" };
    assert_eq!(cipher_kharond_negotiates(Vec::new()), expected);
    // The user's Ciphers line still wins: the cipher kharon would otherwise put second.
    let other =
        if aes_gcm_accelerated() { "chacha20-poly1305@openssh.com" } else { "aes256-gcm@openssh.com" };
    assert_eq!(cipher_kharond_negotiates(vec![format!("Ciphers {other}")]), other);
}
