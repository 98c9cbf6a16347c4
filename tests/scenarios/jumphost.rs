//! Routed connections through chains of real OpenSSH jump hosts, end to end: kharond reads the
//! chain from an ssh_config (ProxyJump or `ProxyCommand ssh -W`), authenticates with a real
//! ssh-agent, checks host keys against known_hosts, and the *last* hop resolves the target name:
//! `api.c1.example` resolves only inside the last sshd's mount namespace (see `harness::sshd`).
//!
//! [`Lab`] is shared with `ssh_faults` and `host_keys`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use kharon_e2e::agent::Agent;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::servers::{HttpServer, pattern};
use kharon_e2e::sshd::{self, Sshd};
use kharon_e2e::{Env, inventory, kharonctl, socks, wait_until};

/// The target's name: resolvable only at the last hop.
pub const TARGET: &str = "api.c1.example";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Form {
    /// `ProxyJump previous`
    ProxyJump,
    /// `ProxyCommand ssh -W %h:%p previous` (recognised and dialled natively)
    SshW,
    /// `ProxyCommand ssh previous -W %h:%p`: options after the host, as ssh reads them (native too)
    SshWHostFirst,
    /// `ProxyCommand ssh -F CONFIG -W %h:%p previous`: a real child `ssh` process
    Command,
}

pub struct Lab {
    pub env: Env,
    pub hops: Vec<Sshd>,
    pub agent: Agent,
    pub key: PathBuf,
    pub ssh_config: PathBuf,
    pub target: HttpServer,
    pub daemon: Option<Kharond>,
}

pub struct LabOptions {
    pub hops: usize,
    pub form: Form,
    /// Extra lines for every Host block (e.g. ServerAliveInterval).
    pub host_options: Vec<String>,
    /// Record the hops' keys in known_hosts.
    pub known_hosts: bool,
    /// Extra sshd_config lines for every hop.
    pub sshd_options: Vec<String>,
    /// More names only the last hop resolves, besides [`TARGET`] (name, address).
    pub last_hop_hosts: Vec<(String, String)>,
}

impl Default for LabOptions {
    fn default() -> Self {
        LabOptions {
            hops: 1,
            form: Form::ProxyJump,
            host_options: Vec::new(),
            known_hosts: true,
            sshd_options: Vec::new(),
            last_hop_hosts: Vec::new(),
        }
    }
}

impl Lab {
    pub fn new(opts: LabOptions) -> Lab {
        assert!(
            sshd::hosts_supported(),
            "these scenarios need `unshare -m` (root) to give the last hop its own /etc/hosts"
        );
        let env = Env::new();
        let key = env.home().join(".ssh/id_kharon");
        let (agent, public) = Agent::with_new_key(&key);
        let hops: Vec<Sshd> = (0..opts.hops)
            .map(|i| {
                let b = opts.sshd_options.iter().fold(Sshd::builder().authorize(&public), |b, o| b.option(o));
                if i + 1 == opts.hops {
                    let extra: Vec<(&str, &str)> =
                        opts.last_hop_hosts.iter().map(|(n, a)| (n.as_str(), a.as_str())).collect();
                    b.hosts(&[(TARGET, "127.0.0.1")]).hosts(&extra).start()
                } else {
                    b.start()
                }
            })
            .collect();
        let ssh_config = env.home().join(".ssh/config");
        let lab =
            Lab { env, hops, agent, key, ssh_config, target: HttpServer::start("target"), daemon: None };
        lab.write_ssh_config(&opts);
        if opts.known_hosts {
            let lines: Vec<String> = lab.hops.iter().map(Sshd::host_key_line).collect();
            std::fs::write(lab.known_hosts(), lines.join("\n") + "\n").unwrap();
        }
        lab
    }

    pub fn known_hosts(&self) -> PathBuf {
        self.env.home().join(".ssh/known_hosts")
    }

    /// The jump host alias of the cluster: the last hop.
    pub fn jumphost(&self) -> String {
        format!("hop{}", self.hops.len())
    }

    pub fn write_ssh_config(&self, opts: &LabOptions) {
        let user = sshd::current_user();
        let mut text = String::new();
        for (i, hop) in self.hops.iter().enumerate() {
            let mut extra: Vec<String> = opts.host_options.clone();
            // Explicit, so a ProxyCommand child `ssh` (which takes HOME from getpwuid, not $HOME)
            // checks the same file.
            extra.push(format!("UserKnownHostsFile {}", self.known_hosts().display()));
            if i > 0 {
                let prev = format!("hop{i}");
                extra.push(match opts.form {
                    Form::ProxyJump => format!("ProxyJump {prev}"),
                    Form::SshW => format!("ProxyCommand ssh -W %h:%p {prev}"),
                    Form::SshWHostFirst => format!("ProxyCommand ssh {prev} -W %h:%p"),
                    Form::Command => {
                        format!("ProxyCommand ssh -F {} -W %h:%p {prev}", self.ssh_config.display())
                    }
                });
            }
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            text.push_str(&sshd::host_block(&format!("hop{}", i + 1), hop.port(), &user, &self.key, &extra));
        }
        std::fs::write(&self.ssh_config, text).unwrap();
    }

    /// Writes the inventory (one cluster behind our jump host) and returns kharond's arguments.
    pub fn daemon_args(&self) -> Vec<String> {
        let inv = self.env.write(
            "inventory.json",
            &inventory::to_json(&[inventory::routed("c1", &self.jumphost(), "c1.example")]),
        );
        ["--inventory", inv.to_str().unwrap(), "--ssh-config", self.ssh_config.to_str().unwrap()]
            .map(str::to_owned)
            .to_vec()
    }

    pub fn start_daemon(&mut self) -> &Kharond {
        let args = self.daemon_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.start_daemon_with(&args)
    }

    /// Starts kharond with `args` (an inventory among them) and the lab's agent.
    pub fn start_daemon_with(&mut self, args: &[&str]) -> &Kharond {
        let agent = self.agent.socket().display().to_string();
        let daemon = Kharond::start_with(&self.env, args, &[("SSH_AUTH_SOCK", agent.as_str())]);
        self.daemon = Some(daemon);
        self.daemon()
    }

    /// Starts kharond on the inventory file `inventory` and the lab's ssh_config, plus `extra` args.
    pub fn start_daemon_on(&mut self, inventory: &std::path::Path, extra: &[&str]) -> &Kharond {
        let (inventory, ssh_config) =
            (inventory.display().to_string(), self.ssh_config.display().to_string());
        let mut args = vec!["--inventory", inventory.as_str(), "--ssh-config", ssh_config.as_str()];
        args.extend_from_slice(extra);
        self.start_daemon_with(&args)
    }

    pub fn daemon(&self) -> &Kharond {
        self.daemon.as_ref().expect("daemon started")
    }

    /// `curl -x socks5h://… http://api.c1.example:PORT/PATH` with a bound on its run time.
    pub fn curl(&self, path: &str, max_secs: u64) -> Output {
        Command::new("curl")
            .args(["-sS", "--fail", "--max-time", &max_secs.to_string(), "-x", &self.daemon().proxy_url()])
            .arg(format!("http://{TARGET}:{}{path}", self.target.port()))
            .output()
            .expect("run curl")
    }

    /// Bytes kharond has relayed up (client to target) so far, from `kharonctl status`.
    pub fn bytes_up(&self) -> u64 {
        kharonctl::run(&self.env, &["status", "-o", "json"]).json()["connections"]["bytes_up"]
            .as_u64()
            .unwrap_or(0)
    }

    /// Waits up to 10 s for [`Lab::bytes_up`] to reach `expected` (a relay counts what it wrote,
    /// which may be after the client already has its answer); returns the count last seen.
    pub fn bytes_up_reaching(&self, expected: u64) -> u64 {
        let mut seen = self.bytes_up();
        wait_until(Duration::from_secs(10), || {
            seen = self.bytes_up();
            seen == expected
        });
        seen
    }

    pub fn hello(&self) -> Result<String, String> {
        let out = self.curl("/hello", 20);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "curl exit {:?}: {}\n---- kharond log ----\n{}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr),
                self.daemon().log()
            ))
        }
    }

    /// `kharonctl status -o json` → the chain entry of our jump host.
    pub fn chain_status(&self) -> serde_json::Value {
        let status = kharonctl::run(&self.env, &["status", "-o", "json"]).json();
        status["chains"]
            .as_array()
            .and_then(|chains| chains.iter().find(|c| c["jumphost"] == self.jumphost().as_str()).cloned())
            .unwrap_or(serde_json::Value::Null)
    }

    /// Waits (bounded) until the chain is out of its backoff window, so the next request dials.
    pub fn wait_backoff_over(&self) {
        let now_ms =
            || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        assert!(
            wait_until(Duration::from_secs(35), || self.chain_status()["next_retry_ms"]
                .as_u64()
                .unwrap_or(0)
                <= now_ms()),
            "{}",
            self.chain_status()
        );
    }

    /// A raw SOCKS CONNECT by name to the target; the reply code and how long it took.
    pub fn socks_connect(&self, port: u16) -> (u8, Duration, std::net::TcpStream) {
        let start = Instant::now();
        let (code, s) = socks::connect_by_name(self.daemon().socks_addr(), TARGET, port);
        (code, start.elapsed(), s)
    }
}

fn routed_hello(hops: usize, form: Form) {
    let mut lab = Lab::new(LabOptions { hops, form, ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    // The name never resolved here: it only exists at the last hop.
    assert!(
        std::net::ToSocketAddrs::to_socket_addrs(&(TARGET, 80)).is_err(),
        "{TARGET} must not resolve locally"
    );
    let chain = lab.chain_status();
    assert_eq!(chain["state"], "connected", "{chain}");
    // A ProxyCommand child is the first hop's transport: kharond sees only the hops after it.
    let seen = if form == Form::Command { hops - 1 } else { hops };
    assert_eq!(chain["hops"].as_array().map(Vec::len), Some(seen), "{chain}");
    // Every hop kharond dials is listed with what it resolved; a ProxyCommand transport is
    // shown in front of the hop it reaches: the hops inside it are its business.
    let details = chain["hop_details"].as_array().cloned().unwrap_or_default();
    assert_eq!(details.len(), seen, "{chain}");
    let human = kharonctl::run(&lab.env, &["status"]).stdout;
    for (detail, hop) in details.iter().zip(&lab.hops[hops - seen..]) {
        assert_eq!(
            (detail["host"].as_str(), detail["port"].as_u64()),
            (Some("127.0.0.1"), Some(u64::from(hop.port())))
        );
        assert!(human.contains(&format!("@127.0.0.1:{}", hop.port())), "{human}");
    }
    let command = details[0]["proxy_command"].as_str().unwrap_or_default();
    if form == Form::Command {
        let wanted = format!("ssh -F {} -W 127.0.0.1:{} hop1", lab.ssh_config.display(), lab.hops[1].port());
        assert_eq!(command, wanted, "{chain}");
        assert!(human.contains(&format!("(ProxyCommand {wanted}) → ")), "{human}");
    } else {
        assert_eq!(command, "", "{chain}");
    }
    assert!(chain["bytes_down"].as_u64().unwrap_or(0) > 0, "{chain}");
    // Status probed the live chain end to end: a round trip, well under its 1 s limit.
    let rtt = chain["round_trip_us"].as_u64().unwrap_or(0);
    assert!(rtt > 0 && rtt < 1_000_000, "{chain}");
    assert!(chain["probe_failed"].is_null(), "{chain}");
    let human = kharonctl::run(&lab.env, &["status"]);
    assert!(human.stdout.contains("round trip") && human.stdout.contains(" ms"), "{}", human.stdout);
    // A second request reuses the session: still exactly one "session up".
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let log = lab.daemon().log();
    assert_eq!(log.matches("SSH session up").count(), 1, "{log}");
    // Every hop really saw a session (sshd logs accepted publickey for each).
    for hop in &lab.hops {
        assert!(hop.log().contains("Accepted publickey"), "hop {} log:\n{}", hop.port(), hop.log());
    }
}

#[test]
fn one_hop_routes_curl_and_the_last_hop_resolves_the_name() {
    routed_hello(1, Form::ProxyJump);
}

#[test]
fn two_hops_with_proxyjump() {
    routed_hello(2, Form::ProxyJump);
}

#[test]
fn three_hops_with_proxyjump() {
    routed_hello(3, Form::ProxyJump);
}

#[test]
fn two_hops_with_proxycommand_ssh_w() {
    routed_hello(2, Form::SshW);
}

#[test]
fn three_hops_with_proxycommand_ssh_w() {
    routed_hello(3, Form::SshW);
}

#[test]
fn two_hops_with_proxycommand_ssh_host_first() {
    routed_hello(2, Form::SshWHostFirst);
}

#[test]
fn two_hops_with_a_proxycommand_child_process() {
    routed_hello(2, Form::Command);
}

#[test]
fn concurrent_first_uses_share_one_handshake() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    let results: Vec<Result<String, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..20).map(|_| s.spawn(|| lab.hello())).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in &results {
        assert_eq!(r.as_deref(), Ok("hello from target"));
    }
    let log = lab.daemon().log();
    assert_eq!(log.matches("SSH session up").count(), 1, "{log}");
    assert_eq!(lab.hops[0].log().matches("Accepted publickey").count(), 1, "{}", lab.hops[0].log());
}

#[test]
fn refused_and_unresolvable_targets_get_distinct_socks_replies() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    // Nothing listens there: the last hop says "Connection refused" → REP 0x05.
    let (code, elapsed, _) = lab.socks_connect(kharon_e2e::free_port());
    assert_eq!(code, 5, "{}", lab.daemon().log());
    assert!(elapsed < Duration::from_secs(5));
    // A name the last hop cannot resolve → REP 0x04.
    let (code, _) = socks::connect_by_name(lab.daemon().socks_addr(), "nowhere.c1.example", 80);
    assert_eq!(code, 4, "{}", lab.daemon().log());
    // The session survived both.
    assert_eq!(lab.hello().unwrap(), "hello from target");
}

/// A client that sends its greeting, its request and its first bytes in one write, without
/// waiting for our answers. kharond reads each handshake message whole, so those bytes come in
/// with the request: they must reach the target first and in order, directly (spliced) and
/// through the jump host (an SSH channel), and be counted as sent up.
#[test]
fn a_socks_client_pipelining_its_request_and_payload_is_relayed_in_order() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    let direct = HttpServer::start("direct");
    let payload = "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    for (host, port, name) in [("localhost", direct.port(), "direct"), (TARGET, lab.target.port(), "target")]
    {
        let before = lab.bytes_up();
        let sent =
            [&[5u8, 1, 0][..], &socks::connect_request(host.as_bytes(), port), payload.as_bytes()].concat();
        let answer = socks::exchange(lab.daemon().socks_addr(), &sent);
        // Method choice, then a success reply whose bound address is IPv4 or IPv6.
        assert_eq!(answer.get(..4), Some(&[5, 0, 5, 0][..]), "{host}: {answer:?}");
        let reply_len = 4 + if answer.get(5) == Some(&4) { 16 } else { 4 } + 2;
        let response = String::from_utf8_lossy(answer.get(2 + reply_len..).unwrap_or_default());
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{host}: {response}");
        assert!(response.ends_with(&format!("hello from {name}")), "{host}: {response}");
        let expected = before + payload.len() as u64;
        assert_eq!(lab.bytes_up_reaching(expected), expected, "{host}: bytes up");
    }
}

#[test]
fn unencrypted_key_file_works_without_agent_and_encrypted_one_says_what_to_do() {
    let mut lab = Lab::new(LabOptions::default());
    // Plain key file, agent explicitly off.
    let text =
        std::fs::read_to_string(&lab.ssh_config).unwrap().replace("\n\n", "\n  IdentityAgent none\n\n");
    std::fs::write(&lab.ssh_config, &text).unwrap();
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    drop(lab.daemon.take());

    // Now an encrypted key (authorized on the sshd) and no agent.
    let enc = lab.env.home().join(".ssh/id_encrypted");
    let public = kharon_e2e::agent::encrypted_key(&enc, "sekrit passphrase");
    let auth = lab.hops[0].dir().join("authorized_keys");
    let mut keys = std::fs::read_to_string(&auth).unwrap();
    keys.push_str(&public);
    keys.push('\n');
    std::fs::write(&auth, keys).unwrap();
    std::fs::write(&lab.ssh_config, text.replace(&lab.key.display().to_string(), &enc.display().to_string()))
        .unwrap();
    lab.start_daemon();
    let (code, _, _) = lab.socks_connect(lab.target.port());
    assert_ne!(code, 0);
    // `ssh-add` would not help: this hop has `IdentityAgent none` (the advice fits).
    let expected = format!(
        "{} is encrypted and the ssh config gives this hop no agent (IdentityAgent none)",
        enc.display()
    );
    let chain = lab.chain_status();
    assert!(chain["last_error"].as_str().unwrap_or("").contains(&expected), "{chain}");
    drop(lab.daemon.take());

    // Once the agent holds it, the same config works (agent keys matching IdentityFile first).
    let out = Command::new("ssh-add")
        .arg(&enc)
        .env("SSH_AUTH_SOCK", lab.agent.socket())
        .env("SSH_ASKPASS_REQUIRE", "force")
        .env("SSH_ASKPASS", write_askpass(&lab.env, "sekrit passphrase"))
        .env("DISPLAY", "none")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(
        &lab.ssh_config,
        text.replace("IdentityAgent none", "IdentitiesOnly yes")
            .replace(&lab.key.display().to_string(), &enc.display().to_string()),
    )
    .unwrap();
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
}

fn write_askpass(env: &Env, passphrase: &str) -> PathBuf {
    let path = env.write("askpass.sh", &format!("#!/bin/sh\necho '{passphrase}'\n"));
    kharon_e2e::set_mode(&path, 0o700);
    path
}

/// docs/performance.md item 7 (russh#474 panicked beyond 500 MB): 2 GiB through a routed channel, every byte
/// checked against the server's deterministic pattern (stronger than a checksum: it names the
/// offset). About 20 s on 2 cores with a debug kharond.
#[test]
fn two_gib_transfer_arrives_intact() {
    transfer(2 << 30);
}

fn transfer(len: u64) {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    let started = Instant::now();
    let s = download_checked(&lab, len, &mut |_| {});
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{len} bytes in {secs:.1} s = {:.0} MB/s", len as f64 / secs / 1e6);
    let chain = lab.chain_status();
    assert!(chain["bytes_down"].as_u64().unwrap_or(0) >= len, "{chain}");
    drop(s);
    assert!(
        wait_until(Duration::from_secs(5), || lab.chain_status()["open_channels"] == 0),
        "{}",
        lab.chain_status()
    );
}

/// `GET /bytes/LEN` through the lab's daemon, every byte checked against the server's
/// deterministic pattern (stronger than a checksum: it names the offset); `progress` hears the
/// bytes read so far after each read. Returns the connection, still open.
pub fn download_checked(lab: &Lab, len: u64, progress: &mut dyn FnMut(u64)) -> std::net::TcpStream {
    let (code, _, mut s) = lab.socks_connect(lab.target.port());
    assert_eq!(code, 0);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET /bytes/{len} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    // Skip the response head.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    let period = pattern((1 << 20) + 251);
    while got < len {
        let n = s.read(&mut buf[..((len - got).min(1 << 20)) as usize]).unwrap();
        assert!(n > 0, "stream ended after {got} of {len} bytes");
        let off = (got % 251) as usize;
        assert!(buf[..n] == period[off..off + n], "payload differs near byte {got}");
        got += n as u64;
        progress(got);
    }
    s
}

/// `openssl s_server -WWW` on 127.0.0.1 with a self-signed certificate for [`TARGET`]: serves the
/// files of its directory, here `version` (JSON as an API server answers it). Killed on drop.
pub struct TlsServer {
    child: std::process::Child,
    pub port: u16,
    cert: PathBuf,
}

impl TlsServer {
    pub fn start(dir: &std::path::Path) -> TlsServer {
        let cert = dir.join("cert.pem");
        let key = dir.join("key.pem");
        let out = Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "1",
            ])
            .args(["-subj", &format!("/CN={TARGET}"), "-addext", &format!("subjectAltName=DNS:{TARGET}")])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("run openssl req");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        std::fs::write(
            dir.join("version"),
            r#"{"major":"1","minor":"30","gitVersion":"v1.30.0-kharon-test"}"#,
        )
        .unwrap();
        let port = kharon_e2e::free_port();
        let child = Command::new("openssl")
            .args(["s_server", "-quiet", "-WWW", "-accept", &format!("127.0.0.1:{port}")])
            .arg("-cert")
            .arg(&cert)
            .arg("-key")
            .arg(&key)
            .current_dir(dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn openssl s_server");
        assert!(
            wait_until(Duration::from_secs(10), || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
        );
        TlsServer { child, port, cert }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kubeconfig(lab: &Lab, tls: &TlsServer, proxy_url: Option<String>) -> PathBuf {
    let proxy = proxy_url.map(|p| format!("\n    proxy-url: {p}")).unwrap_or_default();
    lab.env.write(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n    server: https://{TARGET}:{}\n    \
             certificate-authority: {}{proxy}\nusers:\n- name: u\n  user:\n    token: test\ncontexts:\n- name: c1\n  \
             context:\n    cluster: c1\n    user: u\ncurrent-context: c1\n",
            tls.port,
            tls.cert.display()
        ),
    )
}

fn kubectl_version(lab: &Lab, kubeconfig: &std::path::Path, https_proxy: Option<&str>) -> String {
    // Bounded by timeout(1): kubectl's --request-timeout would add a query string that
    // `s_server -WWW` takes for part of the file name.
    let mut cmd = Command::new("timeout");
    cmd.env_clear().envs(lab.env.vars()).args(["30", "kubectl", "--kubeconfig"]).arg(kubeconfig);
    cmd.args(["get", "--raw", "/version"]);
    if let Some(p) = https_proxy {
        cmd.env("HTTPS_PROXY", p);
    }
    let out = cmd.output().expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl: {}\n---- kharond log ----\n{}",
        String::from_utf8_lossy(&out.stderr),
        lab.daemon().log()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn kubectl_reaches_a_tls_api_server_via_https_proxy_and_via_proxy_url() {
    let mut lab = Lab::new(LabOptions { hops: 2, ..Default::default() });
    let tls = TlsServer::start(lab.env.path());
    lab.start_daemon();
    // HTTPS_PROXY=socks5h://… : kubectl sends the name, the last hop resolves it.
    let plain = kubeconfig(&lab, &tls, None);
    let body = kubectl_version(&lab, &plain, Some(&lab.daemon().proxy_url()));
    assert!(body.contains("v1.30.0-kharon-test"), "{body}");
    // proxy-url: socks5://… in the kubeconfig (kubectl rejects socks5h there; Go still sends names).
    let with_proxy = kubeconfig(&lab, &tls, Some(format!("socks5://{}", lab.daemon().socks_addr())));
    let body = kubectl_version(&lab, &with_proxy, None);
    assert!(body.contains("v1.30.0-kharon-test"), "{body}");
}

#[test]
fn reload_keeps_a_healthy_session_and_an_open_routed_connection() {
    let mut lab = Lab::new(LabOptions::default());
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    // A routed connection that stays open across the reload.
    let (code, _, mut open) = lab.socks_connect(lab.target.port());
    assert_eq!(code, 0);
    let before = lab.chain_status();
    assert_eq!(before["state"], "connected", "{before}");

    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert!(reload.success(), "{}", reload.stderr);

    let after = lab.chain_status();
    assert_eq!(after["state"], "connected", "{after}");
    assert_eq!(after["since_ms"], before["since_ms"], "the session was rebuilt by a reload");
    open.write_all(b"GET /hello HTTP/1.0\r\n\r\n").unwrap();
    // Half-close: the target answers, sees our EOF and closes, so the read below ends.
    open.shutdown(std::net::Shutdown::Write).unwrap();
    let mut reply = String::new();
    open.read_to_string(&mut reply).unwrap();
    assert!(reply.ends_with("hello from target"), "{reply}");
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert_eq!(lab.hops[0].log().matches("Accepted publickey").count(), 1, "{}", lab.hops[0].log());
}
