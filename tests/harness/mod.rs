//! The end-to-end harness: real `kharond`/`kharonctl` binaries, real clients (curl, kubectl) and
//! real servers on loopback, each scenario in its own temporary HOME.
//!
//! # Layout
//! - [`Env`]: temp HOME and XDG dirs, passed to child processes (never set in the test process).
//! - [`kharond`]: starts the built daemon and learns its ports. [`kharonctl`]: runs the CLI.
//! - [`sshd`], [`agent`], [`gpg_agent`]: real OpenSSH servers, ssh-agent and gpg-agent (SSH support).
//!   [`dropbear`]: Debian's Dropbear. [`legacy`]: an OpenSSH-7-like server (paramiko) with SHA-1
//!   key exchange, `ssh-rsa` host keys and hmac-sha1.
//! - [`servers`]: HTTP targets on loopback. [`origin`]: Python's HTTP/1.1 server as a target (files,
//!   a git repository, request echo). [`echo`]: echo targets, in process or as a child for
//!   thousands of connections. [`inventory`]: Lieutenant `/clusters` JSON builders.
//! - [`procfs`]: descriptors, limits and memory of a process, from `/proc`.
//! - [`chromium`]: a real headless browser, for what only a browser does (PAC, origins).
//! - [`desktop`]: a private D-Bus session bus with a notification server that records what it is
//!   sent (a desktop session, as kharond meets one).
//! - [`passbolt`]: a fake Passbolt (GPGAuth, MFA, v5 metadata). [`moto`]: a real S3 (moto) that checks SigV4.
//! - [`oidc`], [`lieutenant`]: a real OpenID provider and a fake Lieutenant; [`commodore`]: the real
//!   commodore, whose token cache kharonctl shares.
//! - [`wait_until`]: the only way to wait: a bounded poll of a real condition.
//! - [`failure`]: the logs a failed test prints, each ending with the failure.

pub mod agent;
pub mod chromium;
pub mod desktop;
pub mod dropbear;
pub mod echo;
pub mod failure;
pub mod gpg_agent;
pub mod inventory;
pub mod kharonctl;
pub mod kharond;
pub mod legacy;
pub mod origin;
pub mod procfs;
pub mod servers;
pub mod socks;
pub mod sshd;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A scenario's private world: HOME, config/cache/runtime dirs and the control socket path.
pub struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        // Short base path: the control socket must fit in sun_path (108 bytes).
        let dir = tempfile::Builder::new().prefix("kh").tempdir_in("/tmp").expect("temp dir");
        for sub in ["home/.ssh", "config", "cache", "run"] {
            std::fs::create_dir_all(dir.path().join(sub)).expect("create env dir");
        }
        // XDG_RUNTIME_DIR must be private, as logind makes it.
        set_mode(&dir.path().join("run"), 0o700);
        set_mode(&dir.path().join("home/.ssh"), 0o700);
        Self { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> PathBuf {
        self.path().join("home")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.path().join("cache/kharon")
    }

    pub fn control_socket(&self) -> PathBuf {
        self.path().join("run/kharon/kharond.sock")
    }

    /// The environment every child process gets: ours only, plus PATH and locale.
    pub fn vars(&self) -> Vec<(String, String)> {
        let p = |s: &str| self.path().join(s).display().to_string();
        let mut vars = vec![
            ("HOME".into(), p("home")),
            ("XDG_CONFIG_HOME".into(), p("config")),
            ("XDG_CACHE_HOME".into(), p("cache")),
            ("XDG_RUNTIME_DIR".into(), p("run")),
            ("USER".into(), std::env::var("USER").unwrap_or_else(|_| "root".into())),
        ];
        for keep in ["PATH", "LANG", "TERM"] {
            if let Ok(v) = std::env::var(keep) {
                vars.push((keep.into(), v));
            }
        }
        vars
    }

    /// Writes `contents` to a file inside the env and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&path, contents).expect("write file");
        path
    }
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// Where cargo put the workspace binaries: next to the `deps` directory holding this test binary.
pub fn bin(name: &str) -> PathBuf {
    if let Ok(dir) = std::env::var("KHARON_BIN_DIR") {
        return PathBuf::from(dir).join(name);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} not built; run the suite with `cargo test --workspace` (it builds every binary)",
        path.display()
    );
    path
}

/// Appends everything `reader` produces (a child's stderr) to `log`, on a thread of its own, so
/// a failing test can print what the child said (and keeps panic messages for the end of that
/// print, [`failure`]). The thread ends at EOF; join it to be sure the log holds everything.
pub fn collect_output(
    mut reader: impl std::io::Read + Send + 'static,
    log: Arc<Mutex<String>>,
) -> std::thread::JoinHandle<()> {
    failure::keep_panic_messages();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut log) = log.lock() {
                log.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    })
}

/// Waits for `child` to exit and collects its output, for at most `limit`; past that the child is
/// killed (SIGKILL) and `None` comes back, so a hung client fails its test instead of the suite.
pub fn output_within(child: std::process::Child, limit: Duration) -> Option<std::process::Output> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => Some(out.expect("collect the child's output")),
        Err(_) => {
            // Our own child, not reaped yet (its waiter still runs): the pid is still its.
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
            None
        }
    }
}

/// Polls `condition` every 20 ms until it holds or `limit` passes. Returns whether it held.
pub fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; fine for tests that bind it right away).
/// A loopback port that nothing listens on, for a server the test starts or a connection that
/// must be refused.
///
/// It is taken from outside the kernel's ephemeral range (`net.ipv4.ip_local_port_range`): a
/// port the kernel handed out for `bind(…:0)` is free again once probed, and the kernel may then
/// give it to any outgoing connection of the parallel tests before the server binds it (seen in CI:
/// `systemd-socket-activate: Address already in use`). Outside that range only this function
/// hands ports out, each once per process, and a probe bind on `127.0.0.1` and `0.0.0.0` skips
/// ports another process holds.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let (low, high) = ephemeral_range();
    // Below the ephemeral range when there is room, else above it.
    let (start, end) = if low > 12_000 { (10_000, low) } else { (high + 1, 65_535) };
    let span = end - start;
    // Each test process starts elsewhere in the span, so two runs at once rarely meet.
    let offset = std::process::id() % span;
    for _ in 0..span {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (start + (offset + n) % span) as u16;
        let free =
            ["127.0.0.1", "0.0.0.0"].iter().all(|host| std::net::TcpListener::bind((*host, port)).is_ok());
        if free {
            return port;
        }
    }
    panic!("no free port in {start}..{end}");
}

/// The kernel's ephemeral port range (Linux's default when it cannot be read).
fn ephemeral_range() -> (u32, u32) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| {
            let mut it = s.split_whitespace().map(|n| n.parse::<u32>().ok());
            Some((it.next()??, it.next()??))
        })
        .unwrap_or((32_768, 60_999))
}
pub mod commodore;
pub mod lieutenant;
pub mod moto;
pub mod oidc;
pub mod passbolt;
