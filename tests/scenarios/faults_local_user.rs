//! Another local user is refused by the control API (docs/performance.md, item 18), and by a
//! password-less proxy. The control API: first by the
//! private runtime directory; if someone loosened the modes, kharonctl itself refuses a socket
//! that is not its user's, and a client that ignores that (raw gRPC over HTTP/2, here real `curl`)
//! is refused by the daemon's peer-credential check on every request (OpenSSH's agent-getpeereid
//! check does the same).
//!
//! Runs kharonctl and curl as `nobody` with `setpriv`, which needs root; the suite runs as root
//! (sshd scenarios need it too), and the test says so instead of skipping.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, kharonctl, set_mode, wait_until};

/// `kharonctl ARGS` as uid/gid 65534 (nobody), with a HOME it can read and our control socket.
fn as_nobody(env: &Env, own: &Path, args: &[&str]) -> Output {
    let p = |s: &str| own.join(s).display().to_string();
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(kharon_e2e::bin("kharonctl"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", p("home"))
        .env("XDG_CONFIG_HOME", p("config"))
        .env("XDG_CACHE_HOME", p("cache"))
        .env("XDG_RUNTIME_DIR", p("run"))
        .env("KHARON_CONTROL_SOCKET", env.control_socket())
        .output()
        .expect("run setpriv")
}

/// One unary gRPC call with an empty request message, as uid 65534, by real `curl` over HTTP/2:
/// a client that does not check who owns the socket. Returns the response head.
fn grpc_as_nobody(env: &Env, own: &Path, method: &str) -> String {
    // The gRPC frame of an empty message: not compressed, length 0.
    let empty = own.join("empty-frame");
    std::fs::write(&empty, [0u8; 5]).unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "curl", "-s", "-i"])
        .args(["--http2-prior-knowledge", "--max-time", "10", "--unix-socket"])
        .arg(env.control_socket())
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers", "--data-binary"])
        .arg(format!("@{}", empty.display()))
        .arg(format!("http://localhost/kharon.v1.Control/{method}"))
        .output()
        .expect("run setpriv curl");
    text(&out)
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn another_local_user_is_refused_by_the_control_api() {
    assert!(nix::unistd::geteuid().is_root(), "acting as another user (setpriv) needs root");
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    let loaded_at =
        kharonctl::run(&env, &["status", "-o", "json"]).json()["inventory"]["loaded_at_ms"].clone();
    assert!(loaded_at.is_i64() || loaded_at.is_u64(), "{loaded_at}");
    // nobody's own world, readable by it.
    let own = tempfile::Builder::new().prefix("khnobody").tempdir_in("/tmp").unwrap();
    for sub in ["home", "config", "cache", "run"] {
        std::fs::create_dir_all(own.path().join(sub)).unwrap();
    }
    for dir in [
        own.path().to_path_buf(),
        own.path().join("home"),
        own.path().join("config"),
        own.path().join("cache"),
        own.path().join("run"),
    ] {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    }

    // As deployed: the socket lives in a 0700 directory of ours.
    let out = as_nobody(&env, own.path(), &["status"]);
    assert!(!out.status.success(), "nobody got a status:\n{}", text(&out));
    // It cannot even see the socket (kharonctl then says the daemon is not running).
    assert!(out.stdout.is_empty(), "{}", text(&out));

    // Someone loosened every mode on the way: the daemon itself still refuses, on each request.
    for dir in [env.path().to_path_buf(), env.path().join("run"), env.path().join("run/kharon")] {
        set_mode(&dir, 0o755);
    }
    set_mode(&env.control_socket(), 0o666);
    // kharonctl will not talk to a daemon that is not its user's.
    for args in [&["status"][..], &["route", "api.a.example"], &["reload"]] {
        let out = as_nobody(&env, own.path(), args);
        assert!(!out.status.success(), "nobody ran kharonctl {args:?}:\n{}", text(&out));
        assert!(
            text(&out).contains("belongs to uid 0 (root), not to us (uid 65534)"),
            "{args:?}: {}",
            text(&out)
        );
    }
    // A client that does not ask is refused by the daemon, request by request: PERMISSION_DENIED.
    for method in ["Status", "Route", "Reload"] {
        let head = grpc_as_nobody(&env, own.path(), method);
        assert!(head.contains("grpc-status: 7"), "{method}: {head}");
        assert!(
            head.contains("uid%2065534%20may%20not%20control%20this%20kharond%20(uid%200)"),
            "{method}: {head}"
        );
    }
    // Nothing was reloaded on nobody's behalf, and the owner is still served.
    let status = kharonctl::run(&env, &["status", "-o", "json"]);
    assert!(status.success(), "{}", status.stderr);
    let status = status.json();
    assert_eq!(status["pid"], daemon.pid());
    assert_eq!(status["inventory"]["loaded_at_ms"], loaded_at, "{status}");
}

/// `curl ARGS` as uid/gid 65534 (nobody); returns its exit code and stderr.
fn curl_as_nobody(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--", "curl", "-sS", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run setpriv curl");
    (out.status.code(), text(&out))
}

/// `curl ARGS` as ourselves (the owner).
fn curl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10"])
        .args(args)
        .output()
        .expect("run curl");
    if out.status.success() { Ok(String::from_utf8_lossy(&out.stdout).into_owned()) } else { Err(text(&out)) }
}

/// A password-less kharond is the engineer's SSH identity in every customer network;
/// another user of the machine is refused (SOCKS "not allowed", HTTP 403, the PAC too), named
/// once in the log, while the owner is served; `allow_other_users = true` lets others in.
#[test]
fn a_password_less_proxy_serves_its_owner_and_refuses_another_local_user() {
    assert!(nix::unistd::geteuid().is_root(), "acting as another user (setpriv) needs root");
    let env = Env::new();
    let server = kharon_e2e::servers::HttpServer::start("local target");
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    let socks = daemon.proxy_url();
    let http = daemon.http_proxy_url();
    let target = format!("http://localhost:{}/hello", server.port());
    let pac = format!("http://localhost:{}/proxy.pac", daemon.socks_addr().port());

    // SOCKS5: reply 0x02 "connection not allowed by ruleset", which curl reports as (2).
    let (code, said) = curl_as_nobody(&["-x", &socks, &target]);
    assert_eq!(code, Some(97), "nobody got through SOCKS: {said}");
    assert!(said.contains("(2)"), "not the 'not allowed' reply: {said}");
    // HTTP CONNECT and the PAC: 403.
    let (code, said) = curl_as_nobody(&["-p", "-x", &http, &target]);
    assert_eq!(code, Some(56), "nobody got through CONNECT: {said}");
    assert!(said.contains("403"), "{said}");
    let (_, said) = curl_as_nobody(&["-i", &pac]);
    assert!(said.starts_with("HTTP/1.1 403 Forbidden"), "{said}");
    assert!(!said.contains("FindProxyForURL"), "the PAC went to another user: {said}");

    // The owner, meanwhile, is served on every path.
    assert_eq!(curl(&["-x", &socks, &target]).unwrap(), "hello from local target");
    assert_eq!(curl(&["-p", "-x", &http, &target]).unwrap(), "hello from local target");
    assert!(curl(&[&pac]).unwrap().contains("FindProxyForURL"));

    // One WARN for the refused user, however many connections it made, naming its uid.
    let refused = |log: &str| {
        log.lines().filter(|l| l.contains(" WARN ") && l.contains("refused a client of uid 65534")).count()
    };
    assert!(wait_until(Duration::from_secs(5), || refused(&daemon.log()) == 1), "{}", daemon.log());
    assert!(daemon.log().contains("set allow_other_users = true"), "{}", daemon.log());
    drop(daemon);

    // The setting that lets other local users in.
    let config = env.write("config.toml", "allow_other_users = true\n");
    let daemon =
        Kharond::start(&env, &["--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()]);
    let (code, said) = curl_as_nobody(&["--fail", "-x", &daemon.proxy_url(), &target]);
    assert_eq!(code, Some(0), "allow_other_users = true, yet: {said}");
    assert_eq!(refused(&daemon.log()), 0, "{}", daemon.log());
}
