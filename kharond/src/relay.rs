//! Moves bytes between the SOCKS client and its upstream until both directions are closed.
//!
//! Two shapes, one contract (both honour half-close: when one side shuts down writing, the other
//! direction is still delivered in full, and the byte counts come back as a [`Transfer`]):
//! - [`tcp`]: TCP ↔ TCP (the direct path). On Linux this is splice(2) through a kernel pipe, so
//!   payload never enters user space (targets.md §0: 1.7–3× a userspace copy); elsewhere a copy
//!   with large buffers.
//! - [`stream`]: TCP ↔ any stream (an SSH channel), a copy with large buffers. The channel side
//!   protects its shared session from slow readers itself (ssh/tunnel.rs, crates.md §1.8); an
//!   extra buffering task here measured 0.67× `ssh -D` throughput against 0.96× without it.
//!
//! Imports nothing from kharon.

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Bytes moved each way. `up` is client → target, `down` is target → client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    pub up: u64,
    pub down: u64,
}

/// Buffer size of the portable copy path; large enough that syscalls are not the bottleneck.
#[cfg_attr(target_os = "linux", allow(dead_code))]
const COPY_BUFFER: usize = 256 * 1024;

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

/// Relays between a TCP client and any upstream stream until both directions finish.
pub async fn stream<U>(client: &mut TcpStream, upstream: &mut U) -> std::io::Result<Transfer>
where
    U: AsyncRead + AsyncWrite + Unpin,
{
    let (up, down) =
        tokio::io::copy_bidirectional_with_sizes(client, upstream, COPY_BUFFER, COPY_BUFFER).await?;
    Ok(Transfer { up, down })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
        (a.unwrap(), b.unwrap().0)
    }

    /// The client half-closes after sending; the target still answers in full.
    async fn half_close_delivers_reply(generic_path: bool) {
        let (mut client, mut proxy_side) = pair().await;
        let (mut upstream, mut target) = pair().await;
        let relay = tokio::spawn(async move {
            if generic_path {
                stream(&mut proxy_side, &mut upstream).await.unwrap()
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
    async fn stream_relay_delivers_other_direction_after_half_close() {
        half_close_delivers_reply(true).await;
    }
}
