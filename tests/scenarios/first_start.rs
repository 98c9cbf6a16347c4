//! The first day: kharond started (e.g. by `kharonctl service-install`) before any `kharonctl
//! update`, and `--listen` given as a host name. The daemon must come up and serve direct
//! connections, say plainly that it has no inventory yet, and route once the first real `update`
//! (fake Lieutenant, real login, real sshd jump host) has reloaded it.

use std::io::{Read, Write};
use std::process::Command;

use kharon_e2e::kharonctl;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::lieutenant::Lieutenant;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, inventory, oidc};

use crate::jumphost::{Lab, LabOptions};

/// `curl -x socks5h://PROXY URL`, bounded; stdout on success, else what went wrong.
fn curl(proxy: &str, url: &str) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "20", "-x", proxy, url])
        .output()
        .expect("run curl");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("curl exit {:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr)))
    }
}

/// The PAC body kharond serves on its SOCKS port.
fn pac(daemon: &Kharond) -> String {
    let mut s = std::net::TcpStream::connect(daemon.socks_addr()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /proxy.pac HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    reply.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
}

fn ctl_json(env: &Env, args: &[&str]) -> serde_json::Value {
    let out = kharonctl::run(env, args);
    assert!(out.success(), "{args:?}: {}\n{}", out.stdout, out.stderr);
    out.json()
}

#[test]
fn without_a_cache_kharond_serves_direct_and_the_first_update_makes_it_route() {
    let _port = oidc::login_lock();
    let mut lab = Lab::new(LabOptions::default());
    let env = &lab.env;
    // Lieutenant knows one cluster behind the lab's jump host; nothing has been fetched yet.
    let clusters = env.write(
        "lieutenant-clusters.json",
        &inventory::to_json(&[inventory::routed("c-first", &lab.jumphost(), "c1.example")]),
    );
    let provider = oidc::Provider::start();
    let lieutenant = Lieutenant::start(&provider, &clusters);
    let cache = env.cache_dir().join("inventory.json");
    assert!(!cache.exists());

    let agent = lab.agent.socket().display().to_string();
    let daemon = Kharond::start_with(
        env,
        &["--ssh-config", lab.ssh_config.to_str().unwrap()],
        &[("SSH_AUTH_SOCK", agent.as_str())],
    );
    let log = daemon.log();
    assert_eq!(log.matches("no inventory yet").count(), 1, "one warning at start:\n{log}");
    assert!(log.contains(&format!("{} does not exist", cache.display())), "{log}");

    // The direct path works, by name and by address.
    let direct = HttpServer::start("direct");
    let proxy = daemon.proxy_url();
    assert_eq!(
        curl(&proxy, &format!("http://localhost:{}/hello", direct.port())).unwrap(),
        "hello from direct"
    );
    assert_eq!(curl(&proxy, &format!("http://{}/hello", direct.addr())).unwrap(), "hello from direct");

    // status and route say why nothing is routed, and what to do.
    let status = ctl_json(env, &["status", "-o", "json"]);
    assert_eq!(status["inventory"]["missing"], true, "{status}");
    assert_eq!(status["inventory"]["source_kind"], "cache", "{status}");
    assert_eq!(status["inventory"]["source_path"], cache.display().to_string(), "{status}");
    let human = kharonctl::run(env, &["status"]);
    assert!(human.stdout.contains("no inventory yet: run `kharonctl update`"), "{}", human.stdout);
    let route = ctl_json(env, &["route", "api.c1.example", "-o", "json"]);
    assert_eq!((&route["via"], &route["inventory_missing"]), (&"direct".into(), &true.into()), "{route}");
    assert!(
        route["reason"].as_str().unwrap().contains("no inventory yet: run `kharonctl update`"),
        "{route}"
    );
    let human = kharonctl::run(env, &["route", "api.c1.example"]);
    assert!(human.stdout.contains("→ direct"), "{}", human.stdout);
    assert!(human.stdout.contains("no inventory yet: run `kharonctl update`"), "{}", human.stdout);
    // `test` has nothing to check, and says why rather than passing.
    let test = kharonctl::run(env, &["test"]);
    assert_eq!(test.code, Some(1), "{test:?}");
    assert!(test.stdout.contains("no inventory yet: run `kharonctl update`"), "{}", test.stdout);
    // The PAC sends everything DIRECT.
    assert!(pac(&daemon).contains("var RULES = {};"), "{}", pac(&daemon));
    // A reload before any update changes nothing and says what to do.
    let reload = kharonctl::run(env, &["reload"]);
    assert_ne!(reload.code, Some(0), "{reload:?}");
    assert!(reload.stderr.contains("run `kharonctl update`"), "{}", reload.stderr);

    // The first update writes the cache and the Reload it sends makes the daemon route.
    let browser = oidc::browser_command();
    let update = kharonctl::run_with(
        env,
        &["update", "--login-timeout", "60"],
        &[("LIEUTENANT_URL", lieutenant.url()), ("KHARON_BROWSER", browser.as_str())],
    );
    assert!(update.success(), "{}\n{}", update.stdout, update.stderr);
    assert!(update.stdout.contains("kharond reloaded: 1 cluster, 1 routed"), "{}", update.stdout);
    assert!(cache.exists());
    let status = ctl_json(env, &["status", "-o", "json"]);
    assert_eq!(status["inventory"]["missing"], false, "{status}");
    assert_eq!(status["inventory"]["clusters_routed"], 1, "{status}");
    let route = ctl_json(env, &["route", "api.c1.example", "-o", "json"]);
    assert_eq!(route["jumphost"], lab.jumphost().as_str(), "{route}");
    assert_eq!(route["inventory_missing"], false, "{route}");
    assert!(!kharonctl::run(env, &["status"]).stdout.contains("no inventory yet"));
    assert!(pac(&daemon).contains("\"=c1.example\": true"), "{}", pac(&daemon));
    // A routed request: the name resolves only at the jump host.
    let pid = daemon.pid();
    lab.daemon = Some(daemon);
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert_eq!(lab.daemon().pid(), pid, "no restart");
    assert_eq!(
        curl(&lab.daemon().proxy_url(), &format!("http://{}/hello", direct.addr())).unwrap(),
        "hello from direct"
    );
}

/// Only a cache that does not exist yet starts empty: an `--inventory` file that is not there is
/// a mistake and still stops kharond (exit 2, naming the file).
#[test]
fn a_missing_inventory_file_given_explicitly_is_still_an_error() {
    let env = Env::new();
    let missing = env.path().join("no-such-inventory.json");
    let exited = Kharond::try_start(&env, &["--inventory", missing.to_str().unwrap()], &[])
        .err()
        .expect("must not start");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains(&missing.display().to_string()), "{}", exited.stderr);
    assert!(!exited.stderr.contains("panicked"), "{}", exited.stderr);
}

/// `--listen localhost:0`: the name is resolved at start, kharond listens on its loopback address
/// and a client that knows the proxy only as `localhost` reaches it.
#[test]
fn listen_accepts_a_name_that_resolves_to_loopback() {
    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap(), "--listen", "localhost:0"]);
    let addr = daemon.socks_addr();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    assert!(
        daemon.log().contains("listen address localhost:0 (from flag --listen) resolves to"),
        "{}",
        daemon.log()
    );
    let target = HttpServer::start("target");
    let proxy = format!("socks5h://localhost:{}", addr.port());
    assert_eq!(
        curl(&proxy, &format!("http://localhost:{}/hello", target.port())).unwrap(),
        "hello from target"
    );

    // A value that is neither IP:PORT nor NAME:PORT is refused at start, quoted as written.
    let env = Env::new();
    let exited = Kharond::try_start(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--listen", "localhost:notaport"],
        &[],
    )
    .err()
    .expect("must refuse");
    assert_eq!(exited.code, Some(2), "{}", exited.stderr);
    assert!(exited.stderr.contains("\"localhost:notaport\" is not an address"), "{}", exited.stderr);
}
