//! A TCP stream that acknowledges every read at once (TCP_QUICKACK after each read).
//!
//! Why: OpenSSH's sshd leaves Nagle on for non-interactive sessions, so a small packet it sends
//! (a channel-open confirmation, the tail of a response) waits until its previous segment is
//! acknowledged; Linux delays our ACK by up to 40 ms when we have nothing to send back. Measured
//! with bench/routed.sh: every warm routed connection took ~44 ms to open and ~44 ms per small
//! round trip. Linux leaves quick-ack mode on its own, so it is re-armed after every read (one
//! per recv: gather.rs reads the socket through a buffer, not once per SSH packet). Hops
//! behind another hop get the same effect from `chain::Handler::answer`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub struct QuickAck(pub TcpStream);

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
        let result = Pin::new(&mut self.0).poll_read(cx, buf);
        if matches!(result, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            rearm(&self.0);
        }
        result
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, data)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
