//! Choosing a cluster without typing its whole id: `kharonctl switch`'s fuzzy picker, typed at
//! through a real pseudo-terminal, and partial ids (`switch ID`, `clusters ID <action>`), which
//! resolve when one cluster matches, open the picker on a terminal when several do, and without a
//! terminal exit with 2 listing the matches.

use std::path::{Path, PathBuf};

use kharon_e2e::kharonctl::{self, Output, run_with};
use kharon_e2e::{Env, inventory};
use rexpect::process::WaitStatus;
use rexpect::session::PtySession;
use serde_json::json;

/// How long one expected piece of screen output may take to appear.
const SCREEN_TIMEOUT_MS: u64 = 15_000;

fn ok(out: &Output) {
    assert!(out.success(), "kharonctl failed ({:?}):\n{}\n{}", out.code, out.stdout, out.stderr);
}

/// Four clusters, two of which share "green".
fn clusters(env: &Env) -> PathBuf {
    let named = |mut c: serde_json::Value, name: &str, tenant: &str| {
        c["displayName"] = json!(name);
        c["tenant"] = json!(tenant);
        c
    };
    env.write(
        "inventory.json",
        &inventory::to_json(&[
            named(inventory::routed("c-green-tree-1", "jump-a", "a.example"), "Green Tree", "t-test"),
            named(direct_with_api("c-green-lake-5", "e.example"), "Green Lake", "t-lake"),
            named(inventory::routed("c-red-rock-3", "jump-c", "c.example"), "Red Rock", "t-test"),
            named(inventory::routed("c-blue-sky-2", "jump-b", "b.example"), "Blue Sky", "t-test"),
        ]),
    )
}

/// A cluster reached directly, with an API URL (so `switch` can make it current).
fn direct_with_api(id: &str, base: &str) -> serde_json::Value {
    let mut c = inventory::direct(id, base);
    c["dynamicFacts"]["openshiftApiURL"] = json!(format!("https://api.{base}:6443"));
    c
}

fn current_context(kubeconfig: &Path) -> String {
    let doc: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    doc["current-context"].as_str().unwrap_or_default().to_owned()
}

/// `kharonctl ARGS` on a pseudo-terminal of its own (stdin, stdout and stderr), colours off so the
/// screen reads as text.
fn on_terminal(env: &Env, args: &[&str], kubeconfig: &Path) -> PtySession {
    let mut cmd = kharonctl::command(env, args);
    cmd.env("KUBECONFIG", kubeconfig).env("NO_COLOR", "1").env("TERM", "xterm");
    rexpect::session::spawn_command(cmd, Some(SCREEN_TIMEOUT_MS))
        .expect("start kharonctl on a pseudo-terminal")
}

/// Waits for the program to end and returns its exit code.
fn exit_code(session: &mut PtySession) -> i32 {
    let rest = session.exp_eof().expect("kharonctl ends");
    match session.process().wait().expect("wait for kharonctl") {
        WaitStatus::Exited(_, code) => code,
        other => panic!("kharonctl ended with {other:?}:\n{rest}"),
    }
}

/// Sends `keys` as typed.
fn press(session: &mut PtySession, keys: &str) {
    session.send(keys).expect("type on the pseudo-terminal");
    session.flush().expect("type on the pseudo-terminal");
}

/// Types `text` into the picker's filter, waits for it to show, and presses Enter.
fn type_then_enter(session: &mut PtySession, text: &str) {
    press(session, text);
    session.exp_string(text).expect("the typed filter is shown");
    press(session, "\r");
}

/// Where each of `ids` first appears on `screen` (panics if one does not).
fn positions(screen: &str, ids: &[&str]) -> Vec<usize> {
    ids.iter().map(|id| screen.find(id).unwrap_or_else(|| panic!("{id} not shown:\n{screen}"))).collect()
}

#[test]
fn the_picker_switches_to_the_cluster_whose_name_was_typed_in_part() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap();
    let kubeconfig = env.path().join("kube/config");
    let kc = [("KUBECONFIG", kubeconfig.to_str().unwrap())];
    // Current c-red-rock-3, previous c-blue-sky-2.
    ok(&run_with(&env, &["switch", "--inventory", i, "c-blue-sky-2"], &kc));
    ok(&run_with(&env, &["switch", "--inventory", i, "c-red-rock-3"], &kc));

    let mut picker = on_terminal(&env, &["switch", "--inventory", i], &kubeconfig);
    let screen = picker.exp_string("type to filter").expect("the picker shows its help line");
    // Every cluster, the previous one (`switch -`) first; the current and the previous marked;
    // display name, tenant and route on each line.
    let at = positions(&screen, &["c-blue-sky-2", "c-red-rock-3", "c-green-lake-5", "c-green-tree-1"]);
    assert!(at[0] < at[1] && at[0] < at[2] && at[0] < at[3], "previous context not first:\n{screen}");
    assert!(screen.contains("- c-blue-sky-2"), "previous not marked:\n{screen}");
    assert!(screen.contains("* c-red-rock-3"), "current not marked:\n{screen}");
    assert!(screen.contains("Green Tree") && screen.contains("via jump-a"), "{screen}");
    assert!(screen.contains("t-lake") && screen.contains("direct"), "{screen}");

    type_then_enter(&mut picker, "tree");
    picker.exp_string("Switched to context c-green-tree-1").expect("the pick is switched to");
    assert_eq!(exit_code(&mut picker), 0);
    assert_eq!(current_context(&kubeconfig), "c-green-tree-1");
    // And `switch -` goes back to where the picker came from.
    ok(&run_with(&env, &["switch", "-"], &kc));
    assert_eq!(current_context(&kubeconfig), "c-red-rock-3");
}

#[test]
fn a_partial_id_that_several_clusters_match_opens_the_picker_with_it_typed_in() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap();
    let kubeconfig = env.path().join("kube/config");

    let mut picker = on_terminal(&env, &["switch", "--inventory", i, "green"], &kubeconfig);
    let screen = picker.exp_string("type to filter").expect("the picker opens");
    positions(&screen, &["c-green-tree-1", "c-green-lake-5"]);
    assert!(!screen.contains("c-red-rock-3") && !screen.contains("c-blue-sky-2"), "not filtered:\n{screen}");
    type_then_enter(&mut picker, "lake");
    picker.exp_string("Switched to context c-green-lake-5").expect("the pick is switched to");
    assert_eq!(exit_code(&mut picker), 0);
    assert_eq!(current_context(&kubeconfig), "c-green-lake-5");

    // Esc picks nothing: exit 1, the kubeconfig as it was.
    let before = std::fs::read_to_string(&kubeconfig).unwrap();
    let mut picker = on_terminal(&env, &["clusters", "--inventory", i, "green", "kubeconfig"], &kubeconfig);
    picker.exp_string("type to filter").expect("the picker opens for an action too");
    press(&mut picker, "\x1b");
    picker.exp_string("no cluster picked").expect("says nothing was picked");
    assert_eq!(exit_code(&mut picker), 1);
    assert_eq!(std::fs::read_to_string(&kubeconfig).unwrap(), before);
}

#[test]
fn without_a_terminal_partial_ids_resolve_or_exit_2_listing_the_matches() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap();
    let kubeconfig = env.path().join("kube/config");
    let kc = [("KUBECONFIG", kubeconfig.to_str().unwrap())];

    // One match: that cluster, in any case.
    ok(&run_with(&env, &["switch", "--inventory", i, "ROCK"], &kc));
    assert_eq!(current_context(&kubeconfig), "c-red-rock-3");
    let out =
        run_with(&env, &["clusters", "--inventory", i, "sky", "kubectl", "config", "current-context"], &kc);
    ok(&out);
    assert_eq!(out.stdout, "c-blue-sky-2\n");
    // A tenant narrows a partial id to one.
    let out =
        run_with(&env, &["clusters", "--inventory", i, "green", "--tenant", "t-lake", "kubeconfig"], &kc);
    ok(&out);
    assert!(out.stdout.contains("current-context: c-green-lake-5"), "{}", out.stdout);

    // Several: exit 2, every match listed with what tells them apart, nothing written.
    let before = std::fs::read_to_string(&kubeconfig).unwrap();
    for args in [
        vec!["switch", "--inventory", i, "green"],
        vec!["clusters", "--inventory", i, "green", "kubeconfig"],
        vec!["clusters", "--inventory", i, "c-green-*", "kubectl", "version"],
    ] {
        let out = run_with(&env, &args, &kc);
        assert_eq!(out.code, Some(2), "{args:?}\n{}\n{}", out.stdout, out.stderr);
        assert!(out.stderr.contains("matches 2 clusters"), "{args:?}: {}", out.stderr);
        for line in
            ["c-green-lake-5  Green Lake  t-lake  direct", "c-green-tree-1  Green Tree  t-test  via jump-a"]
        {
            assert!(out.stderr.contains(line), "{args:?} lacks {line:?}:\n{}", out.stderr);
        }
        assert!(!out.stderr.contains("c-red-rock-3"), "{}", out.stderr);
        assert_eq!(out.stdout, "", "{args:?}");
    }
    assert_eq!(std::fs::read_to_string(&kubeconfig).unwrap(), before);

    // None: the error it always was.
    let out = run_with(&env, &["switch", "--inventory", i, "purple"], &kc);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("unknown cluster \"purple\""), "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&kubeconfig).unwrap(), before);

    // `switch` without an id and without a terminal keeps listing.
    let listing = run_with(&env, &["switch", "--inventory", i], &kc);
    ok(&listing);
    assert!(listing.stdout.contains("* c-red-rock-3"), "{}", listing.stdout);
    assert!(listing.stdout.contains("  c-green-lake-5"), "{}", listing.stdout);
}
