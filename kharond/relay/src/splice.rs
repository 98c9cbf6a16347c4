//! splice(2) through a kernel pipe: socket → pipe → socket, payload never copied to user space.
//!
//! Written here rather than taken from tokio-splice 0.2.1, which caps its pipe at 64 KiB, so every
//! 64 KiB costs four syscalls and two wake-ups: about a third of loopback's throughput on 2 cores
//! in the bulk phase of `bench/direct.sh`, which measures the direct path beside plain loopback.
//! A 1 MiB pipe moves a whole socket buffer per call.
//!
//! The pipe is leased from [`Pipes`] for one fill/drain cycle only (see `pipes.rs`): a direction
//! waits for its source with no pipe, so an idle connection holds just its two sockets.
//!
//! # Small first, splice for streams
//! A direction starts by copying through a spare buffer of [`SMALL`] bytes (`spare.rs`) and
//! moves to splice for good with its first read that fills it. What a short connection sends (a
//! request, a reply, a TLS handshake record) is read and written once each: two splices through a
//! pipe cost the kernel more for a few bytes (the pipe's buffer bookkeeping, the lease), and a
//! plain read tells when it emptied the socket, which spares the read that would find nothing
//! ([`read_small`]). A stream fills the buffer at once and is spliced from then on.

use std::io::{Error, ErrorKind, Read, Result};
use std::os::fd::AsFd;

use nix::fcntl::SpliceFFlags;
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::counters::{Counters, Way};
use super::pipes::Pipes;
use super::spare;

/// Buffer of a cycle copied through user space, when no pipe is to be had.
const COPY_CHUNK: usize = 64 * 1024;
/// Reads shorter than this are copied; the first one that fills it moves the direction to splice.
pub const SMALL: usize = spare::SMALL;

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
    // Whether this direction splices (a read filled a small buffer); until then it copies.
    let mut streaming = false;
    // Only when the pool is out of pipes; made once, on first need, for this direction.
    let mut fallback: Vec<u8> = Vec::new();
    loop {
        src.readable().await?;
        let moved = if streaming {
            match pipes.lease() {
                Some(lease) => match spliced(src, dst, lease).await? {
                    Some(n) => n,
                    None => continue,
                },
                None => {
                    if fallback.is_empty() {
                        fallback.resize(COPY_CHUNK, 0);
                    }
                    match copy_once(src, dst, &mut fallback).await? {
                        Some(n) => n,
                        None => continue,
                    }
                }
            }
        } else {
            let mut buffer = spare::take_small();
            let copied = copy_once(src, dst, &mut buffer).await;
            spare::give_small(buffer);
            match copied? {
                Some(n) => {
                    streaming = n == SMALL;
                    n
                }
                None => continue,
            }
        };
        if moved == 0 {
            // The direction that ends second leaves its FIN to the close that follows (`tcp`'s
            // contract): both sockets have read their end of stream, so the close sends just the
            // FIN this shutdown would, one system call less per connection.
            if !counters.ended(way.reverse()) {
                socket2::SockRef::from(dst).shutdown(std::net::Shutdown::Write).or_else(|e| {
                    // The peer may already be gone; the data it got is all it will get.
                    if e.kind() == ErrorKind::NotConnected { Ok(()) } else { Err(e) }
                })?;
            }
            counters.end(way);
            return Ok(total);
        }
        total += moved as u64;
        counters.add(way, moved as u64);
    }
}

/// One fill/drain cycle through a leased pipe: what `src` has now, all of it into `dst`. `None`
/// when `src` turned out to have nothing; `Some(0)` at its end.
async fn spliced(src: &TcpStream, dst: &TcpStream, lease: super::pipes::Lease<'_>) -> Result<Option<usize>> {
    // Fill: the pipe is empty here, so EAGAIN can only mean "socket has nothing".
    let pipe = lease.pipe();
    let filled = match src.try_io(Interest::READABLE, || splice(src, &pipe.write, pipe.capacity)) {
        Ok(n) => n,
        Err(e) if e.kind() == ErrorKind::WouldBlock => {
            // A readiness left over from the bytes before: nothing moved, so the pipe is as
            // empty as it was leased.
            lease.give_back();
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    // Drain: EAGAIN here means the destination's send buffer is full. An error returns with the
    // lease, which closes the pipe and whatever is left in it.
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
    lease.give_back();
    Ok(Some(filled))
}

/// What `src` has now, up to the buffer's size, without waiting ([`read_small`]). `None` when it
/// had nothing; `Some(0)` at its end.
fn read_small(src: &TcpStream, buf: &mut [u8]) -> Result<Option<usize>> {
    let mut got = 0;
    let read = src.try_io(Interest::READABLE, || {
        got = (&*socket2::SockRef::from(src)).read(buf)?;
        // Fewer bytes than room: TCP's read takes all it has queued, so the socket is empty now.
        // Saying so (WouldBlock) clears its readiness as tokio's own reads do, and as safely:
        // tokio clears it only if no event came in since this read began, and never clears an
        // end of stream. The next wait then sleeps until there is more, where it would otherwise
        // read once more and find nothing.
        if got > 0 && got < buf.len() { Err(ErrorKind::WouldBlock.into()) } else { Ok(got) }
    });
    match read {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.kind() == ErrorKind::WouldBlock => Ok((got > 0).then_some(got)),
        Err(e) => Err(e),
    }
}

/// One cycle through user space: what `src` has now (up to `buf`'s size), written in full to
/// `dst`. `None` when `src` turned out to have nothing; `Some(0)` at its end.
async fn copy_once(src: &TcpStream, dst: &TcpStream, buf: &mut [u8]) -> Result<Option<usize>> {
    let Some(read) = read_small(src, buf)? else { return Ok(None) };
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
