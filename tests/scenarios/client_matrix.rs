//! The clients people point at kharond's one port, each against a routed target (a cluster name
//! that only a real OpenSSH jump host resolves) and a direct one, with the outcome a user sees
//!: curl as a SOCKS5 (socks5h), SOCKS4A, HTTP CONNECT and plain HTTP proxy client,
//! Python's requests and urllib, Node's http module, git over http, and ssh through
//! `nc -X 5`. Every client gets through, or (SOCKS4) a refusal in its own protocol, with the
//! hint in kharond's log; every failure is logged once at INFO on either route, escaped and
//! limited per client; an HTTP request that two parsers could frame two ways is refused.
//!
//! The clients of the matrix run at once, each bounded in time, so the matrix costs about as long
//! as its slowest client.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::origin::Origin;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::socks::{Close, assert_still_serving, exchange, read_to_close};
use kharon_e2e::{Env, inventory, output_within, socks, sshd, wait_until};

use crate::jumphost::{Lab, LabOptions, TARGET};

/// What the origin serves at `/hello.txt`.
const HELLO: &str = "hello from the origin\n";
/// What the git repository's README holds.
const README: &str = "kharon client matrix\n";

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
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// A client run: its name, and its output (`None`: it did not finish in time and was killed).
struct Ran {
    name: String,
    out: Option<Output>,
}

impl Ran {
    fn stdout(&self) -> String {
        self.out.as_ref().map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        self.out.as_ref().map(|o| String::from_utf8_lossy(&o.stderr).into_owned()).unwrap_or_default()
    }

    fn code(&self) -> Option<i32> {
        self.out.as_ref().and_then(|o| o.status.code())
    }

    /// The client's stdout, which must be a success's.
    fn succeeded(&self) -> String {
        assert_eq!(self.code(), Some(0), "{}: {}\n{}", self.name, self.stderr(), self.stdout());
        self.stdout()
    }
}

/// Runs every command at once, each for at most 60 s, and returns their runs in order.
fn run_all(commands: Vec<(String, Command)>) -> Vec<Ran> {
    let children: Vec<(String, std::process::Child)> = commands
        .into_iter()
        .map(|(name, mut cmd)| {
            let child = cmd.spawn().unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, child)
        })
        .collect();
    let waiting: Vec<_> = children
        .into_iter()
        .map(|(name, child)| {
            std::thread::spawn(move || Ran { out: output_within(child, Duration::from_secs(60)), name })
        })
        .collect();
    waiting.into_iter().map(|w| w.join().expect("a waiter thread")).collect()
}

/// Python's requests through an HTTP proxy on one session: a GET twice (one kept connection), a
/// POST with a length and one with chunks (a generator body), each answered by the origin's echo.
/// (requests is on every machine .ci/run prepares: moto and passbolt-python-api require it.)
const REQUESTS: &str = "import json, sys, requests
base, proxy = sys.argv[1:3]
s = requests.Session()
s.trust_env = False
s.proxies = {'http': proxy}
for _ in range(2):
    r = s.get(base + '/hello.txt', timeout=20)
    r.raise_for_status()
    print(json.dumps({'hello': r.text, 'via': r.headers.get('Via')}))
def chunks():
    yield b'chunked '
    yield b'body'
for body in [b'length body', chunks()]:
    r = s.post(base + '/echo', data=body, timeout=20)
    r.raise_for_status()
    print(json.dumps(r.json()))
";

/// Python's urllib with an explicit ProxyHandler for http://.
const URLLIB: &str = "import sys, urllib.request
base, proxy = sys.argv[1:3]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({'http': proxy}))
print(opener.open(base + '/hello.txt', timeout=20).read().decode(), end='')
";

/// Node's http module, as Node code that knows a proxy talks to one: absolute-form paths to the
/// proxy's address on a keep-alive agent, a GET twice and a chunked POST (no Content-Length).
const NODE: &str = "const http = require('http');
const [base, proxyHost, proxyPort] = process.argv.slice(1);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const host = new URL(base).host;
function ask(method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: proxyHost, port: proxyPort, method, path: base + path,
                               headers: { Host: host }, agent, timeout: 20000 }, res => {
      let data = '';
      res.on('data', c => data += c);
      res.on('end', () => resolve({ status: res.statusCode, data, reused: req.reusedSocket }));
    });
    req.on('error', reject);
    if (body) { for (const part of body) req.write(part); }
    req.end();
  });
}
(async () => {
  const out = [];
  out.push(await ask('GET', '/hello.txt'));
  out.push(await ask('GET', '/hello.txt'));
  out.push(await ask('POST', '/echo', ['node ', 'chunks']));
  console.log(JSON.stringify(out));
  agent.destroy();
})().catch(e => { console.error(String(e)); process.exit(1); });
";

/// A directory for the origin: `hello.txt`, and a bare repository served over git's dumb HTTP
/// protocol (`repo.git`, with `update-server-info`), cloned by git through the proxy.
fn origin_dir(env: &Env) -> std::path::PathBuf {
    let (www, work) = (env.path().join("www"), env.path().join("work"));
    for dir in [&www, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(www.join("hello.txt"), HELLO).unwrap();
    std::fs::write(work.join("README"), README).unwrap();
    let git = |dir: &Path, args: &[&str]| {
        let out = Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", env.home())
            .args([
                "-c",
                "user.name=kharon",
                "-c",
                "user.email=kharon@example.invalid",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&work, &["init", "-q"]);
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-qm", "first"]);
    git(&www, &["clone", "-q", "--bare", work.to_str().unwrap(), "repo.git"]);
    git(&www.join("repo.git"), &["update-server-info"]);
    www
}

/// The matrix's commands against `host` (routed or direct) on the origin's `port`.
fn commands(lab: &Lab, host: &str, port: u16, known_hosts: &Path) -> Vec<(String, Command)> {
    let daemon = lab.daemon();
    let proxy = daemon.socks_addr();
    let base = format!("http://{host}:{port}");
    let hello = format!("{base}/hello.txt");
    let mut list = Vec::new();
    let mut add = |name: &str, cmd: Command| list.push((format!("{name} → {host}"), cmd));

    let curl = |proxy_args: &[&str]| {
        let mut cmd = client("curl");
        cmd.args(["-sS", "--max-time", "20"]).args(proxy_args);
        cmd
    };
    let mut c = curl(&["-x", &format!("socks5h://{proxy}")]);
    add("curl socks5h", {
        c.arg(&hello);
        c
    });
    let mut c = curl(&["-p", "-x", &format!("http://{proxy}")]);
    add("curl CONNECT", {
        c.arg(&hello);
        c
    });
    // Two URLs in one run: the second must reuse the kept-alive proxy connection.
    let mut c = curl(&["-w", "%{num_connects}\\n"]);
    c.env("http_proxy", format!("http://{proxy}")).arg(&hello).arg(&hello);
    add("curl http_proxy", c);
    let mut c = curl(&["-x", &format!("socks4a://{proxy}")]);
    add("curl socks4a", {
        c.arg(&hello);
        c
    });

    let mut py = client("python3");
    py.args(["-c", REQUESTS, &base, &format!("http://{proxy}")]);
    add("python requests", py);
    let mut py = client("python3");
    py.args(["-c", URLLIB, &base, &format!("http://{proxy}")]);
    add("python urllib", py);
    let mut node = client("node");
    node.args(["-e", NODE, &base, &proxy.ip().to_string(), &proxy.port().to_string()]);
    add("node http", node);

    for (how, proxy_url) in [("http", format!("http://{proxy}")), ("socks5h", format!("socks5h://{proxy}"))] {
        let dest = lab.env.path().join(format!("clone-{how}-{host}"));
        let mut git = client("git");
        git.env("GIT_CONFIG_NOSYSTEM", "1").env("HOME", lab.env.home()).env("GIT_TERMINAL_PROMPT", "0");
        git.args(["-c", &format!("http.proxy={proxy_url}"), "clone", "-q", &format!("{base}/repo.git")])
            .arg(&dest);
        add(&format!("git http.proxy={how}"), git);
    }

    let mut ssh = client("ssh");
    ssh.env("SSH_AUTH_SOCK", lab.agent.socket());
    ssh.args(["-F", "none", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20"]);
    ssh.arg("-o").arg(format!("UserKnownHostsFile={}", known_hosts.display()));
    ssh.arg("-o").arg(format!("ProxyCommand=nc -X 5 -x {proxy} %h %p"));
    ssh.arg("-i").arg(&lab.key);
    ssh.args(["-p", &lab.hops[0].port().to_string(), &format!("{}@{host}", sshd::current_user())]);
    ssh.args(["echo", "kharon-ssh-ok"]);
    add("ssh nc -X 5", ssh);
    list
}

/// What one matrix run must show; `host` and `port` as the commands had them.
fn check(ran: &Ran, lab: &Lab, host: &str, port: u16) {
    let name = ran.name.split(" → ").next().unwrap_or("");
    match name {
        "curl socks5h" | "curl CONNECT" | "python urllib" => {
            assert_eq!(ran.succeeded(), HELLO, "{}", ran.name)
        }
        "curl http_proxy" => {
            assert_eq!(ran.succeeded(), format!("{HELLO}1\n{HELLO}0\n"), "{}: a second connection", ran.name)
        }
        "curl socks4a" => {
            // curl's own words for SOCKS4's "rejected" (91), which kharond sends; the address is
            // the 4A marker curl sent.
            assert_eq!(ran.code(), Some(97), "{}: {}", ran.name, ran.stderr());
            let said = format!("SOCKS4 connection to 0.0.0.1:{port}. (91), request rejected or failed.");
            assert!(ran.stderr().contains(&said), "{}: {}", ran.name, ran.stderr());
        }
        "python requests" => {
            let lines: Vec<serde_json::Value> =
                ran.succeeded().lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
            assert_eq!(lines.len(), 4, "{}: {lines:?}", ran.name);
            for hello in &lines[..2] {
                assert_eq!(
                    (hello["hello"].as_str(), hello["via"].as_str()),
                    (Some(HELLO), Some("1.1 kharon"))
                );
            }
            for (echo, body) in lines[2..].iter().zip(["length body", "chunked body"]) {
                assert_echoed(echo, &ran.name, host, port, body);
            }
        }
        "node http" => {
            let out: serde_json::Value = serde_json::from_str(&ran.succeeded()).expect("JSON");
            assert_eq!(out[0]["data"], HELLO, "{}: {out}", ran.name);
            assert_eq!(
                (&out[1]["data"], &out[1]["reused"]),
                (&HELLO.into(), &true.into()),
                "{}: {out}",
                ran.name
            );
            let echo: serde_json::Value =
                serde_json::from_str(out[2]["data"].as_str().unwrap_or("")).expect("echo");
            assert_echoed(&echo, &ran.name, host, port, "node chunks");
        }
        git if git.starts_with("git ") => {
            ran.succeeded();
            let how = git.rsplit('=').next().unwrap_or("");
            let readme = lab.env.path().join(format!("clone-{how}-{host}/README"));
            assert_eq!(std::fs::read_to_string(&readme).ok().as_deref(), Some(README), "{}", ran.name);
        }
        "ssh nc -X 5" => assert_eq!(ran.succeeded(), "kharon-ssh-ok\n", "{}", ran.name),
        other => panic!("no check for {other}"),
    }
}

/// The origin's echo of a POST as kharond forwarded it: origin form, the URL's Host, kharond's
/// Via, none of the proxy's own fields, and the body whole.
fn assert_echoed(echo: &serde_json::Value, name: &str, host: &str, port: u16, body: &str) {
    assert_eq!(echo["request_line"], "POST /echo HTTP/1.1", "{name}: {echo}");
    assert_eq!(echo["body"], body, "{name}: {echo}");
    let fields: Vec<(String, String)> = echo["headers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|h| (h[0].as_str().unwrap_or("").to_ascii_lowercase(), h[1].as_str().unwrap_or("").to_owned()))
        .collect();
    let field =
        |name: &str| fields.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect::<Vec<_>>();
    assert_eq!(field("host"), [format!("{host}:{port}").as_str()], "{name}: {echo}");
    assert_eq!(field("via"), ["1.1 kharon"], "{name}: {echo}");
    for hop in ["proxy-connection", "proxy-authorization", "keep-alive", "te", "upgrade"] {
        assert!(field(hop).is_empty(), "{name}: {hop} reached the target: {echo}");
    }
}

#[test]
fn every_client_gets_through_or_a_clear_answer_on_both_routes() {
    let mut lab = Lab::new(LabOptions::default());
    let www = origin_dir(&lab.env);
    let origin = Origin::start(&www);
    // The default log level, as a user runs it: what the log says at INFO is part of the outcome.
    let args = lab.daemon_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let agent = lab.agent.socket().display().to_string();
    lab.daemon =
        Some(Kharond::start_with(&lab.env, &args, &[("SSH_AUTH_SOCK", &agent), ("RUST_LOG", "info")]));
    let hop = &lab.hops[0];
    let known_hosts = lab.env.write(
        "matrix_known_hosts",
        &format!("[{TARGET}]:{0} {1}\n[localhost]:{0} {1}\n", hop.port(), hop.host_key()),
    );

    let hosts = [TARGET, "localhost"];
    let mut all = Vec::new();
    for host in hosts {
        all.extend(commands(&lab, host, origin.port(), &known_hosts));
    }
    let runs = run_all(all);
    for ran in &runs {
        let host = if ran.name.ends_with(TARGET) { TARGET } else { "localhost" };
        check(ran, &lab, host, origin.port());
    }
    // The routed name never resolved here: only the jump host knows it.
    assert!(std::net::ToSocketAddrs::to_socket_addrs(&(TARGET, 80)).is_err(), "{TARGET} resolves locally");

    // The SOCKS4A clients' refusals are in the log at INFO, with what to use instead.
    let log = || lab.daemon().log();
    for host in hosts {
        let line =
            format!("a SOCKS4A client asked for \"{host}\":{}; kharond speaks SOCKS5 only", origin.port());
        assert!(
            wait_until(Duration::from_secs(5), || log()
                .lines()
                .any(|l| l.contains(" INFO ") && l.contains(&line))),
            "{line}\n{}",
            log()
        );
    }
    assert!(log().contains(&format!("use socks5h://{}", lab.daemon().socks_addr())), "{}", log());

    // Failures on both routes: at INFO, once, with why; the HTTP proxy client gets a 502 naming
    // the route.
    let proxy = format!("http://{}", lab.daemon().socks_addr());
    for (url, route, why) in [
        (
            "http://nosuch.c1.example:81/".to_owned(),
            format!("via jump host {}", lab.jumphost()),
            "nosuch.c1.example",
        ),
        ("http://nosuch.invalid/".to_owned(), "directly".to_owned(), "cannot resolve nosuch.invalid"),
    ] {
        let out = client("curl")
            .args(["-sS", "--max-time", "20", "-x", &proxy, "-w", "%{http_code}", &url])
            .output()
            .unwrap();
        let answer = String::from_utf8_lossy(&out.stdout);
        assert!(answer.starts_with("kharond cannot reach ") && answer.ends_with("502"), "{url}: {answer}");
        assert!(answer.contains(&route), "{url}: {answer}");
        let logged = |l: &&str| {
            l.contains(" INFO ") && l.contains(&format!("cannot connect {route}: ")) && l.contains(why)
        };
        assert!(
            wait_until(Duration::from_secs(5), || log().lines().filter(logged).count() == 1),
            "{url}:\n{}",
            log()
        );
    }
    assert!(lab.hops[0].log().contains("Accepted publickey"), "{}", lab.hops[0].log());
}

fn start_direct(env: &Env) -> Kharond {
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    Kharond::start_with(env, &["--inventory", inv.to_str().unwrap()], &[("RUST_LOG", "info")])
}

/// A SOCKS4 request (4A when `name` is given) for `port`.
fn socks4(port: u16, name: Option<&[u8]>) -> Vec<u8> {
    let mut r = vec![4, 1];
    r.extend_from_slice(&port.to_be_bytes());
    r.extend_from_slice(if name.is_some() { &[0, 0, 0, 1] } else { &[127, 0, 0, 1] });
    r.extend_from_slice(b"user\0");
    if let Some(name) = name {
        r.extend_from_slice(name);
        r.push(0);
    }
    r
}

#[test]
fn clients_of_other_protocols_get_answers_in_their_own_and_the_log_says_why() {
    let env = Env::new();
    let daemon = start_direct(&env);
    let server = HttpServer::start("ok");
    let addr = daemon.socks_addr();
    let port = server.port();

    // SOCKS4 and 4A: "rejected" (91) with the request's port and address, and a clean close.
    for (request, address) in
        [(socks4(port, None), [127, 0, 0, 1]), (socks4(port, Some(b"localhost")), [0, 0, 0, 1])]
    {
        let mut s = socks::connect(addr);
        s.write_all(&request).unwrap();
        let (reply, close) = read_to_close(&mut s);
        let [hi, lo] = port.to_be_bytes();
        assert_eq!(reply, [&[0, 91, hi, lo][..], &address].concat());
        assert_eq!(close, Close::Clean);
    }
    // A hostile name reaches the log escaped: no escape sequence, no line of its own.
    let hostile = socks4(port, Some(b"x\x1b[31m\n2026-01-01T00:00:00Z  INFO kharond: forged"));
    assert_eq!(exchange(addr, &hostile).get(1), Some(&91));
    // A lower-case CONNECT, and other HTTP: an HTTP answer that says why.
    let answer = String::from_utf8_lossy(&exchange(
        addr,
        format!("connect localhost:{port} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
    ))
    .into_owned();
    assert!(
        answer.starts_with("HTTP/1.1 501 Not Implemented\r\n") && answer.contains("case-sensitive"),
        "{answer}"
    );
    // TLS (an https:// proxy URL): nothing it would understand, closed; the log says what it was.
    assert!(exchange(addr, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03").is_empty());
    assert_still_serving(&daemon, &server, None);

    let log = daemon.log();
    let info = |needle: &str| log.lines().any(|l| l.contains(" INFO ") && l.contains(needle));
    let shown =
        format!("a SOCKS4 client asked for 127.0.0.1:{port}; kharond speaks SOCKS5 only, answered 91");
    assert!(wait_until(Duration::from_secs(5), || daemon.log().contains(&shown)), "{}", daemon.log());
    let log = daemon.log();
    assert!(info(&shown), "{log}");
    // Shown escaped, and only its first 32 bytes.
    assert!(info("asked for \"x\\x1b[31m\\n2026-01-01T00:00:00Z  INF\"… (49 bytes)"), "{log}");
    assert!(!log.contains('\x1b') && !log.lines().any(|l| l.starts_with("2026-01-01")), "{log}");
    assert!(info("HTTP request answered 501 Not Implemented: method names are case-sensitive"), "{log}");
    assert!(info("it began with \"\\x16\\x03\\x01"), "{log}");
    assert!(info("a TLS handshake (an https:// proxy URL?)"), "{log}");
}

#[test]
fn a_request_two_parsers_could_frame_two_ways_is_refused_and_forwards_nothing() {
    let env = Env::new();
    let daemon = start_direct(&env);
    let server = HttpServer::start("ok");
    let addr = daemon.socks_addr();
    let url = format!("http://localhost:{}", server.port());
    for (head, status) in [
        (
            format!(
                "POST {url}/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET {url}/smuggled HTTP/1.1\r\n\r\n"
            ),
            "400 Bad Request",
        ),
        (
            format!(
                "POST {url}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n"
            ),
            "400 Bad Request",
        ),
        (
            format!("POST {url}/ HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde"),
            "400 Bad Request",
        ),
        (format!("POST {url}/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), "501 Not Implemented"),
        (format!("POST {url}/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n"), "400 Bad Request"),
        (
            format!("GET {url}/ HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "a".repeat(17 * 1024)),
            "431 Request Header Fields Too Large",
        ),
    ] {
        let answer = String::from_utf8_lossy(&exchange(addr, head.as_bytes())).into_owned();
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{head:?}: {answer}");
    }
    assert_eq!(server.requests(), 0, "a refused request reached the target");
    // The same connection forwards well-framed requests, one after another, to the target.
    let mut s = socks::connect(addr);
    s.write_all(
        format!("GET {url}/hello HTTP/1.1\r\n\r\nGET {url}/hello HTTP/1.1\r\nConnection: close\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert_eq!(answer.matches("hello from ok").count(), 2, "{answer}");
    assert_eq!(server.requests(), 2);
}

#[test]
fn a_client_failing_in_a_loop_is_logged_once_with_the_count_held_back() {
    let env = Env::new();
    let daemon = start_direct(&env);
    let closed: SocketAddr = ([127, 0, 0, 1], kharon_e2e::free_port()).into();
    let refused_line = format!("cannot connect directly: connecting to {closed}");
    for _ in 0..30 {
        let (code, _) = socks::connect_by_ip(daemon.socks_addr(), closed);
        assert_eq!(code, 5, "connection refused");
    }
    // Another failure of the same client address says how many were held back.
    assert_eq!(exchange(daemon.socks_addr(), &socks4(closed.port(), None)).get(1), Some(&91));
    let held = "more failure(s) of this client address held back";
    assert!(wait_until(Duration::from_secs(5), || daemon.log().contains(held)), "{}", daemon.log());
    let log = daemon.log();
    let lines = log.lines().filter(|l| l.contains(&refused_line)).count();
    // Once per 10 s window: a slow machine may see a second window begin.
    assert!((1..=2).contains(&lines), "{lines} lines:\n{log}");
}
