//! [`Tunnel`]: one direct-tcpip channel as an `AsyncRead + AsyncWrite` byte stream, which never
//! lets a slow reader freeze the session it shares with other channels.
//!
//! # Why a pump (docs/ssh-engine.md, "Slow readers")
//! russh's session loop hands each incoming data packet to its channel's bounded queue and
//! *waits* when that queue is full; it also re-opens the SSH window on receipt, so the server
//! never slows down for us. One channel whose reader stops therefore stalls every channel of the
//! session, keepalives included. So each tunnel has a pump task that takes packets off russh's
//! queue at once and keeps them in its own buffer of up to `tunnel_buffer` bytes
//! (`SessionSettings`). If that buffer stays full for `stalled_grace` (the consumer took nothing
//! meanwhile), the pump gives up on this channel: it closes it and keeps nothing, and the reader
//! gets an error once it has taken what was buffered. Other channels are held up for at most
//! that long. This is the only
//! slow-reader protection: the daemon's relay is a plain copy, so the engine protects its shared
//! sessions whatever the caller does.
//!
//! # Who closes
//! Once both sides have sent EOF, the server is about to send CLOSE, so the pump waits up to
//! `close_wait` for it rather than sending its own. The reason is a hop behind another hop:
//! when our CLOSE crosses the server's, russh drops the server's as belonging to no channel, so
//! nothing answers it (`chain::Handler::answer`); it stays unacknowledged between the two sshd and
//! sshd's Nagle holds the next channel's open confirmation behind it for a delayed ACK, ~40 ms.
//! Measured (`HOPS=2 bench/routed.sh`): 7-9 % of warm connections took 44 ms to open.
//! It also keeps memory flat: russh 0.65 forgets a channel's queue only when the server's CLOSE
//! arrives for a channel still open, which after our own CLOSE it never is, so each channel we
//! closed first kept ~3.7 KiB until its session ended (80 MB after 20,000 connections). That
//! still happens when we must close first: the client went away without EOF, a stalled reader
//! was given up, or no CLOSE came within `close_wait`; the pump counts those on the chain
//! ([`Dialled::note_abandoned`]) and the pool retires a session that has too many.
//!
//! # A session that ends under its channels
//! When a hop's session ends (a transport error, a keepalive timeout, a server that closed it),
//! russh drops every channel without the server's EOF or CLOSE. The pump then hands the reader
//! an error (`ConnectionAborted`, naming the hop and why) once it has taken what was buffered, not
//! an end of stream: a client must not take half a download for a whole one. The daemon resets
//! the client's connection on it.
//!
//! Owns: the pump, the byte and channel counters of its chain. Knows nothing of pooling.

use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use russh::client::Msg;
use russh::{Channel, ChannelMsg, ChannelReadHalf, ChannelWriteHalf};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, oneshot};

use crate::flow::packets::{fill, fitting, within};
use crate::sessions::chain::Dialled;
use crate::sessions::report::DialReport;
use crate::sessions::uplink::Lane;
use crate::settings::Settings;
use kharon_relay::{ChunkQueue, Chunked};

/// Why a channel broke, and the error kind its reader gets (see [`Tunnel`]'s `broken`).
type Broken = Arc<Mutex<Option<(std::io::ErrorKind, String)>>>;

/// Per-chain counters for `Status`.
#[derive(Debug, Default)]
pub struct Counters {
    /// Shared with the first hop's transport, which reads it (gather.rs).
    pub open: Arc<AtomicU32>,
    pub up: AtomicU64,
    pub down: AtomicU64,
}

/// A relayed channel to the target. Counts bytes and open channels for its chain.
pub struct Tunnel {
    inbound: mpsc::Receiver<Bytes>,
    /// Packets taken off `inbound` and not yet handed on.
    queued: ChunkQueue,
    /// Where what the client sends goes: the tunnel's lane of its chain's writer (uplink.rs).
    lane: Lane,
    /// Set by the pump when the channel broke: it gave up on a consumer that stopped reading,
    /// or the session ended under it. What the reader gets once it has taken what was buffered.
    broken: Broken,
    /// Sent (or dropped) with the tunnel: tells the pump to close, and whether we sent EOF.
    dropped: Option<oneshot::Sender<bool>>,
    eof_sent: bool,
    counters: Arc<Counters>,
    /// Keeps the chain's sessions (and a ProxyCommand child) up while the tunnel is used, even if
    /// the pool has dropped or replaced them.
    chain: Arc<Dialled>,
    /// The packet a reader's batch is counted in (`FlowSettings::packet`).
    packet: u32,
    /// How long our EOF may wait for the chain's next open once the server has sent its own
    /// (`SessionSettings::teardown_hold`; uplink.rs, "A teardown goes out with the next open").
    teardown_hold: Duration,
}

/// What the pump waits for, and how long (`SessionSettings`).
#[derive(Debug, Clone, Copy)]
struct Patience {
    /// How long a full buffer waits for its client.
    stalled_grace: Duration,
    /// How long crossed EOFs wait for the server's CLOSE.
    close_wait: Duration,
    /// The buffer, in bytes, for the message that gives up on a client.
    buffer: usize,
}

impl Tunnel {
    pub(crate) fn new(
        channel: Channel<Msg>,
        counters: Arc<Counters>,
        chain: Arc<Dialled>,
        settings: &Settings,
    ) -> Self {
        let (read_half, write_half) = channel.split();
        let write_half = Arc::new(write_half);
        let lane = chain.lane(write_half.clone());
        let buffer = settings.sessions.tunnel_buffer;
        let (tx, inbound) = mpsc::channel(within(buffer, chain.largest_packet()));
        let (dropped_tx, dropped) = oneshot::channel();
        let broken = Broken::default();
        let patience = Patience {
            stalled_grace: settings.sessions.stalled_grace,
            close_wait: settings.sessions.close_wait,
            buffer,
        };
        tokio::spawn(pump(read_half, write_half, tx, broken.clone(), dropped, chain.clone(), patience));
        counters.open.fetch_add(1, Ordering::Relaxed);
        Tunnel {
            inbound,
            queued: ChunkQueue::default(),
            lane,
            broken,
            dropped: Some(dropped_tx),
            eof_sent: false,
            counters,
            chain,
            packet: settings.flow.packet,
            teardown_hold: settings.sessions.teardown_hold,
        }
    }

    /// How the chain this channel was opened on came up (when, and how long each hop took).
    pub fn report(&self) -> DialReport {
        self.chain.report()
    }
}

/// Moves packets from russh's channel queue into the tunnel's buffer until the channel closes,
/// the tunnel is dropped, or the consumer stalls for `stalled_grace`; then sends CLOSE.
/// It keeps taking messages after the target's EOF (window adjustments still arrive there), so
/// russh never waits on this channel.
async fn pump(
    mut read_half: ChannelReadHalf,
    write_half: Arc<ChannelWriteHalf<Msg>>,
    tx: mpsc::Sender<Bytes>,
    broken: Broken,
    mut dropped: oneshot::Receiver<bool>,
    chain: Arc<Dialled>,
    patience: Patience,
) {
    let mut tx = Some(tx);
    // Set once the server said the channel ends (EOF or CLOSE): a channel that russh drops
    // without either went down with its session.
    let mut ended = false;
    // Whether the server's CLOSE is worth waiting for (see "Who closes").
    let wait_for_close = loop {
        let msg = tokio::select! {
            // `tx` is gone once the server sent EOF.
            eof_sent = &mut dropped => break eof_sent.unwrap_or(false) && tx.is_none(),
            msg = read_half.wait() => msg,
        };
        match msg {
            // russh dropped the channel: nothing left to close. Without the server's EOF or
            // CLOSE first, the session ended under it: the reader gets an error, not an end of
            // stream that a client could take for a complete response.
            None => {
                if !ended {
                    let why = chain.ended().unwrap_or_else(|| "the SSH session ended".to_owned());
                    if let Ok(mut s) = broken.lock() {
                        *s = Some((
                            std::io::ErrorKind::ConnectionAborted,
                            format!("the channel's SSH session ended: {why}"),
                        ));
                    }
                }
                return;
            }
            Some(ChannelMsg::Data { data }) => {
                // Bytes flow: the path is worth measuring now (meter.rs).
                chain.kick_flow();
                let Some(sender) = &tx else { continue };
                let data = match sender.try_send(data) {
                    Ok(()) => continue,
                    Err(mpsc::error::TrySendError::Closed(_)) => break false,
                    Err(mpsc::error::TrySendError::Full(data)) => data,
                };
                match tokio::time::timeout(patience.stalled_grace, sender.send(data)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => break false,
                    Err(_) => {
                        let why = format!(
                            "the client read nothing for {:?} with its {} MiB buffer full; \
                             channel closed so the shared SSH session keeps flowing",
                            patience.stalled_grace,
                            patience.buffer >> 20
                        );
                        tracing::warn!("{why}");
                        if let Ok(mut s) = broken.lock() {
                            *s = Some((std::io::ErrorKind::TimedOut, why));
                        }
                        break false;
                    }
                }
            }
            // The reader sees end of stream once it has taken what is buffered.
            Some(ChannelMsg::Eof | ChannelMsg::Close) => {
                ended = true;
                tx = None;
            }
            Some(_) => {}
        }
    };
    if wait_for_close {
        // Still taking messages meanwhile; russh drops the channel once it has answered the CLOSE.
        let drained = async { while read_half.wait().await.is_some() {} };
        if tokio::time::timeout(patience.close_wait, drained).await.is_ok() {
            return;
        }
    }
    // Dropping the read half makes russh discard this channel's data instead of waiting for it.
    drop(read_half);
    chain.note_abandoned();
    let _ = write_half.close().await;
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
        if let Some(dropped) = self.dropped.take() {
            let _ = dropped.send(self.eof_sent);
        }
    }
}

impl Tunnel {
    /// Makes sure a packet is queued, taking what else is already waiting (up to `most` packets
    /// in all): `Ready(Ok(false))` once the channel has ended and everything was handed on.
    fn poll_fill(&mut self, cx: &mut Context<'_>, most: usize) -> Poll<std::io::Result<bool>> {
        if ready!(fill(&mut self.queued, &mut self.inbound, cx, most)) {
            return Poll::Ready(Ok(true));
        }
        let broken = self.broken.lock().ok().and_then(|mut s| s.take());
        Poll::Ready(match broken {
            Some((kind, why)) => Err(std::io::Error::new(kind, why)),
            None => Ok(false),
        })
    }
}

/// The routed relay's down direction: packets go to the client as they are (relay/chunked.rs).
impl Chunked for Tunnel {
    fn poll_chunks<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
        out: &mut [std::io::IoSlice<'a>],
    ) -> Poll<std::io::Result<usize>> {
        if !ready!(self.poll_fill(cx, out.len()))? {
            return Poll::Ready(Ok(0));
        }
        Poll::Ready(Ok(self.queued.slices(out)))
    }

    fn consume(&mut self, n: usize) {
        self.queued.consume(n);
        self.counters.down.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// For callers that want a plain byte stream (an HTTP exchange over the tunnel): a copy.
impl AsyncRead for Tunnel {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if ready!(this.poll_fill(cx, fitting(buf.remaining(), this.packet)))? {
            let moved = this.queued.copy_to(buf);
            this.counters.down.fetch_add(moved as u64, Ordering::Relaxed);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tunnel {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = self.lane.poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.counters.up.fetch_add(*n as u64, Ordering::Relaxed);
        }
        r
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.lane.poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // The pump lets go of the inbound queue once the server sent EOF (or the channel
        // ended): then our EOF is a teardown that nobody waits for, and may wait for an open.
        let hold = self.inbound.is_closed().then_some(self.teardown_hold);
        let r = ready!(self.lane.poll_shutdown(cx, hold));
        self.eof_sent |= r.is_ok();
        Poll::Ready(r)
    }
}
