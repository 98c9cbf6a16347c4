//! HTTP CONNECT on the SOCKS port: `HTTPS_PROXY=http://127.0.0.1:PORT` with
//! real curl, Python's urllib and kubectl reaches a cluster host behind a real OpenSSH jump host
//! and a direct host; failures and bad requests get HTTP answers; a payload sent with the CONNECT
//! head is relayed and counted; with a password configured, CONNECT needs it and no log line
//! carries it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, inventory, kharonctl, socks, wait_until};

use crate::jumphost::{Lab, LabOptions, TARGET};
use crate::kubeconfig::TlsApi;

/// Every variable that could send a client elsewhere than where a test points it.
const PROXY_VARS: [&str; 8] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// `program` with no proxy settings from the test's own environment.
fn client(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// The client's stdout when it succeeded, else its exit status and stderr.
fn stdout(out: Output) -> Result<String, String> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{:?}: {}", out.status.code(), String::from_utf8_lossy(&out.stderr)))
    }
}

/// Sends `bytes` in one write and returns everything answered until the daemon closed.
fn raw(daemon: &Kharond, bytes: &[u8]) -> String {
    String::from_utf8_lossy(&socks::exchange(daemon.socks_addr(), bytes)).into_owned()
}

fn connect_head(authority: &str) -> String {
    format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: kharon-e2e\r\n\r\n")
}

/// (total direct, total routed) connections, from `kharonctl status`.
fn totals(env: &Env) -> (u64, u64) {
    let c = kharonctl::run(env, &["status", "-o", "json"]).json()["connections"].clone();
    (c["total_direct"].as_u64().unwrap_or(0), c["total_jumphost"].as_u64().unwrap_or(0))
}

/// Runs `f` and asserts it opened connections through kharond on the expected path only (kubectl
/// may open more than one).
fn through_kharond<T>(env: &Env, routed: bool, what: &str, f: impl FnOnce() -> T) -> T {
    let before = totals(env);
    let out = f();
    let went = |now: (u64, u64)| match routed {
        true => now.0 == before.0 && now.1 > before.1,
        false => now.0 > before.0 && now.1 == before.1,
    };
    assert!(
        wait_until(Duration::from_secs(10), || went(totals(env))),
        "{what}: connections {before:?} → {:?}, expected more {}",
        totals(env),
        if routed { "routed" } else { "direct" }
    );
    out
}

/// Python's urllib: through `proxy` with an explicit ProxyHandler, or (None) through the
/// environment's HTTPS_PROXY as every urllib user gets it.
const URLLIB: &str = "import ssl, sys, urllib.request
url, ca, proxy = sys.argv[1:4]
handlers = [urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=ca))]
if proxy:
    handlers.append(urllib.request.ProxyHandler({'https': proxy}))
print(urllib.request.build_opener(*handlers).open(url, timeout=20).read().decode())
";

fn urllib(
    url: &str,
    ca: &Path,
    handler_proxy: Option<&str>,
    env_proxy: Option<&str>,
) -> Result<String, String> {
    let mut cmd = client("python3");
    cmd.args(["-c", URLLIB, url]).arg(ca).arg(handler_proxy.unwrap_or(""));
    if let Some(proxy) = env_proxy {
        cmd.env("HTTPS_PROXY", proxy);
    }
    stdout(cmd.output().expect("run python3"))
}

/// A TLS API server for `host` with its CA in `dir`.
fn tls_api(dir: PathBuf, host: &str) -> (TlsApi, PathBuf) {
    std::fs::create_dir_all(&dir).unwrap();
    let api = TlsApi::start(&dir, host);
    (api, dir.join("ca.crt"))
}

#[test]
fn https_proxy_reaches_a_routed_and_a_direct_host_with_curl_python_and_kubectl() {
    let mut lab = Lab::new(LabOptions::default());
    let (routed, routed_ca) = tls_api(lab.env.path().join("routed"), TARGET);
    let (direct, direct_ca) = tls_api(lab.env.path().join("direct"), "localhost");
    lab.start_daemon();
    let env = &lab.env;
    let proxy = lab.daemon().http_proxy_url();
    let routed_url = format!("https://{TARGET}:{}/version", routed.port);
    let direct_url = format!("https://localhost:{}/version", direct.port);
    let hosts = [(true, &routed_url, &routed_ca), (false, &direct_url, &direct_ca)];
    let version = "v1.30.0-kharon-test";

    for (is_routed, url, ca) in hosts {
        // curl: HTTPS_PROXY, https_proxy, and -x with -p (--proxytunnel).
        for how in ["HTTPS_PROXY", "https_proxy", "-x"] {
            let mut cmd = client("curl");
            cmd.args(["-sS", "--fail", "--max-time", "20", "-p", "--cacert"]).arg(ca).arg(url);
            match how {
                "-x" => cmd.args(["-x", &proxy]),
                var => cmd.env(var, &proxy),
            };
            let got = through_kharond(env, is_routed, how, || stdout(cmd.output().expect("run curl")));
            assert!(got.as_ref().is_ok_and(|b| b.contains(version)), "curl {how} {url}: {got:?}");
        }
        // Python: the environment, and an explicit ProxyHandler.
        let got = through_kharond(env, is_routed, "urllib env", || urllib(url, ca, None, Some(&proxy)));
        assert!(got.as_ref().is_ok_and(|b| b.contains(version)), "urllib {url}: {got:?}");
        let got = through_kharond(env, is_routed, "urllib handler", || urllib(url, ca, Some(&proxy), None));
        assert!(got.as_ref().is_ok_and(|b| b.contains(version)), "urllib ProxyHandler {url}: {got:?}");
    }

    // kubectl takes HTTPS_PROXY from the environment (no proxy-url in its kubeconfig).
    let kubeconfig = env.write("empty-kubeconfig", "apiVersion: v1\nkind: Config\n");
    let kubectl = |server: &str, ca: &Path, token: &str| {
        let mut cmd = client("kubectl");
        cmd.env("KUBECONFIG", &kubeconfig).env("HTTPS_PROXY", &proxy);
        cmd.args([
            "--server",
            server,
            "--token",
            token,
            "--request-timeout",
            "20s",
            "--certificate-authority",
        ]);
        cmd.arg(ca).args(["get", "--raw", "/version"]);
        stdout(cmd.output().expect("run kubectl"))
    };
    let server = format!("https://{TARGET}:{}", routed.port);
    let got = through_kharond(env, true, "kubectl", || kubectl(&server, &routed_ca, "t-routed"));
    let got = got.unwrap_or_else(|e| panic!("kubectl {server}: {e}\n{}", lab.daemon().log()));
    let json: serde_json::Value = serde_json::from_str(&got).expect("JSON from /version");
    assert_eq!(
        (json["gitVersion"].as_str(), json["authorization"].as_str()),
        (Some(version), Some("Bearer t-routed"))
    );
    // Go never proxies "localhost" or a loopback IP, whatever HTTPS_PROXY says; "localhost." is
    // the same host to kharond (which drops the trailing dot) and to the certificate check.
    let server = format!("https://localhost.:{}", direct.port);
    let got = through_kharond(env, false, "kubectl direct", || kubectl(&server, &direct_ca, "t-direct"));
    let got = got.unwrap_or_else(|e| panic!("kubectl {server}: {e}\n{}", lab.daemon().log()));
    assert!(got.contains("Bearer t-direct"), "{got}");

    // The routed name never resolved here: only the jump host knows it.
    assert!(std::net::ToSocketAddrs::to_socket_addrs(&(TARGET, 443)).is_err(), "{TARGET} resolves locally");
    assert!(lab.hops[0].log().contains("Accepted publickey"), "{}", lab.hops[0].log());
    assert_eq!(kharonctl::run(env, &["status", "-o", "json"]).json()["connections"]["failed"], 0);
}

#[test]
fn failures_and_bad_requests_get_http_answers_and_the_daemon_keeps_serving() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    let daemon = lab.daemon();
    let direct = HttpServer::start("direct");
    let hello = || {
        let mut cmd = client("curl");
        cmd.args(["-sS", "--fail", "--max-time", "20", "-p", "-x", &daemon.http_proxy_url()]);
        stdout(cmd.arg(format!("http://localhost:{}/hello", direct.port())).output().expect("run curl"))
    };
    assert_eq!(hello().as_deref(), Ok("hello from direct"));

    // Nothing listens on port 1, at the jump host or here; the jump host cannot resolve the
    // second name. Each is a 502 whose one line names the route.
    for (authority, route) in [
        (format!("{TARGET}:1"), format!("via jump host {}", lab.jumphost())),
        ("nosuch.c1.example:443".to_owned(), format!("via jump host {}", lab.jumphost())),
        ("localhost:1".to_owned(), "directly".to_owned()),
    ] {
        let answer = raw(daemon, connect_head(&authority).as_bytes());
        assert!(answer.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{authority}: {answer}");
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        assert!(body.starts_with(&format!("kharond cannot reach {authority} {route}: ")), "{body}");
        assert!(body.ends_with('\n') && body.lines().count() == 1, "{body:?}");
    }

    // Bad targets: 400, named, and the daemon keeps serving.
    for bad in ["localhost", "localhost:0", "localhost:99999", "a..b:443", "::1:443", "https://localhost:443"]
    {
        let answer = raw(daemon, connect_head(bad).as_bytes());
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{bad}: {answer}");
        assert!(answer.contains("HTTP CONNECT"), "{bad}: {answer}");
        assert_eq!(hello().as_deref(), Ok("hello from direct"), "after {bad}");
    }
    // Another method: 405 with what is allowed.
    let answer = raw(daemon, b"DELETE / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{answer}");
    assert!(answer.contains("\r\nAllow: GET, HEAD, CONNECT\r\n"), "{answer}");
    // curl without -p sends a plain-HTTP proxy request for an http:// URL: forwarded (the client
    // matrix, client_matrix.rs, has the rest); an https:// URL in one is told to use CONNECT.
    let served = direct.requests();
    let mut cmd = client("curl");
    cmd.args(["-sS", "--max-time", "20", "-i", "-x", &daemon.http_proxy_url()]);
    let out = stdout(cmd.arg(format!("http://localhost:{}/hello", direct.port())).output().expect("curl"));
    let answer = out.expect("curl ran");
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n") && answer.ends_with("hello from direct"), "{answer}");
    assert_eq!(direct.requests(), served + 1);
    let answer =
        raw(daemon, format!("GET https://localhost:{}/hello HTTP/1.1\r\n\r\n", direct.port()).as_bytes());
    assert!(answer.starts_with("HTTP/1.1 501 Not Implemented\r\n"), "{answer}");
    assert!(answer.contains("HTTPS_PROXY=http://"), "{answer}");
    assert_eq!(direct.requests(), served + 1, "the https:// request reached the target");
    assert_eq!(hello().as_deref(), Ok("hello from direct"));
}

#[test]
fn a_payload_sent_with_the_connect_head_reaches_the_target_and_is_counted() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    let direct = HttpServer::start("direct");
    let payload = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    // Directly (spliced) and through the jump host (an SSH channel): head and payload in one
    // write, as a client that does not wait for the 200 sends its TLS ClientHello.
    for (authority, name) in [
        (format!("localhost:{}", direct.port()), "direct"),
        (format!("{TARGET}:{}", lab.target.port()), "target"),
    ] {
        let up_before = lab.bytes_up();
        let answer = raw(lab.daemon(), (connect_head(&authority) + payload).as_bytes());
        assert!(
            answer.starts_with("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 200 OK\r\n"),
            "{answer}"
        );
        assert!(answer.ends_with(&format!("hello from {name}")), "{answer}");
        // Counted like any relayed byte: the payload, and not one byte of the head.
        let expected = up_before + payload.len() as u64;
        assert_eq!(lab.bytes_up_reaching(expected), expected, "{authority}: bytes up");
    }
}

const USER: &str = "kh";
const PASSWORD: &str = "s3cret-Pw:7617";
const WRONG: &str = "wr0ng-Pw.guess";

fn base64(text: &str) -> String {
    crate::kubeconfig::base64_encode(text.as_bytes())
}

#[test]
fn with_a_password_connect_needs_basic_credentials_and_none_reaches_the_log() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let config =
        env.write("config.toml", &format!("[socks]\nusername = \"{USER}\"\npassword = \"{PASSWORD}\"\n"));
    let daemon = Kharond::start_with(
        &env,
        &["--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()],
        &[("RUST_LOG", "trace")],
    );
    let server = HttpServer::start("ok");
    let (api, ca) = tls_api(env.path().join("api"), "localhost");
    let url = format!("http://localhost:{}/hello", server.port());
    // curl's exit status, and what the proxy answered its CONNECT with.
    let curl = |credentials: Option<&str>| {
        let mut cmd = client("curl");
        cmd.args(["-sS", "--max-time", "20", "-p", "-x", &daemon.http_proxy_url(), "-w", "%{http_connect}"]);
        if let Some(credentials) = credentials {
            cmd.args(["--proxy-user", credentials]);
        }
        let out = cmd.arg(&url).output().expect("run curl");
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
    };

    let good = curl(Some(&format!("{USER}:{PASSWORD}")));
    assert_eq!(good, (true, "hello from ok200".to_owned()));
    for (what, credentials) in [("none", None), ("wrong", Some(format!("{USER}:{WRONG}")))] {
        assert_eq!(curl(credentials.as_deref()), (false, "407".to_owned()), "{what}");
    }
    // The answer itself, as a raw client sees it.
    for header in
        ["".to_owned(), format!("Proxy-Authorization: Basic {}\r\n", base64(&format!("{USER}:{WRONG}")))]
    {
        let head = format!("CONNECT localhost:{} HTTP/1.1\r\n{header}\r\n", server.port());
        let answer = raw(&daemon, head.as_bytes());
        assert!(answer.starts_with("HTTP/1.1 407 Proxy Authentication Required\r\n"), "{answer}");
        assert!(answer.contains("\r\nProxy-Authenticate: Basic realm=\"kharon\"\r\n"), "{answer}");
    }
    // Python takes the credentials from the proxy URL, kubectl from HTTPS_PROXY's.
    let with_credentials =
        daemon.http_proxy_url().replace("http://", &format!("http://{USER}:{}@", "s3cret-Pw%3A7617"));
    let https = format!("https://localhost:{}/version", api.port);
    let got = urllib(&https, &ca, Some(&with_credentials), None);
    assert!(got.as_ref().is_ok_and(|b| b.contains("kharon-test")), "urllib: {got:?}");
    let wrong = daemon.http_proxy_url().replace("http://", &format!("http://{USER}:{WRONG}@"));
    let got = urllib(&https, &ca, Some(&wrong), None);
    assert!(got.as_ref().is_err_and(|e| e.contains("407")), "urllib with a wrong password: {got:?}");
    let kubeconfig = env.write("empty-kubeconfig", "apiVersion: v1\nkind: Config\n");
    let mut cmd = client("kubectl");
    cmd.env("KUBECONFIG", &kubeconfig).env("HTTPS_PROXY", &with_credentials);
    cmd.args([
        "--server",
        &format!("https://localhost.:{}", api.port),
        "--token",
        "t",
        "--certificate-authority",
    ]);
    let got = stdout(cmd.arg(&ca).args(["get", "--raw", "/version"]).output().expect("run kubectl"));
    assert!(got.as_ref().is_ok_and(|b| b.contains("kharon-test")), "kubectl: {got:?}");
    socks::assert_still_serving(&daemon, &server, Some((USER, PASSWORD)));

    // Every refusal is in the trace log; no password, plain or as sent, is.
    let refusals = || daemon.log().matches("handshake failed").count();
    assert!(wait_until(Duration::from_secs(10), || refusals() >= 5), "{}", daemon.log());
    let log = daemon.log();
    assert!(log.contains("TRACE"), "{log}");
    for secret in [
        PASSWORD.to_owned(),
        WRONG.to_owned(),
        base64(&format!("{USER}:{PASSWORD}")),
        base64(&format!("{USER}:{WRONG}")),
        "s3cret-Pw%3A7617".to_owned(),
    ] {
        assert!(!log.contains(&secret), "{secret} logged:\n{log}");
    }
}
