//! splice(2) through a kernel pipe: socket → pipe → socket, payload never copied to user space.
//!
//! Written here rather than taken from tokio-splice 0.2.1, which measured at ~35 % of loopback on
//! our 2-core bench: it caps its pipe at 64 KiB, so every 64 KiB costs four syscalls and two
//! wake-ups. A 1 MiB pipe moves a whole socket buffer per call.
//!
//! The pipe is leased from [`Pipes`] for one fill/drain cycle only (see `pipes.rs`): a direction
//! waits for its source with no pipe, so an idle connection holds just its two sockets.

use std::io::{Error, ErrorKind, Result};
use std::os::fd::AsFd;

use nix::fcntl::SpliceFFlags;

use tokio::io::Interest;
use tokio::net::TcpStream;

use super::counters::{Counters, Way};
use super::pipes::Pipes;

/// Buffer of a cycle copied through user space, when no pipe is to be had.
const COPY_CHUNK: usize = 64 * 1024;

/// One splice(2) of up to `len` bytes, without offsets (stream I/O) and without blocking.
fn splice(from: impl AsFd, to: impl AsFd, len: usize) -> Result<usize> {
    let flags = SpliceFFlags::SPLICE_F_MOVE | SpliceFFlags::SPLICE_F_NONBLOCK;
    nix::fcntl::splice(from, None, to, None, len, flags).map_err(Error::from)
}

/// Moves `src` → `dst` until `src` ends, then shuts down `dst`'s write side (half-close). Each
/// cycle's bytes are added to `counters` as `way`.
pub async fn one_way(
    src: &TcpStream,
    dst: &TcpStream,
    pipes: &Pipes,
    counters: &Counters,
    way: Way,
) -> Result<u64> {
    let mut total = 0u64;
    // Only when the pool is out of pipes; made once, on first need, for this direction.
    let mut fallback: Vec<u8> = Vec::new();
    loop {
        src.readable().await?;
        let moved = match pipes.lease() {
            Some(lease) => {
                // Fill: the pipe is empty here, so EAGAIN can only mean "socket has nothing".
                let pipe = lease.pipe();
                let filled = match src.try_io(Interest::READABLE, || splice(src, &pipe.write, pipe.capacity))
                {
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        // A spurious wake-up, rare: the checked give-back costs nothing here.
                        lease.give_back();
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                // Drain: EAGAIN here means the destination's send buffer is full. An error
                // returns with the lease, which closes the pipe and whatever is left in it.
                let mut left = filled;
                while left > 0 {
                    dst.writable().await?;
                    match dst.try_io(Interest::WRITABLE, || splice(&pipe.read, dst, left)) {
                        Ok(0) => return Err(ErrorKind::WriteZero.into()),
                        Ok(n) => left -= n,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
                        Err(e) => return Err(e),
                    }
                }
                lease.give_back_empty();
                filled
            }
            None => match copy_once(src, dst, &mut fallback).await? {
                Some(n) => n,
                None => continue,
            },
        };
        if moved == 0 {
            socket2::SockRef::from(dst).shutdown(std::net::Shutdown::Write).or_else(|e| {
                // The peer may already be gone; the data it got is all it will get.
                if e.kind() == ErrorKind::NotConnected { Ok(()) } else { Err(e) }
            })?;
            counters.end(way);
            return Ok(total);
        }
        total += moved as u64;
        counters.add(way, moved as u64);
    }
}

/// One cycle through user space: what `src` has now (up to [`COPY_CHUNK`]), written in full to
/// `dst`. `None` when `src` turned out to have nothing; `Some(0)` at its end.
async fn copy_once(src: &TcpStream, dst: &TcpStream, buf: &mut Vec<u8>) -> Result<Option<usize>> {
    if buf.is_empty() {
        buf.resize(COPY_CHUNK, 0);
    }
    let read = match src.try_read(buf.as_mut_slice()) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut written = 0;
    while written < read {
        dst.writable().await?;
        match dst.try_write(&buf[written..read]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(Some(read))
}
