//! The down direction of a routed relay: an upstream that already holds what it received as owned
//! chunks (an SSH channel's data packets) has them written to the client with one vectored write,
//! straight from where they are.
//!
//! Why: through `copy.rs` every byte of a routed download would be copied once more, from the
//! channel's packets into the relay's buffer, before the write to the client. `perf` on a 1 GiB
//! routed download (`bench/routed.sh`'s rig) puts a sixth of kharond's samples in memmove with
//! that copy, over a third of them in that copy; the rest is russh's own. A `writev` of up to
//! [`WRITE_CHUNKS`] packets keeps the number of writes what the copy's growing buffer makes it.
//!
//! Same contract as `copy.rs`: when the upstream ends, what it offered is written, then the
//! client's writing half is shut down; the first error ends the relay.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::copy;
use super::counters::{Counters, Way};

/// Chunks offered to one vectored write: 16 SSH packets of 32 KiB are 512 KiB, past what the
/// copy's buffer grows to (256 KiB), so a bulk download makes no more writes than the copy would.
pub const WRITE_CHUNKS: usize = 16;

/// A stream whose input comes as owned chunks the relay may write out without copying.
pub trait Chunked {
    /// Fills `out` with up to `out.len()` chunks ready to write, in order, and returns how many;
    /// 0 when the stream has ended. Offers the same chunks again until they are consumed.
    fn poll_chunks<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
        out: &mut [IoSlice<'a>],
    ) -> Poll<io::Result<usize>>;
    /// Drops the first `n` bytes of what [`Chunked::poll_chunks`] offered: they were written.
    fn consume(&mut self, n: usize);
}

/// Received chunks not yet handed on: the queue behind a [`Chunked`] stream, which also serves a
/// plain `AsyncRead` by copying.
#[derive(Debug, Default)]
pub struct ChunkQueue {
    chunks: VecDeque<Bytes>,
}

impl ChunkQueue {
    pub fn is_empty(&self) -> bool {
        self.chunks.is_empty()
    }

    /// How many chunks are queued.
    pub fn len(&self) -> usize {
        self.chunks.len()
    }

    pub fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.chunks.push_back(chunk);
        }
    }

    /// Points `out` at the first queued chunks; returns how many.
    pub fn slices<'a>(&'a self, out: &mut [IoSlice<'a>]) -> usize {
        let mut filled = 0;
        for (slot, chunk) in out.iter_mut().zip(&self.chunks) {
            *slot = IoSlice::new(chunk);
            filled += 1;
        }
        filled
    }

    /// Drops the first `n` queued bytes.
    pub fn consume(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else { return };
            let k = n.min(front.len());
            front.advance(k);
            n -= k;
            if front.is_empty() {
                self.chunks.pop_front();
            }
        }
    }

    /// Copies as much as fits into `buf` and drops it from the queue; returns the bytes copied.
    pub fn copy_to(&mut self, buf: &mut ReadBuf<'_>) -> usize {
        let mut copied = 0;
        while buf.remaining() > 0 {
            let Some(front) = self.chunks.front() else { break };
            let k = front.len().min(buf.remaining());
            buf.put_slice(&front[..k]);
            self.consume(k);
            copied += k;
        }
        copied
    }
}

/// Relays `client` → `upstream` through `copy.rs` and `upstream` → `client` from the upstream's
/// own chunks, until both directions have ended; returns the bytes written each way (up, down).
pub async fn bidirectional<C, U>(
    client: &mut C,
    upstream: &mut U,
    counters: &Counters,
) -> io::Result<(u64, u64)>
where
    C: AsyncRead + AsyncWrite + Unpin + ?Sized,
    U: Chunked + AsyncWrite + Unpin + ?Sized,
{
    let (mut up, mut down) = (copy::Direction::default(), Direction::default());
    poll_fn(|cx| {
        let forward = up.poll(cx, Pin::new(&mut *client), Pin::new(&mut *upstream), counters, Way::Up)?;
        let back = down.poll(cx, &mut *upstream, Pin::new(&mut *client), counters)?;
        match (forward, back) {
            (Poll::Ready(up), Poll::Ready(down)) => Poll::Ready(Ok((up, down))),
            _ => Poll::Pending,
        }
    })
    .await
}

/// The down direction's progress.
#[derive(Debug, Default)]
struct Direction {
    written: u64,
    state: copy::Stage,
}

impl Direction {
    fn poll<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        mut writer: Pin<&mut W>,
        counters: &Counters,
    ) -> Poll<io::Result<u64>>
    where
        R: Chunked + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        loop {
            if ready!(self.state.poll_end(cx, writer.as_mut(), counters, Way::Down))? {
                return Poll::Ready(Ok(self.written));
            }
            let mut slices = [IoSlice::new(&[]); WRITE_CHUNKS];
            let offered = match reader.poll_chunks(cx, &mut slices) {
                Poll::Pending => {
                    // Make sure what was written reaches the client before this direction sleeps.
                    ready!(writer.as_mut().poll_flush(cx))?;
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(0)) => {
                    self.state = copy::Stage::ShuttingDown;
                    continue;
                }
                Poll::Ready(Ok(offered)) => offered,
            };
            let n = ready!(writer.as_mut().poll_write_vectored(cx, &slices[..offered]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            reader.consume(n);
            self.written += n as u64;
            counters.add(Way::Down, n as u64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};

    /// Chunks handed over as they come, then the end.
    struct Source {
        queue: ChunkQueue,
        ended: bool,
        written: Vec<u8>,
    }

    impl Chunked for Source {
        fn poll_chunks<'a>(
            &'a mut self,
            _: &mut Context<'_>,
            out: &mut [IoSlice<'a>],
        ) -> Poll<io::Result<usize>> {
            if self.queue.is_empty() {
                return if self.ended { Poll::Ready(Ok(0)) } else { Poll::Pending };
            }
            Poll::Ready(Ok(self.queue.slices(out)))
        }
        fn consume(&mut self, n: usize) {
            self.queue.consume(n);
        }
    }

    impl AsyncWrite for Source {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
            self.written.extend_from_slice(data);
            Poll::Ready(Ok(data.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn the_queue_offers_its_chunks_in_order_and_consumes_across_them() {
        let mut queue = ChunkQueue::default();
        for chunk in [&b"ab"[..], b"", b"cde", b"f"] {
            queue.push(Bytes::copy_from_slice(chunk));
        }
        assert_eq!(queue.len(), 3, "an empty chunk is not queued");
        let mut out = [IoSlice::new(&[]); 2];
        assert_eq!(queue.slices(&mut out), 2, "no more than `out` holds");
        assert_eq!((&*out[0], &*out[1]), (&b"ab"[..], &b"cde"[..]));
        queue.consume(3);
        let mut out = [IoSlice::new(&[]); 4];
        let n = queue.slices(&mut out);
        assert_eq!(out[..n].iter().map(|s| &**s).collect::<Vec<_>>(), [&b"de"[..], b"f"]);
        let mut bytes = [0u8; 2];
        let mut buf = ReadBuf::new(&mut bytes);
        assert_eq!(queue.copy_to(&mut buf), 2);
        assert_eq!(buf.filled(), b"de");
        assert_eq!(queue.len(), 1);
    }

    #[tokio::test]
    async fn chunks_reach_the_client_whole_and_in_order_through_a_slow_client_then_the_end() {
        // A small pipe to the client: the vectored writes land partly, and often not at all.
        let (mut client, mut near) = duplex(1000);
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut upstream = Source { queue: ChunkQueue::default(), ended: true, written: Vec::new() };
        for piece in payload.chunks(7_777) {
            upstream.queue.push(Bytes::copy_from_slice(piece));
        }
        let counters = Counters::default();
        let reader = tokio::spawn(async move {
            client.write_all(b"request").await.unwrap();
            client.shutdown().await.unwrap();
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        let (up, down) = bidirectional(&mut near, &mut upstream, &counters).await.unwrap();
        assert_eq!(reader.await.unwrap(), payload);
        assert_eq!((up, down), (7, payload.len() as u64));
        assert_eq!(upstream.written, b"request");
        assert!(counters.ended(Way::Up) && counters.ended(Way::Down));
    }
}
