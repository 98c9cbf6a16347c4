//! Host keys of real sshd jump hosts against known_hosts, end to end: unknown keys are refused
//! with the fingerprint and a command that records them, a changed key is always refused naming
//! the recorded line, `accept-new` records, and hashed files (`ssh-keygen -H`) work.

use std::process::Command;

use crate::jumphost::{Lab, LabOptions};

fn fingerprint(lab: &Lab, hop: usize) -> String {
    let out = Command::new("ssh-keygen")
        .arg("-lf")
        .arg(lab.hops[hop].dir().join("host_ed25519.pub"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().nth(1).unwrap().to_owned()
}

fn refused_with(lab: &Lab) -> String {
    let (code, _, _) = lab.socks_connect(lab.target.port());
    assert_eq!(code, 3, "a refused host key is a broken path (network unreachable)");
    lab.chain_status()["last_error"].as_str().unwrap_or("").to_owned()
}

#[test]
fn unknown_host_key_is_refused_with_fingerprint_and_a_working_record_command() {
    let mut lab = Lab::new(LabOptions { known_hosts: false, ..Default::default() });
    lab.start_daemon();
    let error = refused_with(&lab);
    assert!(error.contains("is not known") && error.contains(&fingerprint(&lab, 0)), "{error}");
    let command = format!(
        "ssh -F {} -o StrictHostKeyChecking=ask -p {} -l {} -- hop1 true",
        lab.ssh_config.display(),
        lab.hops[0].port(),
        kharon_e2e::sshd::current_user()
    );
    assert!(error.contains(&command), "{error}");
    // The command is real. Without a terminal ssh cannot ask, so run it with accept-new instead of
    // ask (the same thing once a user answered "yes"): it reaches the hop through the same
    // ssh_config and records the key where kharond looks; then the same daemon connects.
    let out = Command::new("sh")
        .arg("-c")
        .arg(command.replace("StrictHostKeyChecking=ask", "StrictHostKeyChecking=accept-new"))
        .env("SSH_AUTH_SOCK", lab.agent.socket())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recorded = std::fs::read_to_string(lab.known_hosts()).unwrap_or_default();
    assert!(recorded.contains(&lab.hops[0].host_key()), "{recorded}");
    // The failed dial put the chain in backoff (≤ 0.6 s); the first request after it succeeds.
    let ok = kharon_e2e::wait_until(std::time::Duration::from_secs(3), || lab.hello().is_ok());
    assert!(ok, "{}", lab.hello().unwrap_err());
}

#[test]
fn changed_host_key_is_refused_naming_the_recorded_line() {
    let mut lab = Lab::new(LabOptions::default());
    let other = kharon_e2e::sshd::keygen(&lab.env.path().join("other_host_key"), "");
    let other: Vec<&str> = other.split_whitespace().take(2).collect();
    let port = lab.hops[0].port();
    std::fs::write(lab.known_hosts(), format!("# old key\n[127.0.0.1]:{port}\t{}\n", other.join(" ")))
        .unwrap();
    // Even StrictHostKeyChecking no does not let a changed key through.
    let text =
        std::fs::read_to_string(&lab.ssh_config).unwrap().replace("\n\n", "\n  StrictHostKeyChecking no\n\n");
    std::fs::write(&lab.ssh_config, text).unwrap();
    lab.start_daemon();
    let error = refused_with(&lab);
    assert!(error.contains("HAS CHANGED"), "{error}");
    assert!(error.contains(&format!("{}:2", lab.known_hosts().display())), "{error}");
    assert!(error.contains(&fingerprint(&lab, 0)), "{error}");
}

#[test]
fn a_changed_key_in_the_middle_of_a_chain_names_that_hop() {
    let mut lab = Lab::new(LabOptions { hops: 2, ..Default::default() });
    let other = kharon_e2e::sshd::keygen(&lab.env.path().join("other_host_key"), "");
    let other: Vec<&str> = other.split_whitespace().take(2).collect();
    let lines =
        format!("{}\n[127.0.0.1]:{} {}\n", lab.hops[0].host_key_line(), lab.hops[1].port(), other.join(" "));
    std::fs::write(lab.known_hosts(), lines).unwrap();
    lab.start_daemon();
    let error = refused_with(&lab);
    assert!(error.contains("hop 2/2 hop2") && error.contains("HAS CHANGED"), "{error}");
}

#[test]
fn accept_new_records_the_key_and_hashed_files_match() {
    let mut lab = Lab::new(LabOptions {
        known_hosts: false,
        host_options: vec!["StrictHostKeyChecking accept-new".into()],
        ..Default::default()
    });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let recorded = std::fs::read_to_string(lab.known_hosts()).unwrap();
    assert!(recorded.contains(&lab.hops[0].host_key_line()), "{recorded}");
    drop(lab.daemon.take());

    // Hash the file as `ssh-keygen -H` does and require an exact match from now on.
    let out = Command::new("ssh-keygen").arg("-H").arg("-f").arg(lab.known_hosts()).output().unwrap();
    assert!(out.status.success());
    assert!(std::fs::read_to_string(lab.known_hosts()).unwrap().starts_with("|1|"));
    let text = std::fs::read_to_string(&lab.ssh_config)
        .unwrap()
        .replace("StrictHostKeyChecking accept-new", "StrictHostKeyChecking yes");
    std::fs::write(&lab.ssh_config, text).unwrap();
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
}
