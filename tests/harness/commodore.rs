//! The real commodore (PyPI `syn-commodore`, pinned in `tests/commodore/requirements.txt`): the
//! reference client whose token cache kharonctl reads and keeps current. Its own `login`,
//! `fetch-token` and `tokencache` code write and read that cache here; nothing imitates them.
//!
//! It lives in a venv of its own, `tests/commodore/.venv`: its pins (kapitan, click, requests, …)
//! must not move the packages moto and openapi-core run on. Only what its command line imports is
//! installed, each pinned (`requirements.txt` says how that list was made). `.ci/run` creates it up front;
//! [`ensure`] does when it is missing (once, under a lock), as `oidc::ensure_npm` does for npm.
//!
//! What the tests set for it, and why:
//! - `OAUTHLIB_INSECURE_TRANSPORT=1`: oauthlib refuses an authorization endpoint that is not
//!   https (`prepare_grant_uri` raises `InsecureTransportError`); the test IdP is http on loopback.
//! - `BROWSER`: a script that runs `tests/oidc/browser.mjs`. Python's `webbrowser` runs the
//!   variable's value as one program with the URL as its argument, so it cannot be `node FILE`.
//! - The test IdP started with `PKCE=optional`: commodore sends no PKCE (`commodore/login.py`).
//!
//! Commodore's login server binds port 18000 like kharonctl's: hold `oidc::login_lock()`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::Env;
use crate::kharonctl::Output;

/// How long one commodore command may take (a login included) before the test fails.
const LIMIT: Duration = Duration::from_secs(90);

/// `tests/commodore`.
fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("commodore")
}

/// The venv commodore is installed in.
pub fn venv() -> PathBuf {
    dir().join(".venv")
}

/// Creates the venv and installs the pinned commodore if that was not done yet.
pub fn ensure() {
    let installed = || venv().join("bin/commodore").exists();
    if installed() {
        return;
    }
    let _guard = crate::oidc::lock_file("/tmp/kharon-e2e-commodore.lock", Duration::from_secs(600));
    if installed() {
        return;
    }
    let status =
        Command::new("python3").args(["-m", "venv"]).arg(venv()).status().expect("run python3 -m venv");
    assert!(status.success(), "python3 -m venv {} failed", venv().display());
    let status = Command::new(venv().join("bin/pip"))
        .args(["install", "--quiet", "--no-deps", "-r"])
        .arg(dir().join("requirements.txt"))
        .status()
        .expect("run pip");
    assert!(status.success(), "pip install -r tests/commodore/requirements.txt failed");
}

/// Commodore's token cache in `env`: `$XDG_CACHE_HOME/commodore/token`.
pub fn cache_file(env: &Env) -> PathBuf {
    env.path().join("cache/commodore/token")
}

/// A `BROWSER` that plays the user through `browser.mjs`.
pub fn browser(env: &Env) -> PathBuf {
    let script = crate::oidc::node_dir().join("browser.mjs");
    executable(env, "commodore-browser", &format!("#!/bin/sh\nexec node {} \"$@\"\n", script.display()))
}

/// A `BROWSER` that only records that it was started (the marker file), then answers commodore's
/// callback without a code so that commodore stops waiting for one.
pub fn tripwire(env: &Env) -> (PathBuf, PathBuf) {
    let marker = env.path().join("commodore-opened-a-browser");
    let script = executable(
        env,
        "commodore-tripwire",
        &format!(
            "#!/bin/sh\ntouch {}\ncurl -s -o /dev/null --max-time 10 http://localhost:18000/\nexit 1\n",
            marker.display()
        ),
    );
    (script, marker)
}

fn executable(env: &Env, name: &str, text: &str) -> PathBuf {
    let path = env.write(name, text);
    crate::set_mode(&path, 0o755);
    path
}

/// Runs `commodore ARGS` in `cwd` with the env's variables, `browser` as its `BROWSER`, and `extra`.
pub fn run(env: &Env, cwd: &Path, browser: &Path, args: &[&str], extra: &[(&str, &str)]) -> Output {
    ensure();
    let mut cmd = Command::new(venv().join("bin/commodore"));
    cmd.env_clear()
        .envs(env.vars())
        .env("OAUTHLIB_INSECURE_TRANSPORT", "1")
        .env("BROWSER", browser)
        .current_dir(cwd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let child = cmd.spawn().expect("start commodore");
    let out = crate::output_within(child, LIMIT)
        .unwrap_or_else(|| panic!("commodore {args:?} did not finish within {LIMIT:?}"));
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `commodore login --api-url URL` through the playing browser; panics unless it succeeded.
pub fn login(env: &Env, api_url: &str) {
    let out = run(env, env.path(), &browser(env), &["login", "--api-url", api_url], &[]);
    assert!(out.success(), "commodore login failed:\n{}\n{}", out.stdout, out.stderr);
}

/// Stores `entry` (a token response) under `key` with commodore's own `tokencache.save`, run in
/// `cwd` with the env's variables and `extra`.
pub fn save(env: &Env, cwd: &Path, extra: &[(&str, &str)], key: &str, entry: &serde_json::Value) {
    ensure();
    let code = "import json, sys\nfrom commodore import tokencache\n\
                tokencache.save(sys.argv[1], json.loads(sys.argv[2]))";
    let mut cmd = Command::new(venv().join("bin/python"));
    cmd.env_clear().envs(env.vars()).current_dir(cwd).args(["-c", code, key, &entry.to_string()]);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run commodore's python");
    assert!(out.status.success(), "tokencache.save failed: {}", String::from_utf8_lossy(&out.stderr));
}
