//! A request body on its way from the client to the target: read from the client as its head
//! framed it ([`Framing`]), decoded (chunks undone, by httparse's chunk-size parser, the port's one
//! parser), and handed to hyper as plain data ([`Outgoing`]), which frames it again upstream. A
//! body kharond cannot read to its end without guessing is an error, never forwarded as it is.
//!
//! Bounded: a read takes at most [`READ`] bytes, and the channel to hyper holds at most
//! `IN_FLIGHT` of them, so a fast client waits for a slow target rather than filling memory. A
//! chunk-size line may hold at most `MAX_CHUNK_LINE` bytes (extensions included); a trailer
//! section as much as a request head. Trailers are dropped (RFC 9110 §6.5.1 lets an intermediary
//! discard them).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::mpsc;

use super::head::Framing;
use crate::proxy::http::request::{MAX_HEADERS, MAX_REQUEST};

/// The most one read from the client takes.
pub const READ: usize = 16 * 1024;
/// Reads in flight to hyper at most.
const IN_FLIGHT: usize = 2;
/// The longest chunk-size line (size, extensions, CRLF).
const MAX_CHUNK_LINE: usize = 4096;

/// Why a request body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the client closed the connection in the middle of its request body")]
    CutShort,
    #[error("malformed chunked request body: {0}")]
    Chunks(&'static str),
    #[error("the target stopped taking the request body")]
    Gone,
    #[error("reading the request body")]
    Io(#[from] io::Error),
}

/// The body hyper sends upstream: nothing, or what [`pump`] passes on.
pub struct Outgoing {
    rx: Option<mpsc::Receiver<Bytes>>,
    /// Set by the pump once the client's body ended where its framing says; a channel that
    /// closes without it is a broken body, which must not reach the target as a shorter one.
    whole: Arc<AtomicBool>,
    length: Option<u64>,
}

/// The sending side of an [`Outgoing`] body, for [`pump`]; `None` for a request without a body.
pub struct Feed {
    tx: mpsc::Sender<Bytes>,
    whole: Arc<AtomicBool>,
}

/// A body for a request framed as `framing`, and where its data goes in.
pub fn channel(framing: Framing) -> (Option<Feed>, Outgoing) {
    let whole = Arc::new(AtomicBool::new(false));
    let length = match framing {
        Framing::Empty => return (None, Outgoing { rx: None, whole, length: Some(0) }),
        Framing::Length(n) => Some(n),
        Framing::Chunked => None,
    };
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    (Some(Feed { tx, whole: Arc::clone(&whole) }), Outgoing { rx: Some(rx), whole, length })
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let Some(rx) = self.rx.as_mut() else { return Poll::Ready(None) };
        match rx.poll_recv(cx) {
            Poll::Ready(Some(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Poll::Ready(None) if self.whole.load(Ordering::Acquire) => Poll::Ready(None),
            // The pump's own error says why; hyper only needs to abandon the request.
            Poll::Ready(None) => {
                Poll::Ready(Some(Err(io::Error::other("the client's request body broke off"))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.rx.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        self.length.map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

/// Reads the request body framed as `framing` from the client (`input` first: what was read past
/// the head) into `feed`; `input` keeps what was read past the body. Returns how many bytes of
/// data it passed on.
pub async fn pump<R: AsyncRead + Unpin>(
    client: &mut R,
    input: &mut Vec<u8>,
    framing: Framing,
    feed: Option<Feed>,
) -> Result<u64, Error> {
    let Some(feed) = feed else { return Ok(0) };
    let mut passed = 0;
    match framing {
        Framing::Empty => {}
        Framing::Length(n) => data(client, input, n, &feed.tx, &mut passed).await?,
        Framing::Chunked => chunks(client, input, &feed.tx, &mut passed).await?,
    }
    feed.whole.store(true, Ordering::Release);
    Ok(passed)
}

/// Passes on `n` bytes of data.
async fn data<R: AsyncRead + Unpin>(
    client: &mut R,
    input: &mut Vec<u8>,
    mut n: u64,
    feed: &mpsc::Sender<Bytes>,
    passed: &mut u64,
) -> Result<(), Error> {
    while n > 0 {
        if input.is_empty() {
            fill(client, input).await?;
        }
        let take = input.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        let data = Bytes::copy_from_slice(&input[..take]);
        input.drain(..take);
        n -= take as u64;
        *passed += take as u64;
        feed.send(data).await.map_err(|_| Error::Gone)?;
    }
    Ok(())
}

/// Undoes `Transfer-Encoding: chunked` (RFC 9112 §7.1), passing on the data.
async fn chunks<R: AsyncRead + Unpin>(
    client: &mut R,
    input: &mut Vec<u8>,
    feed: &mpsc::Sender<Bytes>,
    passed: &mut u64,
) -> Result<(), Error> {
    loop {
        let size = loop {
            // httparse takes an empty size as 0; RFC 9112 §7.1: chunk-size = 1*HEXDIG.
            if input.first().is_some_and(|b| !b.is_ascii_hexdigit()) {
                return Err(Error::Chunks("a chunk size is not hexadecimal"));
            }
            match httparse::parse_chunk_size(input) {
                Ok(httparse::Status::Complete((len, size))) => {
                    input.drain(..len);
                    break size;
                }
                Ok(httparse::Status::Partial) if input.len() < MAX_CHUNK_LINE => fill(client, input).await?,
                Ok(httparse::Status::Partial) => return Err(Error::Chunks("a chunk-size line is too long")),
                Err(_) => return Err(Error::Chunks("a chunk size is malformed")),
            }
        };
        if size == 0 {
            return trailers(client, input).await;
        }
        data(client, input, size, feed, passed).await?;
        while input.len() < 2 {
            fill(client, input).await?;
        }
        if input[..2] != *b"\r\n" {
            return Err(Error::Chunks("a chunk's data does not end where its size says"));
        }
        input.drain(..2);
    }
}

/// Reads away the trailer section after the last chunk, up to its empty line.
async fn trailers<R: AsyncRead + Unpin>(client: &mut R, input: &mut Vec<u8>) -> Result<(), Error> {
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::parse_headers(input, &mut fields) {
            Ok(httparse::Status::Complete((len, _))) => {
                input.drain(..len);
                return Ok(());
            }
            Ok(httparse::Status::Partial) if input.len() < MAX_REQUEST => fill(client, input).await?,
            Ok(httparse::Status::Partial) | Err(_) => {
                return Err(Error::Chunks("a malformed or too large trailer section"));
            }
        }
    }
}

/// Reads what the client sent next into `input`.
async fn fill<R: AsyncRead + Unpin>(client: &mut R, input: &mut Vec<u8>) -> Result<(), Error> {
    input.reserve(READ);
    let n = (&mut *client).take(READ as u64).read_buf(input).await?;
    if n == 0 {
        return Err(Error::CutShort);
    }
    Ok(())
}
