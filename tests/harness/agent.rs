//! A real `ssh-agent` for a scenario: `ssh-agent -D -a SOCKET`, holding keys added with `ssh-add`.
//! Killed on drop. [`encrypted_key`] writes a passphrase-protected key file (for the
//! "add it to your agent" error).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::sshd::keygen;
use crate::wait_until;

pub struct Agent {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Agent {
    /// Starts an empty agent.
    pub fn start() -> Self {
        // Short path: a Unix socket path must fit in sun_path.
        let dir = tempfile::Builder::new().prefix("khag").tempdir_in("/tmp").expect("agent dir");
        let socket = dir.path().join("agent.sock");
        let child = Command::new("ssh-agent")
            .arg("-D")
            .arg("-a")
            .arg(&socket)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ssh-agent");
        // Connectable, not only present: ssh-agent binds the socket before it listens, and an
        // `ssh-add` in between is refused.
        let listening = || std::os::unix::net::UnixStream::connect(&socket).is_ok();
        assert!(wait_until(Duration::from_secs(10), listening), "ssh-agent socket did not appear");
        Agent { child, socket, _dir: dir }
    }

    /// Starts an agent holding a fresh ed25519 key written to `key_path`; returns the agent and the
    /// public key line.
    pub fn with_new_key(key_path: &Path) -> (Self, String) {
        let agent = Self::start();
        let public = keygen(key_path, "");
        agent.add(key_path);
        (agent, public)
    }

    /// `ssh-add KEY` (the key must be unencrypted).
    pub fn add(&self, key: &Path) {
        let out = Command::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket)
            .stdin(Stdio::null())
            .output()
            .expect("run ssh-add");
        assert!(out.status.success(), "ssh-add: {}", String::from_utf8_lossy(&out.stderr));
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes an ed25519 key encrypted with `passphrase`; returns its public key line.
pub fn encrypted_key(path: &Path, passphrase: &str) -> String {
    keygen(path, passphrase)
}
