//! Both directions of a user-space relay in one future, with buffers that cost nothing until data
//! moves and grow only for a stream that fills them.
//!
//! Why not `tokio::io::copy_bidirectional_with_sizes`: it allocates its buffers up front and
//! zeroes them. With the 256 KiB a bulk download needs, every routed connection would pay for
//! 512 KiB of fresh pages: in a routed connection-rate run (64 workers, `bench/routed.sh`) that
//! memset and its page faults take 30 % of kharond's CPU, and an idle routed connection keeps the
//! buffers. Here a direction's buffer starts at [`START`], is allocated uninitialised (`BytesMut`,
//! filled by `tokio_util::io::poll_read_buf`), doubles up to [`MAX`] each time a read fills it,
//! and is given back whenever the direction waits with nothing buffered, so an idle connection
//! holds no buffer at all. A first buffer given back is kept for the next one on this thread
//! (`spare.rs`).
//!
//! The contract is the one of the rest of the relay: when one side ends its stream, the other
//! side's writing half is shut down after everything read was written, and the other direction
//! goes on until it ends too (half-close). The first error ends both directions.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};

use super::counters::{Counters, Way};
use super::spare;

/// A direction's first buffer: a small request or response fits in one read.
pub const START: usize = spare::SIZE;
/// The most a direction's buffer grows to: large enough that syscalls are not the bottleneck of
/// a bulk transfer.
pub const MAX: usize = 256 * 1024;

/// Copies `a` → `b` and `b` → `a` until both directions have ended; returns the bytes written
/// each way (`a` → `b`, `b` → `a`), and counts each write into `counters` (`a` → `b` is up).
/// The direct path's relay where there is no splice(2); on Linux only its tests use both
/// directions, and the routed relay uses [`Direction`] for its up direction (`chunked.rs`).
#[cfg(any(test, not(target_os = "linux")))]
pub async fn bidirectional<A, B>(a: &mut A, b: &mut B, counters: &Counters) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Unpin + ?Sized,
{
    let (mut forward, mut back) = (Direction::default(), Direction::default());
    std::future::poll_fn(|cx| {
        let ab = forward.poll(cx, Pin::new(&mut *a), Pin::new(&mut *b), counters, Way::Up)?;
        let ba = back.poll(cx, Pin::new(&mut *b), Pin::new(&mut *a), counters, Way::Down)?;
        match (ab, ba) {
            (Poll::Ready(up), Poll::Ready(down)) => Poll::Ready(Ok((up, down))),
            _ => Poll::Pending,
        }
    })
    .await
}

/// One direction's progress.
#[derive(Debug)]
pub(super) struct Direction {
    /// Read but not yet written; `None` while the direction waits with nothing buffered.
    buffer: Option<BytesMut>,
    /// The size of the next buffer allocated.
    size: usize,
    written: u64,
    state: Stage,
}

/// Where a direction is in its life; shared with `chunked.rs`'s direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Stage {
    #[default]
    Copying,
    /// The reader ended; what is buffered is written, then the writer is shut down.
    ShuttingDown,
    Done,
}

impl Stage {
    /// Past `Copying` (and with nothing left to write): shuts `writer` down once and counts `way`
    /// as ended. `Ready(true)` when the direction is done, `Ready(false)` while it still copies.
    pub(super) fn poll_end<W: AsyncWrite + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        writer: Pin<&mut W>,
        counters: &Counters,
        way: Way,
    ) -> Poll<io::Result<bool>> {
        match self {
            Stage::Copying => Poll::Ready(Ok(false)),
            Stage::ShuttingDown => {
                ready!(writer.poll_shutdown(cx))?;
                counters.end(way);
                *self = Stage::Done;
                Poll::Ready(Ok(true))
            }
            Stage::Done => Poll::Ready(Ok(true)),
        }
    }
}

impl Default for Direction {
    fn default() -> Self {
        Self { buffer: None, size: START, written: 0, state: Stage::Copying }
    }
}

impl Direction {
    pub(super) fn poll<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut reader: Pin<&mut R>,
        mut writer: Pin<&mut W>,
        counters: &Counters,
        way: Way,
    ) -> Poll<io::Result<u64>>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        loop {
            if let Some(buffer) = self.buffer.as_mut().filter(|b| !b.is_empty()) {
                let n = ready!(writer.as_mut().poll_write(cx, buffer))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                buffer.advance(n);
                self.written += n as u64;
                counters.add(way, n as u64);
                continue;
            }
            if ready!(self.state.poll_end(cx, writer.as_mut(), counters, way))? {
                self.give_back();
                return Poll::Ready(Ok(self.written));
            }
            let size = self.size;
            let buffer = self.buffer.get_or_insert_with(|| match size {
                START => spare::take(),
                _ => BytesMut::with_capacity(size),
            });
            // Empty here: rewinding lets the allocation be reused instead of growing it.
            buffer.clear();
            buffer.reserve(size);
            let room = buffer.capacity();
            match tokio_util::io::poll_read_buf(reader.as_mut(), cx, buffer) {
                Poll::Pending => {
                    // Nothing to write while we wait: hand the buffer back, and make sure what
                    // was written reaches the other side before this direction sleeps.
                    self.give_back();
                    ready!(writer.as_mut().poll_flush(cx))?;
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(0)) => self.state = Stage::ShuttingDown,
                Poll::Ready(Ok(n)) => {
                    if n == room && self.size < MAX {
                        self.size = (self.size * 2).min(MAX);
                    }
                }
            }
        }
    }
}

impl Direction {
    /// Drops the buffer; a first one is kept as a spare.
    fn give_back(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            spare::give(buffer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    #[tokio::test]
    async fn both_directions_arrive_whole_and_in_order_with_half_close() {
        let (mut client, mut near) = duplex(MAX * 2);
        let (mut far, mut target) = duplex(MAX * 2);
        let relay =
            tokio::spawn(async move { bidirectional(&mut near, &mut far, &Counters::default()).await });
        let big: Vec<u8> = (0..(4 * MAX)).map(|i| (i % 253) as u8).collect();
        let expected = big.clone();
        let target_task = tokio::spawn(async move {
            let mut request = [0u8; 5];
            target.read_exact(&mut request).await.unwrap();
            target.write_all(&big).await.unwrap();
            target.shutdown().await.unwrap();
            let mut rest = Vec::new();
            target.read_to_end(&mut rest).await.unwrap();
            (request, rest)
        });
        client.write_all(b"hello").await.unwrap();
        let mut got = vec![0u8; expected.len()];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        client.write_all(b" bye").await.unwrap();
        client.shutdown().await.unwrap();
        let (request, rest) = target_task.await.unwrap();
        assert_eq!((&request[..], &rest[..]), (&b"hello"[..], &b" bye"[..]));
        let mut eof = Vec::new();
        client.read_to_end(&mut eof).await.unwrap();
        assert!(eof.is_empty());
        assert_eq!(relay.await.unwrap().unwrap(), (9, 4 * MAX as u64));
    }

    #[test]
    fn a_direction_waiting_with_nothing_buffered_holds_no_buffer_and_one_that_filled_grows() {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut direction = Direction::default();
        let mut reader: &[u8] = &[7u8; START];
        let mut sink = Vec::new();
        // A full read doubles the next buffer; EOF then shuts down and ends the direction.
        let counters = Counters::default();
        let done = direction.poll(&mut cx, Pin::new(&mut reader), Pin::new(&mut sink), &counters, Way::Down);
        assert!(matches!(done, Poll::Ready(Ok(n)) if n == START as u64), "{done:?}");
        assert_eq!(direction.size, 2 * START);
        assert!(direction.buffer.is_none());

        let (mut idle, _keep_open) = duplex(64);
        let mut waiting = Direction::default();
        let pending =
            waiting.poll(&mut cx, Pin::new(&mut idle), Pin::new(&mut Vec::new()), &counters, Way::Up);
        assert!(pending.is_pending());
        assert!(waiting.buffer.is_none(), "an idle direction keeps no buffer");
        assert_eq!(waiting.size, START);
    }

    #[tokio::test]
    async fn an_error_on_either_side_ends_the_relay_with_it() {
        let (mut client, mut near) = duplex(1024);
        let mut broken = Broken;
        client.write_all(b"x").await.unwrap();
        let result = bidirectional(&mut near, &mut broken, &Counters::default()).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
    }

    /// Reads nothing yet, and refuses every write.
    struct Broken;
    impl AsyncRead for Broken {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            _: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            Poll::Pending
        }
    }
    impl AsyncWrite for Broken {
        fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, _: &[u8]) -> Poll<io::Result<usize>> {
            Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }
}
