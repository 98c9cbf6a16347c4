//! [`Carried`]: the byte stream a nested hop's SSH session runs over, a channel of the hop before
//! it, with that hop's session loop kept out of the nested one's way in both directions.
//!
//! # Why
//! russh's session loop hands each incoming data packet to its channel's bounded queue and waits
//! while the queue is full; and a channel's writer waits for room in its session's queue of ten
//! messages (russh `client::connect_stream`, `channel(10)`), which only that same loop empties. A
//! nested session reads its transport from such a channel and writes to it from its own loop. So
//! when the outer loop waits for the nested session to read, while the nested loop waits to write
//! (a window adjust, an answer), neither moves again: both sessions and every channel through them
//! stand still until a keepalive gives up on the chain. When it was found the vendored russh re-opened
//! windows every three packets (vendor/README.md), so during a download the nested loop wrote
//! about a thousand times a second at 1 Gbit/s; `bench/shaped.sh` (25 ms each way, 1 Gbit/s) froze within seconds
//! (requests timed out, the download fell to 8 MB/s, "no answer to a keepalive").
//!
//! Here the nested session's writes never wait on the outer loop: they go to a queue that a task
//! of their own hands to the channel. The outer loop may still wait for the nested session to read
//! (a task takes the channel's packets into a buffer of `carrier_buffer` bytes,
//! `TransportSettings`, and waits when it is full), and that is back-pressure, not a deadlock: the nested session reads on, since nothing it
//! does waits for the outer loop.
//!
//! What the write queue can hold is bounded by the SSH protocol, not here: data only within the
//! windows the far sshd grants our channels, and the rest are small control messages.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use kharon_relay::ChunkQueue;
use russh::client::Msg;
use russh::{Channel, ChannelMsg};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc;

use crate::flow::packets::{fill, fitting, within};
use crate::settings::TransportSettings;
use crate::transport::backlog::Layer;

/// A channel of the outer hop as the nested hop's transport.
pub(crate) struct Carried {
    inbound: mpsc::Receiver<Bytes>,
    /// What was received and not yet read.
    queued: ChunkQueue,
    /// `None` once shut down.
    outbound: Option<mpsc::UnboundedSender<Bytes>>,
    /// The packet a reader's batch is counted in (`FlowSettings::packet`).
    packet: u32,
    /// What is queued for the outer channel and not yet taken by it (backlog.rs).
    layer: Arc<Layer>,
}

impl Carried {
    /// `largest`: the largest packet the outer session's jump host may send; `packet`: the one
    /// a reader's batch is counted in.
    pub(crate) fn new(
        channel: Channel<Msg>,
        largest: u32,
        layer: Arc<Layer>,
        settings: &TransportSettings,
        packet: u32,
    ) -> Self {
        let (mut read_half, write_half) = channel.split();
        let (to_reader, inbound) = mpsc::channel(within(settings.carrier_buffer, largest));
        tokio::spawn(async move {
            loop {
                // A nested session that ended takes nothing more: the task ends with it.
                let msg = tokio::select! {
                    _ = to_reader.closed() => break,
                    msg = read_half.wait() => msg,
                };
                match msg {
                    Some(ChannelMsg::Data { data }) => {
                        if to_reader.send(data).await.is_err() {
                            break;
                        }
                    }
                    // The reader sees the end of the stream once it has taken what is buffered.
                    None | Some(ChannelMsg::Eof | ChannelMsg::Close) => break,
                    Some(_) => {}
                }
            }
        });
        let (outbound, mut from_writer) = mpsc::unbounded_channel::<Bytes>();
        let passed = layer.clone();
        tokio::spawn(async move {
            let mut writer = write_half.make_writer();
            while let Some(data) = from_writer.recv().await {
                if writer.write_all(&data).await.is_err() {
                    return;
                }
                passed.passed_on(data.len());
            }
            // The nested session shut its transport down (or dropped it): EOF to the far side.
            let _ = writer.shutdown().await;
        });
        Carried { inbound, queued: ChunkQueue::default(), outbound: Some(outbound), packet, layer }
    }
}

impl AsyncRead for Carried {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        // The same fill as a tunnel's (an empty packet is legal and must not read as the end);
        // no more packets than the caller's buffer can take.
        if ready!(fill(&mut this.queued, &mut this.inbound, cx, fitting(buf.remaining(), this.packet))) {
            this.queued.copy_to(buf);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Carried {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        // Counted before the task can take it (it runs on another thread): the count then errs
        // towards more held, never less (backlog.rs, "Two totals").
        self.layer.appended(buf.len());
        let sent = self.outbound.as_ref().is_some_and(|out| out.send(Bytes::copy_from_slice(buf)).is_ok());
        if !sent {
            // Nothing will take it: not held either.
            self.layer.passed_on(buf.len());
            return Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the outer hop's channel is closed",
            )));
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Queued is as far as a write goes here; the task hands it on in order.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.outbound = None;
        Poll::Ready(Ok(()))
    }
}
