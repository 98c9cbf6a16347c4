//! Headless Chromium (Debian's `chromium` package) as the real browser: loads one URL with the
//! flags a test gives it and returns the DOM after the page has loaded (`--dump-dom`).
//!
//! Each run gets a fresh profile inside the scenario's [`Env`], the flags that keep it off the
//! network it would otherwise try (Google hosts for updates, sync, field trials), and a deadline:
//! the whole process group is killed after [`DEADLINE`]. A machine without chromium fails the
//! test with what to install; `.ci/run` installs it.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{Env, collect_output, wait_until};

/// Longest a single page load may take, start-up included (about 2 s on an idle machine).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The browser binary; panics with what to install when there is none.
pub fn binary() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("chromium is not installed: run `apt-get install -y chromium` (.ci/run installs it)")
        })
}

/// Loads `url` with the extra `flags` and returns the DOM Chromium dumped after the load.
pub fn dump_dom(env: &Env, url: &str, flags: &[&str]) -> String {
    let profile = tempfile::Builder::new().prefix("chromium").tempdir_in(env.path()).expect("profile dir");
    let mut cmd = Command::new(binary());
    cmd.env_clear()
        .envs(env.vars())
        .args([
            "--headless",
            // Root cannot use the sandbox; the pages are the test's own.
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(flags)
        .arg("--dump-dom")
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so a timeout kills the renderer and helper processes too.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().expect("spawn chromium");
    let (stdout, stderr) = (Arc::new(Mutex::new(String::new())), Arc::new(Mutex::new(String::new())));
    if let Some(out) = child.stdout.take() {
        collect_output(out, Arc::clone(&stdout));
    }
    if let Some(err) = child.stderr.take() {
        collect_output(err, Arc::clone(&stderr));
    }
    let mut status = None;
    let done = wait_until(DEADLINE, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    });
    if !done {
        // The process group we created for this child.
        let group = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::SIGKILL);
        let _ = child.wait();
    }
    let text = |log: &Arc<Mutex<String>>| log.lock().map(|l| l.clone()).unwrap_or_default();
    // The reader threads end at EOF, shortly after the exit.
    wait_until(Duration::from_secs(5), || text(&stdout).contains("</html>"));
    assert!(done, "chromium did not finish loading {url} within {DEADLINE:?}\n{}", text(&stderr));
    let dom = text(&stdout);
    assert!(
        status.is_some_and(|s| s.success()) && dom.contains("</html>"),
        "chromium failed on {url} ({status:?}):\n{}\n{dom}",
        text(&stderr)
    );
    dom
}
