//! Text from the inventory reaches people only escaped. A hostile inventory (an OSC
//! window title, CSI screen clears, carriage returns and newlines, C1 controls, a 10 MB display
//! name) printed by `clusters` and `status` on a real pseudo-terminal shows none of its control
//! bytes and stays small; and a newline in a cluster id or a jump host value cannot forge a line of
//! kharond's log.

use std::path::PathBuf;
use std::process::Command;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, kharonctl};
use serde_json::json;

/// How long one command may take to print everything on the pseudo-terminal.
const SCREEN_TIMEOUT_MS: u64 = 30_000;

/// A log line kharond itself would write; the hostile id carries it after a newline.
const FORGED: &str = "2026-11-26T00:00:00.000000Z  INFO kharond::daemon: kharond ready";

/// The hostile clusters; with `huge`, also one whose display name is 10 MB.
fn hostile_inventory(env: &Env, huge: bool) -> PathBuf {
    let mut clusters = json!([
        {"id": "c-title-\u{1b}]0;pwned\u{7}", "tenant": "t-\u{9b}2J",
         "displayName": "Red\u{1b}[31mRED\u{1b}[0m\roverwritten",
         "facts": {"jumphost": "jump-a", "distribution": "openshift4"},
         "dynamicFacts": {"openshiftBaseDomain": "a.example", "openshiftApiURL": "https://api.a.example:6443"}},
        {"id": format!("c-nl\n{FORGED}"), "tenant": "t",
         "facts": {"jumphost": format!("jump\n{FORGED}"), "jumphostDomains": "nl.example"}}
    ]);
    if huge {
        clusters.as_array_mut().expect("an array").push(json!(
            {"id": "c-huge", "tenant": "t", "displayName": "A".repeat(10 * 1024 * 1024),
             "facts": {"jumphost": "jump-h", "jumphostDomains": "huge.example"}}
        ));
    }
    env.write(if huge { "inventory-huge.json" } else { "inventory.json" }, &clusters.to_string())
}

/// Everything `kharonctl ARGS` prints on a pseudo-terminal of its own (120 columns, as a
/// terminal window has; a fresh pseudo-terminal has none), until it exits, as text.
fn on_terminal(env: &Env, args: &[&str]) -> String {
    let mut cmd = Command::new("sh");
    cmd.env_clear()
        .envs(env.vars())
        .env("KHARON_CONTROL_SOCKET", env.control_socket())
        .env("NO_COLOR", "1")
        .env("TERM", "xterm")
        .args(["-c", "stty cols 120 rows 50 && exec \"$0\" \"$@\""])
        .arg(kharon_e2e::bin("kharonctl"))
        .args(args);
    let mut session = rexpect::session::spawn_command(cmd, Some(SCREEN_TIMEOUT_MS))
        .expect("start kharonctl on a pseudo-terminal");
    let read = session.exp_eof().expect("kharonctl prints and ends");
    // rexpect hands each byte over as one char: back to the bytes, then to UTF-8.
    let bytes: Vec<u8> =
        read.chars().map(|c| u8::try_from(u32::from(c)).expect("one byte per char")).collect();
    String::from_utf8(bytes).expect("kharonctl prints UTF-8")
}

/// No control byte from the data: no ESC, no C1 control, no carriage return but the one the
/// terminal puts before each newline (ONLCR).
fn assert_clean(screen: &str, what: &str) {
    assert!(!screen.contains('\u{1b}'), "{what}: raw ESC on the terminal:\n{screen:?}");
    assert!(
        !screen.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c)),
        "{what}: raw C1 control:\n{screen:?}"
    );
    let lone_cr = screen.match_indices('\r').any(|(at, _)| screen.as_bytes().get(at + 1) != Some(&b'\n'));
    assert!(!lone_cr, "{what}: a carriage return from the data:\n{screen:?}");
    assert!(!screen.contains(&format!("\n{FORGED}")), "{what}: a line of the data's own:\n{screen}");
}

#[test]
fn a_hostile_inventory_is_shown_escaped_on_a_terminal() {
    let env = Env::new();
    let inv = hostile_inventory(&env, false);
    let inv = inv.to_str().unwrap();

    let screen = on_terminal(&env, &["clusters", "--inventory", inv]);
    assert_clean(&screen, "clusters");
    // A 10 MB display name is cut, and costs the table no more than a short one.
    let huge = hostile_inventory(&env, true);
    let screen = on_terminal(&env, &["clusters", "--inventory", huge.to_str().unwrap()]);
    assert_clean(&screen, "clusters with a huge display name");
    assert!(screen.contains("c-huge") && screen.contains('…'), "{screen}");
    assert!(screen.len() < 64 * 1024, "a 10 MB display name printed whole ({} bytes)", screen.len());
    // Escaped, not dropped: the values can still be read and reported (off a terminal, unwrapped).
    let piped = kharonctl::run(&env, &["clusters", "--inventory", inv, "-o", "wide"]);
    assert!(piped.success(), "{}", piped.stderr);
    assert!(piped.stdout.contains(r"c-title-\x1b]0;pwned\x07"), "{}", piped.stdout);
    assert!(piped.stdout.contains(r"Red\x1b[31mRED\x1b[0m\roverwritten"), "{}", piped.stdout);
    assert!(piped.stdout.contains(r"t-\u{9b}2J"), "{}", piped.stdout);

    let daemon = Kharond::start(&env, &["--inventory", huge.to_str().unwrap()]);
    let screen = on_terminal(&env, &["status"]);
    assert_clean(&screen, "status");
    assert!(screen.contains(r"c-nl\n2026"), "the refused jump host is named, escaped:\n{screen}");

    // kharond's log: the jump host is refused and named in one line, with the newline escaped; the
    // only "kharond ready" line is kharond's own.
    let log = daemon.log();
    let ready = |l: &&str| {
        l.split_once(' ')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with("INFO kharond::daemon: kharond ready"))
    };
    assert_eq!(log.lines().filter(ready).count(), 1, "{log}");
    assert!(!log.lines().any(|l| l.starts_with(FORGED)), "a forged log line:\n{log}");
    let refused = log.lines().find(|l| l.contains(" WARN ") && l.contains(r"cluster c-nl\n2026"));
    assert!(
        refused.is_some_and(|l| l.contains(r#"jumphost value \"jump\n2026"#) || l.contains(r"jump\n2026")),
        "{log}"
    );
    assert!(!log.contains('\u{1b}') && !log.contains('\r'), "raw controls in the log:\n{log:?}");
}
