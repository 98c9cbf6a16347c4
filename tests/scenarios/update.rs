//! `kharonctl update` end to end: the fake Lieutenant, a real login, the cache on disk, and a
//! running kharond whose routing answers change without a restart. Also what happens when
//! Lieutenant is down or the cache is damaged, and `kharonctl config`.

use std::os::unix::fs::PermissionsExt;

use kharon_e2e::kharonctl;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::lieutenant::fixture;
use kharon_e2e::{Env, inventory, oidc};

use crate::login::World;

fn route(env: &Env, host: &str) -> serde_json::Value {
    let out = kharonctl::run(env, &["route", host, "-o", "json"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    out.json()
}

fn cache_file(env: &Env) -> std::path::PathBuf {
    env.cache_dir().join("inventory.json")
}

#[test]
fn update_writes_the_cache_and_the_running_daemon_reroutes_without_restart() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();

    // Without a daemon: the cache is written and the user is told nobody was reloaded.
    let out = world.ctl(&["update"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("fetched 5 clusters"), "{}", out.stdout);
    assert!(out.stdout.contains("+ cluster c-quiet-river-5678"), "{}", out.stdout);
    assert!(
        out.stdout.contains("+ route green.acme.example via jump-acme (c-green-meadow-1234)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("kharond is not running"), "{}", out.stdout);
    assert!(
        out.stderr.contains("cluster c-lonely-jump-0002 has jumphost jump-lonely but no domains"),
        "{}",
        out.stderr
    );
    let cache = cache_file(&world.env);
    assert_eq!(std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777, 0o600);
    let envelope: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(envelope["version"], 1);
    assert_eq!(envelope["api_url"], world.lieutenant.url());
    assert_eq!(envelope["clusters"].as_array().unwrap().len(), 5);
    assert!(envelope["routes"].as_array().unwrap().iter().any(|r| r["suffix"] == "river.talos.example"));

    // kharond starts from the cache (no --inventory).
    let daemon = Kharond::start(&world.env, &[]);
    assert_eq!(route(&world.env, "api.river.talos.example")["jumphost"], "jump-talos");
    assert_eq!(route(&world.env, "x.forest.acme.example")["via"], "direct");
    let pid = daemon.pid();

    // Lieutenant changes; update reloads the running daemon.
    world.lieutenant.set_clusters(&fixture("clusters-next.json"));
    let out = world.ctl(&["update"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("+ cluster c-new-forest-9999"), "{}", out.stdout);
    assert!(out.stdout.contains("- cluster c-quiet-river-5678"), "{}", out.stdout);
    assert!(out.stdout.contains("- route river.talos.example via jump-talos"), "{}", out.stdout);
    assert!(out.stdout.contains("kharond reloaded"), "{}", out.stdout);
    assert_eq!(route(&world.env, "x.forest.acme.example")["jumphost"], "jump-forest");
    assert_eq!(route(&world.env, "api.river.talos.example")["via"], "direct");
    assert_eq!(daemon.pid(), pid);

    // Nothing new: said so.
    let out = world.ctl(&["update"]);
    assert!(out.stdout.contains("no changes since the last update"), "{}", out.stdout);
}

/// A kharond started on `--inventory FILE` ignores the cache: `update` must not claim it reloaded,
/// but say which file it routes by, and leave its routing as it was.
#[test]
fn update_says_kharond_on_an_inventory_file_did_not_pick_up_the_cache() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let file = world.env.write(
        "inventory.json",
        &inventory::to_json(&[inventory::routed("c-file", "jump-file", "file.example")]),
    );
    let daemon = Kharond::start(&world.env, &["--inventory", file.to_str().unwrap()]);

    let out = world.ctl(&["update"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("fetched 5 clusters"), "{}", out.stdout);
    assert!(!out.stdout.contains("kharond reloaded"), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!(
            "kharond (pid {}) routes by the inventory file {} (--inventory), not the cache: it did not \
             pick up this update",
            daemon.pid(),
            file.display()
        )),
        "{}",
        out.stdout
    );
    assert!(cache_file(&world.env).exists());
    assert_eq!(route(&world.env, "api.file.example")["jumphost"], "jump-file");
    assert_eq!(route(&world.env, "api.green.acme.example")["via"], "direct");
}

#[test]
fn lieutenant_down_keeps_the_old_cache_serving_and_says_its_age() {
    let _port = oidc::login_lock();
    let mut world = World::start();
    world.login();
    let out = world.ctl(&["update", "--no-reload"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let cache = cache_file(&world.env);
    let before = std::fs::read(&cache).unwrap();
    let daemon = Kharond::start(&world.env, &[]);

    world.lieutenant.stop();
    let out = world.ctl(&["update"]);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    let err = &out.stderr;
    assert!(
        err.contains(&format!("cannot reach Lieutenant at {}/clusters", world.lieutenant.url())),
        "{err}"
    );
    assert!(err.contains("Connection refused") || err.contains("connection refused"), "{err}");
    assert!(err.contains(&format!("the inventory cache {} from", cache.display())), "{err}");
    assert!(err.contains("ago is unchanged and kharond keeps using it"), "{err}");
    assert_eq!(std::fs::read(&cache).unwrap(), before, "a failed update must not touch the cache");
    assert_eq!(route(&world.env, "api.green.acme.example")["jumphost"], "jump-acme");
    drop(daemon);
}

#[test]
fn a_corrupt_or_future_cache_is_a_clear_error_naming_the_file() {
    let env = Env::new();
    let cache = env.write("cache/kharon/inventory.json", "{\"version\": 1, \"clusters\": [");
    let exited = Kharond::try_start(&env, &[], &[]).err().expect("must not start on a corrupt cache");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("--inventory FILE"), "{}", exited.stderr);
    assert!(exited.stderr.contains(&cache.display().to_string()), "{}", exited.stderr);
    assert!(exited.stderr.contains("is corrupt"), "{}", exited.stderr);
    assert!(exited.stderr.contains("kharonctl update"), "{}", exited.stderr);

    std::fs::write(&cache, r#"{"version": 99, "api_url": "https://x", "fetched_at": 0, "clusters": []}"#)
        .unwrap();
    let exited = Kharond::try_start(&env, &[], &[]).err().expect("must not start on a future cache");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&cache.display().to_string()), "{}", exited.stderr);
    assert!(exited.stderr.contains("format version 99"), "{}", exited.stderr);
}

/// With nothing configured, `update` goes to VSHN's production Lieutenant, as Go kharon does. The
/// attempt runs in a network namespace of its own where that name is loopback, so it fails without
/// anything leaving the machine, and the error names the URL and how to choose another.
#[test]
fn update_without_a_lieutenant_url_tries_vshns_production_lieutenant() {
    let env = Env::new();
    let config = kharonctl::run(&env, &["config", "-o", "json"]);
    assert!(config.success(), "{}", config.stderr);
    let rows = config.json();
    let url = rows.as_array().unwrap().iter().find(|r| r["setting"] == "lieutenant_url").cloned().unwrap();
    assert_eq!(
        (url["value"].as_str(), url["source"].as_str()),
        (Some("https://api.syn.vshn.net"), Some("default"))
    );

    let out = kharonctl::run_isolated(&env, &["update", "--login-timeout", "5"], &["api.syn.vshn.net"]);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("cannot reach Lieutenant at https://api.syn.vshn.net/"), "{}", out.stderr);
    assert!(out.stderr.contains("https://api.syn.vshn.net is the default Lieutenant"), "{}", out.stderr);
    assert!(
        out.stderr.contains("--lieutenant-url") && out.stderr.contains("LIEUTENANT_URL"),
        "{}",
        out.stderr
    );
    assert!(!cache_file(&env).exists(), "a failed update must not write a cache");

    // A URL the user chose is not called the default.
    let out = kharonctl::run_isolated(
        &env,
        &["--lieutenant-url", "https://lieutenant.example", "update"],
        &["lieutenant.example"],
    );
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("cannot reach Lieutenant at https://lieutenant.example/"), "{}", out.stderr);
    assert!(!out.stderr.contains("default Lieutenant"), "{}", out.stderr);
}

#[test]
fn config_shows_each_setting_with_its_source_and_never_the_password() {
    let env = Env::new();
    let file = env.write(
        "config/kharon/config.toml",
        "lieutenant_url = \"https://file.example\"\noidc_client = \"from-file\"\n\
         [socks]\nusername = \"me\"\npassword = \"hunter2-secret\"\n",
    );
    let out = kharonctl::run_with(
        &env,
        &["config", "-o", "json"],
        &[
            ("COMMODORE_API_URL", "https://commodore.example"),
            ("COMMODORE_OIDC_DISCOVERY_URL", "https://id.example/"),
        ],
    );
    assert!(out.success(), "{}", out.stderr);
    assert!(!out.stdout.contains("hunter2"), "{}", out.stdout);
    let rows = out.json();
    let find = |name: &str| rows.as_array().unwrap().iter().find(|r| r["setting"] == name).cloned().unwrap();
    assert_eq!(find("lieutenant_url")["value"], "https://commodore.example");
    assert_eq!(find("lieutenant_url")["source"], "env COMMODORE_API_URL");
    assert_eq!(find("oidc_client")["source"], file.display().to_string());
    assert_eq!(find("oidc_discovery_url")["source"], "env COMMODORE_OIDC_DISCOVERY_URL");
    assert_eq!(find("socks.username")["value"], "me");
    assert_eq!(find("socks.password")["value"], "(set, not shown)");

    let out = kharonctl::run_with(&env, &["--lieutenant-url", "http://127.0.0.1:9", "config"], &[]);
    assert!(out.success(), "{}", out.stderr);
    assert!(out.stdout.contains("flag --lieutenant-url"), "{}", out.stdout);
    assert!(!out.stdout.contains("hunter2"), "{}", out.stdout);
}
