//! `kharonctl clusters`: the listing and its filters, closest-id suggestions, where the clusters
//! come from (no cache: kharond's table), and the per-cluster `shell` and `kubectl` actions
//! (per-cluster KUBECONFIG, exit codes, `--each`, missing programs).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use kharon_e2e::kharonctl::{Output, run, run_with};
use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory};
use serde_json::json;

fn ok(out: &Output) {
    assert!(out.success(), "kharonctl failed ({:?}):\n{}\n{}", out.code, out.stdout, out.stderr);
}

fn clusters(env: &Env) -> PathBuf {
    let mut other_tenant = inventory::routed("c-blue-sky-2", "jump-b", "b.example");
    other_tenant["tenant"] = json!("t-other");
    env.write(
        "inventory.json",
        &inventory::to_json(&[
            inventory::routed("c-green-tree-1", "jump-a", "a.example"),
            other_tenant,
            inventory::routed("c-red-rock-3", "jump-c", "c.example"),
            json!({"id": "c-ignored-4", "tenant": "t-test", "facts": {"kharonIgnore": "true"}}),
        ]),
    )
}

fn ids(out: &Output) -> Vec<String> {
    out.json().as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect()
}

#[test]
fn lists_filters_and_hides_ignored_clusters() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap();
    let all = run(&env, &["clusters", "--inventory", i, "-o", "json"]);
    ok(&all);
    assert_eq!(ids(&all), ["c-blue-sky-2", "c-green-tree-1", "c-red-rock-3"]);
    assert_eq!(all.json()[0]["jumphost"], "jump-b");
    assert_eq!(all.json()[0]["apiUrl"], "https://api.b.example:6443");
    assert_eq!(ids(&run(&env, &["clusters", "--inventory", i, "c-*-1", "-o", "json"])), ["c-green-tree-1"]);
    assert_eq!(ids(&run(&env, &["clusters", "--inventory", i, "rock", "-o", "json"])), ["c-red-rock-3"]);
    let tenant = run(&env, &["clusters", "--inventory", i, "--tenant", "t-other", "-o", "json"]);
    assert_eq!(ids(&tenant), ["c-blue-sky-2"]);
    let table = run(&env, &["clusters", "--inventory", i]);
    ok(&table);
    assert!(table.stdout.contains("c-green-tree-1") && table.stdout.contains("jump-a"), "{}", table.stdout);
    let yaml = run(&env, &["clusters", "--inventory", i, "-o", "yaml"]);
    ok(&yaml);
    assert!(yaml.stdout.contains("- id: c-blue-sky-2"), "{}", yaml.stdout);
}

#[test]
fn unknown_cluster_suggests_the_closest_ids() {
    let env = Env::new();
    let inv = clusters(&env);
    let out = run(&env, &["clusters", "--inventory", inv.to_str().unwrap(), "c-gren-tree-1", "kubeconfig"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("unknown cluster \"c-gren-tree-1\""), "{}", out.stderr);
    assert!(out.stderr.contains("did you mean c-green-tree-1?"), "{}", out.stderr);
}

/// Neither a cache nor a running kharond: exit code 1 (the command failed), and one message that
/// names both and each way out.
#[test]
fn without_inventory_cache_or_daemon_the_error_says_what_to_do() {
    let env = Env::new();
    let cache = env.cache_dir().join("inventory.json");
    for args in [&["clusters"][..], &["switch", "c-a"], &["kubeconfig"], &["clusters", "c-a", "kubeconfig"]] {
        let out = run(&env, args);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stderr);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        let err = &out.stderr;
        assert!(err.contains(&format!("no inventory cache at {}", cache.display())), "{args:?}: {err}");
        assert!(
            err.contains("no kharond to ask for its clusters: kharond is not running"),
            "{args:?}: {err}"
        );
        assert!(err.contains("run `kharonctl update`") || err.contains("Run `kharonctl update`"), "{err}");
        assert!(err.contains("start kharond") && err.contains("--inventory FILE"), "{args:?}: {err}");
    }
    // `config` says the same instead of failing: it shows what every cluster command would read.
    let config = run(&env, &["config", "-o", "json"]);
    ok(&config);
    let rows = config.json();
    let row = rows.as_array().unwrap().iter().find(|r| r["setting"] == "clusters").unwrap().clone();
    assert_eq!(row["value"], serde_json::Value::Null, "{row}");
    assert!(row["source"].as_str().unwrap().contains("kharond is not running"), "{row}");
}

/// kharond started on `--inventory FILE`, and no cache here: every command that reads clusters
/// asks kharond for the table it routes by (not the file, which may have changed since), without
/// a notice on every command (the README's first command starts kharond that way):
/// `kharonctl config` shows where the list came from.
#[test]
fn without_a_cache_the_clusters_are_the_daemons_table() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap();
    let daemon = Kharond::start(&env, &["--inventory", i]);
    let port = daemon.socks_addr().port();
    let cache = env.cache_dir().join("inventory.json");
    assert!(!cache.exists());

    let all = run(&env, &["clusters", "-o", "json"]);
    ok(&all);
    assert_eq!(ids(&all), ["c-blue-sky-2", "c-green-tree-1", "c-red-rock-3"]);
    assert_eq!(all.json()[1]["jumphost"], "jump-a");
    assert!(all.stderr.is_empty(), "no notice on every command: {}", all.stderr);
    let table = run(&env, &["clusters", "--tenant", "t-other"]);
    ok(&table);
    assert!(table.stdout.contains("c-blue-sky-2") && !table.stdout.contains("c-green"), "{}", table.stdout);

    // kharond's table, not its file: a file changed without a reload is not what kharond routes by.
    env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-new-5", "jump-n", "n.example")]));
    assert_eq!(
        ids(&run(&env, &["clusters", "-o", "json"])),
        ["c-blue-sky-2", "c-green-tree-1", "c-red-rock-3"]
    );

    // switch by a part of an id, into a kubeconfig that points at kharond.
    let kubeconfig = env.path().join("kube/config");
    let kc = [("KUBECONFIG", kubeconfig.to_str().unwrap())];
    let switched = run_with(&env, &["switch", "green"], &kc);
    ok(&switched);
    assert!(switched.stdout.contains("Switched to context c-green-tree-1"), "{}", switched.stdout);
    assert!(switched.stderr.is_empty(), "{}", switched.stderr);
    let doc: serde_norway::Value =
        serde_norway::from_str(&std::fs::read_to_string(&kubeconfig).unwrap()).unwrap();
    assert_eq!(doc["current-context"], "c-green-tree-1");
    let proxy = format!("socks5://127.0.0.1:{port}");
    assert_eq!(doc["clusters"][0]["cluster"]["proxy-url"], proxy.as_str(), "{doc:?}");
    assert_eq!(doc["clusters"][0]["cluster"]["server"], "https://api.a.example:6443");
    assert_eq!(std::fs::metadata(&kubeconfig).unwrap().permissions().mode() & 0o777, 0o600);
    // `kubectl` reads it: the context is there, with its proxy.
    let kubectl = std::process::Command::new("kubectl")
        .args(["config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.proxy-url}"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&kubectl.stdout),
        proxy,
        "{}",
        String::from_utf8_lossy(&kubectl.stderr)
    );

    // Every cluster's kubeconfig, and one cluster's, from the same table.
    let file = env.path().join("all.kubeconfig");
    let written = run(&env, &["kubeconfig", "-o", file.to_str().unwrap()]);
    ok(&written);
    assert!(written.stderr.contains("Wrote 3 contexts"), "{}", written.stderr);
    let contexts = std::process::Command::new("kubectl")
        .args(["config", "get-contexts", "-o", "name", "--kubeconfig", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&contexts.stdout), "c-blue-sky-2\nc-green-tree-1\nc-red-rock-3\n");
    // The exec entry names no inventory file: when kubectl runs it, it asks kharond again.
    let doc: serde_norway::Value = serde_norway::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let args = &doc["users"][0]["user"]["exec"]["args"];
    assert_eq!(args[0], "clusters", "{doc:?}");
    assert!(!args.as_sequence().unwrap().iter().any(|a| a == "--inventory"), "{args:?}");
    let one = run(&env, &["clusters", "red", "kubeconfig"]);
    ok(&one);
    assert!(
        one.stdout.contains("https://api.c.example:6443") && one.stdout.contains(&proxy),
        "{}",
        one.stdout
    );
    // Ignored clusters stay ignored, and unknown ids get suggestions from the table.
    let unknown = run(&env, &["clusters", "c-ignored-4", "kubeconfig"]);
    assert_eq!(unknown.code, Some(1));
    assert!(unknown.stderr.contains("unknown cluster \"c-ignored-4\""), "{}", unknown.stderr);
    let config = run(&env, &["config", "-o", "json"]);
    ok(&config);
    let rows = config.json();
    let row = rows.as_array().unwrap().iter().find(|r| r["setting"] == "clusters").unwrap().clone();
    assert_eq!(row["value"], "3 clusters");
    assert_eq!(row["source"], format!("kharond's routing table (its file {i})").as_str());

    // Completion of ids reads the same table, silently.
    let tab = run_with(&env, &["--", "kharonctl", "switch", "c-"], &[("COMPLETE", "fish")]);
    assert!(tab.success() && tab.stderr.is_empty(), "{tab:?}");
    let completed: Vec<&str> = tab.stdout.lines().map(|l| l.split('\t').next().unwrap_or(l)).collect();
    assert_eq!(completed, ["c-blue-sky-2", "c-green-tree-1", "c-red-rock-3"], "{}", tab.stdout);

    // After a reload kharond routes by the new file, and so the list follows.
    ok(&run(&env, &["reload"]));
    assert_eq!(ids(&run(&env, &["clusters", "-o", "json"])), ["c-new-5"]);

    // A cache that exists is read, and one that is broken is an error: kharond's list does not
    // stand in for it without a word.
    std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
    std::fs::write(&cache, "{\"version\": 1, \"clusters\": [").unwrap();
    for args in [&["clusters"][..], &["switch", "c-new-5"], &["kubeconfig"]] {
        let out = run_with(&env, args, &kc);
        assert_eq!(out.code, Some(1), "{args:?}: {}", out.stdout);
        assert!(
            out.stderr.contains(&format!("inventory cache {} is corrupt", cache.display())),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr.contains("kharond's clusters are not used in place of a cache that exists"),
            "{}",
            out.stderr
        );
        assert!(!out.stdout.contains("c-new-5"), "{}", out.stdout);
    }
    assert_eq!(
        serde_norway::from_str::<serde_norway::Value>(&std::fs::read_to_string(&kubeconfig).unwrap())
            .unwrap()["current-context"],
        "c-green-tree-1"
    );
    // kharond itself is unaffected.
    ok(&run(&env, &["status"]));
    drop(daemon);
}

/// kharond on a cache that does not exist yet (first start) has no clusters to give: the error
/// says so, not that kharond is missing.
#[test]
fn a_daemon_without_clusters_either_is_named_in_the_error() {
    let env = Env::new();
    let _daemon = Kharond::start(&env, &[]);
    let out = run(&env, &["clusters"]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert!(out.stderr.contains("kharond has no clusters either (its cache"), "{}", out.stderr);
    assert!(out.stderr.contains("does not exist yet); run `kharonctl update`"), "{}", out.stderr);
}

#[test]
fn shell_command_gets_its_own_kubeconfig_and_exit_code() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap().to_owned();
    // Two shells at once: each sees its own file, and its current context is its own cluster even
    // while the other one is running.
    let cmd = "sleep 0.5; echo $KUBECONFIG; echo $KHARON_CLUSTER; kubectl config current-context; exit 7";
    let shells: Vec<_> = ["c-green-tree-1", "c-red-rock-3"]
        .into_iter()
        .map(|id| {
            let i = i.clone();
            let vars = env.vars();
            std::thread::spawn(move || {
                let out = std::process::Command::new(kharon_e2e::bin("kharonctl"))
                    .env_clear()
                    .envs(vars)
                    .env("SHELL", "/bin/sh")
                    .args(["clusters", "--inventory", &i, id, "shell", "--command", cmd])
                    .output()
                    .unwrap();
                (id, out)
            })
        })
        .collect();
    let mut files = Vec::new();
    for shell in shells {
        let (id, out) = shell.join().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(out.status.code(), Some(7), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let lines: Vec<_> = stdout.lines().collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        assert!(
            lines[0].starts_with(env.cache_dir().to_str().unwrap()),
            "not in our cache dir: {}",
            lines[0]
        );
        assert_eq!(lines[1], id);
        assert_eq!(lines[2], id);
        let mode = std::fs::metadata(lines[0]).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        files.push(lines[0].to_owned());
    }
    assert_ne!(files[0], files[1], "two shells shared one kubeconfig");
}

#[test]
fn missing_shell_is_a_clear_error() {
    let env = Env::new();
    let inv = clusters(&env);
    // Env::vars has no SHELL.
    let out = run(&env, &["clusters", "--inventory", inv.to_str().unwrap(), "c-green-tree-1", "shell"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("SHELL is not set"), "{}", out.stderr);
}

#[test]
fn each_prefixes_output_and_summarises_exit_codes() {
    let env = Env::new();
    let inv = clusters(&env);
    let cmd = "echo hello; echo oops >&2; test $KHARON_CLUSTER != c-red-rock-3 || exit 4";
    let out = run(
        &env,
        &["clusters", "--inventory", inv.to_str().unwrap(), "c-*", "shell", "--each", "--command", cmd],
    );
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    for id in ["c-blue-sky-2", "c-green-tree-1", "c-red-rock-3"] {
        assert!(out.stdout.contains(&format!("[{id}] hello\n")), "{}", out.stdout);
        assert!(out.stderr.contains(&format!("[{id}] oops\n")), "{}", out.stderr);
    }
    let summary = out.stderr.split("--- exit codes\n").nth(1).expect("summary");
    let rows: Vec<Vec<&str>> = summary.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows, [vec!["c-blue-sky-2", "0"], vec!["c-green-tree-1", "0"], vec!["c-red-rock-3", "4"]]);
}

#[test]
fn kubectl_exit_code_passes_through_and_a_missing_binary_says_what_to_install() {
    let env = Env::new();
    let inv = clusters(&env);
    let i = inv.to_str().unwrap();
    let out =
        run(&env, &["clusters", "--inventory", i, "c-green-tree-1", "kubectl", "config", "current-context"]);
    ok(&out);
    assert_eq!(out.stdout, "c-green-tree-1\n");
    // Without a name, an action works on the current kube context: here, inside a cluster's shell.
    let inner = "\"$K\" clusters --inventory \"$I\" kubectl config current-context";
    let k = kharon_e2e::bin("kharonctl");
    let shell = ["clusters", "--inventory", i, "c-red-rock-3", "shell", "--command", inner];
    let out = run_with(&env, &shell, &[("K", k.to_str().unwrap()), ("I", i)]);
    ok(&out);
    assert_eq!(out.stdout, "c-red-rock-3\n");

    // A stand-in kubectl that fails with its own code and shows the arguments it got.
    let bin = env.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = env.write("bin/kubectl", "#!/bin/sh\necho \"$@\"\nexit 42\n");
    kharon_e2e::set_mode(&fake, 0o755);
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = run_with(
        &env,
        &["clusters", "--inventory", i, "c-green-tree-1", "kubectl", "get", "-n", "x", "pods"],
        &[("PATH", &path)],
    );
    assert_eq!(out.code, Some(42), "{}", out.stderr);
    assert_eq!(out.stdout, "get -n x pods\n");

    let out = run_with(
        &env,
        &["clusters", "--inventory", i, "c-green-tree-1", "oc", "whoami"],
        &[("PATH", "/nonexistent")],
    );
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("`oc` is not in PATH") && out.stderr.contains("install"), "{}", out.stderr);
    let out = run_with(
        &env,
        &["clusters", "--inventory", i, "c-green-tree-1", "kubectl", "version"],
        &[("PATH", "/nonexistent")],
    );
    assert!(out.stderr.contains("install kubectl"), "{}", out.stderr);
}

#[test]
fn console_opens_the_console_url_with_the_browser_command() {
    let env = Env::new();
    let mut c = inventory::routed("c-green-tree-1", "jump-a", "a.example");
    c["dynamicFacts"]["openshiftConsoleURL"] = json!("https://console.apps.a.example/");
    let inv = env.write("inventory.json", &inventory::to_json(&[c]));
    let opened = env.path().join("opened");
    // kharonctl runs `sh -c 'COMMAND "$1"'` with the URL as $1.
    let browser = format!("printf %s > {}", opened.display());
    let out = run_with(
        &env,
        &["clusters", "--inventory", inv.to_str().unwrap(), "c-green-tree-1", "console"],
        &[("KHARON_BROWSER", &browser)],
    );
    ok(&out);
    assert!(
        kharon_e2e::wait_until(std::time::Duration::from_secs(5), || std::fs::read_to_string(&opened)
            .is_ok_and(|s| s == "https://console.apps.a.example/")),
        "browser not run: {}",
        out.stderr
    );
}
