//! A real S3 implementation on loopback: PyPI `moto[server]` (docs/emergency-credentials.md), which verifies
//! SigV4 signatures once its first few unauthenticated calls are used up.
//!
//! [`Moto::start`] runs `python3 -m moto.server` on 127.0.0.1 at a free port (HTTPS with
//! [`Moto::start_tls`], as real object storage is) with
//! `INITIAL_NO_AUTH_ACTION_COUNT=3` (the IAM user, its access key and its policy, made by
//! `fixtures/s3/setup.py`) and `S3_IGNORE_SUBDOMAIN_BUCKETNAME` (requests arrive with a host name
//! such as `objects.c1.example`, which moto would otherwise take for a virtual-hosted bucket).
//! [`Moto::setup`] creates buckets and objects with that key, signed by boto3, and returns it.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wait_until;

/// The access key `setup` created; kharond must sign with it.
#[derive(Debug, Clone)]
pub struct Keys {
    pub access_key_id: String,
    pub secret_access_key: String,
}

pub struct Moto {
    child: Child,
    port: u16,
    tls: bool,
    log: Arc<Mutex<String>>,
}

impl Moto {
    /// Starts moto on plain HTTP and waits (at most 30 s) until it accepts connections.
    pub fn start() -> Moto {
        Self::spawn(None)
    }

    /// Starts moto serving HTTPS with this certificate and key (PEM files).
    pub fn start_tls(cert: &Path, key: &Path) -> Moto {
        Self::spawn(Some((cert, key)))
    }

    fn spawn(tls: Option<(&Path, &Path)>) -> Moto {
        let port = crate::free_port();
        let mut cmd = Command::new("python3");
        cmd.args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()]);
        if let Some((cert, key)) = tls {
            cmd.arg("--ssl-cert").arg(cert).arg("--ssl-key").arg(key);
        }
        let mut child = cmd
            .env("INITIAL_NO_AUTH_ACTION_COUNT", "3")
            .env("S3_IGNORE_SUBDOMAIN_BUCKETNAME", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run python3 -m moto.server (pip install 'moto[server]')");
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            crate::collect_output(stderr, Arc::clone(&log));
        }
        // A plain connect: an HTTP probe would count as one of the unauthenticated calls.
        let up = wait_until(Duration::from_secs(30), || TcpStream::connect(("127.0.0.1", port)).is_ok());
        let mut moto = Moto { child, port, tls: tls.is_some(), log };
        assert!(up, "moto did not listen on {port} within 30 s:\n{}", moto.log());
        assert!(matches!(moto.child.try_wait(), Ok(None)), "moto exited:\n{}", moto.log());
        moto
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Creates `buckets` (`{"bucket": {"key": "content"}}`) and returns the key that may read them.
    pub fn setup(&self, buckets: &serde_json::Value) -> Keys {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/s3/setup.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(format!("{}://127.0.0.1:{}", if self.tls { "https" } else { "http" }, self.port))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run setup.py");
        let spec = serde_json::json!({ "buckets": buckets }).to_string();
        {
            use std::io::Write as _;
            // Dropped at the end of this block: setup.py sees the end of its input.
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(spec.as_bytes()).expect("write the spec to setup.py");
        }
        let out = child.wait_with_output().expect("setup.py output");
        assert!(
            out.status.success(),
            "setup.py failed:\n{}\n---- moto ----\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        let keys: serde_json::Value = serde_json::from_slice(&out.stdout).expect("setup.py prints JSON");
        Keys {
            access_key_id: keys["access_key_id"].as_str().expect("access_key_id").to_owned(),
            secret_access_key: keys["secret_access_key"].as_str().expect("secret_access_key").to_owned(),
        }
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::failure::print_log_if_failing(&format!("moto :{} log", self.port), || self.log());
    }
}
