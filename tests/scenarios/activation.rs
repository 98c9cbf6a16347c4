//! Socket activation through the real `systemd-socket-activate`: it binds the address, waits
//! for the first client, then execs kharond with the listener as descriptor 3 (`LISTEN_FDS`).
//! The loopback rule of `--listen` holds for such a listener too.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, collect_output, inventory, kharonctl, wait_until};

const ACTIVATE: &str = "/usr/bin/systemd-socket-activate";

/// `systemd-socket-activate -l LISTEN --fdname=socks kharond ARGS…`, waiting until it listens.
struct Activator {
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Activator {
    fn start(env: &Env, listen: &str, args: &[&str]) -> Self {
        Self::start_named(env, listen, "socks", args)
    }

    /// As [`Activator::start`], with the descriptor named `name` (FileDescriptorName=).
    fn start_named(env: &Env, listen: &str, name: &str, args: &[&str]) -> Self {
        let mut child = Command::new(ACTIVATE)
            .args(["-l", listen, &format!("--fdname={name}")])
            .arg(kharon_e2e::bin("kharond"))
            .arg("--control-socket")
            .arg(env.control_socket())
            .args(args)
            .env_clear()
            .envs(env.vars())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run systemd-socket-activate (package systemd)");
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            collect_output(stderr, Arc::clone(&log));
        }
        let activator = Self { child, log };
        assert!(
            wait_until(Duration::from_secs(10), || activator.log().contains("Listening on")),
            "systemd-socket-activate did not listen:\n{}",
            activator.log()
        );
        activator
    }

    fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The exit code once the process (by then kharond) ends by itself within 20 s.
    fn exit_code(&mut self) -> Option<Option<i32>> {
        let mut code = None;
        wait_until(Duration::from_secs(20), || match self.child.try_wait() {
            Ok(Some(status)) => {
                code = Some(status.code());
                true
            }
            _ => false,
        });
        code
    }
}

impl Drop for Activator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- systemd-socket-activate + kharond log ----\n{}", self.log());
        }
    }
}

fn inventory_file(env: &Env) -> String {
    env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]))
        .display()
        .to_string()
}

/// curl through `proxy` to the server's /hello; returns the body.
fn fetch(proxy: &str, server: &HttpServer) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "30", "-x", proxy])
        .arg(format!("http://localhost:{}/hello", server.port()))
        .output()
        .expect("run curl");
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn an_activated_listener_on_all_addresses_without_password_refuses_to_start() {
    let env = Env::new();
    let inv = inventory_file(&env);
    let port = kharon_e2e::free_port();
    let mut activator = Activator::start(&env, &format!("0.0.0.0:{port}"), &["--inventory", &inv]);
    // The first client makes systemd-socket-activate exec kharond with the listener.
    let _client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");

    let code = activator.exit_code();
    let log = activator.log();
    assert_eq!(code, Some(Some(2)), "kharond must refuse to start:\n{log}");
    assert!(log.contains(&format!("0.0.0.0:{port} (from socket activation) is not loopback")), "{log}");
    assert!(log.contains(&format!("ListenStream=127.0.0.1:{port}")), "{log}");
    assert!(log.contains("[socks] username and password"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(!env.control_socket().exists(), "no control socket for a daemon that did not start");
}

#[test]
fn an_activated_loopback_listener_serves_socks_clients() {
    let env = Env::new();
    let inv = inventory_file(&env);
    let server = HttpServer::start("activated");
    let port = kharon_e2e::free_port();
    let activator = Activator::start(&env, &format!("127.0.0.1:{port}"), &["--inventory", &inv]);

    // curl's connection is the one that starts kharond; it is answered once the daemon is up.
    let body = fetch(&format!("socks5h://127.0.0.1:{port}"), &server);
    assert_eq!(body, "hello from activated", "{}", activator.log());
    let status = kharonctl::run(&env, &["status", "-o", "json"]).json();
    assert_eq!(status["listen_address"], format!("127.0.0.1:{port}"));
    assert!(activator.log().contains("using the SOCKS listener passed by the service manager"));
}

#[test]
fn an_activated_listener_on_all_addresses_starts_with_a_password() {
    let env = Env::new();
    let inv = inventory_file(&env);
    let config = env.write("config.toml", "[socks]\nusername = \"kharon\"\npassword = \"s3cret\"\n");
    kharon_e2e::set_mode(&config, 0o600);
    let server = HttpServer::start("authenticated");
    let port = kharon_e2e::free_port();
    let activator = Activator::start(
        &env,
        &format!("0.0.0.0:{port}"),
        &["--inventory", &inv, "--config", config.to_str().unwrap()],
    );

    let body = fetch(&format!("socks5h://kharon:s3cret@127.0.0.1:{port}"), &server);
    assert_eq!(body, "hello from authenticated", "{}", activator.log());
    let status = kharonctl::run(&env, &["status", "-o", "json"]).json();
    assert_eq!(status["listen_address"], format!("0.0.0.0:{port}"));
    assert_eq!(status["socks_auth_required"], true);
    // Without the password the same listener serves nothing.
    let refused = fetch(&format!("socks5h://127.0.0.1:{port}"), &server);
    assert!(!refused.contains("hello from"), "{refused}");
}

#[test]
fn a_tcp_listener_named_control_is_refused_not_served_as_the_control_api() {
    let env = Env::new();
    let inv = inventory_file(&env);
    let port = kharon_e2e::free_port();
    let mut activator =
        Activator::start_named(&env, &format!("127.0.0.1:{port}"), "control", &["--inventory", &inv]);
    let _client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");

    let code = activator.exit_code();
    let log = activator.log();
    assert_eq!(code, Some(Some(2)), "kharond must refuse the descriptor:\n{log}");
    assert!(log.contains("named \"control\" but is a TCP/IP socket"), "{log}");
    assert!(log.contains("ListenStream=%t/kharon/kharond.sock"), "{log}");
}
