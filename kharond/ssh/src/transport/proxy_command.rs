//! A `ProxyCommand` child as the first hop's transport: `$SHELL -c "exec CMD"`, its stdin/stdout
//! carry the SSH connection, as in OpenSSH (sshconnect.c `ssh_proxy_connect` and
//! `expand_proxy_command`).
//!
//! Owns: spawning the child, the byte stream over its pipes, keeping the tail of its stderr for
//! error messages, and ending it when the stream is dropped (the session ends: a reload that
//! changed the chain, a dead session, kharond's shutdown).
//! Knows nothing of SSH: `chain` runs the handshake over [`Stream`]. `ProxyCommand ssh -W` never
//! gets here; `config` turns it into a native hop.
//!
//! # The whole process group
//! A ProxyCommand is often more than one process: `ssh gw nc %h %p` is a shell and an `ssh`
//! (Debian's dash does not replace itself with the last command of `-c`), and that ssh may run
//! its own ProxyCommand or ProxyJump children. Killing the shell alone would leave the rest
//! running, holding a session on the bastion after every reload and restart. So the child leads a process
//! group of its own (setpgid), and dropping the stream kills that group: everything the command
//! started, except what made itself a new session on purpose (a `ControlPersist` master).
//! The group id stays ours while the leader is unreaped, and nothing reaps it before the drop
//! (tokio reaps only on `wait`, and the dropped child after the kill), so the kill cannot reach
//! another process. OpenSSH sends SIGHUP to the command's pid (`ssh_kill_proxy_command`); a
//! group has no one to hang up on gracefully, so kharond sends SIGKILL, as tokio's `kill_on_drop`
//! did to the shell.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// The child's stderr, its first lines first to go.
#[derive(Debug, Clone)]
pub struct Stderr {
    text: Arc<Mutex<String>>,
    /// The bytes kept at most (`TransportSettings::stderr_tail`).
    limit: usize,
}

impl Stderr {
    fn new(limit: usize) -> Self {
        Stderr { text: Arc::default(), limit }
    }

    /// What the child wrote to stderr so far (its last `limit` bytes), trimmed.
    pub fn tail(&self) -> String {
        self.text.lock().map(|s| s.trim().to_owned()).unwrap_or_default()
    }

    fn push(&self, line: &str) {
        if let Ok(mut s) = self.text.lock() {
            s.push_str(line);
            s.push('\n');
            if s.len() > self.limit {
                let mut cut = s.len() - self.limit;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                s.drain(..cut);
            }
        }
    }
}

/// The child's pipes as one stream. Dropping it kills the child's process group.
pub struct Stream {
    stdout: ChildStdout,
    stdin: ChildStdin,
    child: Child,
}

impl Drop for Stream {
    fn drop(&mut self) {
        // The leader is alive or an unreaped zombie (see the module doc), so its pid is still
        // the group's id.
        if let Some(pid) = self.child.id().and_then(|pid| libc::pid_t::try_from(pid).ok()) {
            // The group is the one this child leads (spawned with process_group(0)).
            let group = nix::unistd::Pid::from_raw(pid);
            if let Err(e) = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL) {
                tracing::debug!(pid, error = %e, "ProxyCommand process group already gone");
            }
        }
    }
}

/// Starts `$SHELL -c "exec command"` (`/bin/sh` without SHELL) with `env` as its whole
/// environment, leading a process group of its own. Its stderr is collected into the returned
/// [`Stderr`] (its last `stderr_tail` bytes; all of it is logged at debug).
pub fn spawn(
    command: &str,
    env: &std::collections::HashMap<String, String>,
    stderr_tail: usize,
) -> std::io::Result<(Stream, Stderr)> {
    let shell = env.get("SHELL").filter(|s| s.starts_with('/')).map_or("/bin/sh", String::as_str);
    let mut child = Command::new(shell)
        .arg("-c")
        .arg(format!("exec {command}"))
        .process_group(0)
        .env_clear()
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("ProxyCommand child has no pipes"));
    };
    let tail = Stderr::new(stderr_tail);
    let sink = tail.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(%line, "ProxyCommand stderr");
            sink.push(&line);
        }
    });
    Ok((Stream { stdout, stdin, child }, tail))
}

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdout).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stdin).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[tokio::test]
    async fn child_pipes_carry_bytes_and_stderr_is_kept() {
        let env = std::collections::HashMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]);
        // ssh runs `exec COMMAND`, so a list needs a shell of its own, as under ssh.
        let (mut s, err) = spawn("sh -c 'echo oops >&2; exec cat'", &env, 2048).unwrap();
        s.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        for _ in 0..100 {
            if !err.tail().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(err.tail(), "oops");
    }

    /// Pids whose command line is `words`, from /proc (a zombie has none, so it does not count).
    fn running(words: &str) -> Vec<u32> {
        let wanted: Vec<u8> = words.split(' ').flat_map(|w| w.bytes().chain([0])).collect();
        std::fs::read_dir("/proc")
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted))
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn until(what: impl Fn() -> bool) -> bool {
        for _ in 0..500 {
            if what() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        false
    }

    #[tokio::test]
    async fn dropping_the_stream_kills_everything_the_command_started() {
        let env = std::collections::HashMap::from([("PATH".to_owned(), "/usr/bin:/bin".to_owned())]);
        // A grandchild in the background and the shell waiting for its foreground command, as
        // `ssh gw nc %h %p` under dash is a shell and an ssh.
        let marker = format!("sleep {}", 40_000 + std::process::id() % 20_000);
        let (stream, _) = spawn(&format!("{marker} & cat"), &env, 2048).unwrap();
        assert!(until(|| !running(&marker).is_empty()).await, "the command did not start");
        drop(stream);
        assert!(until(|| running(&marker).is_empty()).await, "left running: {:?}", running(&marker));
    }

    #[tokio::test]
    async fn a_failing_command_ends_the_stream() {
        let (mut s, err) = spawn("echo 'no route' >&2; exit 1", &Default::default(), 2048).unwrap();
        let mut buf = Vec::new();
        assert_eq!(s.read_to_end(&mut buf).await.unwrap(), 0);
        for _ in 0..100 {
            if !err.tail().is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(err.tail(), "no route");
    }
}
