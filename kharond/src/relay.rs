//! Moves bytes between the SOCKS client and its upstream until both directions are closed.
//!
//! Two shapes, one contract (both honour half-close: when one side shuts down writing, the other
//! direction is still delivered in full, and the byte counts come back as a [`Transfer`]):
//! - [`tcp`]: TCP ↔ TCP (the direct path). On Linux this is splice(2) through a kernel pipe, so
//!   payload never enters user space (targets.md §0: 1.7–3× a userspace copy); elsewhere a copy
//!   with large buffers.
//! - [`buffered`]: TCP ↔ any stream (an SSH channel). The upstream is drained promptly into a
//!   bounded buffer, and a client that stops reading for longer than the stall limit loses its
//!   connection. Why: russh delivers every channel's data from one session loop, which blocks on
//!   the first channel whose queue is full, freezing every other channel and the keepalives of the
//!   same jump host (crates.md §1.8). Never letting a channel's queue stay full keeps one slow
//!   reader from stalling everyone else.
//!
//! Imports nothing from kharon.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bytes moved each way. `up` is client → target, `down` is target → client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    pub up: u64,
    pub down: u64,
}

/// Buffer size of the portable copy path; large enough that syscalls are not the bottleneck.
const COPY_BUFFER: usize = 256 * 1024;
/// Read size from an SSH channel: a few of its 32 KiB packets at a time.
const DOWN_CHUNK: usize = 64 * 1024;

/// Relays between two TCP streams until both directions finish.
pub async fn tcp(client: &mut TcpStream, upstream: &mut TcpStream) -> std::io::Result<Transfer> {
    #[cfg(target_os = "linux")]
    {
        let (up, down) =
            tokio::try_join!(splice::one_way(client, upstream), splice::one_way(upstream, client))?;
        Ok(Transfer { up, down })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let (up, down) =
            tokio::io::copy_bidirectional_with_sizes(client, upstream, COPY_BUFFER, COPY_BUFFER).await?;
        Ok(Transfer { up, down })
    }
}

/// splice(2) through a kernel pipe: socket → pipe → socket, payload never copied to user space.
///
/// Written here rather than taken from tokio-splice 0.2.1, which measured at ~35 % of loopback on
/// our 2-core bench: it caps its pipe at 64 KiB, so every 64 KiB costs four syscalls and two
/// wake-ups. A 1 MiB pipe moves a whole socket buffer per call.
#[cfg(target_os = "linux")]
mod splice {
    use std::io::{Error, ErrorKind, Result};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use tokio::io::Interest;
    use tokio::net::TcpStream;

    /// Pipe capacity asked for; the kernel may grant less (pipe-max-size), which only costs speed.
    const PIPE_SIZE: libc::c_int = 1 << 20;

    struct Pipe {
        read: OwnedFd,
        write: OwnedFd,
        capacity: usize,
    }

    impl Pipe {
        fn new() -> Result<Self> {
            let mut fds = [0 as RawFd; 2];
            // SAFETY: pipe2 writes two descriptors into the array we own.
            if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
                return Err(Error::last_os_error());
            }
            // SAFETY: both descriptors were just created and are owned by nobody else.
            let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
            // SAFETY: fcntl on a descriptor we own; failure leaves the default size.
            let granted = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
            let capacity = if granted > 0 { granted as usize } else { 64 * 1024 };
            Ok(Self { read, write, capacity })
        }
    }

    fn splice(from: RawFd, to: RawFd, len: usize) -> Result<usize> {
        // SAFETY: plain syscall on descriptors that outlive the call; null offsets = stream I/O.
        let n = unsafe {
            libc::splice(
                from,
                std::ptr::null_mut(),
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
            )
        };
        if n < 0 { Err(Error::last_os_error()) } else { Ok(n as usize) }
    }

    /// Moves `src` → `dst` until `src` ends, then shuts down `dst`'s write side (half-close).
    pub async fn one_way(src: &TcpStream, dst: &TcpStream) -> Result<u64> {
        let pipe = Pipe::new()?;
        let mut total = 0u64;
        loop {
            // Fill: the pipe is empty here, so EAGAIN can only mean "socket has nothing".
            let filled = loop {
                src.readable().await?;
                match src.try_io(Interest::READABLE, || {
                    splice(src.as_raw_fd(), pipe.write.as_raw_fd(), pipe.capacity)
                }) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            };
            if filled == 0 {
                socket2::SockRef::from(dst).shutdown(std::net::Shutdown::Write).or_else(|e| {
                    // The peer may already be gone; the data it got is all it will get.
                    if e.kind() == ErrorKind::NotConnected { Ok(()) } else { Err(e) }
                })?;
                return Ok(total);
            }
            // Drain: EAGAIN here means the destination's send buffer is full.
            let mut left = filled;
            while left > 0 {
                dst.writable().await?;
                match dst.try_io(Interest::WRITABLE, || splice(pipe.read.as_raw_fd(), dst.as_raw_fd(), left))
                {
                    Ok(0) => return Err(ErrorKind::WriteZero.into()),
                    Ok(n) => {
                        left -= n;
                        total += n as u64;
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
}

/// What happened when a [`buffered`] relay ended early.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("client read nothing for {0:?} while {1} bytes waited for it; connection dropped")]
    Stalled(Duration, usize),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Relays between a TCP client and an arbitrary upstream, draining the upstream into a buffer of
/// at most `buffer_limit` bytes. If the client accepts no byte for `stall_limit` while that buffer
/// is full, the relay ends with [`Error::Stalled`] (dropping the upstream closes it).
pub async fn buffered<U>(
    client: &mut TcpStream,
    upstream: U,
    buffer_limit: usize,
    stall_limit: Duration,
) -> Result<Transfer, Error>
where
    U: AsyncRead + AsyncWrite + Unpin + Send,
{
    let (mut client_read, mut client_write) = client.split();
    let (mut up_read, mut up_write) = tokio::io::split(upstream);

    // client → upstream: the upstream (an SSH channel) applies its own window, so a plain copy
    // with a large buffer is right here.
    let upward = async {
        let mut buf = vec![0u8; COPY_BUFFER];
        let mut total = 0u64;
        loop {
            let n = client_read.read(&mut buf).await?;
            if n == 0 {
                up_write.shutdown().await?;
                return Ok::<u64, std::io::Error>(total);
            }
            up_write.write_all(&buf[..n]).await?;
            total += n as u64;
        }
    };

    // upstream → client: a reader that drains the upstream into a bounded queue of chunks, and a
    // writer that feeds the client from it. The reader only ever waits on a full queue, so that
    // wait is exactly "the client took nothing for this long".
    let slots = (buffer_limit / DOWN_CHUNK).max(2);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(slots);
    let drain = async move {
        loop {
            let mut chunk = vec![0u8; DOWN_CHUNK];
            let n = up_read.read(&mut chunk).await?;
            if n == 0 {
                return Ok::<(), Error>(());
            }
            chunk.truncate(n);
            match tokio::time::timeout(stall_limit, tx.send(chunk)).await {
                Err(_) => return Err(Error::Stalled(stall_limit, slots * DOWN_CHUNK)),
                // The writer is gone because the client failed; its error is the one to report.
                Ok(Err(_)) => return Ok(()),
                Ok(Ok(())) => {}
            }
        }
    };
    let feed = async {
        let mut total = 0u64;
        while let Some(chunk) = rx.recv().await {
            client_write.write_all(&chunk).await?;
            total += chunk.len() as u64;
        }
        client_write.shutdown().await?;
        Ok::<u64, Error>(total)
    };
    // try_join: a stalled drain must not wait for a writer that is stuck on that same client.
    let downward = async { tokio::try_join!(drain, feed).map(|((), total)| total) };

    let (up, down) = tokio::try_join!(async { upward.await.map_err(Error::from) }, downward)?;
    Ok(Transfer { up, down })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (a.unwrap(), b.unwrap().0)
    }

    /// The client half-closes after sending; the target still answers in full.
    async fn half_close_delivers_reply(buffered_path: bool) {
        let (mut client, mut proxy_side) = pair().await;
        let (mut upstream, mut target) = pair().await;
        let relay = tokio::spawn(async move {
            if buffered_path {
                buffered(&mut proxy_side, upstream, 1 << 20, Duration::from_secs(5)).await.unwrap()
            } else {
                tcp(&mut proxy_side, &mut upstream).await.unwrap()
            }
        });
        let reply: Vec<u8> = (0..(3 << 20)).map(|i| (i % 251) as u8).collect();
        let expected = reply.clone();
        let target_task = tokio::spawn(async move {
            let mut request = Vec::new();
            target.read_to_end(&mut request).await.unwrap();
            target.write_all(&reply).await.unwrap();
            target.shutdown().await.unwrap();
            request
        });
        client.write_all(b"request").await.unwrap();
        client.shutdown().await.unwrap();
        let mut got = Vec::new();
        client.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, expected);
        assert_eq!(target_task.await.unwrap(), b"request");
        let t = relay.await.unwrap();
        assert_eq!(t, Transfer { up: 7, down: 3 << 20 });
    }

    #[tokio::test]
    async fn tcp_relay_delivers_other_direction_after_half_close() {
        half_close_delivers_reply(false).await;
    }

    #[tokio::test]
    async fn buffered_relay_delivers_other_direction_after_half_close() {
        half_close_delivers_reply(true).await;
    }

    #[tokio::test]
    async fn buffered_relay_drops_a_client_that_stops_reading() {
        let (client, mut proxy_side) = pair().await;
        let (upstream, mut target) = pair().await;
        // The target floods; the client never reads.
        tokio::spawn(async move {
            let chunk = vec![7u8; 64 * 1024];
            while target.write_all(&chunk).await.is_ok() {}
        });
        let started = tokio::time::Instant::now();
        let result = buffered(&mut proxy_side, upstream, 256 * 1024, Duration::from_millis(300)).await;
        assert!(matches!(result, Err(Error::Stalled(..))), "{result:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        drop(client);
    }
}
