//! A TCP stream that acknowledges the tail of every burst at once (TCP_QUICKACK after a read
//! that ends in a short segment).
//!
//! Why: OpenSSH's sshd leaves Nagle on for sessions without a pty or X11 forwarding (session.c,
//! `do_exec_no_pty`, calls `ssh_packet_set_interactive` with `s->display != NULL`; a forwarding
//! session never gets there), so a small packet it sends (a channel-open confirmation, the tail of
//! a response, a channel's EOF) waits until its previous small segment is acknowledged; Linux
//! delays our ACK by 40 ms up to a round trip when we have nothing to send back. Measured with
//! bench/routed.sh: every warm routed connection took ~44 ms to open and ~44 ms per small round
//! trip. Linux leaves quick-ack mode on its own, so it is re-armed after such a read (one per
//! recv: gather.rs reads the socket through a buffer, not once per SSH packet). Hops behind
//! another hop get the same effect from `chain::Handler::answer`.
//!
//! Only a read that ends in a short segment re-arms it: a bulk transfer's full segments are
//! acknowledged every second one by Linux already (RFC 1122 §4.2.3.2), and re-arming after each
//! of its reads doubles the ACKs the far side and the link must carry. On 0.5 % loss at 50 Mbit/s
//! that cost a download 3 % of its rate against `ssh -D` (`ONLY=lossy bench/shaped.sh`). A
//! sender under Nagle sends a short segment only at the end of what it has, so a read ending in
//! one is exactly the moment its next small packet waits for our ACK.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub struct QuickAck {
    stream: TcpStream,
    /// The connection's full segment size (TCP_MAXSEG, the same both ways on a path of one MTU);
    /// `None` when unknown, and then every read re-arms.
    segment: Option<usize>,
}

impl QuickAck {
    pub fn new(stream: TcpStream) -> Self {
        let segment = socket2::SockRef::from(&stream).tcp_mss().ok().filter(|&mss| mss > 0);
        QuickAck { stream, segment: segment.map(|mss| mss as usize) }
    }
}

/// Whether a read of `n` bytes ends in a short segment: not a whole number of full `segment`s
/// (always, when the segment size is unknown).
fn ends_short(segment: Option<usize>, n: usize) -> bool {
    segment.is_none_or(|segment| !n.is_multiple_of(segment))
}

fn rearm(stream: &TcpStream) {
    // A failure only costs the delayed ACK this avoids.
    #[cfg(target_os = "linux")]
    let _ = socket2::SockRef::from(stream).set_tcp_quickack(true);
    #[cfg(not(target_os = "linux"))]
    let _ = stream;
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        let read = buf.filled().len() - before;
        if matches!(result, Poll::Ready(Ok(()))) && read > 0 && ends_short(self.segment, read) {
            rearm(&self.stream);
        }
        result
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_read_ending_in_a_short_segment_rearms() {
        // Full segments of a bulk transfer: Linux acknowledges every second one itself.
        assert!(!ends_short(Some(1448), 1448));
        assert!(!ends_short(Some(1448), 20 * 1448));
        // A burst's tail (a confirmation, an EOF, the end of a response): acknowledged at once.
        assert!(ends_short(Some(1448), 120));
        assert!(ends_short(Some(1448), 3 * 1448 + 52));
        // No segment size known: every read, as before any is known.
        assert!(ends_short(None, 1448));
    }

    #[tokio::test]
    async fn a_connected_stream_knows_its_segment_size() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let segment = QuickAck::new(stream).segment;
        assert!(segment.is_some_and(|s| (536..=65_535).contains(&s)), "{segment:?}");
    }
}
