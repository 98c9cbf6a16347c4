//! The first hour: what a newcomer meets following the README, on a fresh HOME, with
//! real kharond, kharonctl, sshd and curl. Each answer is right and says what to do next: a URL
//! pasted into `route` is routed as its host; a missing ssh-agent and a jump host no `Host` block
//! names are said before any connection fails; a stale control socket is named as such; errors
//! are printed once; counts agree with their nouns; unknown cluster ids are answered one way;
//! tables are written wide when piped; a foreground start on a workstation's descriptor limit does
//! not alarm; and kharond on `--inventory` does not make every cluster command print a notice.

use std::time::{Duration, Instant};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, kharonctl, wait_until};
use serde_json::json;

use crate::jumphost::{Lab, LabOptions};

fn ok(out: &kharonctl::Output) {
    assert!(out.success(), "exit {:?}\n{}\n{}", out.code, out.stdout, out.stderr);
}

/// Item 1 and the trace timeout: a kubeconfig's `server:` URL or `host:port` pasted into `route`
/// is routed as its host and the answer says so; what is no host at all is a usage error, not
/// "direct"; `--timeout` takes a unit.
#[test]
fn a_pasted_url_or_host_port_is_routed_as_its_host() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c1", "jump-a", "c1.example")]));
    let _daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);

    let url = "https://api.c1.example:6443/version";
    for given in [url, "api.c1.example:6443", "API.c1.example.:443"] {
        let out = kharonctl::run(&env, &["route", given]);
        ok(&out);
        assert!(out.stdout.contains("→ jump host jump-a (cluster c1)"), "{given}: {}", out.stdout);
        assert!(out.stdout.contains(&format!("(the host of {given})")), "{given}: {}", out.stdout);
    }
    let json = kharonctl::run(&env, &["route", url, "-o", "json"]);
    ok(&json);
    let answer = json.json();
    assert_eq!(
        (&answer["host"], &answer["via"], &answer["given"]),
        (&json!("api.c1.example"), &json!("jumphost"), &json!(url))
    );
    // The bare host still answers as before, without a word about a URL.
    let bare = kharonctl::run(&env, &["route", "api.c1.example", "-o", "json"]);
    assert_eq!((&bare.json()["via"], &bare.json()["given"]), (&json!("jumphost"), &serde_json::Value::Null));

    for bad in ["bad host!", "https://", "a..b"] {
        let out = kharonctl::run(&env, &["route", bad]);
        assert_eq!(out.code, Some(2), "{bad}: {out:?}");
        assert!(out.stdout.is_empty(), "no route is told for {bad:?}: {}", out.stdout);
        assert!(out.stderr.contains("is not a host"), "{bad}: {}", out.stderr);
    }

    // Durations take units: `--timeout 1s` waits one second and says so.
    let started = Instant::now();
    let trace = kharonctl::run(&env, &["route", url, "--trace", "--timeout", "1s"]);
    assert_eq!(trace.code, Some(1), "{trace:?}");
    assert!(trace.stderr.contains("tracing api.c1.example, port 6443, the host of"), "{}", trace.stderr);
    assert!(trace.stderr.contains("came within 1s"), "{}", trace.stderr);
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());
    let nonsense = kharonctl::run(&env, &["route", "api.c1.example", "--trace", "--timeout", "soon"]);
    assert_eq!(nonsense.code, Some(2), "{nonsense:?}");
    assert!(nonsense.stderr.contains("500ms, 30s, 2m, 1h"), "{}", nonsense.stderr);
}

/// Item 2: kharond with no ssh-agent and no key file usable without one says so at start, and
/// `test` fails its agent row; a usable key file makes both quiet.
#[test]
fn no_agent_and_no_usable_key_is_a_warning_at_start_and_a_failed_test_row() {
    let env = Env::new();
    let key = env.home().join(".ssh/id_kharon");
    let config = env.write(
        "home/.ssh/config",
        &format!("Host jump-a\n  HostName 127.0.0.1\n  Port 1\n  IdentityFile {}\n", key.display()),
    );
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c1", "jump-a", "c1.example")]));
    // The harness clears the environment: this kharond has no SSH_AUTH_SOCK.
    let daemon = Kharond::start(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", config.to_str().unwrap()],
    );
    let warned = |log: &str| {
        log.lines()
            .any(|l| l.contains("WARN") && l.contains("kharond has no ssh-agent") && l.contains("jump-a"))
    };
    // The check runs beside serving (its lookups may wait for DNS): said within its deadline.
    wait_until(Duration::from_secs(10), || warned(&daemon.log()));
    assert!(warned(&daemon.log()), "a WARN at start:\n{}", daemon.log());

    let agent_row = |env: &Env| {
        let out = kharonctl::run(env, &["test", "-o", "json"]);
        let rows = out.json();
        rows.as_array()
            .and_then(|rows| rows.iter().find(|r| r["endpoint"] == "ssh-agent").cloned())
            .unwrap_or_else(|| panic!("no agent row: {rows}"))
    };
    let row = agent_row(&env);
    assert_eq!(row["ok"], false, "{row}");
    let why = row["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("SSH_AUTH_SOCK was not set") && why.contains("systemctl --user import-environment"),
        "{why}"
    );
    let status = kharonctl::run(&env, &["status"]);
    assert!(status.stdout.contains("warning: kharond has no ssh-agent"), "{}", status.stdout);

    // The log says it once per condition, not again at every reload while it lasts
    // (each reload still tells the person who asked for it).
    let warnings = || daemon.log().lines().filter(|l| warned(l)).count();
    for _ in 0..3 {
        let reload = kharonctl::run(&env, &["reload"]);
        ok(&reload);
        assert!(reload.stderr.contains("kharond has no ssh-agent"), "{}", reload.stderr);
    }
    assert_eq!(warnings(), 1, "{}", daemon.log());

    // A key file usable without an agent is enough: the row passes, and a reload says nothing.
    kharon_e2e::sshd::keygen(&key, "");
    let reload = kharonctl::run(&env, &["reload"]);
    ok(&reload);
    assert!(!reload.stderr.contains("ssh-agent"), "{}", reload.stderr);
    assert_eq!(agent_row(&env)["ok"], true);
    // Gone and back again: a new condition, logged again (once).
    std::fs::remove_file(&key).unwrap();
    for _ in 0..2 {
        ok(&kharonctl::run(&env, &["reload"]));
    }
    assert_eq!(warnings(), 2, "{}", daemon.log());
}

/// Item 3: a jump host that no `Host` block names and that does not resolve (a renamed block) is
/// named with "did you mean" at start, by `reload` and by `status`, before any connection fails;
/// fixed, it is named no more.
#[test]
fn a_jump_host_no_host_block_names_is_named_before_any_connection_fails() {
    let env = Env::new();
    // A key usable without an agent: only the Host block is wrong here.
    kharon_e2e::sshd::keygen(&env.home().join(".ssh/id_ed25519"), "");
    let block = |name: &str| format!("Host {name}\n  HostName 127.0.0.1\n  Port 1\n  User nobody\n");
    let config = env.write("home/.ssh/config", &block("jump-tyrr"));
    let inv = env
        .write("inventory.json", &inventory::to_json(&[inventory::routed("c1", "jump-tyr", "c1.example")]));
    let daemon = Kharond::start(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--ssh-config", config.to_str().unwrap()],
    );
    let hint = "did you mean \"jump-tyrr\"?";
    let warned = |log: &str| {
        log.lines().any(|l| l.contains("WARN") && l.contains("jump host jump-tyr:") && l.contains(hint))
    };
    wait_until(Duration::from_secs(10), || warned(&daemon.log()));
    assert!(warned(&daemon.log()), "{}", daemon.log());

    let status = kharonctl::run(&env, &["status"]);
    ok(&status);
    let line =
        status.stdout.lines().find(|l| l.starts_with("warning: jump host jump-tyr:")).unwrap_or_default();
    assert!(
        line.contains("no Host block") && line.contains(hint) && line.contains("checked"),
        "{}",
        status.stdout
    );
    let json = kharonctl::run(&env, &["status", "-o", "json"]).json();
    assert_eq!(json["preflight"]["unresolved"][0]["jumphost"], "jump-tyr", "{json}");

    let reload = kharonctl::run(&env, &["reload"]);
    assert_eq!(reload.code, Some(0), "everything is in force: {reload:?}");
    assert!(
        reload.stderr.contains("warning: jump host jump-tyr:") && reload.stderr.contains(hint),
        "{}",
        reload.stderr
    );
    assert_eq!(reload.stderr.matches(hint).count(), 1, "{}", reload.stderr);
    assert!(kharonctl::run(&env, &["status", "-o", "json"]).json()["chains"][0]["state"] == "idle");

    // The block renamed back: nothing to say any more.
    std::fs::write(&config, block("jump-tyr")).unwrap();
    let reload = kharonctl::run(&env, &["reload"]);
    ok(&reload);
    assert!(reload.stderr.is_empty(), "{}", reload.stderr);
    assert!(!kharonctl::run(&env, &["status"]).stdout.contains("warning: jump host"));
}

/// Item 6: a control socket left by a killed kharond is named stale, with the fix.
#[test]
fn a_stale_control_socket_is_named_as_such() {
    let env = Env::new();
    let mut daemon = Kharond::start(&env, &[]);
    daemon.signal_and_wait(libc::SIGKILL);
    assert!(env.control_socket().exists(), "SIGKILL leaves the socket file");
    let out = kharonctl::run(&env, &["status"]);
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stderr.contains("kharond is not running"), "{}", out.stderr);
    assert!(out.stderr.contains("is stale") && out.stderr.contains("start kharond again"), "{}", out.stderr);
    assert!(!out.stderr.contains("no control socket"), "there is one: {}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
}

/// Item 7: an error is printed once, whatever its causes repeat: `update` against a closed port,
/// and kharond on a config.toml that is not TOML.
#[test]
fn errors_are_printed_once() {
    let env = Env::new();
    let closed = format!("http://127.0.0.1:{}", kharon_e2e::free_port());
    let out = kharonctl::run(&env, &["update", "--lieutenant-url", &closed]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("cannot reach Lieutenant"), "{}", out.stderr);
    assert_eq!(out.stderr.matches("Connection refused").count(), 1, "{}", out.stderr);
    assert_eq!(out.stderr.matches("error sending request").count(), 1, "{}", out.stderr);

    env.write("config/kharon/config.toml", "listen = \"127.0.0.1:12000\nfoo = 1\n");
    let exited = Kharond::try_start(&env, &[], &[]).err().expect("kharond must refuse the config");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("config.toml"), "{}", exited.stderr);
    assert_eq!(exited.stderr.matches("TOML parse error").count(), 1, "{}", exited.stderr);
}

/// Item 8: a table that is not on a terminal is never folded or cut, whatever
/// `$COLUMNS` says, so `grep` finds a whole value on the line of its setting; the long reason is
/// said once, under the table.
#[test]
fn piped_tables_are_written_wide_and_grep_finds_whole_values() {
    let env = Env::new();
    let url = "https://lieutenant.kx-dotenv-with-a-rather-long-name.example.com/api/lieutenant/v1";
    let narrow = [("LIEUTENANT_URL", url), ("COLUMNS", "80")];
    let config = kharonctl::run_with(&env, &["config"], &narrow);
    ok(&config);
    let line = config.stdout.lines().find(|l| l.contains("lieutenant_url")).unwrap_or_default();
    assert!(line.contains(url) && line.contains("env LIEUTENANT_URL"), "{}", config.stdout);
    assert!(config.stdout.lines().filter(|l| l.contains("lieutenant.kx")).count() == 1, "{}", config.stdout);
    assert!(
        config.stdout.lines().any(|l| l.contains("clusters") && l.contains("none found (below)")),
        "{}",
        config.stdout
    );
    assert_eq!(config.stdout.matches("kharond is not running").count(), 1, "{}", config.stdout);
    assert!(
        config.stdout.lines().any(|l| l.starts_with("clusters: no inventory cache at")),
        "{}",
        config.stdout
    );

    let long = [
        (
            "c-a-rather-long-cluster-identifier-01",
            "t-a-tenant-with-a-long-name",
            "jump.bastion.a-long-domain.example",
        ),
        ("c-b-02", "t-b", "jump-b"),
    ];
    let name = "A display name long enough to need folding in a narrow table";
    let clusters: Vec<_> = long
        .iter()
        .map(|(id, tenant, jump)| {
            let mut c = inventory::routed(id, jump, &format!("{id}.example"));
            c["tenant"] = json!(tenant);
            c["displayName"] = json!(name);
            c
        })
        .collect();
    let inv = env.write("inventory.json", &inventory::to_json(&clusters));
    let list = kharonctl::run_with(&env, &["clusters", "--inventory", inv.to_str().unwrap()], &narrow);
    ok(&list);
    for (id, tenant, jump) in long {
        let row = list.stdout.lines().find(|l| l.contains(&format!(" {id} "))).unwrap_or_default();
        for whole in [tenant, jump, name] {
            assert!(row.contains(whole), "{whole} not on {id}'s line:\n{}", list.stdout);
        }
    }
}

/// Item 10: counts agree with their nouns, and the jump-host table counts bytes in the units of
/// the route table.
#[test]
fn one_cluster_one_jump_host_and_bytes_in_units() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    assert_eq!(lab.hello().as_deref(), Ok("hello from target"));
    let wide = [("COLUMNS", "200")];
    let status = kharonctl::run_with(&lab.env, &["status"], &wide);
    ok(&status);
    let inventory = status.stdout.lines().find(|l| l.starts_with("inventory:")).unwrap_or_default();
    assert!(
        inventory.contains("— 1 cluster (1 routed, 0 ignored)") && inventory.contains(", 1 jump host,"),
        "{inventory}"
    );
    assert!(
        !status.stdout.contains("1 clusters") && !status.stdout.contains("1 jump hosts"),
        "{}",
        status.stdout
    );
    let row =
        status.stdout.lines().find(|l| l.contains("hop1") && l.contains("connected")).unwrap_or_default();
    assert!(row.contains(" KiB / ") || row.contains(" B / "), "human units: {row}\n{}", status.stdout);

    let reload = kharonctl::run(&lab.env, &["reload"]);
    ok(&reload);
    assert!(reload.stdout.contains("(1 cluster, 1 routed, 2 suffixes)"), "{}", reload.stdout);
    let config = kharonctl::run(&lab.env, &["config", "-o", "json"]);
    let rows = config.json();
    let clusters = rows.as_array().and_then(|r| r.iter().find(|r| r["setting"] == "clusters").cloned());
    assert_eq!(clusters.map(|c| c["value"].clone()), Some(json!("1 cluster")));
}

/// Item 11: an id no cluster has is answered the same way by `clusters ID`, `switch ID` and
/// `kubeconfig ID`: the same message with the closest id, and exit code 1 (the command failed;
/// 2 is for a command line that names several clusters).
#[test]
fn unknown_cluster_ids_are_answered_one_way() {
    let env = Env::new();
    let all = [
        inventory::routed("c-green-tree-1", "jump-a", "g.example"),
        inventory::routed("c-red-3", "jump-a", "r.example"),
    ];
    let inv = env.write("inventory.json", &inventory::to_json(&all));
    let file = [("KHARON_INVENTORY", inv.to_str().unwrap()), ("KUBECONFIG", "/nonexistent/kubeconfig")];
    let said = "kharonctl: unknown cluster \"c-gren-tree-1\"; did you mean c-green-tree-1?\n";
    for args in
        [&["clusters", "c-gren-tree-1"][..], &["switch", "c-gren-tree-1"], &["kubeconfig", "c-gren-tree-1"]]
    {
        let out = kharonctl::run_with(&env, args, &file);
        assert_eq!(out.code, Some(1), "{args:?}: {out:?}");
        assert_eq!(out.stderr, said, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
    }
    // A filter that matches is still a listing, and a glob that matches nothing says so.
    ok(&kharonctl::run_with(&env, &["clusters", "red"], &file));
    let glob = kharonctl::run_with(&env, &["clusters", "c-blue-*"], &file);
    assert_eq!(glob.code, Some(1), "{glob:?}");
    assert!(glob.stderr.contains("no cluster matches \"c-blue-*\""), "{}", glob.stderr);
}

/// Item 12: a foreground start under a workstation's descriptor limit (4096 fits some 1,900
/// connections, more than a browser and kubectl hold) is said at INFO, not as a warning.
#[test]
fn a_workstation_descriptor_limit_does_not_alarm_at_start() {
    let env = Env::new();
    let daemon = Kharond::start_with_nofile(&env, &[], &[], 4096);
    let log = daemon.log();
    assert!(
        !log.lines().any(|l| l.contains("WARN") && l.contains("descriptor limit")),
        "no alarm for a limit no workstation reaches:\n{log}"
    );
    let (soft, _) = kharon_e2e::procfs::nofile_limit(daemon.pid());
    if soft == 4096 {
        // Not raised (no CAP_SYS_RESOURCE): the shortfall is said once, calmly, with the fix.
        let line = log.lines().find(|l| l.contains("descriptor limit of 4096")).unwrap_or_default();
        assert!(
            line.contains("INFO") && line.contains("plenty for a workstation") && line.contains("ulimit -n"),
            "{log}"
        );
    }
}

/// Item 13: with kharond on `--inventory FILE` (the README's first command) and no cache, the
/// cluster commands print no notice; `config` shows where the clusters came from.
#[test]
fn kharond_on_an_inventory_file_adds_no_notice_to_cluster_commands() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c1", "jump-a", "c1.example")]));
    let i = inv.to_str().unwrap();
    let _daemon = Kharond::start(&env, &["--inventory", i]);
    for args in [&["clusters"][..], &["kubeconfig"], &["switch"]] {
        let out =
            kharonctl::run_with(&env, args, &[("KUBECONFIG", env.path().join("kube").to_str().unwrap())]);
        ok(&out);
        assert!(out.stderr.is_empty(), "{args:?}: {}", out.stderr);
    }
    let config = kharonctl::run(&env, &["config"]);
    let text = config.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(config.stdout.contains("kharond's routing table"), "{}", config.stdout);
    assert!(text.contains("1 cluster"), "{}", config.stdout);
}

/// Beyond the list: kharond started a second time (the README's command, run again) says that
/// kharond is already running, not "is another proxy or kharond using that port?".
#[test]
fn kharond_started_twice_says_it_is_already_running() {
    let env = Env::new();
    let listen = format!("127.0.0.1:{}", kharon_e2e::free_port());
    let _first = Kharond::start(&env, &["--listen", &listen]);
    let second = Kharond::try_start(&env, &["--listen", &listen], &[]).err().expect("the second must exit");
    assert_eq!(second.code, Some(3), "{}", second.stderr);
    assert!(second.stderr.contains("kharond is already running"), "{}", second.stderr);
    assert!(second.stderr.contains("kharonctl status"), "{}", second.stderr);
}
