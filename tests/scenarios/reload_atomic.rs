//! A reload is all or nothing: a reload whose `Match exec` outlasts the reload
//! deadline installs neither the new table nor the new jump host chains, `status` names it, and
//! the next reload (started while the abandoned one is still running) installs both. A new ssh
//! config that refuses a jump host, or cannot be read, makes a partial reload: the table is in,
//! `kharonctl reload` names what was left out and exits 4.

use std::path::Path;
use std::time::Duration;

use kharon_e2e::sshd::{self, Sshd};
use kharon_e2e::{inventory, kharonctl, wait_until};

use crate::jumphost::{Lab, LabOptions, TARGET};

/// The reload deadline the daemon gets (`reload_deadline_secs` in its config file): short, so a
/// `Match exec` of [`SLOW`] outlasts it by seconds.
const DEADLINE_SECS: &str = "2";
/// How long the slow `Match exec` sleeps.
const SLOW: &str = "4";

fn start(lab: &mut Lab, clusters: &[serde_json::Value]) {
    let inv = lab.env.write("inventory.json", &inventory::to_json(clusters));
    lab.env.write("config/kharon/config.toml", &format!("reload_deadline_secs = {DEADLINE_SECS}\n"));
    lab.start_daemon_on(&inv, &[]);
}

fn write_inventory(lab: &Lab, clusters: &[serde_json::Value]) {
    lab.env.write("inventory.json", &inventory::to_json(clusters));
}

/// The lab's ssh config with a `Match` in front that sends hop1 to `port` once `command` exits 0.
fn config_with_match(base: &str, command: &str, port: u16) -> String {
    format!("Match originalhost hop1 exec \"{command}\"\n  Port {port}\n\n{base}")
}

fn status(lab: &Lab) -> serde_json::Value {
    let out = kharonctl::run(&lab.env, &["status", "-o", "json"]);
    assert!(out.success(), "{out:?}");
    out.json()
}

/// hop1's first hop as `status` shows it ("user@127.0.0.1:PORT").
fn hop1(lab: &Lab) -> String {
    let s = status(lab);
    let chain = s["chains"].as_array().and_then(|c| c.iter().find(|c| c["jumphost"] == "hop1")).cloned();
    chain.map(|c| c["hops"][0].as_str().unwrap_or_default().to_owned()).unwrap_or_default()
}

fn route(lab: &Lab, host: &str) -> String {
    let out = kharonctl::run(&lab.env, &["route", host, "-o", "json"]);
    assert!(out.success(), "{out:?}");
    out.json()["jumphost"].as_str().unwrap_or_default().to_owned()
}

/// Waits (bounded) until the slow `Match exec` touched `marker` and the daemon logged that the
/// abandoned reload finished: only then could it have installed anything.
fn wait_abandoned_done(lab: &Lab, marker: &Path, times: usize) {
    let done = wait_until(Duration::from_secs(20), || {
        marker.exists()
            && lab.daemon().log().matches("an abandoned reload finished; nothing of it is installed").count()
                >= times
    });
    assert!(done, "the abandoned reload did not finish:\n{}", lab.daemon().log());
}

#[test]
fn a_reload_past_its_deadline_installs_neither_table_nor_chains_and_the_next_one_installs_both() {
    let mut lab = Lab::new(LabOptions::default());
    // A second real jump host that also resolves the target: the new ssh config sends hop1 there.
    let public = std::fs::read_to_string(sshd::pub_path(&lab.key)).unwrap();
    let other = Sshd::builder().authorize(public.trim()).hosts(&[(TARGET, "127.0.0.1")]).start();
    let mut known = std::fs::read_to_string(lab.known_hosts()).unwrap();
    known.push_str(&format!("{}\n", other.host_key_line()));
    std::fs::write(lab.known_hosts(), known).unwrap();
    let base = std::fs::read_to_string(&lab.ssh_config).unwrap();
    let user = sshd::current_user();
    let (old_hop, new_hop) =
        (format!("{user}@127.0.0.1:{}", lab.hops[0].port()), format!("{user}@127.0.0.1:{}", other.port()));

    let c1 = inventory::routed("c1", "hop1", "c1.example");
    let c2 = inventory::routed("c2", "hop1", "c2.example");
    let c3 = inventory::routed("c3", "hop1", "c3.example");
    start(&mut lab, std::slice::from_ref(&c1));
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert_eq!(hop1(&lab), old_hop);

    // A new inventory and an ssh config whose `Match exec` sleeps past the deadline.
    let marker = lab.env.path().join("exec-1-done");
    write_inventory(&lab, &[c1.clone(), c2.clone()]);
    let slow = format!("sleep {SLOW}; touch {}", marker.display());
    std::fs::write(&lab.ssh_config, config_with_match(&base, &slow, other.port())).unwrap();
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert_eq!(reload.code, Some(1), "{reload:?}");
    assert!(
        reload.stderr.contains("nothing reloaded, the old routing table and ssh config stay"),
        "{reload:?}"
    );
    assert!(reload.stderr.contains("did not finish within 2s"), "{reload:?}");
    assert!(!marker.exists(), "the caller was answered at the deadline, not when the exec ended");

    // Once the abandoned reload ran to its end: the old table and the old chain are in force.
    wait_abandoned_done(&lab, &marker, 1);
    assert_eq!(route(&lab, "api.c2.example"), "", "the old table stays");
    assert_eq!(hop1(&lab), old_hop, "the old ssh config stays");
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert!(!other.log().contains("Accepted publickey"), "nothing dialled the new chain:\n{}", other.log());
    let s = status(&lab);
    assert_eq!(s["last_reload"]["result"], "failed", "{s}");
    assert_eq!(s["last_reload"]["trigger"], "rpc", "{s}");
    assert!(s["last_failed_reload"]["error"].as_str().unwrap_or_default().contains("within 2s"), "{s}");
    let human = kharonctl::run(&lab.env, &["status"]);
    assert!(human.stdout.contains("last reload: ") && human.stdout.contains("(rpc): failed"), "{human:?}");

    // Another slow one, and while its `Match exec` still sleeps, a fixed one: the fixed one is
    // not held up, installs the new table and chain together, and the abandoned one never
    // installs over it.
    let marker2 = lab.env.path().join("exec-2-done");
    let slow = format!("sleep {SLOW}; touch {}", marker2.display());
    std::fs::write(&lab.ssh_config, config_with_match(&base, &slow, other.port())).unwrap();
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert_eq!(reload.code, Some(1), "{reload:?}");
    write_inventory(&lab, &[c1.clone(), c2.clone(), c3.clone()]);
    std::fs::write(&lab.ssh_config, config_with_match(&base, "true", other.port())).unwrap();
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert_eq!(reload.code, Some(0), "{reload:?}\n{}", lab.daemon().log());
    assert!(!marker2.exists(), "the next reload did not wait for the abandoned one");
    assert!(
        reload.stdout.contains("+ route c2.example via hop1 (c2)")
            && reload.stdout.contains("+ route c3.example via hop1 (c3)")
    );
    assert_eq!((route(&lab, "api.c2.example"), hop1(&lab)), ("hop1".to_owned(), new_hop.clone()));
    wait_abandoned_done(&lab, &marker2, 2);
    assert_eq!((route(&lab, "api.c3.example"), hop1(&lab)), ("hop1".to_owned(), new_hop));
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert!(other.log().contains("Accepted publickey"), "the new chain is used:\n{}", other.log());
    let s = status(&lab);
    assert_eq!(s["last_reload"]["result"], "ok", "{s}");
    assert_eq!(s["last_failed_reload"]["result"], "failed", "the failure is still named: {s}");
}

#[test]
fn a_new_ssh_config_that_refuses_a_jump_host_or_cannot_be_read_is_a_partial_reload() {
    let mut lab = Lab::new(LabOptions::default());
    let c1 = inventory::routed("c1", "hop1", "c1.example");
    start(&mut lab, std::slice::from_ref(&c1));
    assert_eq!(lab.hello().unwrap(), "hello from target");

    // A jump host new with this inventory that a `Match tagged` in the new config refuses.
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    let line = config.lines().count() + 1;
    config.push_str("Match originalhost hop-tagged tagged kharon\n  User nobody\n");
    std::fs::write(&lab.ssh_config, &config).unwrap();
    let origin = format!("{}:{line}", lab.ssh_config.display());
    write_inventory(&lab, &[c1.clone(), inventory::routed("c2", "hop-tagged", "c2.example")]);
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert_eq!(reload.code, Some(4), "{reload:?}");
    assert!(reload.stdout.contains("+ route c2.example via hop-tagged (c2)"), "the table is in: {reload:?}");
    assert!(
        reload.stderr.contains(&format!("partial reload: jump host hop-tagged ({origin}) is refused")),
        "{reload:?}"
    );
    assert_eq!(route(&lab, "api.c2.example"), "hop-tagged");
    assert_eq!(lab.hello().unwrap(), "hello from target", "the other jump host keeps working");
    let s = status(&lab);
    assert_eq!(s["last_reload"]["result"], "partial", "{s}");
    assert_eq!(s["last_reload"]["refused"][0]["origin"], origin.as_str(), "{s}");

    // An ssh config that cannot be loaded: the table goes in, the old config stays and says so.
    std::fs::write(&lab.ssh_config, format!("{config}Host broken\n  NoSuchKeyword yes\n")).unwrap();
    write_inventory(&lab, &[c1, inventory::routed("c3", "hop1", "c3.example")]);
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert_eq!(reload.code, Some(4), "{reload:?}");
    assert!(reload.stdout.contains("+ route c3.example via hop1 (c3)"), "{reload:?}");
    assert!(
        reload.stderr.contains("partial reload: the ssh config was not reloaded, the one read before stays")
            && reload.stderr.contains("NoSuchKeyword"),
        "{reload:?}"
    );
    assert_eq!(route(&lab, "api.c3.example"), "hop1");
    assert_eq!(lab.hello().unwrap(), "hello from target");
}
