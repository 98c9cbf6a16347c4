//! A `ProxyCommand` child as the first hop's transport: `sh -c CMD`, its stdin/stdout carry the
//! SSH connection, as in OpenSSH.
//!
//! Owns: spawning the child, the byte stream over its pipes, keeping the tail of its stderr for
//! error messages, and killing it when the stream is dropped (the session ends).
//! Knows nothing of SSH: `chain` runs the handshake over [`Stream`]. `ProxyCommand ssh -W` never
//! gets here; `config` turns it into a native hop.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How much of the child's stderr is kept for error messages.
const STDERR_TAIL: usize = 2048;

/// The child's stderr, last lines first to go.
#[derive(Debug, Clone, Default)]
pub struct Stderr(Arc<Mutex<String>>);

impl Stderr {
    /// What the child wrote to stderr so far (its last [`STDERR_TAIL`] bytes), trimmed.
    pub fn tail(&self) -> String {
        self.0.lock().map(|s| s.trim().to_owned()).unwrap_or_default()
    }

    fn push(&self, line: &str) {
        if let Ok(mut s) = self.0.lock() {
            s.push_str(line);
            s.push('\n');
            if s.len() > STDERR_TAIL {
                let mut cut = s.len() - STDERR_TAIL;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                s.drain(..cut);
            }
        }
    }
}

/// The child's pipes as one stream. Dropping it kills the child.
pub struct Stream {
    stdout: ChildStdout,
    stdin: ChildStdin,
    _child: Child,
}

/// Starts `sh -c command` with `env` as its whole environment. Its stderr is collected into
/// the returned [`Stderr`] (and logged at debug).
pub fn spawn(
    command: &str,
    env: &std::collections::HashMap<String, String>,
) -> std::io::Result<(Stream, Stderr)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
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
    let tail = Stderr::default();
    let sink = tail.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!(%line, "ProxyCommand stderr");
            sink.push(&line);
        }
    });
    Ok((Stream { stdout, stdin, _child: child }, tail))
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
        let (mut s, err) = spawn("echo oops >&2; cat", &env).unwrap();
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

    #[tokio::test]
    async fn a_failing_command_ends_the_stream() {
        let (mut s, err) = spawn("echo 'no route' >&2; exit 1", &Default::default()).unwrap();
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
