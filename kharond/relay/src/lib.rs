//! Moves bytes between the SOCKS client and its upstream until both directions are closed.
//!
//! Two shapes, one contract (both honour half-close: when one side shuts down writing, the other
//! direction is still delivered in full, and the byte counts come back as a [`Transfer`]):
//! - [`tcp`]: TCP ↔ TCP (the direct path). On Linux a stream is spliced (splice(2)) through a
//!   kernel pipe, so its payload never enters user space (1.7–3× a userspace copy:
//!   docs/performance.md, "Where the targets come from"); the few bytes of a short exchange are
//!   copied, which costs the kernel less (`splice.rs`, "Small first"); elsewhere (macOS)
//!   a copy with buffers that grow to 256 KiB (`copy.rs`), held to the same contract by the same
//!   tests on Linux. The pipes are shared and bounded (`pipes.rs`): a connection holds one
//!   only while data moves, so an idle connection costs its two sockets and nothing more.
//! - [`stream`]: TCP ↔ a stream that receives in owned chunks (an SSH channel): up is a user-space
//!   copy (`copy.rs`), down writes the chunks themselves, several per `writev` (`chunked.rs`). The
//!   channel side protects its shared session from slow readers itself (the SSH engine's tunnel.rs;
//!   docs/ssh-engine.md, "Slow readers"), so this side adds no buffering task: one costs about
//!   a third of the routed throughput against `ssh -D` (`bench/routed.sh`, with `KHAROND=PATH`
//!   for a build that has one).
//!
//! Both take `early`: what the client sent with its request, read by the handshake; it goes
//! upstream first, counted like the rest, and is freed once sent rather than held for the life
//! of the connection.
//!
//! Bytes are counted live in a [`Counters`] the caller owns (the connection registry shows them
//! while the connection runs): one relaxed add per chunk the loops already handle, never per byte,
//! no allocation, no lock.
//!
//! Imports nothing from kharon. Its errors are the sockets' own `std::io::Error`s, shown by the
//! caller.
//!
//! # Layout
//! - `splice.rs`: one direction of the direct path: small reads copied, then one pipe lease per
//!   fill/drain cycle.
//! - `pipes.rs`: the shared pipe pool and its bounds ([`PIPE_DESCRIPTORS`]).
//! - `copy.rs`: both directions of a user-space copy, with buffers allocated only while data moves.
//! - `chunked.rs`: the down direction of [`stream`], from the upstream's own chunks.
//! - `spare.rs`: a few spare buffers per thread for `copy.rs` and `splice.rs`.
//! - `counters.rs`: the live byte counts both shapes add to.

mod chunked;
mod copy;
mod counters;
#[cfg(target_os = "linux")]
mod pipes;
mod spare;
#[cfg(target_os = "linux")]
mod splice;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

pub use chunked::{ChunkQueue, Chunked};
pub use counters::{Counters, Way};

/// The most descriptors the relay holds beyond each connection's two sockets (its shared
/// pipes); the daemon counts them in its descriptor reserve.
#[cfg(target_os = "linux")]
pub const PIPE_DESCRIPTORS: usize = pipes::DESCRIPTORS;
#[cfg(not(target_os = "linux"))]
pub const PIPE_DESCRIPTORS: usize = 0;

/// Bytes moved each way. `up` is client → target, `down` is target → client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Transfer {
    pub up: u64,
    pub down: u64,
}

/// Relays between two TCP streams until both directions finish, `early` first, counting into
/// `counters`. The caller closes both streams once it returns: on Linux the direction that
/// finishes second leaves its half-close (the FIN) to that close.
pub async fn tcp(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    early: Vec<u8>,
    counters: &Counters,
) -> std::io::Result<Transfer> {
    let sent = send_early(upstream, early, counters).await?;
    #[cfg(target_os = "linux")]
    {
        let pipes = &pipes::SHARED;
        let (up, down) = tokio::try_join!(
            splice::one_way(client, upstream, pipes, counters, Way::Up),
            splice::one_way(upstream, client, pipes, counters, Way::Down)
        )?;
        Ok(Transfer { up: sent + up, down })
    }
    #[cfg(not(target_os = "linux"))]
    {
        copied(client, upstream, sent, counters).await
    }
}

/// The direct path where there is no splice(2) (macOS): a user-space copy each way, `sent`
/// bytes of `early` already upstream. Linux tests it over real TCP sockets too (tests.rs).
#[cfg(any(test, not(target_os = "linux")))]
async fn copied(
    client: &mut TcpStream,
    upstream: &mut TcpStream,
    sent: u64,
    counters: &Counters,
) -> std::io::Result<Transfer> {
    let (up, down) = copy::bidirectional(client, upstream, counters).await?;
    Ok(Transfer { up: sent + up, down })
}

/// Relays between a TCP client and an upstream that receives in owned chunks until both
/// directions finish, `early` first, counting into `counters`.
pub async fn stream<U>(
    client: &mut TcpStream,
    upstream: &mut U,
    early: Vec<u8>,
    counters: &Counters,
) -> std::io::Result<Transfer>
where
    U: Chunked + AsyncWrite + Unpin,
{
    let sent = send_early(upstream, early, counters).await?;
    let (up, down) = chunked::bidirectional(client, upstream, counters).await?;
    Ok(Transfer { up: sent + up, down })
}

/// Writes what the client sent with its request upstream, before anything else it sends.
async fn send_early<U: AsyncWrite + Unpin>(
    upstream: &mut U,
    early: Vec<u8>,
    counters: &Counters,
) -> std::io::Result<u64> {
    if early.is_empty() {
        return Ok(0);
    }
    upstream.write_all(&early).await?;
    counters.add(Way::Up, early.len() as u64);
    Ok(early.len() as u64)
}

#[cfg(test)]
mod tests;
