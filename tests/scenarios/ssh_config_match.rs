//! ssh_config constructs kharond cannot take whole, and what it does: a `Match` it cannot evaluate
//! costs only the jump hosts it applies to, named with its file:line in `status` and the log,
//! while the daemon, the other jump hosts (real sshd) and the direct path keep working; and a
//! jump host with no Host block is connected as `ssh` would, with "did you mean" when that fails.

use std::time::Duration;

use kharon_e2e::servers::HttpServer;
use kharon_e2e::sshd::{self};
use kharon_e2e::{inventory, kharonctl, socks, wait_until};

use crate::jumphost::{Lab, LabOptions};

/// Starts the lab's daemon on `clusters` instead of the lab's own one-cluster inventory.
fn start(lab: &mut Lab, clusters: &[serde_json::Value]) {
    let inv = lab.env.write("inventory.json", &inventory::to_json(clusters));
    lab.start_daemon_on(&inv, &[]);
}

fn chain<'a>(status: &'a serde_json::Value, jumphost: &str) -> &'a serde_json::Value {
    status["chains"]
        .as_array()
        .and_then(|chains| chains.iter().find(|c| c["jumphost"] == jumphost))
        .unwrap_or_else(|| panic!("no chain {jumphost} in {status}"))
}

#[test]
fn an_unsupported_match_refuses_one_jump_host_and_everything_else_keeps_working() {
    let mut lab = Lab::new(LabOptions::default());
    // A second jump host on the same real sshd, which a `Match tagged` line applies to.
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    let known_hosts = format!("UserKnownHostsFile {}", lab.known_hosts().display());
    config.push_str(&sshd::host_block(
        "hop-tagged",
        lab.hops[0].port(),
        &sshd::current_user(),
        &lab.key,
        &[&known_hosts],
    ));
    let line = config.lines().count() + 1;
    config.push_str("Match originalhost hop-tagged tagged kharon\n  User nobody\n");
    std::fs::write(&lab.ssh_config, config).unwrap();
    let origin = format!("{}:{line}", lab.ssh_config.display());
    let jumphost = lab.jumphost();
    start(
        &mut lab,
        &[
            inventory::routed("c1", &jumphost, "c1.example"),
            inventory::routed("c2", "hop-tagged", "c2.example"),
        ],
    );

    // The other jump host (a real sshd) and the direct path work.
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let direct = HttpServer::start("direct");
    socks::assert_still_serving(lab.daemon(), &direct, None);

    // status names the line, for the affected jump host only.
    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let refused = chain(&status, "hop-tagged");
    assert_eq!(refused["state"], "refused", "{refused}");
    assert_eq!(refused["config_origin"], origin.as_str(), "{refused}");
    let reason = refused["config_error"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with(&format!(
            "{origin}: Match tagged kharon: kharon cannot evaluate this for hop-tagged"
        )),
        "{reason}"
    );
    let good = chain(&status, &jumphost);
    assert_eq!(
        (good["state"].as_str(), good["config_error"].as_str()),
        (Some("connected"), Some("")),
        "{good}"
    );
    let human = kharonctl::run(&lab.env, &["status"]);
    assert!(human.success(), "{}", human.stderr);
    assert!(
        human.stdout.contains(&format!("jump host hop-tagged is not used: {origin}: Match tagged kharon")),
        "{}",
        human.stdout
    );
    assert!(human.stdout.contains("refused"), "{}", human.stdout);

    // A connection routed through it fails at once, with the reason in the log, and nothing
    // is dialled for it.
    let (code, _) = socks::connect_by_name(lab.daemon().socks_addr(), "api.c2.example", 443);
    assert_eq!(code, 3, "network unreachable\n{}", lab.daemon().log());
    let wanted = format!("jump host hop-tagged cannot be used: {origin}: Match tagged kharon");
    assert!(
        wait_until(Duration::from_secs(5), || lab
            .daemon()
            .log()
            .lines()
            .any(|l| l.contains("cannot connect") && l.contains(&wanted))),
        "{}",
        lab.daemon().log()
    );
    assert_eq!(lab.hops[0].log().matches("Accepted publickey").count(), 1, "{}", lab.hops[0].log());
    assert!(!lab.hops[0].log().contains("nobody"), "{}", lab.hops[0].log());
}

#[test]
fn a_jump_host_without_a_host_block_connects_like_ssh_and_a_failing_one_says_did_you_mean() {
    let mut lab = Lab::new(LabOptions::default());
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    // `hop-1` and `hop-9` are named by no Host block: ssh would take `Host *` for them.
    config.push_str(&format!(
        "Host * !hop-9\n  HostName 127.0.0.1\n  Port {}\n  User {}\n  IdentityFile {}\n  UserKnownHostsFile {}\n\n\
         Host *\n  HostName 127.0.0.1\n  Port {}\n",
        lab.hops[0].port(),
        sshd::current_user(),
        lab.key.display(),
        lab.known_hosts().display(),
        kharon_e2e::free_port(),
    ));
    std::fs::write(&lab.ssh_config, config).unwrap();
    start(
        &mut lab,
        &[inventory::routed("c1", "hop-1", "c1.example"), inventory::routed("c2", "hop-9", "c2.example")],
    );

    assert_eq!(lab.hello().unwrap(), "hello from target");
    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let hop = chain(&status, "hop-1");
    assert_eq!(hop["state"], "connected", "{hop}");
    assert_eq!(hop["hops"][0], format!("{}@127.0.0.1:{}", sshd::current_user(), lab.hops[0].port()), "{hop}");

    let (code, _) = socks::connect_by_name(lab.daemon().socks_addr(), "api.c2.example", 443);
    assert_ne!(code, 0);
    let hint = "no Host block names it, did you mean \"hop1\"?";
    assert!(
        wait_until(Duration::from_secs(5), || lab
            .daemon()
            .log()
            .lines()
            .any(|l| l.contains("cannot connect") && l.contains(hint))),
        "{}",
        lab.daemon().log()
    );
    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let failed = chain(&status, "hop-9");
    assert_eq!(failed["state"], "failed", "{failed}");
    assert!(failed["last_error"].as_str().is_some_and(|e| e.contains(hint)), "{failed}");
}
