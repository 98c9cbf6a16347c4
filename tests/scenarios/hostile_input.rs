//! Hostile data from the inventory and the ssh_config: a `jumphost` fact never becomes
//! a shell command, and an ssh_config that would overflow the loader's stack is refused at start
//! and on reload, while the daemon keeps serving.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, kharonctl, socks, wait_until};

use crate::jumphost::{Lab, LabOptions};

/// Starts the lab's daemon on `clusters` instead of the lab's own one-cluster inventory.
fn start_with_inventory(lab: &mut Lab, clusters: &[serde_json::Value]) {
    let inv = lab.env.write("inventory.json", &inventory::to_json(clusters));
    lab.start_daemon_on(&inv, &[]);
}

#[test]
fn a_jumphost_fact_with_shell_syntax_never_runs_and_is_reported() {
    let mut lab = Lab::new(LabOptions::default());
    // The reproduction: a generic ProxyCommand for a wildcard block, and a jump
    // host name from the inventory that the block matches.
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    config.push_str("Host *.jump.test\n  ProxyCommand /bin/echo %h\n");
    std::fs::write(&lab.ssh_config, config).unwrap();
    // ssh lowercases the host name behind %h, and the temp dir's name has capitals: so the
    // command reaches the marker from $HOME (`cd` alone goes there), all in lowercase.
    let marker = lab.env.path().join("marker");
    let evil = "$(cd;touch ../marker).jump.test";
    let jumphost = lab.jumphost();
    start_with_inventory(
        &mut lab,
        &[
            inventory::routed("c-evil", evil, "evil.invalid"),
            inventory::routed("c1", &jumphost, "c1.example"),
        ],
    );

    let (code, _) = socks::connect_by_name(lab.daemon().socks_addr(), "api.evil.invalid", 443);
    assert_ne!(code, 0, "{}", lab.daemon().log());
    // A spawned shell would have run `touch` before the reply could fail; give it time anyway.
    assert!(
        !wait_until(Duration::from_secs(1), || marker.exists()),
        "the jumphost fact ran as a command:\n{}",
        lab.daemon().log()
    );

    // The cluster is reported, naming it and the fact, in the log and in `status`.
    let log = lab.daemon().log();
    let warned = log.lines().find(|l| l.contains("WARN") && l.contains("cluster c-evil"));
    assert!(warned.is_some_and(|l| l.contains("jumphost value")), "{log}");
    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let warnings: Vec<&str> =
        status["inventory"]["warnings"].as_array().into_iter().flatten().filter_map(|w| w.as_str()).collect();
    let warning = warnings.iter().find(|w| w.contains("c-evil")).unwrap_or_else(|| panic!("{status}"));
    assert!(warning.contains("jumphost value") && warning.contains("routes nothing"), "{warning}");
    assert_eq!(status["inventory"]["jumphosts"], 1, "{status}");
    let chains: Vec<&str> =
        status["chains"].as_array().into_iter().flatten().filter_map(|c| c["jumphost"].as_str()).collect();
    assert_eq!(chains, [jumphost.as_str()], "{status}");

    // The valid cluster in the same inventory still routes through its real sshd.
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert!(!marker.exists());
}

/// `d1` includes `d2`, ... down to `d{depth}`, all in `dir` (the user's `~/.ssh`). Returns the
/// path of `d16`, whose Include (line 2) is the one that goes too deep when `depth > 16`.
fn include_chain(dir: &Path, depth: usize) -> PathBuf {
    for n in 1..=depth {
        let next = if n < depth { format!("Include d{}\n", n + 1) } else { "Compression no\n".to_owned() };
        std::fs::write(dir.join(format!("d{n}")), format!("# level {n}\n{next}")).unwrap();
    }
    dir.join("d16")
}

/// The error kharond reports for [`include_chain`], with the file and line of the bad Include.
fn too_deep(dir: &Path) -> String {
    format!(
        "{}:2: Include of {} nests more than 16 files deep",
        dir.join("d16").display(),
        dir.join("d17").display()
    )
}

#[test]
fn an_include_chain_deeper_than_openssh_allows_stops_the_start_naming_the_line() {
    let env = Env::new();
    let ssh = env.home().join(".ssh");
    include_chain(&ssh, 20);
    let config = env.write("home/.ssh/config", "Include d1\n");
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let exited = Kharond::try_start(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", config.to_str().unwrap()],
        &[],
    )
    .err()
    .expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&too_deep(&ssh)), "{}\nwanted: {}", exited.stderr, too_deep(&ssh));
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);
}

#[test]
fn reloading_onto_a_deep_include_chain_keeps_the_daemon_and_its_config() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");

    // Long enough that following it to the end overflowed the reload thread's stack.
    let ssh = lab.env.home().join(".ssh");
    include_chain(&ssh, 3000);
    let config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    std::fs::write(&lab.ssh_config, format!("Include d1\n{config}")).unwrap();
    let reload = kharonctl::run(&lab.env, &["reload"]);

    let daemon = lab.daemon.as_mut().expect("daemon");
    assert!(daemon.alive(), "kharond died on reload:\n{}", daemon.log());
    // A partial reload (exit 4): the table is in, the ssh config is not, and kharonctl says why.
    assert_eq!(reload.code, Some(4), "{reload:?}");
    assert!(reload.stderr.contains(&too_deep(&ssh)), "{}", reload.stderr);
    // kharond's log is written off the request's path, so the line may land after the reply.
    let reported =
        |log: &str| log.lines().any(|l| l.contains("ssh config not reloaded") && l.contains(&too_deep(&ssh)));
    let daemon = lab.daemon();
    assert!(wait_until(Duration::from_secs(5), || reported(&daemon.log())), "{}", daemon.log());
    // The old config stays in force: the jump host still routes.
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert!(kharonctl::run(&lab.env, &["status"]).success());
}
