//! The first hop's transport as russh sees it: reads in large gulps, and writes gathered until the
//! session would wait for input.
//!
//! # Why gather writes
//! russh's session loop handles one event per turn (one incoming packet, or the messages its
//! channels queued) and flushes after each turn. Under many short connections that is one
//! `sendto` per CHANNEL_OPEN, per request, per EOF and per CLOSE answer: measured with
//! `perf stat` in the 64-worker rate phase of `bench/routed.sh`, 2.9 writes to sshd per routed
//! connection, each also paying for loopback delivery into sshd and one more read there, while
//! the reads were already down to 0.13 per connection thanks to the large read buffer.
//!
//! So a write here only appends to a buffer, and a flush does not send. What was gathered goes to
//! the socket when the session has taken everything it read (its read buffer is empty), which
//! the loop reaches every turn it has nothing else to do: answers to a burst of packets leave in
//! one write. If more has arrived by then, it goes at once (a window adjustment must not wait
//! behind a bulk download). If nothing has, the session is about to wait; when other channels of
//! the jump host are open, the task first yields once (it wakes itself, and the runtime runs the tasks
//! already queued before it), so the channels about to speak join the same write: 0.6 writes per
//! routed connection instead of 1.9 without the yield. With one channel there is no one to wait
//! for, and the yield is not free: the self-wake also wakes an idle worker thread, which cost a
//! bulk download 8-10 % of its throughput (same-run A/B on `bench/routed.sh`'s rig). tokio's
//! `yield_now`, which wakes no other thread, batched less (1.3 writes per connection).
//!
//! Bounded: past `gather_limit` bytes waiting (`TransportSettings`), a write first pushes them out, and waits for the
//! socket when it cannot take them (a bulk upload is paced by the socket as before). Shutting
//! down sends everything first.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, BufReader, ReadBuf};

use crate::settings::TransportSettings;
use crate::transport::backlog::Layer;

/// `inner` with a read buffer and gathered writes (see the module doc).
pub struct Gathered<S> {
    inner: BufReader<S>,
    /// `out[sent..]` is gathered and not yet written.
    out: Vec<u8>,
    sent: usize,
    /// Bytes gathered at most before a write waits for the socket.
    limit: usize,
    /// Whether the session already yielded once for what is gathered (see the module doc).
    yielded: bool,
    /// The jump host's open channels: the yield only pays when there are others to wait for.
    channels: Arc<AtomicU32>,
    /// What is gathered and not yet written, for the session's writer (backlog.rs).
    layer: Arc<Layer>,
}

impl<S: AsyncRead> Gathered<S> {
    /// `channels`: how many channels the jump host has open (its tunnels count them).
    pub fn new(inner: S, channels: Arc<AtomicU32>, layer: Arc<Layer>, settings: &TransportSettings) -> Self {
        Self::with_sizes(inner, settings.read_buffer, settings.gather_limit, channels, layer)
    }

    fn with_sizes(
        inner: S,
        read_buffer: usize,
        limit: usize,
        channels: Arc<AtomicU32>,
        layer: Arc<Layer>,
    ) -> Self {
        Gathered {
            inner: BufReader::with_capacity(read_buffer, inner),
            out: Vec::new(),
            sent: 0,
            limit,
            yielded: false,
            channels,
            layer,
        }
    }

    fn gathered(&self) -> usize {
        self.out.len() - self.sent
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Gathered<S> {
    /// Writes what is gathered until all is sent (`Ready`) or the socket is full (`Pending`, with
    /// this task registered for when it can take more).
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.out.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.out[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
            self.layer.passed_on(n);
        }
        self.out.clear();
        self.sent = 0;
        self.yielded = false;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Gathered<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.inner.buffer().is_empty() || this.gathered() == 0 {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        // The session has taken all it read, so this reads the socket: send now, or yield once
        // first if it is about to wait and other channels may join (see the module doc).
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if read.is_pending() && !this.yielded && this.channels.load(Ordering::Relaxed) > 1 {
            this.yielded = true;
            cx.waker().wake_by_ref();
        } else if let Poll::Ready(Err(e)) = this.poll_send(cx) {
            return Poll::Ready(Err(e));
        }
        read
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Gathered<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.gathered() >= this.limit {
            // Push out what we can; wait only while the socket cannot take the backlog.
            if let Poll::Ready(Err(e)) = this.poll_send(cx) {
                return Poll::Ready(Err(e));
            }
            if this.gathered() >= this.limit {
                return Poll::Pending;
            }
        }
        this.out.extend_from_slice(data);
        this.layer.appended(data.len());
        Poll::Ready(Ok(data.len()))
    }

    /// Sends nothing: gathered bytes leave when the session next reads (see the module doc).
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_send(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    const GATHER_LIMIT: usize = 256 * 1024;

    #[tokio::test]
    async fn writes_wait_for_the_next_read_then_leave_together_after_one_yield() {
        let (near, mut far) = duplex(1 << 20);
        // Two channels open: worth waiting for the other one.
        let channels = Arc::new(AtomicU32::new(2));
        let mut link = Gathered::new(near, channels.clone(), Arc::default(), &TransportSettings::default());
        link.write_all(b"open ").await.unwrap();
        link.flush().await.unwrap();
        link.write_all(b"data").await.unwrap();
        link.flush().await.unwrap();
        let mut probe = [0u8; 16];
        let nothing = tokio::time::timeout(std::time::Duration::from_millis(50), far.read(&mut probe)).await;
        assert!(nothing.is_err(), "a flush alone sent something");

        // The session waits for input: first a yield (nothing sent), then everything at once.
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 8];
        let mut read = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut link).poll_read(&mut cx, &mut read).is_pending());
        assert_eq!(link.gathered(), 9, "the first wait only yields");
        assert!(Pin::new(&mut link).poll_read(&mut cx, &mut read).is_pending());
        assert_eq!(link.gathered(), 0);
        let n = far.read(&mut probe).await.unwrap();
        assert_eq!(&probe[..n], b"open data");

        // Input still arrives in order, through the read buffer.
        far.write_all(b"confirm").await.unwrap();
        let mut got = [0u8; 7];
        link.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"confirm");

        // With more to read, what is gathered goes at once, before the input is handed over.
        link.write_all(b"adjust").await.unwrap();
        link.flush().await.unwrap();
        far.write_all(b"more").await.unwrap();
        let mut more = [0u8; 4];
        let mut read = ReadBuf::new(&mut more);
        // The duplex holds "more" already: the first poll reads it, with no yield.
        assert!(matches!(Pin::new(&mut link).poll_read(&mut cx, &mut read), Poll::Ready(Ok(()))));
        assert_eq!((read.filled(), link.gathered()), (&b"more"[..], 0));
        let n = far.read(&mut probe).await.unwrap();
        assert_eq!(&probe[..n], b"adjust");

        // With one channel open there is no one to wait for: no yield.
        channels.store(1, Ordering::Relaxed);
        link.write_all(b"alone").await.unwrap();
        let mut read = ReadBuf::new(&mut buf);
        assert!(Pin::new(&mut link).poll_read(&mut cx, &mut read).is_pending());
        assert_eq!(link.gathered(), 0, "a lone channel's write waited for a yield");
        let n = far.read(&mut probe).await.unwrap();
        assert_eq!(&probe[..n], b"alone");
    }

    #[tokio::test]
    async fn a_backlog_past_the_limit_waits_for_the_socket_and_shutdown_sends_it_all() {
        let (near, mut far) = duplex(64 * 1024);
        let layer: Arc<Layer> = Arc::default();
        let mut link =
            Gathered::with_sizes(near, 1024, GATHER_LIMIT, Arc::new(AtomicU32::new(1)), layer.clone());
        let chunk = vec![7u8; 32 * 1024];
        // The peer reads nothing yet: the backlog grows to the limit, then writes wait.
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut accepted = 0;
        while let Poll::Ready(n) = Pin::new(&mut link).poll_write(&mut cx, &chunk) {
            accepted += n.unwrap();
            assert!(accepted <= GATHER_LIMIT + 64 * 1024 + chunk.len(), "never waited: {accepted}");
        }
        assert!(accepted >= GATHER_LIMIT);
        let reader = tokio::spawn(async move {
            let mut all = Vec::new();
            far.read_to_end(&mut all).await.unwrap();
            all
        });
        poll_fn(|cx| Pin::new(&mut link).poll_shutdown(cx)).await.unwrap();
        let all = reader.await.unwrap();
        assert_eq!(all.len(), accepted);
        assert!(all.iter().all(|b| *b == 7));
    }
}
