//! The control socket: `status`, `route`, `reload` against a running daemon, the 0600 socket, a
//! second daemon, a stale socket, and a daemon that is not running.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::{HttpServer, pattern};
use kharon_e2e::{Env, inventory, kharonctl};

fn write_inventory(env: &Env, clusters: &[serde_json::Value]) -> String {
    env.write("inventory.json", &inventory::to_json(clusters)).display().to_string()
}

#[test]
fn status_and_route_describe_the_daemon() {
    let env = Env::new();
    let inv = write_inventory(
        &env,
        &[inventory::routed("c-a", "jump-a", "a.example"), inventory::direct("c-d", "d.example")],
    );
    let daemon = Kharond::start(&env, &["--inventory", &inv]);

    let status = kharonctl::run(&env, &["status", "-o", "json"]).json();
    assert_eq!(status["listen_address"], daemon.socks_addr().to_string());
    assert_eq!(status["inventory"]["source_kind"], "file");
    assert_eq!(status["inventory"]["clusters_total"], 2);
    assert_eq!(status["inventory"]["clusters_routed"], 1);
    assert_eq!(status["pid"], daemon.pid());
    // Memory as the kernel counts it (within a factor of two: the daemon allocates meanwhile),
    // and the heap's live bytes within what the heaps hold.
    let vm_rss = daemon.rss_kib() * 1024;
    let memory = &status["memory"];
    let resident = memory["resident_bytes"].as_u64().unwrap();
    assert!(resident > vm_rss / 2 && resident < vm_rss * 2, "{memory} against VmRSS {vm_rss}");
    let (in_use, heap) =
        (memory["heap_in_use_bytes"].as_u64().unwrap(), memory["heap_bytes"].as_u64().unwrap());
    assert!(in_use > 0 && in_use <= heap && heap < resident * 4, "{memory}");

    let human = kharonctl::run(&env, &["status"]);
    assert!(human.success(), "{}", human.stderr);
    assert!(human.stdout.contains(&format!("socks5h://{}", daemon.socks_addr())), "{}", human.stdout);
    let memory_line = human.stdout.lines().find(|l| l.starts_with("memory: ")).unwrap_or_default();
    assert!(
        memory_line.contains(" MiB resident; heap ") && memory_line.contains(" in use of "),
        "{}",
        human.stdout
    );

    // A reader that went away (`kharonctl status | head`): a quiet end with the shell's status
    // for a broken pipe, not a panic. The pipe's read end is closed before kharonctl starts.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let piped = kharonctl::command(&env, &["status"]).stdout(writer).output().unwrap();
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert_eq!((piped.status.code(), stderr.as_ref()), (Some(141), ""));

    let routed = kharonctl::run(&env, &["route", "API.A.example.", "--output", "json"]).json();
    assert_eq!(routed["host"], "api.a.example");
    assert_eq!(routed["via"], "jumphost");
    assert_eq!(routed["jumphost"], "jump-a");
    assert_eq!(routed["cluster"], "c-a");
    assert_eq!(routed["suffix"], "api.a.example", "the API URL host is the longest include");

    let direct = kharonctl::run(&env, &["route", "www.d.example", "-o", "json"]).json();
    assert_eq!(direct["via"], "direct");
    assert!(direct["jumphost"].is_null());

    // Socket 0600 inside a 0700 directory.
    let sock = env.control_socket();
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "socket mode {mode:o}");
    let dir_mode = std::fs::metadata(sock.parent().unwrap()).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700, "dir mode {dir_mode:o}");
}

#[test]
fn reload_changes_routes_while_a_transfer_started_before_completes() {
    let env = Env::new();
    let inv = write_inventory(&env, &[inventory::routed("c-a", "jump-a", "a.example")]);
    let daemon = Kharond::start(&env, &["--inventory", &inv]);
    let server = HttpServer::start("long");

    // A transfer that takes a couple of seconds (rate-limited by curl), started before the reload.
    let len = 24 * 1024 * 1024;
    let out_file = env.path().join("long");
    let mut curl = Command::new("curl")
        .args(["-sS", "--fail", "--limit-rate", "8M", "-x", &daemon.proxy_url(), "-o"])
        .arg(&out_file)
        .arg(format!("http://localhost:{}/bytes/{len}", server.port()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(kharon_e2e::wait_until(Duration::from_secs(10), || {
        kharonctl::run(&env, &["status", "-o", "json"]).json()["connections"]["open_direct"] == 1
    }));

    assert_eq!(kharonctl::run(&env, &["route", "api.b.example", "-o", "json"]).json()["via"], "direct");
    write_inventory(&env, &[inventory::routed("c-b", "jump-b", "b.example")]);
    let reload = kharonctl::run(&env, &["reload"]);
    assert!(reload.success(), "{}", reload.stderr);
    assert!(reload.stdout.contains("+ route b.example via jump-b (c-b)"), "{}", reload.stdout);
    assert!(reload.stdout.contains("- route a.example via jump-a (c-a)"), "{}", reload.stdout);
    assert_eq!(kharonctl::run(&env, &["route", "api.b.example", "-o", "json"]).json()["jumphost"], "jump-b");
    assert_eq!(kharonctl::run(&env, &["route", "api.a.example", "-o", "json"]).json()["via"], "direct");

    let status = curl.wait().unwrap();
    let mut err = String::new();
    curl.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "transfer broke during reload: {err}");
    let got = std::fs::read(&out_file).unwrap();
    assert_eq!(got.len(), len);
    assert!(got == pattern(len));
    drop(daemon);
}

#[test]
fn reload_with_a_corrupt_file_keeps_the_old_table() {
    let env = Env::new();
    let inv = write_inventory(&env, &[inventory::routed("c-a", "jump-a", "a.example")]);
    let _daemon = Kharond::start(&env, &["--inventory", &inv]);
    env.write("inventory.json", "[{\"id\": \"c-broken\", ");
    let reload = kharonctl::run(&env, &["reload"]);
    assert!(!reload.success());
    assert!(reload.stderr.contains("inventory.json"), "{}", reload.stderr);
    assert!(reload.stderr.contains("old routing table stays"), "{}", reload.stderr);
    assert_eq!(kharonctl::run(&env, &["route", "api.a.example", "-o", "json"]).json()["jumphost"], "jump-a");
}

#[test]
fn sighup_reloads_and_sigterm_stops_cleanly() {
    let env = Env::new();
    let inv = write_inventory(&env, &[inventory::routed("c-a", "jump-a", "a.example")]);
    let mut daemon = Kharond::start(&env, &["--inventory", &inv]);
    write_inventory(&env, &[inventory::routed("c-b", "jump-b", "b.example")]);
    daemon.signal(libc::SIGHUP);
    assert!(kharon_e2e::wait_until(Duration::from_secs(10), || {
        kharonctl::run(&env, &["route", "api.b.example", "-o", "json"]).json()["via"] == "jumphost"
    }));
    assert_eq!(daemon.signal_and_wait(libc::SIGTERM), Some(0));
    assert!(!env.control_socket().exists(), "control socket left behind");
}

#[test]
fn second_daemon_is_refused_and_stale_socket_is_replaced() {
    let env = Env::new();
    let inv = write_inventory(&env, &[inventory::routed("c-a", "jump-a", "a.example")]);
    let mut first = Kharond::start(&env, &["--inventory", &inv]);
    let second =
        Kharond::try_start(&env, &["--inventory", &inv], &[]).err().expect("second daemon must exit");
    assert_eq!(second.code, Some(3));
    assert!(second.stderr.contains("already running"), "{}", second.stderr);
    assert!(first.alive(), "the first daemon must keep running");
    assert!(kharonctl::run(&env, &["status"]).success());

    // SIGKILL leaves the socket file behind; the next daemon replaces it.
    first.signal_and_wait(libc::SIGKILL);
    assert!(env.control_socket().exists());
    let _third = Kharond::start(&env, &["--inventory", &inv]);
    assert!(kharonctl::run(&env, &["status"]).success());
}

#[test]
fn kharonctl_explains_a_daemon_that_is_not_running() {
    let env = Env::new();
    let out = kharonctl::run(&env, &["status"]);
    assert_eq!(out.code, Some(3));
    assert!(out.stderr.contains("kharond is not running"), "{}", out.stderr);
    assert!(out.stderr.contains("start it with"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "one line, not a transport dump: {}", out.stderr);
}

/// Evaluates the PAC for `host` with node, as a browser's PAC engine would.
fn pac_decision(pac: &str, host: &str) -> String {
    let script = format!("{pac}\nprocess.stdout.write(FindProxyForURL('https://{host}/', '{host}'));");
    let out = Command::new("node").args(["-e", &script]).output().expect("run node");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn pac_is_served_on_the_socks_port_and_follows_reloads() {
    let env = Env::new();
    let inv = write_inventory(&env, &[inventory::routed("c-a", "jump-a", "a.example")]);
    let daemon = Kharond::start(&env, &["--inventory", &inv]);
    let fetch = || {
        let out = Command::new("curl")
            .args(["-sS", "--fail", &format!("http://{}/proxy.pac", daemon.socks_addr())])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let pac = fetch();
    let proxy = daemon.socks_addr().to_string();
    assert!(pac_decision(&pac, "api.a.example").contains(&proxy));
    assert_eq!(pac_decision(&pac, "www.example.org"), "DIRECT");
    assert_eq!(pac_decision(&pac, "xa.example"), "DIRECT", "label boundary");

    write_inventory(&env, &[inventory::routed("c-b", "jump-b", "b.example")]);
    assert!(kharonctl::run(&env, &["reload"]).success());
    let pac = fetch();
    assert_eq!(pac_decision(&pac, "api.a.example"), "DIRECT");
    assert!(pac_decision(&pac, "api.b.example").contains(&proxy));

    // Other paths: 404, and SOCKS keeps working on the same port.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{}/", daemon.socks_addr()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
    assert_eq!(kharonctl::run(&env, &["status", "-o", "json"]).json()["connections"]["failed"], 0);
}
