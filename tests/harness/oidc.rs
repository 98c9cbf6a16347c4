//! A real OpenID provider for login tests: the npm `oidc-provider` run by `tests/oidc/provider.mjs`
//! on an ephemeral loopback port (PKCE enforced, refresh tokens, device flow), plus the "browser"
//! (`tests/oidc/browser.mjs`) that kharonctl starts through `KHARON_BROWSER`.
//!
//! Not a fake: panva's `oidc-provider` is an OpenID-certified server, so no upstream notes are
//! kept here. Its one configured difference from a default install is Keycloak's habit of issuing
//! a refresh token with every code (`issueRefreshToken` in `provider.mjs`), which is what VSHN's
//! IdP does.
//!
//! The npm packages are installed once per checkout (`npm ci` from the committed lock file) when
//! `tests/oidc/node_modules` is missing; `.ci/run` does the same up front.
//!
//! # Concurrency
//! The IdP only accepts the redirect `http://localhost:18000`, so two browser logins cannot run at
//! once, not even from two test processes (nextest). [`login_lock`] takes an exclusive `flock(2)` on
//! a file in /tmp; hold the guard for the whole test.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `tests/oidc`, where the node scripts and their `package.json` live.
pub fn node_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("oidc")
}

/// The `KHARON_BROWSER` value that plays the user: signs in, consents, follows the redirect.
pub fn browser_command() -> String {
    format!("node {}", node_dir().join("browser.mjs").display())
}

/// `KHARON_BROWSER` that answers the callback with `error=access_denied`.
pub fn denying_browser_command() -> String {
    format!("node {} --deny", node_dir().join("browser.mjs").display())
}

/// An exclusive lock on a file; released when dropped (the fd closes).
pub struct FileLock {
    _file: nix::fcntl::Flock<std::fs::File>,
}

/// Takes an exclusive lock on `path` (created if missing), waiting at most `limit`.
pub fn lock_file(path: &str, limit: Duration) -> FileLock {
    let mut file =
        std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(path).expect("lock file");
    let deadline = Instant::now() + limit;
    loop {
        // Non-blocking, so the deadline holds; a refusal hands the file back for the next try.
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(locked) => return FileLock { _file: locked },
            Err((back, _)) => file = back,
        }
        assert!(Instant::now() < deadline, "could not lock {path} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Serialises every test that uses port 18000 (browser logins), across processes.
pub fn login_lock() -> FileLock {
    lock_file("/tmp/kharon-e2e-login-18000.lock", Duration::from_secs(300))
}

/// Installs the npm packages if `node_modules` is missing (once, under a lock).
pub fn ensure_npm() {
    let dir = node_dir();
    if dir.join("node_modules/oidc-provider").exists() {
        return;
    }
    let _guard = lock_file("/tmp/kharon-e2e-npm.lock", Duration::from_secs(300));
    if dir.join("node_modules/oidc-provider").exists() {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error", "--prefix"])
        .arg(&dir)
        .status()
        .expect("run npm (install nodejs and npm)");
    assert!(status.success(), "npm ci --prefix {} failed", dir.display());
}

/// A node script that prints `ready <url>` once it listens.
pub struct NodeProcess {
    child: Child,
    url: String,
    log: Arc<Mutex<String>>,
}

impl NodeProcess {
    pub fn spawn(script: &str, env: &[(&str, String)]) -> Self {
        ensure_npm();
        let mut cmd = Command::new("node");
        cmd.arg(node_dir().join(script))
            .current_dir(node_dir())
            .env_remove("HTTPS_PROXY")
            .env_remove("HTTP_PROXY")
            .env_remove("ALL_PROXY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn node (install nodejs)");
        let log = Arc::new(Mutex::new(String::new()));
        let (ready_tx, ready_rx) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(url) = line.strip_prefix("ready ") {
                        let _ = ready_tx.send(url.trim().to_owned());
                    }
                    if let Ok(mut log) = log.lock() {
                        log.push_str(&line);
                        log.push('\n');
                    }
                }
            });
        }
        if let Some(stderr) = child.stderr.take() {
            crate::collect_output(stderr, Arc::clone(&log));
        }
        let url = match ready_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{script} did not start within 30 s:\n{}",
                    log.lock().map(|l| l.clone()).unwrap_or_default()
                );
            }
        };
        Self { child, url, log }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Stops the process (and waits for it).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        self.stop();
        crate::failure::print_log_if_failing(&format!("{} log", self.url), || self.log());
    }
}

/// The test identity provider.
pub struct Provider {
    node: NodeProcess,
}

/// Our client id at the test provider.
pub const CLIENT_ID: &str = "kharon";

impl Provider {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// With extra env for `provider.mjs`, e.g. `("ID_TOKEN_TTL", "5")` or `("DEVICE_FLOW", "0")`.
    pub fn start_with(env: &[(&str, &str)]) -> Self {
        let mut vars = vec![("CLIENT_ID", CLIENT_ID.to_owned())];
        vars.extend(env.iter().map(|(k, v)| (*k, (*v).to_owned())));
        Self { node: NodeProcess::spawn("provider.mjs", &vars) }
    }

    pub fn issuer(&self) -> &str {
        self.node.url()
    }

    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer())
    }
}
