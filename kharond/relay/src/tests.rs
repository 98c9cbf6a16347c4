use std::pin::Pin;
use std::task::{Context, Poll, ready};

use super::*;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (a, b) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (a.unwrap(), b.unwrap().0)
}

/// A TCP stream read into owned chunks of varying sizes, as an SSH channel hands over its
/// packets, for the routed relay's shape.
struct Chunking<'s> {
    stream: &'s mut TcpStream,
    queue: ChunkQueue,
    ended: bool,
    reads: usize,
}

impl<'s> Chunking<'s> {
    fn new(stream: &'s mut TcpStream) -> Self {
        Chunking { stream, queue: ChunkQueue::default(), ended: false, reads: 0 }
    }
}

impl Chunked for Chunking<'_> {
    fn poll_chunks<'a>(
        &'a mut self,
        cx: &mut Context<'_>,
        out: &mut [std::io::IoSlice<'a>],
    ) -> Poll<std::io::Result<usize>> {
        // Read until the queue holds a few chunks or the socket has nothing more.
        while !self.ended && self.queue.len() < 3 {
            self.reads += 1;
            let mut chunk = BytesMut::with_capacity(1000 + 3000 * (self.reads % 5));
            match tokio_util::io::poll_read_buf(Pin::new(&mut *self.stream), cx, &mut chunk) {
                Poll::Ready(Ok(0)) => self.ended = true,
                Poll::Ready(Ok(_)) => self.queue.push(chunk.freeze()),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if self.queue.is_empty() => return Poll::Pending,
                Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(self.queue.slices(out)))
    }

    fn consume(&mut self, n: usize) {
        self.queue.consume(n);
    }
}

impl AsyncWrite for Chunking<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.stream).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        ready!(Pin::new(&mut *self.stream).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }
}

#[derive(Clone, Copy)]
enum Path {
    /// [`tcp`]: splice(2) on Linux, the copy elsewhere.
    Splice,
    /// The direct path's copy, as macOS runs it, on any platform.
    Copy,
    Generic,
    #[cfg(target_os = "linux")]
    SpliceWith(&'static pipes::Pipes),
}

/// Relays along `path`, `early` first; the live counters must agree with the totals it returns,
/// and a relay that ended well has ended both ways.
async fn relay(
    path: Path,
    early: &[u8],
    client: &mut TcpStream,
    upstream: &mut TcpStream,
) -> std::io::Result<Transfer> {
    let counters = Counters::default();
    let transfer = match path {
        Path::Splice => tcp(client, upstream, early.to_vec(), &counters).await,
        Path::Copy => {
            let sent = send_early(upstream, early.to_vec(), &counters).await?;
            copied(client, upstream, sent, &counters).await
        }
        Path::Generic => stream(client, &mut Chunking::new(upstream), early.to_vec(), &counters).await,
        #[cfg(target_os = "linux")]
        Path::SpliceWith(pool) => {
            let sent = send_early(upstream, early.to_vec(), &counters).await?;
            let (up, down) = tokio::try_join!(
                splice::one_way(client, upstream, pool, &counters, Way::Up),
                splice::one_way(upstream, client, pool, &counters, Way::Down)
            )?;
            Ok(Transfer { up: sent + up, down })
        }
    }?;
    let counted = Transfer {
        up: counters.up.load(std::sync::atomic::Ordering::Relaxed),
        down: counters.down.load(std::sync::atomic::Ordering::Relaxed),
    };
    assert_eq!(counted, transfer, "live counters disagree with the relay's totals");
    assert!(counters.ended(Way::Up) && counters.ended(Way::Down), "a finished relay ended both ways");
    Ok(transfer)
}

/// The client half-closes after sending; the target gets what the handshake read (early) before
/// the rest, and still answers in full.
async fn half_close_delivers_reply(path: Path) {
    let (mut client, mut proxy_side) = pair().await;
    let (mut upstream, mut target) = pair().await;
    let relay =
        tokio::spawn(async move { relay(path, b"early ", &mut proxy_side, &mut upstream).await.unwrap() });
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
    assert_eq!(target_task.await.unwrap(), b"early request");
    let t = relay.await.unwrap();
    assert_eq!(t, Transfer { up: 13, down: 3 << 20 });
}

#[tokio::test]
async fn tcp_relay_delivers_other_direction_after_half_close() {
    half_close_delivers_reply(Path::Splice).await;
}

#[tokio::test]
async fn copying_tcp_relay_delivers_other_direction_after_half_close() {
    half_close_delivers_reply(Path::Copy).await;
}

#[tokio::test]
async fn stream_relay_delivers_other_direction_after_half_close() {
    half_close_delivers_reply(Path::Generic).await;
}

#[cfg(target_os = "linux")]
mod pool {
    use std::os::fd::AsRawFd;

    use super::*;
    use crate::pipes::Pipes;

    /// A pool of its own per test: the shared one is used by every test running in parallel.
    fn pool(max_idle: usize, max_open: usize) -> &'static Pipes {
        Box::leak(Box::new(Pipes::new(max_idle, max_open)))
    }

    #[test]
    fn an_empty_pipe_goes_back_to_the_pool_and_is_leased_again() {
        let pipes = pool(4, 8);
        let lease = pipes.lease().unwrap();
        let fd = lease.pipe().read.as_raw_fd();
        assert_eq!(pipes.counts(), (0, 1));
        lease.give_back();
        assert_eq!(pipes.counts(), (1, 1));
        let again = pipes.lease().unwrap();
        assert_eq!(again.pipe().read.as_raw_fd(), fd, "the pooled pipe is reused, not a new one");
        assert_eq!(pipes.counts(), (0, 1));
    }

    #[test]
    fn a_pipe_holding_data_is_closed_not_pooled() {
        let pipes = pool(4, 8);
        let lease = pipes.lease().unwrap();
        assert_eq!(nix::unistd::write(&lease.pipe().write, b"x"), Ok(1));
        // A cycle cut short between fill and drain drops its lease.
        drop(lease);
        assert_eq!(pipes.counts(), (0, 0), "a dirty pipe must not be pooled");
        let fresh = pipes.lease().unwrap();
        assert_eq!(fresh.pipe().pending(), Some(0));
    }

    #[test]
    #[should_panic(expected = "a pipe given back as empty holds bytes")]
    fn giving_back_a_pipe_that_holds_data_is_caught_in_debug_builds() {
        let pipes = pool(4, 8);
        let lease = pipes.lease().unwrap();
        assert_eq!(nix::unistd::write(&lease.pipe().write, b"x"), Ok(1));
        lease.give_back();
    }

    #[test]
    fn a_lease_dropped_mid_cycle_closes_its_pipe() {
        let pipes = pool(4, 8);
        drop(pipes.lease().unwrap());
        assert_eq!(pipes.counts(), (0, 0));
    }

    #[test]
    fn bounds_on_idle_and_open_pipes_hold() {
        let pipes = pool(2, 3);
        let leases: Vec<_> = (0..3).map(|_| pipes.lease().unwrap()).collect();
        assert!(pipes.lease().is_none(), "a fourth pipe exceeds max_open");
        assert_eq!(pipes.counts(), (0, 3));
        for lease in leases {
            lease.give_back();
        }
        assert_eq!(pipes.counts(), (2, 2), "only max_idle pipes stay in the pool");
    }

    /// With no pipe to be had, every cycle copies through user space, half-close included.
    #[tokio::test]
    async fn relay_without_pipes_copies_and_keeps_half_close() {
        let pipes = pool(0, 0);
        half_close_delivers_reply(Path::SpliceWith(pipes)).await;
        assert_eq!(pipes.counts(), (0, 0));
    }

    /// A relay holds pipes only while data moves: once both sides are quiet every pipe is back.
    #[tokio::test]
    async fn idle_connection_holds_no_pipe() {
        let pipes = pool(4, 8);
        let (mut client, mut proxy_side) = pair().await;
        let (mut upstream, mut target) = pair().await;
        let relay =
            tokio::spawn(
                async move { relay(Path::SpliceWith(pipes), b"", &mut proxy_side, &mut upstream).await },
            );
        // Rounds large enough to be spliced (a read fills the first, small buffer).
        const ROUND: usize = 1 << 20;
        for round in 0..3u8 {
            let (sent, mut got) = (vec![round; ROUND], vec![0u8; ROUND]);
            let (written, read) = tokio::join!(client.write_all(&sent), target.read_exact(&mut got));
            written.unwrap();
            read.unwrap();
            let mut back = vec![0u8; ROUND];
            let (written, read) = tokio::join!(target.write_all(&got), client.read_exact(&mut back));
            written.unwrap();
            read.unwrap();
            assert_eq!(back, sent);
            // Both directions are now waiting for their source.
            let (idle, open) = pipes.counts();
            assert_eq!(idle, open, "no pipe is leased while the connection is idle");
        }
        drop(client);
        drop(target);
        let _ = relay.await.unwrap();
        let (idle, open) = pipes.counts();
        assert_eq!(idle, open);
    }

    /// A short exchange (a request, its reply, both ends closed) is copied and needs no pipe; a
    /// stream is spliced.
    #[tokio::test]
    async fn a_short_exchange_is_copied_and_a_stream_spliced() {
        let pipes = pool(4, 8);
        let (mut client, mut proxy_side) = pair().await;
        let (mut upstream, mut target) = pair().await;
        let relaying = tokio::spawn(async move {
            relay(Path::SpliceWith(pipes), b"GET", &mut proxy_side, &mut upstream).await.unwrap()
        });
        client.write_all(b" /\r\n").await.unwrap();
        let mut request = [0u8; 7];
        target.read_exact(&mut request).await.unwrap();
        assert_eq!(&request, b"GET /\r\n");
        target.write_all(b"200 OK").await.unwrap();
        drop(target);
        let mut reply = Vec::new();
        client.read_to_end(&mut reply).await.unwrap();
        assert_eq!(reply, b"200 OK");
        drop(client);
        assert_eq!(relaying.await.unwrap(), Transfer { up: 7, down: 6 });
        assert_eq!(pipes.counts(), (0, 0), "a short exchange took a pipe");

        let (mut client, mut proxy_side) = pair().await;
        let (mut upstream, mut target) = pair().await;
        let relaying = tokio::spawn(async move {
            relay(Path::SpliceWith(pipes), b"", &mut proxy_side, &mut upstream).await.unwrap()
        });
        let download = vec![9u8; 4 << 20];
        let sent = download.clone();
        let writer = tokio::spawn(async move {
            target.write_all(&sent).await.unwrap();
        });
        let mut got = vec![0u8; download.len()];
        client.read_exact(&mut got).await.unwrap();
        assert!(got == download, "the stream arrived changed");
        writer.await.unwrap();
        drop(client);
        relaying.await.unwrap();
        assert!(pipes.counts().1 > 0, "a 4 MiB stream was never spliced");
    }

    /// The client vanishes with a full pipe of the target's reply still in flight: the relay
    /// fails, and that pipe is closed, so every pooled pipe is empty.
    #[tokio::test]
    async fn pipe_left_with_data_after_an_error_is_not_pooled() {
        let pipes = pool(4, 8);
        let (client, mut proxy_side) = pair().await;
        let (mut upstream, mut target) = pair().await;
        let relay =
            tokio::spawn(
                async move { relay(Path::SpliceWith(pipes), b"", &mut proxy_side, &mut upstream).await },
            );
        // More than the client's receive buffer and the pipe can take: the drain blocks.
        let reply = vec![7u8; 16 << 20];
        let writer = tokio::spawn(async move {
            let _ = target.write_all(&reply).await;
            target
        });
        // Wait until a pipe is out on loan (the drain waits for the client to read).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pipes.counts().1 == pipes.counts().0 {
            assert!(std::time::Instant::now() < deadline, "the relay never leased a pipe");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // A reset, not a FIN: the relay's next write fails.
        socket2::SockRef::from(&client).set_linger(Some(std::time::Duration::ZERO)).unwrap();
        drop(client);
        assert!(relay.await.unwrap().is_err(), "writing to a reset client fails");
        drop(writer.await.unwrap());
        let (idle, open) = pipes.counts();
        assert_eq!(idle, open, "no pipe stays leased after the relay ends");
        let pooled: Vec<_> = (0..idle).map(|_| pipes.lease().unwrap()).collect();
        for lease in &pooled {
            assert_eq!(lease.pipe().pending(), Some(0), "a pooled pipe must be empty");
        }
    }
}
