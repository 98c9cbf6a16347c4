//! Asking a hop's question through the user's `SSH_ASKPASS` program, as ssh does when it has no
//! terminal (ssh(1), ENVIRONMENT; OpenSSH readpass.c, `read_passphrase` and `ssh_askpass`).
//!
//! Whether: kharond has no terminal, so it is where ssh would use the program whenever it may:
//! - `SSH_ASKPASS_REQUIRE=never`: never;
//! - `SSH_ASKPASS_REQUIRE=force`: always, with or without a display;
//! - unset, `prefer` or anything else: when `DISPLAY` or `WAYLAND_DISPLAY` is set and not empty
//!   (`prefer` only matters to a process that has a terminal to prefer it over);
//!
//! and only when `SSH_ASKPASS` names a program. ssh falls back to its compiled-in default
//! (`/usr/X11R6/bin/ssh-askpass` upstream, each distribution's own path); kharond does not guess a
//! program that may not exist or may not be the user's choice. All of it is read from the
//! environment kharond started with (`PoolSettings::env`), like the agent socket: a systemd user
//! service has `DISPLAY` and `SSH_ASKPASS` only when imported (`systemctl --user
//! import-environment DISPLAY SSH_ASKPASS`).
//!
//! How, as ssh: the program runs once per prompt, with the prompt as its only argument, written
//! as ssh writes it: `(user@host) Verification code: ` for keyboard-interactive
//! (sshconnect2.c `input_userauth_info_req`), `user@host's password: ` for a password
//! (`userauth_passwd`), `host` being the hop's `HostKeyAlias` or host name. It gets kharond's
//! environment, no standard input; its answer is its standard output up to the first line break
//! (at most 1023 bytes, as ssh reads them). An exit status other than 0 means no answer (the
//! person cancelled, or there is no display): ssh then sends an empty answer, kharond sends none
//! and the question stays open for `kharonctl login-jump` until it expires.
//!
//! Its standard error is not kept (nothing of the program's may reach a log next to an answer),
//! and it runs in a process group of its own, which is ended when the question no longer needs it
//! (answered through `kharonctl`, expired): a script's dialog goes with the script.

use std::collections::HashMap;
use std::process::Stdio;

use kharon_common::secret::Secret;
use tokio::io::AsyncReadExt as _;
use tokio::process::{Child, Command};

use crate::login::desk::{Answers, Question};

/// What ssh reads of the program's output (its `buf[1024]`, one byte for the terminating NUL).
const MOST: u64 = 1023;

/// The user's SSH_ASKPASS program, when ssh's rules let it ask (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Askpass {
    program: String,
}

/// Why the program gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum Declined {
    #[error("cannot run it")]
    Spawn(#[source] std::io::Error),
    #[error("it exited with {0} (cancelled, or it could not ask)")]
    Status(std::process::ExitStatus),
    #[error("its answer is not UTF-8 text")]
    NotText,
    #[error("reading its answer failed")]
    Read(#[source] std::io::Error),
}

impl Askpass {
    /// The program to ask with, if `env` (kharond's environment at start) says ssh would use one.
    pub fn from_env(env: &HashMap<String, String>) -> Option<Self> {
        let set = |name: &str| env.get(name).filter(|v| !v.is_empty());
        let display = set("DISPLAY").is_some() || set("WAYLAND_DISPLAY").is_some();
        let allowed = match env.get("SSH_ASKPASS_REQUIRE").map(|v| v.to_ascii_lowercase()).as_deref() {
            Some("never") => false,
            Some("force") => true,
            _ => display,
        };
        let program = set("SSH_ASKPASS")?;
        allowed.then(|| Askpass { program: program.clone() })
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    /// Asks each prompt of `question` in turn (`login` is ssh's `user@host` for it); the answers
    /// once every prompt has one.
    pub async fn ask(
        &self,
        env: &HashMap<String, String>,
        question: &Question,
        login: &str,
    ) -> Result<Answers, Declined> {
        let mut answers = Vec::with_capacity(question.prompts.len());
        for prompt in &question.prompts {
            let shown = if question.method == crate::login::desk::PASSWORD {
                format!("{login}'s password: ")
            } else {
                format!("({login}) {}", prompt.text)
            };
            answers.push(self.run(env, &shown).await?);
        }
        Ok(Answers::new(answers))
    }

    async fn run(&self, env: &HashMap<String, String>, prompt: &str) -> Result<Secret, Declined> {
        let child = Command::new(&self.program)
            .arg(prompt)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(Declined::Spawn)?;
        let mut running = Running(child);
        let mut out = Secret::new(Vec::new());
        if let Some(stdout) = running.0.stdout.take() {
            // Room for all of it at once: a growing buffer would leave copies of the answer behind.
            let mut read = Vec::with_capacity(MOST as usize + 1);
            let result = stdout.take(MOST).read_to_end(&mut read).await;
            out = Secret::new(read);
            result.map_err(Declined::Read)?;
        }
        let status = running.0.wait().await.map_err(Declined::Read)?;
        if !status.success() {
            return Err(Declined::Status(status));
        }
        let bytes = out.expose();
        let end = bytes.iter().position(|b| matches!(b, b'\r' | b'\n')).unwrap_or(bytes.len());
        let answer = std::str::from_utf8(&bytes[..end]).map_err(|_| Declined::NotText)?;
        Ok(Secret::from(answer))
    }
}

/// The program while it runs: dropped before it exits (the question was answered elsewhere, or
/// expired), its whole process group is told to end, then the program itself is killed
/// (`kill_on_drop`).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let (Ok(None), Some(pid)) = (self.0.try_wait(), self.0.id())
            && let Ok(group) = i32::try_from(pid)
        {
            // SAFETY: kill(2) with a negative pid signals the process group our child leads
            // (`process_group(0)`); the child has not been reaped (try_wait said it runs), so the
            // group id cannot belong to anyone else.
            unsafe { libc::kill(-group, libc::SIGTERM) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
        vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn ssh_askpass_asks_as_ssh_would_without_a_terminal() {
        let program = ("SSH_ASKPASS", "/usr/bin/ssh-askpass");
        let asks = |vars: &[(&str, &str)]| Askpass::from_env(&env(vars)).map(|a| a.program);
        assert_eq!(asks(&[program, ("DISPLAY", ":0")]).as_deref(), Some("/usr/bin/ssh-askpass"));
        assert!(asks(&[program, ("WAYLAND_DISPLAY", "wayland-0")]).is_some());
        assert!(asks(&[program]).is_none(), "no display");
        assert!(asks(&[program, ("DISPLAY", "")]).is_none(), "an empty DISPLAY is none");
        assert!(asks(&[program, ("SSH_ASKPASS_REQUIRE", "force")]).is_some(), "force: no display needed");
        assert!(asks(&[program, ("SSH_ASKPASS_REQUIRE", "FORCE")]).is_some(), "as ssh, in any case");
        assert!(asks(&[program, ("DISPLAY", ":0"), ("SSH_ASKPASS_REQUIRE", "never")]).is_none());
        assert!(asks(&[program, ("DISPLAY", ":0"), ("SSH_ASKPASS_REQUIRE", "prefer")]).is_some());
        assert!(asks(&[program, ("SSH_ASKPASS_REQUIRE", "prefer")]).is_none(), "prefer needs a display");
        assert!(
            asks(&[("DISPLAY", ":0"), ("SSH_ASKPASS_REQUIRE", "force")]).is_none(),
            "no program, no guess"
        );
    }
}
