//! `kharonctl clusters`: the listing and its filters, closest-id suggestions, and the per-cluster
//! `shell` and `kubectl` actions (per-cluster KUBECONFIG, exit codes, `--each`, missing programs).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use kharon_e2e::kharonctl::{Output, run, run_with};
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

#[test]
fn without_inventory_or_cache_the_error_says_what_to_do() {
    let env = Env::new();
    let out = run(&env, &["clusters"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("kharonctl update") && out.stderr.contains("--inventory"), "{}", out.stderr);
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
