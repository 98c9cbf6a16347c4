//! A jump host that will not forward: the client gets "not allowed" (SOCKS 0x02),
//! `kharonctl status` shows the refused channel (target, reason, when) while the chain itself
//! stays connected with no error, and `kharonctl test` says the jump host refuses forwarding.

use std::time::{SystemTime, UNIX_EPOCH};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{inventory, kharonctl};

use crate::jumphost::{Lab, LabOptions, TARGET};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

#[test]
fn a_jump_host_refusing_forwarding_is_named_by_status_and_test() {
    let lab =
        Lab::new(LabOptions { sshd_options: vec!["AllowTcpForwarding no".into()], ..Default::default() });
    let port = lab.target.port();
    let mut cluster = inventory::routed("c1", &lab.jumphost(), "c1.example");
    cluster["dynamicFacts"]["openshiftApiURL"] = format!("https://{TARGET}:{port}").into();
    let inv = lab.env.write("inventory.json", &inventory::to_json(&[cluster]));
    let agent = lab.agent.socket().display().to_string();
    let daemon = Kharond::start_with(
        &lab.env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", lab.ssh_config.to_str().unwrap()],
        &[("SSH_AUTH_SOCK", agent.as_str())],
    );

    let before = now_ms();
    let (code, _) = kharon_e2e::socks::connect_by_name(daemon.socks_addr(), TARGET, port);
    assert_eq!(code, 2, "SOCKS 0x02: connection not allowed by ruleset");

    // The session is fine; the refusal is the jump host's, kept with its target and time.
    let chain = lab.chain_status();
    assert_eq!(chain["state"], "connected", "{chain}");
    assert_eq!(chain["last_error"], "", "{chain}");
    let refusal = &chain["last_refusal"];
    assert_eq!(refusal["target"], format!("{TARGET}:{port}"), "{chain}");
    assert_eq!(refusal["reason"], "administratively prohibited", "{chain}");
    assert_eq!(refusal["description"], "open failed", "{chain}");
    let at = refusal["at_ms"].as_u64().unwrap_or(0);
    assert!(at >= before && at <= now_ms(), "{chain}");
    let table = kharonctl::run(&lab.env, &["status"]).stdout;
    assert!(table.contains("last refused channel"), "{table}");
    let row = table.lines().find(|l| l.contains(&format!("{TARGET}:{port}"))).unwrap_or_default();
    assert!(row.contains("administratively prohibited (open failed)") && row.contains(" ago"), "{table}");

    // `test` connects through the same tunnel and says what the jump host does.
    let out = kharonctl::run(&lab.env, &["test", "-o", "json"]);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    let rows = out.json();
    let connect = rows
        .as_array()
        .and_then(|r| r.iter().find(|r| r["cluster"] == "c1" && r["check"] == "connect"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(connect["ok"], false, "{rows}");
    let error = connect["error"].as_str().unwrap_or_default();
    assert!(
        error.starts_with(&format!(
            "jump host {} refuses to forward to {TARGET}:{port} (administratively prohibited: open failed): its \
             sshd allows no TCP forwarding there",
            lab.jumphost()
        )),
        "{error}"
    );
    assert!(error.contains("AllowTcpForwarding no"), "{error}");
}

#[test]
fn a_refused_target_is_shown_until_a_channel_to_it_opens() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    // Nothing listens there yet: the jump host cannot connect.
    let port = kharon_e2e::free_port();
    let (code, _, _) = lab.socks_connect(port);
    assert_eq!(code, 5, "connection refused, at the target");
    let chain = lab.chain_status();
    let refusal = &chain["last_refusal"];
    assert_eq!(refusal["target"], format!("{TARGET}:{port}"), "{chain}");
    assert_eq!(refusal["reason"], "connect failed", "{chain}");
    assert_eq!(refusal["description"], "Connection refused", "{chain}");
    // Another target working does not make that one work.
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert_eq!(lab.chain_status()["last_refusal"]["target"], format!("{TARGET}:{port}"));
    // Once it listens and a channel to it opens, the refusal is over.
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("bind the refused port");
    let (code, _, _) = lab.socks_connect(port);
    assert_eq!(code, 0);
    drop(listener);
    let chain = lab.chain_status();
    assert!(chain["last_refusal"].is_null(), "{chain}");
}
