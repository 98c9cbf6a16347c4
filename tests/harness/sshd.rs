//! Real OpenSSH `sshd` instances on loopback, for jump-host scenarios.
//!
//! Each [`Sshd`] runs `sshd -D -e -f CONFIG` unprivileged-style (as the current user; root in CI)
//! on 127.0.0.1 at an ephemeral port, with its own ed25519 host key and an authorized_keys file
//! in its own temp dir. It can be killed, restarted on the same port with the same host key, and
//! frozen with SIGSTOP (the listener and every per-connection child, which is what carries an
//! established session) and thawed with SIGCONT.
//!
//! Names resolvable only at this hop: with [`Builder::hosts`], sshd runs in a private mount
//! namespace (`unshare -m`) with its own `/etc/hosts` bind-mounted, so a target such as
//! `api.c1.example` resolves at the last jump host and nowhere else (not in kharond, not in curl).
//! That needs CAP_SYS_ADMIN (root in CI); [`hosts_supported`] tells whether it works here.
//!
//! Host certificates: [`Builder::host_certificate`] signs the host key with a CA and serves the
//! certificate (`HostCertificate`).
//!
//! PAM of its own: with [`Builder::pam`], sshd runs in such a namespace with the given text
//! bind-mounted over `/etc/pam.d/sshd` (the machine's file is never touched), for
//! keyboard-interactive and password logins that a real PAM stack answers (`UsePAM yes`).
//!
//! Also writes key pairs ([`keygen`], [`keygen_of`]) and ssh_config snippets for chains of hops
//! ([`host_block`]).

use std::io::{Read, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::wait_until;

/// Generates an ed25519 key pair at `path` (and `path.pub`); `passphrase` empty = unencrypted.
/// Returns the public key line.
pub fn keygen(path: &Path, passphrase: &str) -> String {
    keygen_of(path, "ed25519", None, passphrase)
}

/// Generates an unencrypted key pair of `kind` (`ed25519`, `ecdsa`, `rsa`) with `bits` (`ecdsa`:
/// 256, 384 or 521) at `path`; returns the public key line.
pub fn keygen_of(path: &Path, kind: &str, bits: Option<u32>, passphrase: &str) -> String {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(pub_path(path));
    let mut cmd = Command::new("ssh-keygen");
    cmd.args(["-q", "-t", kind, "-C", "kharon-test", "-N", passphrase]);
    if let Some(bits) = bits {
        cmd.args(["-b", &bits.to_string()]);
    }
    let out = cmd.arg("-f").arg(path).output().expect("run ssh-keygen");
    assert!(out.status.success(), "ssh-keygen: {}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(pub_path(path)).expect("read public key").trim().to_owned()
}

/// Signs `key`'s public half with the CA key `ca` (`ssh-keygen -s`): a host certificate with
/// `host`, else a user certificate; `principals` comma-separated (none: valid for any), `validity`
/// as `ssh-keygen -V` takes it. Returns the certificate's path (`KEY-cert.pub`).
pub fn sign(ca: &Path, key: &Path, host: bool, principals: Option<&str>, validity: Option<&str>) -> PathBuf {
    let mut cmd = Command::new("ssh-keygen");
    cmd.arg("-q").arg("-s").arg(ca).args(["-I", "kharon-test"]);
    if host {
        cmd.arg("-h");
    }
    if let Some(principals) = principals {
        cmd.args(["-n", principals]);
    }
    if let Some(validity) = validity {
        cmd.args(["-V", validity]);
    }
    let out = cmd.arg(pub_path(key)).output().expect("run ssh-keygen -s");
    assert!(out.status.success(), "ssh-keygen -s: {}", String::from_utf8_lossy(&out.stderr));
    let mut cert = key.as_os_str().to_owned();
    cert.push("-cert.pub");
    PathBuf::from(cert)
}

pub fn pub_path(key: &Path) -> PathBuf {
    let mut s = key.as_os_str().to_owned();
    s.push(".pub");
    PathBuf::from(s)
}

/// Whether a private mount namespace (for [`Builder::hosts`]) can be made here.
pub fn hosts_supported() -> bool {
    Command::new("unshare")
        .args(["-m", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// An ssh_config `Host` block for a hop on loopback.
pub fn host_block(alias: &str, port: u16, user: &str, identity: &Path, extra: &[&str]) -> String {
    let mut s = format!(
        "Host {alias}\n  HostName 127.0.0.1\n  Port {port}\n  User {user}\n  IdentityFile {}\n",
        identity.display()
    );
    for line in extra {
        s.push_str("  ");
        s.push_str(line);
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The user sshd runs as and that clients log in as.
pub fn current_user() -> String {
    std::env::var("USER").ok().filter(|u| !u.is_empty()).unwrap_or_else(|| "root".to_owned())
}

/// How [`Builder::host_certificate`] signs the host key.
struct HostCertificate {
    ca: PathBuf,
    principals: Option<String>,
    validity: Option<String>,
}

#[derive(Default)]
pub struct Builder {
    authorized: Vec<String>,
    hosts: Vec<(String, String)>,
    extra: Vec<String>,
    certificate: Option<HostCertificate>,
    pam: Option<String>,
}

impl Builder {
    /// Adds a public key line to authorized_keys.
    pub fn authorize(mut self, public_key_line: &str) -> Self {
        self.authorized.push(public_key_line.to_owned());
        self
    }

    /// Names this sshd (and only it) resolves, e.g. `("api.c1.example", "127.0.0.1")`.
    pub fn hosts(mut self, entries: &[(&str, &str)]) -> Self {
        self.hosts.extend(entries.iter().map(|(n, a)| ((*n).to_owned(), (*a).to_owned())));
        self
    }

    /// An extra sshd_config line. It goes before the defaults, so it replaces one with the same
    /// keyword (sshd keeps the first value it reads).
    pub fn option(mut self, line: &str) -> Self {
        self.extra.push(line.to_owned());
        self
    }

    /// sshd's PAM service (`/etc/pam.d/sshd`) inside its own mount namespace: `text` is the
    /// file. Needs `UsePAM yes` (an [`Builder::option`]) to be used.
    pub fn pam(mut self, text: &str) -> Self {
        self.pam = Some(text.to_owned());
        self
    }

    /// Serves a host certificate: the host key signed by the CA key `ca` for `principals`
    /// (comma-separated; `None`: any host) and `validity` (`ssh-keygen -V`; `None`: forever).
    pub fn host_certificate(mut self, ca: &Path, principals: Option<&str>, validity: Option<&str>) -> Self {
        self.certificate = Some(HostCertificate {
            ca: ca.to_owned(),
            principals: principals.map(str::to_owned),
            validity: validity.map(str::to_owned),
        });
        self
    }

    pub fn start(self) -> Sshd {
        let dir = tempfile::Builder::new().prefix("khsshd").tempdir_in("/tmp").expect("sshd dir");
        let host_key = dir.path().join("host_ed25519");
        keygen(&host_key, "");
        let host_pub = std::fs::read_to_string(pub_path(&host_key)).expect("host pub").trim().to_owned();
        std::fs::write(dir.path().join("authorized_keys"), self.authorized.join("\n") + "\n")
            .expect("authorized");
        let port = crate::free_port();
        let hosts_file = (!self.hosts.is_empty()).then(|| {
            let mut text = String::from("127.0.0.1 localhost\n");
            for (name, addr) in &self.hosts {
                text.push_str(&format!("{addr} {name}\n"));
            }
            let path = dir.path().join("hosts");
            std::fs::write(&path, text).expect("hosts");
            path
        });
        let pam_file = self.pam.as_ref().map(|text| {
            let path = dir.path().join("pam.sshd");
            std::fs::write(&path, text).expect("pam file");
            path
        });
        let mut config: String = self.extra.iter().map(|line| format!("{line}\n")).collect();
        if let Some(c) = &self.certificate {
            let cert = sign(&c.ca, &host_key, true, c.principals.as_deref(), c.validity.as_deref());
            config += &format!("HostCertificate {}\n", cert.display());
        }
        // MaxStartups: the default (10:30:100) drops some handshakes once ten are unauthenticated
        // at once, which parallel tests on a loaded machine reach; a dropped `ssh … nc %h %p` hop
        // then hangs (Debian's nc waits for its stdin to end) instead of failing. Tests that want
        // the default's drops say so in `extra`, whose lines come first and win (sshd_config(5)).
        config += &format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {}\nPidFile none\nAuthorizedKeysFile {}\n\
             StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n\
             PermitTunnel no\nLogLevel VERBOSE\nClientAliveInterval 0\nMaxStartups 100:30:200\n",
            host_key.display(),
            dir.path().join("authorized_keys").display()
        );
        let config_path = dir.path().join("sshd_config");
        std::fs::write(&config_path, config).expect("sshd_config");
        // Running as root, sshd insists on its privilege-separation directory.
        if nix::unistd::geteuid().is_root() {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let mut sshd =
            Sshd { dir, port, config_path, hosts_file, pam_file, host_pub, child: None, log: Arc::default() };
        sshd.spawn();
        sshd
    }
}

pub struct Sshd {
    dir: tempfile::TempDir,
    port: u16,
    config_path: PathBuf,
    hosts_file: Option<PathBuf>,
    pam_file: Option<PathBuf>,
    host_pub: String,
    child: Option<Child>,
    log: Arc<Mutex<String>>,
}

impl Sshd {
    pub fn builder() -> Builder {
        Builder::default()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `ssh-ed25519 AAAA…` (no comment).
    pub fn host_key(&self) -> String {
        self.host_pub.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
    }

    /// A known_hosts line for this sshd as kharond (and ssh) look it up: `[127.0.0.1]:PORT key`.
    pub fn host_key_line(&self) -> String {
        format!("[127.0.0.1]:{} {}", self.port, self.host_key())
    }

    /// sshd's log (-e) so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    fn spawn(&mut self) {
        let sshd = if Path::new("/usr/sbin/sshd").exists() { "/usr/sbin/sshd" } else { "sshd" };
        let binds: Vec<String> = [(&self.hosts_file, "/etc/hosts"), (&self.pam_file, "/etc/pam.d/sshd")]
            .into_iter()
            .filter_map(|(file, over)| Some(format!("mount --bind {} {over} && ", file.as_ref()?.display())))
            .collect();
        let mut cmd = if binds.is_empty() {
            let mut c = Command::new(sshd);
            c.arg("-D").arg("-e").arg("-f").arg(&self.config_path);
            c
        } else {
            let mut c = Command::new("unshare");
            c.args(["-m", "sh", "-c"]).arg(format!(
                "{}exec {sshd} -D -e -f {}",
                binds.concat(),
                self.config_path.display()
            ));
            c
        };
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sshd");
        if let Some(stderr) = child.stderr.take() {
            crate::collect_output(stderr, Arc::clone(&self.log));
        }
        self.child = Some(child);
        let port = self.port;
        let up = wait_until(Duration::from_secs(10), || {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut banner = [0u8; 4];
            let ok = s.read_exact(&mut banner).is_ok() && &banner == b"SSH-";
            let _ = s.write_all(b"SSH-2.0-probe\r\n");
            ok
        });
        assert!(up, "sshd on port {port} did not come up within 10 s:\n{}", self.log());
    }

    fn pid(&self) -> Option<i32> {
        self.child.as_ref().map(|c| c.id() as i32)
    }

    /// The listener and all its descendants (per-connection `sshd:` processes).
    fn tree(&self) -> Vec<i32> {
        let Some(root) = self.pid() else { return Vec::new() };
        let mut parents: Vec<(i32, i32)> = Vec::new();
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for e in entries.flatten() {
                let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
                let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else { continue };
                // "pid (comm) state ppid …": comm may contain spaces; split after the last ')'.
                let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
                if let Some(ppid) = rest.split_whitespace().nth(1).and_then(|p| p.parse().ok()) {
                    parents.push((pid, ppid));
                }
            }
        }
        let mut tree = vec![root];
        let mut i = 0;
        while i < tree.len() {
            let p = tree[i];
            tree.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
            i += 1;
        }
        tree
    }

    fn signal_tree(&self, sig: Signal) {
        for pid in self.tree() {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// SIGSTOP the listener and every session process: established sessions go silent.
    pub fn stop(&self) {
        self.signal_tree(Signal::SIGSTOP);
    }

    /// SIGCONT what [`Sshd::stop`] froze.
    pub fn cont(&self) {
        self.signal_tree(Signal::SIGCONT);
    }

    /// Kills sshd and every session process; the port is closed afterwards.
    pub fn kill(&mut self) {
        let tree = self.tree();
        for pid in &tree {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
        let port = self.port;
        wait_until(Duration::from_secs(5), || TcpStream::connect(("127.0.0.1", port)).is_err());
    }

    /// Starts sshd again on the same port with the same host key and authorized_keys.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.cont();
        self.kill();
        crate::failure::print_log_if_failing(&format!("sshd :{} log", self.port), || self.log());
    }
}
