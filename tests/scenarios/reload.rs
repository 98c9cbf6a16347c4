//! Reloads that cannot read their input: a FIFO where the inventory or the cache should be is
//! refused at once (it would block a read forever), the old table keeps serving, and SIGTERM
//! still stops the daemon promptly with exit code 0.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, inventory, kharonctl, wait_until};

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let mode = nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR;
    nix::unistd::mkfifo(path, mode).unwrap_or_else(|e| panic!("mkfifo {}: {e}", path.display()));
}

/// The daemon still routes by its old table and relays a direct request.
fn still_serving(env: &Env, daemon: &Kharond, server: &HttpServer) {
    let route = kharonctl::run(env, &["route", "api.a.example", "-o", "json"]);
    assert!(route.success(), "{route:?}");
    assert_eq!(route.json()["jumphost"], "jump-a", "the old table must stay");
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "20", "-x", &daemon.proxy_url()])
        .arg(format!("http://localhost:{}/hello", server.port()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from still-here", "{}", daemon.log());
}

#[test]
fn a_fifo_in_place_of_the_inventory_fails_the_reload_and_sigterm_still_stops() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let mut daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    let server = HttpServer::start("still-here");
    mkfifo(&inv);

    // SIGHUP: the reload fails in its own task, with the reason in the log.
    daemon.signal(libc::SIGHUP);
    let logged = wait_until(Duration::from_secs(20), || {
        daemon.log().lines().any(|l| l.contains("SIGHUP") && l.contains("not a regular file (it is a FIFO)"))
    });
    assert!(logged, "no SIGHUP reload error in the log:\n{}", daemon.log());

    // The RPC: a clear error naming the file, not a client timeout.
    let reload = kharonctl::run(&env, &["reload"]);
    assert!(!reload.success(), "{reload:?}");
    assert!(reload.stderr.contains(&inv.display().to_string()), "{}", reload.stderr);
    assert!(reload.stderr.contains("not a regular file (it is a FIFO)"), "{}", reload.stderr);
    assert!(reload.stderr.contains("old routing table stays"), "{}", reload.stderr);
    still_serving(&env, &daemon, &server);

    // SIGTERM is handled although two reloads failed on the FIFO; the process is gone within
    // signal_and_wait's 10 s, with exit code 0.
    assert_eq!(daemon.signal_and_wait(libc::SIGTERM), Some(0), "{}", daemon.log());
    assert!(daemon.log().contains("kharond stopped"), "{}", daemon.log());
}

#[test]
fn a_fifo_in_place_of_the_cache_fails_the_reload() {
    let env = Env::new();
    let clusters: Vec<kharon_routing::inventory::Cluster> =
        serde_json::from_value(serde_json::json!([inventory::routed("c-a", "jump-a", "a.example")])).unwrap();
    let envelope = kharon_routing::cache::Envelope::new("https://lieutenant.example", clusters, Vec::new());
    let cache = kharon_routing::cache::path(&env.cache_dir());
    kharon_routing::cache::store(&cache, &envelope).unwrap();
    let mut daemon = Kharond::start(&env, &[]);
    let server = HttpServer::start("still-here");
    mkfifo(&cache);

    let reload = kharonctl::run(&env, &["reload"]);
    assert!(!reload.success(), "{reload:?}");
    assert!(reload.stderr.contains(&cache.display().to_string()), "{}", reload.stderr);
    assert!(reload.stderr.contains("not a regular file (it is a FIFO)"), "{}", reload.stderr);
    still_serving(&env, &daemon, &server);
    assert_eq!(daemon.signal_and_wait(libc::SIGTERM), Some(0), "{}", daemon.log());
}

#[test]
fn a_fifo_as_inventory_at_start_is_refused_with_exit_code_2() {
    let env = Env::new();
    let fifo = env.path().join("inventory.fifo");
    mkfifo(&fifo);
    let exited = Kharond::try_start(&env, &["--inventory", fifo.to_str().unwrap()], &[])
        .err()
        .expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&fifo.display().to_string()), "{}", exited.stderr);
    assert!(exited.stderr.contains("not a regular file (it is a FIFO)"), "{}", exited.stderr);
}
