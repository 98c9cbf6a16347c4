//! Kharond on a non-loopback address (allowed with a password) serves clients on other
//! machines, but such a client must not reach, through the direct path, what listens only on the
//! engineer's loopback (by address, by `localhost`, by 0.0.0.0); the engineer's own clients still
//! do. The "other machine" is a network namespace the test makes, with 10.200.0.1 on it: a client
//! that connects to that address has it as its source address, which is not a loopback one.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, wait_until};

const REMOTE: &str = "10.200.0.1";
const USER: &str = "kh";
const PASSWORD: &str = "remote-Pw.33";
/// A port nothing else uses in a namespace of our own.
const SERVICE_PORT: u16 = 8080;

/// A network namespace held open by a sleeping process, with loopback up and [`REMOTE`] on it.
struct NetNs {
    holder: Child,
}

impl NetNs {
    fn new() -> Self {
        let holder = Command::new("unshare")
            .args(["-n", "sleep", "600"])
            .stdin(Stdio::null())
            .spawn()
            .expect("unshare -n (root) makes a network namespace");
        let pid = holder.id();
        let ns = |pid: &str| std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
        assert!(
            wait_until(Duration::from_secs(10), || ns(&pid.to_string())
                .is_some_and(|n| Some(n) != ns("self"))),
            "the namespace did not appear"
        );
        let netns = NetNs { holder };
        for script in [
            "ip link set lo up",
            // A second address on the namespace's own interface (no dummy or veth module needed):
            // what matters is the source address a client connects from.
            &format!("ip addr add {REMOTE}/32 dev lo"),
        ] {
            let out = netns.run("sh", &["-c", script]);
            assert!(out.status.success(), "{script}: {}", String::from_utf8_lossy(&out.stderr));
        }
        netns
    }

    fn wrapper(&self) -> Vec<String> {
        ["nsenter", "-t", &self.holder.id().to_string(), "-n", "--"].map(str::to_owned).to_vec()
    }

    fn command(&self, program: &str) -> Command {
        let wrapper = self.wrapper();
        let mut cmd = Command::new(&wrapper[0]);
        cmd.args(&wrapper[1..]).arg(program);
        cmd
    }

    fn run(&self, program: &str, args: &[&str]) -> Output {
        self.command(program).args(args).output().expect("run in the namespace")
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// `curl ARGS` inside the namespace: its exit code and what it said.
fn curl(netns: &NetNs, args: &[&str]) -> (Option<i32>, String) {
    let out = netns.run("curl", &[&["-sS", "--max-time", "10"], args].concat());
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), said)
}

#[test]
fn a_remote_client_never_reaches_the_engineers_loopback_but_the_engineer_does() {
    let netns = NetNs::new();
    // A service on every address of the namespace: on loopback it is the engineer's own.
    let docroot = tempfile::tempdir().unwrap();
    std::fs::write(docroot.path().join("hello"), "hello from the service").unwrap();
    let mut service = netns
        .command("python3")
        .args(["-m", "http.server", &SERVICE_PORT.to_string(), "--bind", "0.0.0.0", "--directory"])
        .arg(docroot.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 -m http.server");
    let service_url = |host: &str| format!("http://{host}:{SERVICE_PORT}/hello");
    assert!(
        wait_until(Duration::from_secs(20), || curl(&netns, &["--fail", &service_url("127.0.0.1")]).0
            == Some(0)),
        "the service did not come up"
    );

    let env = Env::new();
    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let config =
        env.write("config.toml", &format!("[socks]\nusername = \"{USER}\"\npassword = \"{PASSWORD}\"\n"));
    let wrapper = netns.wrapper();
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let args =
        ["--listen", "0.0.0.0:0", "--inventory", inv.to_str().unwrap(), "--config", config.to_str().unwrap()];
    let daemon = Kharond::start_wrapped(&env, &wrapper, &args, &[]);
    let port = daemon.socks_addr().port();
    let socks = |host: &str| format!("socks5h://{USER}:{PASSWORD}@{host}:{port}");
    let http = |host: &str| format!("http://{USER}:{PASSWORD}@{host}:{port}");

    // From "another machine" (source address 10.200.0.1): loopback refused however it is named.
    for target in ["127.0.0.1", "localhost", "0.0.0.0", "[::1]"] {
        let (code, said) = curl(&netns, &["-x", &socks(REMOTE), &service_url(target)]);
        assert_eq!(code, Some(97), "{target} over SOCKS: {said}\n{}", daemon.log());
        assert!(said.contains("(2)"), "{target}: not 'not allowed': {said}");
        let (code, said) = curl(&netns, &["-p", "-x", &http(REMOTE), &service_url(target)]);
        assert_eq!(code, Some(56), "{target} over CONNECT: {said}");
        assert!(said.contains("403"), "{target}: {said}");
    }
    // What is not loopback it still reaches directly.
    let (code, said) = curl(&netns, &["--fail", "-x", &socks(REMOTE), &service_url(REMOTE)]);
    assert_eq!((code, said.as_str()), (Some(0), "hello from the service"));
    // The engineer's own client, on loopback, reaches the loopback service as before.
    let (code, said) = curl(&netns, &["--fail", "-x", &socks("127.0.0.1"), &service_url("127.0.0.1")]);
    assert_eq!((code, said.as_str()), (Some(0), "hello from the service"), "{}", daemon.log());
    let (code, said) = curl(&netns, &["--fail", "-p", "-x", &http("127.0.0.1"), &service_url("localhost")]);
    assert_eq!((code, said.as_str()), (Some(0), "hello from the service"));

    let _ = service.kill();
    let _ = service.wait();
}
