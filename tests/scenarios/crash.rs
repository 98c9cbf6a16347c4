//! Crash safety: `kill -9` of kharond while it reloads an inventory, and while
//! `kharonctl update` writes the cache and asks it to reload, leaves the files whole (old or new,
//! never torn), a new kharond starts from them, and clients of the dead one are refused at once,
//! not left hanging. The shipped systemd unit restarts a kharond that was killed (its policy,
//! checked by systemd's own parser; no service manager runs here). With socket activation the
//! manager keeps the listeners, so clients then wait for the restart (`RestartSec`) instead.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::lieutenant::fixture;
use kharon_e2e::{Env, bin, inventory, kharonctl, oidc};

use crate::login::World;

/// What a client of a daemon that was just killed sees: SOCKS connections refused, kharonctl
/// told "not running" (exit code 3), both at once rather than after a timeout.
fn clients_are_refused(env: &Env, socks: std::net::SocketAddr) {
    let started = Instant::now();
    let refused = TcpStream::connect_timeout(&socks, Duration::from_secs(5));
    assert_eq!(refused.map_err(|e| e.kind()).err(), Some(ErrorKind::ConnectionRefused), "SOCKS port {socks}");
    let status = kharonctl::run(env, &["status"]);
    assert_eq!(status.code, Some(3), "{status:?}");
    assert!(status.stderr.contains("not running"), "{status:?}");
    // Bounded, not timed: a hang would be the kharonctl call timeout (60 s) or the connect's 5 s.
    assert!(started.elapsed() < Duration::from_secs(5), "clients waited {:?}", started.elapsed());
}

fn route(env: &Env, host: &str) -> serde_json::Value {
    let out = kharonctl::run(env, &["route", host, "-o", "json"]);
    assert!(out.success(), "{out:?}");
    out.json()
}

#[test]
fn kill_9_while_reloading_a_large_inventory_leaves_it_whole_and_a_new_daemon_serves_it() {
    let env = Env::new();
    // Large enough that reading and compiling it takes a while, so the kill lands inside reloads.
    let clusters: Vec<serde_json::Value> = (0..20_000)
        .map(|i| inventory::routed(&format!("c-{i}"), &format!("jump-{}", i % 50), &format!("c{i}.example")))
        .collect();
    let inv = env.write("inventory.json", &inventory::to_json(&clusters));
    let before = std::fs::read(&inv).unwrap();
    for delay_ms in [0u64, 5, 20, 60, 150] {
        let mut daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
        let socks = daemon.socks_addr();
        daemon.signal(libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(delay_ms));
        assert_eq!(daemon.signal_and_wait(libc::SIGKILL), None, "killed, not exited");
        assert!(!daemon.alive());
        assert_eq!(std::fs::read(&inv).unwrap(), before, "the inventory changed (kill after {delay_ms} ms)");
        clients_are_refused(&env, socks);
    }
    // The stale control socket of the last one is replaced; the file routes as it did.
    let _daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    assert_eq!(route(&env, "api.c19999.example")["jumphost"], "jump-49");
}

/// The cluster ids of the cache, which must parse.
fn cached_ids(cache: &Path) -> BTreeSet<String> {
    let envelope = kharon_routing::cache::load(cache).unwrap_or_else(|e| panic!("torn cache: {e}"));
    envelope.clusters.iter().map(|c| c.id.clone()).collect()
}

fn fixture_ids(name: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(fixture(name)).unwrap();
    let clusters: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    clusters.iter().filter_map(|c| c["id"].as_str().map(str::to_owned)).collect()
}

#[test]
fn kill_9_during_kharonctl_update_leaves_the_cache_old_or_new_and_update_does_not_hang() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let cache = world.env.cache_dir().join("inventory.json");
    let out = world.ctl(&["update", "--no-reload"]);
    assert!(out.success(), "{out:?}");
    let (old, new) = (fixture_ids("clusters.json"), fixture_ids("clusters-next.json"));
    assert_ne!(old, new);
    assert_eq!(cached_ids(&cache), old);

    // Each round, Lieutenant switches between the two inventories and kharond is killed at
    // another moment of the update: before, while or after the cache is written and reloaded.
    for (round, delay_ms) in [0u64, 20, 60, 120, 250, 500].into_iter().enumerate() {
        let next = if round % 2 == 0 { "clusters-next.json" } else { "clusters.json" };
        world.lieutenant.set_clusters(&fixture(next));
        let mut daemon = Kharond::start(&world.env, &[]);
        let socks = daemon.socks_addr();
        let (update, took) = std::thread::scope(|scope| {
            let update = scope.spawn(|| {
                let started = Instant::now();
                (world.ctl(&["update"]), started.elapsed())
            });
            std::thread::sleep(Duration::from_millis(delay_ms));
            assert_eq!(daemon.signal_and_wait(libc::SIGKILL), None, "killed, not exited");
            update.join().unwrap()
        });
        // The update either finished, or was told kharond is gone: never stuck on a dead daemon.
        assert!(took < Duration::from_secs(30), "update took {took:?}: {update:?}");
        match update.code {
            Some(0) => {}
            Some(1) => assert!(update.stderr.contains("the cache was written, but kharond"), "{update:?}"),
            _ => panic!("round {round}: {update:?}"),
        }
        let ids = cached_ids(&cache);
        assert!(ids == old || ids == new, "round {round}: the cache holds neither inventory: {ids:?}");
        if update.code == Some(0) || update.stderr.contains("the cache was written") {
            assert_eq!(
                ids,
                fixture_ids(next),
                "round {round}: the cache was written, with the new inventory"
            );
        }
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&cache).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o600);
        clients_are_refused(&world.env, socks);

        // A new kharond starts from whatever the cache holds.
        let _daemon = Kharond::start(&world.env, &[]);
        let status = kharonctl::run(&world.env, &["status", "-o", "json"]).json();
        assert_eq!(status["inventory"]["clusters_total"], ids.len(), "{status}");
    }
}

#[test]
fn the_shipped_systemd_unit_restarts_a_killed_kharond() {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/systemd/kharond.service"),
    )
    .unwrap();
    // on-failure restarts a service whose process was killed by a signal other than
    // SIGHUP/SIGINT/SIGTERM/SIGPIPE (systemd.service(5)), SIGKILL included; a clean stop is not
    // restarted.
    let keys: Vec<&str> = unit.lines().filter(|l| l.starts_with("Restart")).collect();
    assert_eq!(keys, ["Restart=on-failure", "RestartSec=2s"], "{unit}");

    let analyze = Path::new("/usr/bin/systemd-analyze");
    // .ci/run installs systemd when it is missing: a check that silently does nothing proves nothing.
    assert!(analyze.exists(), "{} is missing: run `apt-get install -y systemd`", analyze.display());
    let dir = tempfile::tempdir().unwrap();
    let contrib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/systemd");
    let mut paths = Vec::new();
    for name in ["kharond.service", "kharond.socket", "kharond-control.socket"] {
        let text = std::fs::read_to_string(contrib.join(name)).unwrap();
        let text = text
            .replace("@KHAROND@", &bin("kharond").display().to_string())
            .replace("@SSH_AUTH_SOCK@", "/tmp/kharon-test-agent.sock");
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        paths.push(path);
    }
    let run = Env::new();
    let verify = Command::new(analyze)
        .args(["verify", "--user"])
        .args(&paths)
        .env("XDG_RUNTIME_DIR", run.path().join("run"))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "systemd-analyze verify failed:\n{stderr}");
    assert!(stderr.lines().all(|l| !l.contains("kharond")), "systemd-analyze complains:\n{stderr}");
}
