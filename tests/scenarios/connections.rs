//! `kharonctl connections`, `status`'s per-route totals and `route --trace`, with real
//! clients: curl and kubectl through a real OpenSSH jump host, listed while they transfer, their
//! byte counts checked against what curl says it moved and, for kubectl's TLS, against the API
//! server's own kernel counters (`ss`); a trace through a real two-hop chain, dialled and reused.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::jumphost::{Lab, LabOptions, TARGET};
use crate::kubeconfig::TlsApi;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::{Env, inventory, kharonctl, wait_until};

/// How long the servers hold a transfer open, so the clients are listed while they transfer.
const HOLD_SECS: u64 = 8;
/// What curl downloads before the hold.
const CURL_BYTES: usize = 300_000;

fn connections(env: &Env) -> Vec<Value> {
    let out = kharonctl::run(env, &["connections", "-o", "json"]);
    assert!(out.success(), "connections failed ({:?}): {}", out.code, out.stderr);
    out.json()["connections"].as_array().cloned().unwrap_or_default()
}

fn ok(out: &kharonctl::Output) {
    assert!(out.success(), "kharonctl failed ({:?}):\n{}\n{}", out.code, out.stdout, out.stderr);
}

/// One cluster, c1, behind a real jump host: its TLS API and an HTTP target resolve only at the
/// last hop. kharond runs; kubectl has a kubeconfig and a token for it.
struct Routed {
    lab: Lab,
    api: TlsApi,
    kubeconfig: PathBuf,
}

impl Routed {
    fn start() -> Self {
        let crate::kubeconfig::JumpCluster { mut lab, api, daemon, inventory, .. } =
            crate::kubeconfig::JumpCluster::start();
        let listen = daemon.socks_addr().to_string();
        lab.daemon = Some(daemon);
        let kubeconfig = lab.env.path().join("kubeconfig");
        let i = inventory.to_str().unwrap();
        ok(&kharonctl::run_with(
            &lab.env,
            &["kubeconfig", "--inventory", i, "-o", kubeconfig.to_str().unwrap()],
            &[("KHARON_LISTEN", &listen)],
        ));
        let tokens = lab.env.cache_dir().join("openshift-tokens");
        std::fs::create_dir_all(&tokens).unwrap();
        std::fs::write(tokens.join("c1.json"), r#"{"token":"sha256~listed"}"#).unwrap();
        Routed { lab, api, kubeconfig }
    }

    fn env(&self) -> &Env {
        &self.lab.env
    }

    /// curl through kharond, downloading CURL_BYTES and then held open; it prints what it moved.
    fn spawn_curl(&self) -> Child {
        Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "--max-time", "60", "-x", &self.lab.daemon().proxy_url()])
            .args(["-w", "%{size_request} %{size_header} %{size_download}"])
            .arg(format!("http://{TARGET}:{}/hold/{CURL_BYTES}/{HOLD_SECS}", self.lab.target.port()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run curl")
    }

    /// kubectl through kharond, its answer held back for HOLD_SECS.
    fn spawn_kubectl(&self) -> Child {
        Command::new("kubectl")
            .args(["--kubeconfig", self.kubeconfig.to_str().unwrap(), "--request-timeout", "60s"])
            .args(["get", "--raw", &format!("/hold?seconds={HOLD_SECS}")])
            .env_clear()
            .envs(self.env().vars())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl")
    }
}

/// The listed connection held by `pid`, if any.
fn held_by(rows: &[Value], pid: u32) -> Option<Value> {
    rows.iter().find(|r| r["pid"].as_u64() == Some(u64::from(pid))).cloned()
}

/// bytes_received and bytes_acked of the one established socket whose local port is `port` (the
/// server's end), from the kernel (`ss -ti`).
fn server_socket_bytes(port: u16) -> Option<(u64, u64)> {
    let out = Command::new("ss")
        .args(["-tinH", "state", "established", &format!("( sport = :{port} )")])
        .output()
        .expect("run ss");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> u64 {
        text.split_whitespace().find_map(|w| w.strip_prefix(name).and_then(|v| v.parse().ok())).unwrap_or(0)
    };
    // One socket only (kubectl keeps one connection); its details are on indented lines.
    let sockets = text.lines().filter(|l| !l.is_empty() && !l.starts_with(char::is_whitespace)).count();
    (sockets == 1).then(|| (field("bytes_received:"), field("bytes_acked:")))
}

fn wait_output(child: Child, what: &str) -> std::process::Output {
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("wait for {what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// The issue's "must show": `connections` lists a real curl and a real kubectl, program names
/// right, with their route (cluster and jump host) while they transfer, and the byte counts are
/// what they transferred. Afterwards they are gone, and `status`'s per-route totals add up.
#[test]
fn connections_lists_curl_and_kubectl_with_their_routes_and_exact_bytes_while_they_transfer() {
    let routed = Routed::start();
    let env = routed.env();
    let curl = routed.spawn_curl();
    let kubectl = routed.spawn_kubectl();
    let (curl_pid, kubectl_pid) = (curl.id(), kubectl.id());

    // curl's download is all through before its hold: its counts are final while it is listed.
    let mut curl_row = Value::Null;
    let listed = wait_until(Duration::from_secs(20), || {
        let rows = connections(env);
        match held_by(&rows, curl_pid) {
            Some(row) if row["bytes_down"].as_u64().unwrap_or(0) >= CURL_BYTES as u64 => {
                curl_row = row;
                held_by(&rows, kubectl_pid).is_some()
            }
            _ => false,
        }
    });
    assert!(
        listed,
        "curl and kubectl not both listed: {:?}\n{}",
        connections(env),
        routed.lab.daemon().log()
    );
    let port = routed.lab.target.port();
    assert_eq!(curl_row["program"], "curl", "{curl_row}");
    assert_eq!(curl_row["protocol"], "SOCKS");
    assert_eq!(curl_row["destination"], format!("{TARGET}:{port}"));
    assert_eq!((&curl_row["route"], &curl_row["cluster"]), (&json!("hop1"), &json!("c1")), "{curl_row}");
    assert_eq!(curl_row["state"], "open");

    // kubectl speaks TLS: what it moved is what the API server's socket received and had acked.
    let mut kubectl_row = Value::Null;
    let mut kernel = None;
    let matched = wait_until(Duration::from_secs(10), || {
        kubectl_row = held_by(&connections(env), kubectl_pid).unwrap_or(Value::Null);
        kernel = server_socket_bytes(routed.api.port);
        let counted =
            (kubectl_row["bytes_up"].as_u64().unwrap_or(0), kubectl_row["bytes_down"].as_u64().unwrap_or(0));
        kernel == Some(counted) && counted.1 > 0
    });
    assert!(
        matched,
        "kubectl's bytes {kubectl_row} differ from the API server's socket (received, acked) {kernel:?}"
    );
    assert_eq!(kubectl_row["program"], "kubectl", "{kubectl_row}");
    assert_eq!(kubectl_row["destination"], format!("{TARGET}:{}", routed.api.port));
    assert_eq!((&kubectl_row["route"], &kubectl_row["cluster"]), (&json!("hop1"), &json!("c1")));

    // The table people read names both, with cluster and jump host, and so does the wide one.
    let table = kharonctl::run(env, &["connections"]);
    ok(&table);
    for needle in ["curl", "kubectl", "c1 via hop1", "open"] {
        assert!(table.stdout.contains(needle), "{needle} missing:\n{}", table.stdout);
    }
    let wide = kharonctl::run(env, &["connections", "-o", "wide"]);
    ok(&wide);
    assert!(wide.stdout.contains(&curl_row["bytes_down"].to_string()), "exact bytes:\n{}", wide.stdout);
    let yaml: Value =
        serde_norway::from_str(&kharonctl::run(env, &["connections", "-o", "yaml"]).stdout).unwrap();
    assert!(yaml["connections"].as_array().is_some_and(|c| c.len() >= 2), "{yaml}");

    // What curl itself says it moved: the request up, the head and body down.
    let out = wait_output(curl, "curl");
    let moved: Vec<u64> =
        String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|n| n.parse().ok()).collect();
    let [request, head, body] = moved[..] else { panic!("curl -w printed {:?}", out.stdout) };
    assert_eq!(body, CURL_BYTES as u64);
    assert_eq!(curl_row["bytes_up"].as_u64(), Some(request), "{curl_row}");
    assert_eq!(curl_row["bytes_down"].as_u64(), Some(head + body), "{curl_row}");
    let kube_out = wait_output(kubectl, "kubectl");
    assert!(String::from_utf8_lossy(&kube_out.stdout).contains("\"held\": true"));

    // A name the last hop cannot resolve: a failure on the same route.
    let failing = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-x",
            &routed.lab.daemon().proxy_url(),
            "http://nowhere.c1.example:81/",
        ])
        .output()
        .expect("run curl");
    assert!(!failing.status.success());

    // Closed connections leave the list (the registry keeps nothing of them but the totals).
    assert!(wait_until(Duration::from_secs(10), || connections(env).is_empty()), "{:?}", connections(env));
    let status = kharonctl::run(env, &["status", "-o", "json"]).json();
    let routes = status["routes"].as_array().cloned().unwrap_or_default();
    let sum = |key: &str| routes.iter().map(|r| r[key].as_u64().unwrap_or(0)).sum::<u64>();
    let c = &status["connections"];
    let n = |v: &Value| v.as_u64().unwrap_or(u64::MAX);
    assert_eq!(sum("open"), n(&c["open_direct"]) + n(&c["open_jumphost"]), "{status}");
    assert_eq!(sum("total"), n(&c["total_direct"]) + n(&c["total_jumphost"]), "{status}");
    assert_eq!((sum("bytes_up"), sum("bytes_down")), (n(&c["bytes_up"]), n(&c["bytes_down"])), "{status}");
    let hop1 = routes.iter().find(|r| r["route"] == "hop1").unwrap_or_else(|| panic!("{status}"));
    assert_eq!(hop1["open"], 0);
    assert!(n(&hop1["total"]) >= 2 && n(&hop1["total"]) < 10, "curl, kubectl: {hop1}");
    assert_eq!(hop1["failed"], 1, "{hop1}");
    let moved_down = head + body + kubectl_row["bytes_down"].as_u64().unwrap_or(0);
    assert!(n(&hop1["bytes_down"]) >= moved_down, "{hop1} < {moved_down}");
    let text = kharonctl::run(env, &["status"]);
    assert!(text.stdout.contains("hop1") && text.stdout.contains("since start"), "{}", text.stdout);
}

/// Runs `kharonctl route HOST --trace -o json` and hands back its steps as they are printed.
fn spawn_trace(env: &Env, host: &str, timeout: &str) -> (Child, mpsc::Receiver<Value>) {
    let mut child = kharonctl::command(env, &["route", host, "--trace", "--timeout", timeout, "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kharonctl");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let step: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            if tx.send(step).is_err() {
                break;
            }
        }
    });
    (child, rx)
}

/// Every step up to the end of the trace (the process exits after the last one).
fn steps_until_done(child: &mut Child, rx: &mpsc::Receiver<Value>) -> Vec<Value> {
    let mut steps = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while let Ok(step) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        steps.push(step);
    }
    assert!(
        wait_until(Duration::from_secs(5), || child.try_wait().ok().flatten().is_some()),
        "still running"
    );
    assert_eq!(child.wait().ok().and_then(|s| s.code()), Some(0), "{steps:?}");
    steps
}

fn kinds(steps: &[Value]) -> Vec<&str> {
    steps.iter().map(|s| s["step"].as_str().unwrap_or("?")).collect()
}

/// The issue's trace: the next connection through a two-hop chain, step by step with times: the
/// route decision, each hop's connect/handshake/auth when the chain is dialled for it, the
/// channel, the reply and the first byte; the next one says the session was reused, and its age.
#[test]
fn trace_shows_each_step_of_a_routed_connection_through_two_hops_then_the_reused_session() {
    let mut lab = Lab::new(LabOptions { hops: 2, ..Default::default() });
    lab.start_daemon();

    let (mut child, rx) = spawn_trace(&lab.env, &TARGET.to_uppercase(), "30");
    let armed = rx.recv_timeout(Duration::from_secs(10)).expect("armed");
    assert_eq!(armed["step"], "armed", "{armed}");
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let steps = steps_until_done(&mut child, &rx);
    assert_eq!(
        kinds(&steps),
        ["request", "route", "hop", "hop", "channel", "reply", "first-byte"],
        "{steps:#?}"
    );
    let route = steps[1]["detail"].as_str().unwrap_or_default();
    assert!(route.contains("hop2") && route.contains("c1"), "{route}");
    for (i, hop) in steps[2..4].iter().enumerate() {
        let detail = hop["detail"].as_str().unwrap_or_default();
        assert!(detail.starts_with(&format!("hop {}/2 ", i + 1)), "{detail}");
        assert!(detail.contains("connect") && detail.contains("auth"), "{detail}");
        assert!(hop["took_us"].as_u64().is_some_and(|us| us > 0), "{hop}");
    }
    let at: Vec<i64> = steps.iter().map(|s| s["at_us"].as_i64().unwrap_or(-1)).collect();
    assert!(at.windows(2).all(|w| w[0] <= w[1]), "times go backwards: {at:?}");

    // The second connection reuses the session: no hop is dialled, its age is said.
    let (mut child, rx) = spawn_trace(&lab.env, TARGET, "30");
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("armed")["step"], "armed");
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let steps = steps_until_done(&mut child, &rx);
    assert_eq!(
        kinds(&steps),
        ["request", "route", "session", "channel", "reply", "first-byte"],
        "{steps:#?}"
    );
    let session = steps[2]["detail"].as_str().unwrap_or_default();
    assert!(session.contains("reused") && session.contains("up for"), "{session}");
}

/// A trace that nothing answers ends on its timeout with a clear message; bad input is refused
/// clearly; the daemon serves on; with no daemon, both commands say so (exit 3).
#[test]
fn trace_times_out_cleanly_and_bad_input_or_no_daemon_get_clear_errors() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);

    let started = Instant::now();
    let out = kharonctl::run(&env, &["route", "Nothing.Example.", "--trace", "--timeout", "1"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("no connection to nothing.example came within 1s"), "{}", out.stderr);
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?}", started.elapsed());

    // Not a host: the command line's fault, exit 2 as for `route` without --trace.
    let bad = kharonctl::run(&env, &["route", "bad host!", "--trace", "--timeout", "1"]);
    assert_eq!(bad.code, Some(2), "{bad:?}");
    assert!(bad.stderr.contains("cannot trace invalid target host"), "{}", bad.stderr);
    let usage = kharonctl::run(&env, &["route", "a.example", "--port", "443"]);
    assert_eq!(usage.code, Some(2), "--port without --trace: {usage:?}");

    // Nothing broke: a direct connection is served and listed while it is held open.
    let server = HttpServer::start("direct");
    let mut curl = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "--max-time", "30", "--proxytunnel", "-x", &daemon.http_proxy_url()])
        .arg(format!("http://{}/hold/10/3", server.addr()))
        .spawn()
        .expect("run curl");
    let mut row = Value::Null;
    assert!(wait_until(Duration::from_secs(10), || {
        row = held_by(&connections(&env), curl.id()).unwrap_or(Value::Null);
        row["state"] == "open"
    }));
    assert_eq!(
        (&row["protocol"], &row["route"], &row["program"]),
        (&json!("CONNECT"), &json!("direct"), &json!("curl"))
    );
    assert_eq!(row["cluster"], Value::Null);
    assert!(curl.wait().expect("curl").success());

    drop(daemon);
    for args in [&["connections"][..], &["route", "a.example", "--trace"]] {
        let out = kharonctl::run(&env, args);
        assert_eq!(out.code, Some(3), "{args:?}: {out:?}");
        assert!(out.stderr.contains("kharond is not running"), "{}", out.stderr);
    }
}

/// The new command and flags are where users look: TAB completes them, `--help` teaches with
/// examples, and the man pages (generated from the same definitions) carry both.
#[test]
fn the_new_command_and_flags_complete_and_are_documented_with_examples() {
    let env = Env::new();
    let complete = |words: &[&str]| {
        let mut args = vec!["--", "kharonctl"];
        args.extend_from_slice(words);
        let out = kharonctl::run_with(&env, &args, &[("COMPLETE", "fish")]);
        assert!(out.success() && out.stderr.is_empty(), "{out:?}");
        out.stdout
    };
    assert!(complete(&["conn"]).lines().any(|l| l.starts_with("connections")), "{}", complete(&["conn"]));
    assert!(complete(&["route", "h.example", "--tr"]).contains("--trace"));
    assert!(complete(&["connections", "--wa"]).contains("--watch"));
    assert!(complete(&["connections", "-o", ""]).contains("wide"));

    let help = kharonctl::run(&env, &["connections", "--help"]);
    assert!(
        help.stdout.contains("kharonctl connections --watch") && help.stdout.contains("half-closed"),
        "{}",
        help.stdout
    );
    let help = kharonctl::run(&env, &["route", "--help"]);
    assert!(
        help.stdout.contains("--trace --port 6443") && help.stdout.contains("first byte"),
        "{}",
        help.stdout
    );

    let dir = env.path().join("man1");
    let out = kharonctl::run(&env, &["man-pages", "--output", dir.to_str().unwrap()]);
    assert!(out.success(), "{out:?}");
    let page = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let connections = page("kharonctl-connections.1");
    assert!(connections.contains("watch") && connections.contains("yaml"), "{connections}");
    let route = page("kharonctl-route.1");
    assert!(route.contains("trace") && route.contains("timeout"), "{route}");
}
