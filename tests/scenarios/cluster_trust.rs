//! What a cluster reports about itself (its dynamic facts, where a customer may be
//! cluster-admin) cannot act as the engineer. It never becomes a program kubectl runs, and it
//! cannot route another cluster's names, a whole registrable domain, a public suffix or a host
//! kharon itself talks to; every refusal is named by `update`, `reload`, `status` and the log, and
//! the cluster's own names still route, through real sshd jump hosts and real curl.

use std::path::Path;
use std::process::Command;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::sshd::{self, Sshd};
use kharon_e2e::{Env, kharonctl, oidc};
use serde_json::json;

use crate::jumphost::{Lab, LabOptions};

/// An exec entry that leaves `marker` behind when anything runs it.
fn hostile_exec(marker: &Path) -> serde_json::Value {
    json!({"exec": {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "/bin/sh",
        "args": ["-c", format!("touch {}", marker.display())],
        "interactiveMode": "Never"
    }})
}

fn users(kubeconfig: &str) -> serde_norway::Value {
    let doc: serde_norway::Value = serde_norway::from_str(kubeconfig).expect("kubeconfig YAML");
    doc["users"].clone()
}

fn user<'a>(users: &'a serde_norway::Value, name: &str) -> &'a serde_norway::Value {
    users
        .as_sequence()
        .and_then(|list| list.iter().find(|u| u["name"].as_str() == Some(name)))
        .map(|u| &u["user"])
        .unwrap_or_else(|| panic!("no user {name} in {users:?}"))
}

#[test]
fn a_clusters_dynamic_facts_never_become_a_program_that_runs() {
    let env = Env::new();
    let marker = env.path().join("ran-the-clusters-exec");
    // Nothing listens on port 1: kubectl fails to connect, after it would have run the exec.
    let api = "https://127.0.0.1:1";
    let clusters = json!([
        {"id": "c-x", "tenant": "t", "facts": {"distribution": "rancher"},
         "dynamicFacts": {"openshiftApiURL": api, "kubeconfigAuthInfo": hostile_exec(&marker)}},
        {"id": "c-talos", "tenant": "t", "facts": {"distribution": "talos"},
         "dynamicFacts": {"talosApiURL": api, "oidcIssuer": "http://id.evil.example/x",
                          "oidcClientId": "--exec=/bin/sh"}},
        {"id": "c-vshn", "tenant": "t",
         "facts": {"distribution": "rancher", "kubeconfigAuthInfo": "{\"token\": \"set-by-vshn\"}"},
         "dynamicFacts": {"openshiftApiURL": api, "kubeconfigAuthInfo": hostile_exec(&marker)}}
    ]);
    let inv = env.write("inventory.json", &clusters.to_string());
    let inv = inv.to_str().unwrap();

    // Every way a kubeconfig is written: printed, a file, merged.
    let out = kharonctl::run(&env, &["kubeconfig", "--inventory", inv]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("/bin/sh") && !out.stdout.contains("oidc-login"), "{}", out.stdout);
    for id in ["c-x", "c-vshn"] {
        let warning = format!("{id}: ignoring the dynamic fact kubeconfigAuthInfo");
        assert!(out.stderr.contains(&warning), "{id}:\n{}", out.stderr);
    }
    assert!(
        out.stderr.contains(r#"c-talos: no kubectl oidc-login entry from the dynamic facts oidcIssuer "http://id.evil.example/x""#),
        "{}",
        out.stderr
    );
    let users = users(&out.stdout);
    assert_eq!(user(&users, "c-x"), &serde_norway::Value::Mapping(Default::default()));
    assert_eq!(user(&users, "c-talos"), &serde_norway::Value::Mapping(Default::default()));
    // VSHN's own (static) user entry is used as given.
    assert_eq!(user(&users, "c-vshn")["token"].as_str(), Some("set-by-vshn"));

    let merged = env.home().join(".kube/config");
    let out = kharonctl::run(&env, &["kubeconfig", "--inventory", inv, "--merge"]);
    assert!(out.success(), "{}", out.stderr);
    let text = std::fs::read_to_string(&merged).unwrap();
    assert!(!text.contains("/bin/sh") && !text.contains(&marker.display().to_string()), "{text}");

    // Real kubectl, started by kharonctl with the cluster's own kubeconfig: nothing of the
    // cluster's runs.
    for id in ["c-x", "c-talos"] {
        let out = kharonctl::run(
            &env,
            &["clusters", "--inventory", inv, id, "kubectl", "--", "get", "ns", "--request-timeout=5s"],
        );
        assert!(!out.success(), "kubectl reached a server on port 1?\n{}", out.stdout);
        assert!(out.stderr.contains("127.0.0.1:1"), "kubectl did not even try the API:\n{}", out.stderr);
        assert!(!marker.exists(), "{id}: the cluster's exec ran as the engineer");
    }
}

/// Starts one more sshd, reached as `alias`, that resolves `names` (and nothing else) to
/// 127.0.0.1, and adds it to the lab's ssh config and known_hosts.
pub(crate) fn second_jump_host(lab: &Lab, alias: &str, names: &[&str]) -> Sshd {
    let public = std::fs::read_to_string(sshd::pub_path(&lab.key)).unwrap();
    let hosts: Vec<(&str, &str)> = names.iter().map(|n| (*n, "127.0.0.1")).collect();
    let hop = Sshd::builder().authorize(public.trim()).hosts(&hosts).start();
    let known = format!("UserKnownHostsFile {}", lab.known_hosts().display());
    let block = sshd::host_block(alias, hop.port(), &sshd::current_user(), &lab.key, &[known.as_str()]);
    let mut config = std::fs::read_to_string(&lab.ssh_config).unwrap();
    config.push_str(&block);
    std::fs::write(&lab.ssh_config, config).unwrap();
    let mut known_hosts = std::fs::read_to_string(lab.known_hosts()).unwrap();
    known_hosts.push_str(&format!("{}\n", hop.host_key_line()));
    std::fs::write(lab.known_hosts(), known_hosts).unwrap();
    hop
}

/// The victim is reached through the lab's own jump host (`hop1`), which alone resolves its API;
/// the hostile cluster has a jump host of its own that resolves only the hostile cluster's names.
fn hostile_inventory(lab: &Lab) -> serde_json::Value {
    json!([
        {"id": "c-victim", "tenant": "t-v", "facts": {"distribution": "openshift4", "jumphost": lab.jumphost()},
         "dynamicFacts": {"openshiftBaseDomain": "c-victim.example",
                          "openshiftApiURL": "https://api.c-victim.example:6443"}},
        {"id": "c-x", "tenant": "t-x", "facts": {"distribution": "openshift4", "jumphost": "jump-x"},
         "dynamicFacts": {
            "openshiftBaseDomain": "c-x.example",
            "openshiftConsoleURL": "https://console.apps.c-x.example",
            // Another cluster's API, a registrable domain, a public suffix, kharon's own Lieutenant.
            "openshiftApiURL": "https://api.c-victim.example:6443",
            "talosBaseDomain": "vshnmanaged.net",
            "openshiftAppsDomain": "co.uk",
            "talosAppsDomain": "syn.example.net"
         }}
    ])
}

/// The four refusals, as every one of `update`, `reload`, `status` and the log names them.
const REFUSED: [&str; 4] = [
    r#"cluster c-x: openshiftApiURL "https://api.c-victim.example:6443" refused: api.c-victim.example carries the id of cluster c-victim inside its anchor example: the names of c-victim.example are c-victim's"#,
    r#"cluster c-x: talosBaseDomain "vshnmanaged.net" refused: vshnmanaged.net is a registrable domain (Public Suffix List)"#,
    r#"cluster c-x: openshiftAppsDomain "co.uk" refused: co.uk is a public suffix (Public Suffix List)"#,
    r#"cluster c-x: talosAppsDomain "syn.example.net" refused: syn.example.net covers api.syn.example.net, which kharon itself talks to (Lieutenant)"#,
];

pub(crate) fn route(env: &Env, host: &str) -> serde_json::Value {
    let out = kharonctl::run(env, &["route", host, "-o", "json"]);
    assert!(out.success(), "{}", out.stderr);
    out.json()
}

/// `kharonctl route HOST` says it goes direct because no cluster claims it.
pub(crate) fn assert_unclaimed(env: &Env, host: &str) {
    let r = route(env, host);
    assert_eq!((r["via"].as_str(), r["rule"].as_str()), (Some("direct"), Some("no-match")), "{host}: {r}");
}

pub(crate) fn curl(daemon: &Kharond, host: &str, port: u16) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "20", "-x", &daemon.proxy_url()])
        .arg(format!("http://{host}:{port}/hello"))
        .output()
        .expect("run curl");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{}\n---- kharond log ----\n{}", String::from_utf8_lossy(&out.stderr), daemon.log()))
    }
}

#[test]
fn a_cluster_cannot_route_another_clusters_api_a_domain_a_public_suffix_or_kharons_own_hosts() {
    let mut lab = Lab::new(LabOptions {
        last_hop_hosts: vec![("api.c-victim.example".into(), "127.0.0.1".into())],
        ..LabOptions::default()
    });
    let _hostile_hop = second_jump_host(&lab, "jump-x", &["api.c-x.example", "console.apps.c-x.example"]);
    let inv = lab.env.write("inventory.json", &hostile_inventory(&lab).to_string());
    // Both clusters' jump hosts are aliases of 127.0.0.1, which anchor nothing: the
    // engineer's zone lets their names in, so that the rules here decide between them.
    let config = lab.env.write(
        "config.toml",
        "lieutenant_url = \"https://api.syn.example.net\"\ndynamic_domains = [\"example\"]\n",
    );
    lab.start_daemon_on(&inv, &["--config", config.to_str().unwrap()]);
    let daemon = lab.daemon();
    let port = lab.target.port();

    // The victim's API goes through the victim's jump host (the only one that resolves it).
    let victim = route(&lab.env, "api.c-victim.example");
    assert_eq!((victim["jumphost"].as_str(), victim["cluster"].as_str()), (Some("hop1"), Some("c-victim")));
    assert_eq!(curl(daemon, "api.c-victim.example", port).unwrap(), "hello from target");
    // The hostile cluster's own names still route, through its own jump host.
    for host in ["api.c-x.example", "console.apps.c-x.example"] {
        assert_eq!(route(&lab.env, host)["jumphost"], "jump-x", "{host}");
        assert_eq!(curl(daemon, host, port).unwrap(), "hello from target", "{host}");
    }
    // What it must not capture stays out of the table: direct, claimed by no cluster.
    for host in ["www.vshnmanaged.net", "api.c-y.vshnmanaged.net", "www.example.co.uk", "api.syn.example.net"]
    {
        assert_unclaimed(&lab.env, host);
    }
    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let table_routes = status["routes"].as_array().unwrap();
    let hop1 = table_routes.iter().find(|r| r["route"] == "hop1").expect("hop1 totals");
    assert_eq!(hop1["total"], 1, "the victim's API went through the victim's jump host: {status}");

    // Each refusal is named: status (text and JSON), reload, the log.
    let refused = status["inventory"]["refused_claims"].as_array().unwrap();
    assert_eq!(refused.len(), 4, "{status}");
    assert!(refused.iter().all(|r| r["cluster"] == "c-x"), "{status}");
    let facts: Vec<&str> = refused.iter().filter_map(|r| r["fact"].as_str()).collect();
    for fact in ["openshiftApiURL", "talosBaseDomain", "openshiftAppsDomain", "talosAppsDomain"] {
        assert!(facts.contains(&fact), "{fact} not named: {status}");
    }
    let text = kharonctl::run(&lab.env, &["status"]);
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert!(reload.success(), "{}\n{}", reload.stdout, reload.stderr);
    let log = daemon.log();
    for line in REFUSED {
        assert!(text.stdout.contains(&format!("refused: {line}")), "status lacks {line}:\n{}", text.stdout);
        assert!(
            reload.stderr.contains(&format!("warning: {line}")),
            "reload lacks {line}:\n{}",
            reload.stderr
        );
        let logged = log.lines().filter(|l| l.contains(" WARN ") && l.contains(line)).count();
        assert_eq!(logged, 2, "the log names {line} at start and at the reload:\n{log}");
    }
}

#[test]
fn update_names_every_refused_name_and_keeps_the_issuer_for_kharond() {
    let _port = oidc::login_lock();
    let world = crate::login::World::start();
    world.login();
    let hostile = world.env.write("hostile-clusters.json", &{
        let mut clusters = hostile_inventory_for_update();
        clusters.as_array_mut().unwrap().push(json!({"id": "c-typo", "tenant": "t",
            "facts": {"jumphost": "jump-t", "jumphostDomains": "ch,storage.typo.ch"}}));
        clusters.to_string()
    });
    world.lieutenant.set_clusters(&hostile);
    let config = world.env.write("anchors.toml", "dynamic_domains = [\"example\", \"example.net\"]\n");
    let config = config.to_str().unwrap();
    let out = world.ctl_with(
        &["update"],
        &[("KHARON_PASSBOLT_URL", "https://pass.bolt.example.net/vshn"), ("KHARON_CONFIG", config)],
    );
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    for line in [
        r#"warning: cluster c-typo: jumphostDomains "ch" refused: ch is a public suffix (Public Suffix List)"#,
        r#"warning: cluster c-x: openshiftApiURL "https://api.c-victim.example:6443" refused: api.c-victim.example carries the id of cluster c-victim inside its anchor example"#,
        r#"warning: cluster c-x: openshiftAppsDomain "co.uk" refused: co.uk is a public suffix"#,
        r#"warning: cluster c-x: talosBaseDomain "vshnmanaged.net" refused: vshnmanaged.net is a registrable domain"#,
        r#"warning: cluster c-x: talosAppsDomain "bolt.example.net" refused: bolt.example.net covers pass.bolt.example.net, which kharon itself talks to (Passbolt)"#,
    ] {
        assert!(out.stderr.contains(line), "update lacks {line}:\n{}", out.stderr);
    }
    assert!(out.stdout.contains("+ route c-x.example via jump-x (c-x)"), "{}", out.stdout);
    assert!(out.stdout.contains("+ route storage.typo.ch via jump-t (c-typo)"), "{}", out.stdout);
    assert!(!out.stdout.contains("+ route co.uk") && !out.stdout.contains("+ route ch "), "{}", out.stdout);
    // The cache keeps the issuer of the token, so that kharond keeps it out of every route too.
    let cache: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(world.env.cache_dir().join("inventory.json")).unwrap())
            .unwrap();
    assert_eq!(cache["oidc_issuer"].as_str(), Some(world.provider.issuer()), "{cache}");
}

fn hostile_inventory_for_update() -> serde_json::Value {
    json!([
        {"id": "c-victim", "tenant": "t-v", "facts": {"distribution": "openshift4", "jumphost": "jump-v"},
         "dynamicFacts": {"openshiftBaseDomain": "c-victim.example",
                          "openshiftApiURL": "https://api.c-victim.example:6443"}},
        {"id": "c-x", "tenant": "t-x", "facts": {"distribution": "openshift4", "jumphost": "jump-x"},
         "dynamicFacts": {
            "openshiftBaseDomain": "c-x.example",
            "openshiftApiURL": "https://api.c-victim.example:6443",
            "talosBaseDomain": "vshnmanaged.net",
            "openshiftAppsDomain": "co.uk",
            "talosAppsDomain": "bolt.example.net"
         }}
    ])
}
