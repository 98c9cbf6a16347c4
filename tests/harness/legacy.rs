//! An OpenSSH-7-like jump host (`fixtures/legacy_sshd.py`, paramiko 3): SHA-1 key exchange,
//! `ssh-rsa` host key signatures, hmac-sha1, and `server-sig-algs` with exactly the signature
//! algorithms given, for the algorithm cases of the oracle matrix that no packaged
//! server offers any more. Listens on 127.0.0.1 at a port it picks; killed on drop.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// What the server speaks: comma-separated SSH algorithm names, as ssh_config writes them.
pub struct Algorithms<'a> {
    pub kex: &'a str,
    pub ciphers: &'a str,
    pub macs: &'a str,
    pub host_key: &'a str,
    /// What `server-sig-algs` names and public key authentication takes.
    pub pubkeys: &'a str,
    /// Sign the key exchange as this algorithm whatever was negotiated: a server that lies.
    pub sign_host_key_as: Option<&'a str>,
}

pub struct LegacySshd {
    child: Child,
    /// The authorized_keys file the server read; removed with it.
    _authorized: tempfile::NamedTempFile,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl LegacySshd {
    /// Serves with the RSA `host_key` (a private key file), admitting the public key lines of
    /// `authorized`; `hosts` are the names only it resolves.
    pub fn start(
        host_key: &Path,
        authorized: &[String],
        hosts: &[(&str, &str)],
        algorithms: &Algorithms,
    ) -> Self {
        // A file of its own: servers of the matrix start in parallel threads, and one written over
        // while another's server reads it leaves that server with no keys (every login refused).
        let dir = host_key.parent().expect("key dir");
        let mut file = tempfile::Builder::new()
            .prefix("legacy_authorized_")
            .tempfile_in(dir)
            .expect("authorized keys file");
        std::io::Write::write_all(&mut file, (authorized.join("\n") + "\n").as_bytes())
            .expect("authorized keys");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy_sshd.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script)
            .arg("--host-key")
            .arg(host_key)
            .arg("--authorized")
            .arg(file.path())
            .args(["--kex", algorithms.kex, "--ciphers", algorithms.ciphers, "--macs", algorithms.macs])
            .args(["--host-key-algorithms", algorithms.host_key, "--pubkey-algorithms", algorithms.pubkeys]);
        for (name, address) in hosts {
            cmd.arg("--host").arg(format!("{name}={address}"));
        }
        if let Some(algorithm) = algorithms.sign_host_key_as {
            cmd.arg("--sign-host-key-as").arg(algorithm);
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 legacy_sshd.py (pip install 'paramiko==3.5.1')");
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            crate::collect_output(stderr, Arc::clone(&log));
        }
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        // The first line is the port; it comes once the listener is bound (or EOF if it failed).
        let _ = BufReader::new(stdout).read_line(&mut line);
        let Ok(port) = line.trim().parse() else {
            let _ = child.kill();
            let _ = child.wait();
            crate::wait_until(std::time::Duration::from_secs(2), || log.lock().is_ok_and(|l| !l.is_empty()));
            panic!("legacy_sshd.py did not start: {:?}", log.lock().map(|l| l.clone()).unwrap_or_default());
        };
        LegacySshd { child, _authorized: file, port, log }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// What the server wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for LegacySshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
