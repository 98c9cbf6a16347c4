//! Debian's Dropbear as a jump host on loopback (`apt-get install dropbear-bin`), for the oracle
//! matrix: the SSH server of routers, appliances and small images.
//!
//! Dropbear reads authorized keys only from the login user's `~/.ssh/authorized_keys` (2022.83
//! has no option to name another file) and resolves names with the system's resolver. So, like
//! `sshd::Builder::hosts`, it runs in a private mount namespace (`unshare -m`, root) with its
//! own `/etc/hosts` and a home directory of its own bind-mounted over the user's. Killed on drop.

use std::io::Read as _;
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Dropbear {
    _dir: tempfile::TempDir,
    child: Child,
    port: u16,
    host_pub: String,
    log: Arc<Mutex<String>>,
}

/// The login user's home directory from the password database (what Dropbear reads).
pub fn password_home() -> String {
    let user = crate::sshd::current_user();
    let out = Command::new("getent").args(["passwd", &user]).output().expect("getent passwd");
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    line.trim().split(':').nth(5).filter(|h| !h.is_empty()).unwrap_or("/root").to_owned()
}

impl Dropbear {
    /// Serves an ed25519 host key it makes, admitting the public key lines of `authorized`;
    /// `hosts` are the names only it resolves.
    pub fn start(authorized: &[String], hosts: &[(&str, &str)]) -> Self {
        let dir = tempfile::Builder::new().prefix("khdb").tempdir_in("/tmp").expect("dropbear dir");
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join(".ssh")).expect("home");
        crate::set_mode(&home, 0o700);
        crate::set_mode(&home.join(".ssh"), 0o700);
        std::fs::write(home.join(".ssh/authorized_keys"), authorized.join("\n") + "\n").expect("authorized");
        let mut hosts_text = String::from("127.0.0.1 localhost\n");
        for (name, address) in hosts {
            hosts_text.push_str(&format!("{address} {name}\n"));
        }
        std::fs::write(dir.path().join("hosts"), hosts_text).expect("hosts");
        // Dropbear's own key format; the OpenSSH public line comes from `dropbearkey -y`.
        let key = dir.path().join("host_ed25519");
        let out = Command::new("dropbearkey")
            .args(["-t", "ed25519", "-f"])
            .arg(&key)
            .output()
            .expect("dropbearkey");
        assert!(out.status.success(), "dropbearkey: {}", String::from_utf8_lossy(&out.stderr));
        let out = Command::new("dropbearkey").arg("-y").arg("-f").arg(&key).output().expect("dropbearkey -y");
        let host_pub = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("ssh-"))
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
            .expect("dropbear public host key");
        let port = crate::free_port();
        let mut child = Command::new("unshare")
            .args(["-m", "sh", "-c"])
            .arg(format!(
                "mount --bind {hosts} /etc/hosts && mount --bind {home} {user_home} && \
                 exec dropbear -F -E -s -p 127.0.0.1:{port} -r {key} -P {pid}",
                hosts = dir.path().join("hosts").display(),
                home = home.display(),
                user_home = password_home(),
                key = key.display(),
                pid = dir.path().join("pid").display(),
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn dropbear");
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            crate::collect_output(stderr, Arc::clone(&log));
        }
        let up = crate::wait_until(Duration::from_secs(10), || {
            let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else { return false };
            let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
            let mut banner = [0u8; 4];
            s.read_exact(&mut banner).is_ok() && &banner == b"SSH-"
        });
        assert!(
            up,
            "dropbear on port {port} did not come up: {}",
            log.lock().map(|l| l.clone()).unwrap_or_default()
        );
        Dropbear { _dir: dir, child, port, host_pub, log }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `[127.0.0.1]:PORT ssh-ed25519 AAAA…`.
    pub fn host_key_line(&self) -> String {
        format!("[127.0.0.1]:{} {}", self.port, self.host_pub)
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for Dropbear {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
