//! Runs the built `kharonctl` with a scenario's environment and captures what it printed.

use std::process::Command;

use crate::Env;

/// What a kharonctl run printed and how it exited.
#[derive(Debug)]
pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// stdout parsed as JSON (for `-o json`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", self.stdout, self.stderr))
    }
}

/// `kharonctl ARGS` with the env's variables and control socket and nothing else from ours, not
/// started: for a scenario that needs its own stdio, variables or a pseudo-terminal.
pub fn command(env: &Env, args: &[&str]) -> Command {
    let mut cmd = Command::new(crate::bin("kharonctl"));
    cmd.env_clear().envs(env.vars()).env("KHARON_CONTROL_SOCKET", env.control_socket()).args(args);
    cmd
}

/// Runs `kharonctl ARGS` with the env's variables (and `extra`).
pub fn run_with(env: &Env, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = command(env, args);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run kharonctl");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// [`run_with`] started in `cwd` (where a `.env` is looked for, and relative paths start).
pub fn run_in(env: &Env, cwd: &std::path::Path, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = command(env, args);
    cmd.current_dir(cwd);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run kharonctl");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn run(env: &Env, args: &[&str]) -> Output {
    run_with(env, args, &[])
}

/// Runs `kharonctl ARGS` in a network namespace of its own (nothing but a loopback that is down)
/// whose `/etc/hosts` maps each of `names` to 127.0.0.1: kharonctl may try a real server by its
/// real name, and nothing leaves the machine, not even a DNS query. Needs `unshare` (root in CI).
pub fn run_isolated(env: &Env, args: &[&str], names: &[&str]) -> Output {
    let hosts =
        env.write("isolated-hosts", &names.iter().map(|n| format!("127.0.0.1 {n}\n")).collect::<String>());
    let mut cmd = Command::new("unshare");
    cmd.env_clear()
        .envs(env.vars())
        .env("KHARON_CONTROL_SOCKET", env.control_socket())
        .args(["-n", "-m", "sh", "-c", "mount --bind \"$1\" /etc/hosts && shift && exec \"$@\"", "sh"])
        .arg(hosts)
        .arg(crate::bin("kharonctl"))
        .args(args);
    let out = cmd.output().expect("run unshare");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
