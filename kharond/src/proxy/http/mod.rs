//! HTTP on the SOCKS port. A SOCKS5 client's first byte is 0x05, an HTTP request's is a letter,
//! so the listener tells them apart without a second port; then the request line decides:
//! - `CONNECT host:port` is a proxy request ([`connect`]), routed, dialled and relayed exactly
//!   like a SOCKS one;
//! - a request of any method for an absolute `http://` URL (`GET http://host/path`) is a proxy
//!   request too ([`forward`]): routed like a CONNECT, forwarded, its response passed back, and
//!   the connection kept for more;
//! - `GET`/`HEAD /proxy.pac` gets the PAC, rendered once per routing table into one shared buffer
//!   (kept in the table), so it follows reloads;
//! - anything else gets a 4xx or 5xx that says why. The connection is closed after such an answer
//!   (no keep-alive on the PAC path).
//!
//! # One head reader
//! [`read_head`] reads a request head, and not one byte past it: it peeks at what arrived and
//! takes only the bytes up to the head's end. Only the first read of a connection (which tells
//! SOCKS from HTTP, [`handshake::accept`](crate::proxy::handshake::accept)) may have taken more: what a CONNECT
//! client sent right after its head (a TLS ClientHello, without waiting for our 200) is then
//! handed back, and otherwise stays in the socket; either way it is relayed and counted like
//! every other byte, exactly as after a SOCKS request. The parse that finds the head's end also
//! decides what it asks for ([`request::judge`]); nothing parses it again.
//!
//! # Who may read the PAC
//! The PAC lists every cluster domain, so it is for the browser's proxy resolver (and for tools
//! such as curl), never for a web page (who may send CONNECT: see [`connect`]):
//! - DNS rebinding: a page under an attacker's name that resolves to 127.0.0.1 sends that name as
//!   `Host`. Exactly one `Host` is accepted, and it must name this machine; a second one could
//!   smuggle a foreign name past a check that reads only one of them.
//! - Cross-origin script: a page's `<script src=http://localhost:PORT/proxy.pac>` would run the PAC
//!   in the page, which could then read `RULES`. Chromium (148) fetches a `--proxy-pac-url` with no
//!   `Sec-Fetch-*` header at all, a typed URL with `Sec-Fetch-Site: none` and `Sec-Fetch-Dest:
//!   document`, and a page's script with `Sec-Fetch-Site: cross-site` (`same-site` from another
//!   localhost port) and `Sec-Fetch-Dest: script`. So any `Sec-Fetch-Site` but `none` and any
//!   `Sec-Fetch-Dest` but `empty`/`document` is refused. For browsers that send no `Sec-Fetch-*`,
//!   every answer carries `X-Content-Type-Options: nosniff` (a script with the PAC's content type
//!   is then not run) and `Cross-Origin-Resource-Policy: same-origin`.
//!
//! # Memory
//! A large inventory's PAC is about 12 MB. Every answer writes from the table's one shared buffer,
//! and a client that does not take the whole answer within `WRITE_DEADLINE` is reset: a client
//! that asks and never reads holds a socket, not a copy of the PAC.

use std::io;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use kharon_routing::table::RoutingTable;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::proxy::credentials::Credentials;
use crate::proxy::linger::{LINGER, linger};
use crate::proxy::pac;
use crate::state::State;

pub mod authorization;
pub mod connect;
pub mod forward;
pub mod request;
mod response;

use request::{Body, Judged, MAX_REQUEST, Reply, judge};
#[cfg(test)]
use request::{MAX_HEADERS, is_local_host};
use response::{TEXT, response_head};

/// Most bytes looked at per peek while reading a head.
const PEEK: usize = 4096;

/// Time a client gets to take the whole answer. A browser reads even a 12 MB PAC over loopback in
/// well under a second on a busy machine; 10 s leaves room for one that is still starting up, and
/// bounds how long a client that never reads holds a task, a descriptor and (after a reload) the
/// superseded PAC buffer.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// Whether the first byte may start an HTTP request: a method is a token, and every method anyone
/// sends starts with a letter (in lower case too: it is answered that methods are case-sensitive).
pub fn looks_like_http(first: u8) -> bool {
    first.is_ascii_alphabetic()
}

/// What a request head asks for, decided by the parse that found its end.
pub enum Head {
    /// `CONNECT host:port`: the target and credentials still to check, or why the request is
    /// refused ([`connect::admit`] checks them).
    Connect(Result<connect::Connect, connect::Error>),
    /// An absolute-form `http://` request: what to forward, its credentials still to check, or
    /// why it is refused.
    Forward(Result<Box<forward::Forward>, forward::Refused>),
    /// Any other request: its answer (the PAC, or why not).
    Answer(Reply),
}

/// An HTTP request on the PAC port that is not a proxy request (the PAC fetch, or anything
/// answered with an error), its head read and its answer decided.
pub struct PacRequest {
    stream: TcpStream,
    reply: Reply,
}

impl PacRequest {
    pub fn new(stream: TcpStream, reply: Reply) -> Self {
        PacRequest { stream, reply }
    }

    /// The same request answered 403, whatever it asked: its client is another local user
    /// (`proxy::owner`).
    pub fn forbidden(self) -> Self {
        let reply = Reply {
            whole_request_read: self.reply.whole_request_read,
            ..Reply::text("403 Forbidden", "kharond serves only the user it runs as\n")
        };
        PacRequest { reply, ..self }
    }

    /// Why the request is refused, for the log: its answer's status and text; `None` for the PAC.
    pub fn refusal(&self) -> Option<String> {
        match self.reply.body {
            Body::Text(text) if !self.reply.status.starts_with('2') => {
                Some(format!("HTTP request answered {}: {}", self.reply.status, text.trim_end()))
            }
            _ => None,
        }
    }
}

/// Reads one request head from `stream` into `head`, which holds what was already read from it
/// (maybe nothing): every byte up to and including the empty
/// line that ends it, and none after it (see the module doc); the same parse decides what it asks
/// for. When the head does not end (the client closed, it is over [`MAX_REQUEST`], or malformed),
/// `head` holds what was looked at and the answer says why. `head` may hold a
/// `Proxy-Authorization`: the caller wipes it. Also returns the bytes already read past the head
/// (only ever from what `head` held). Takes no deadline: the caller's covers the whole handshake.
pub async fn read_head(
    stream: &mut TcpStream,
    head: &mut Vec<u8>,
    credentials: Option<&Credentials>,
) -> io::Result<(Head, Vec<u8>)> {
    // `head[..taken]` is read from the socket; anything after it only peeked at.
    let mut taken = head.len();
    loop {
        let judged = if head.is_empty() {
            Judged::Partial
        } else {
            judge(head, |request| match request.method {
                Some("CONNECT") => Head::Connect(connect::decide(request, credentials)),
                _ => Head::Forward(forward::head::decide(request, credentials).map(Box::new)),
            })
        };
        let (len, judged) = match judged {
            Judged::Partial => (head.len(), None),
            Judged::Proxy { len, verdict } => (len, Some(verdict)),
            Judged::Answer { len: Some(len), reply } => (len, Some(Head::Answer(reply))),
            // Refused before its end; the rest is read away after the answer.
            Judged::Answer { len: None, reply } => return Ok((Head::Answer(reply), Vec::new())),
        };
        if len > taken {
            // Peeked, so already here: this read does not wait.
            stream.read_exact(&mut head[taken..len]).await?;
            taken = len;
        }
        if let Some(judged) = judged {
            // Bytes past the head can only be ones the caller had read before.
            let past = head[len..taken].to_vec();
            head.truncate(len);
            return Ok((judged, past));
        }
        // No end in sight: all of it belongs to the head.
        head.resize(taken + (MAX_REQUEST - taken.min(MAX_REQUEST)).min(PEEK), 0);
        let n = stream.peek(&mut head[taken..]).await?;
        head.truncate(taken + n);
        if n == 0 {
            // The client closed: whatever arrived is not a request. (The caller saw a first byte,
            // so there always is something.)
            if head.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            return Ok((Head::Answer(Reply::bad_request()), Vec::new()));
        }
    }
}

/// Answers one HTTP request whose head was read.
pub async fn serve(state: &State, request: PacRequest) -> io::Result<()> {
    let PacRequest { mut stream, reply } = request;
    let pac = || {
        let generation = state.routes.current();
        let loaded = &generation.inventory;
        shared_pac(&loaded.pac, &loaded.table, state.listen)
    };
    let result = answer(&mut stream, reply, WRITE_DEADLINE, pac).await;
    if result.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::TimedOut) {
        // Reset rather than close: a closed socket would keep the unsent answer queued in the
        // kernel for a peer that does not read it.
        let _ = stream.set_zero_linger();
    }
    result
}

/// The table's PAC, rendered on first use; every caller gets the same buffer.
fn shared_pac(cell: &OnceLock<Bytes>, table: &RoutingTable, listen: SocketAddr) -> Bytes {
    cell.get_or_init(|| {
        let pac = Bytes::from(pac::render(table, listen));
        crate::process::malloc::release_free();
        pac
    })
    .clone()
}

/// Writes `reply` (within `write_deadline`, else an error of kind `TimedOut`). `pac` is called
/// only for a reply that carries the PAC.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    reply: Reply,
    write_deadline: Duration,
    pac: impl FnOnce() -> Bytes,
) -> io::Result<()> {
    let body = match reply.body {
        Body::Pac => pac(),
        Body::Text(text) => Bytes::from_static(text.as_bytes()),
    };
    let head = reply_head(&reply, body.len());
    let write = tokio::time::timeout(write_deadline, async {
        stream.write_all(head.as_bytes()).await?;
        if !reply.head_only {
            stream.write_all(&body).await?;
        }
        Ok::<_, io::Error>(())
    })
    .await;
    match write {
        Ok(result) => result?,
        Err(_) => {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("client did not read the answer within {} s", write_deadline.as_secs()),
            ));
        }
    }
    if reply.whole_request_read {
        stream.shutdown().await
    } else {
        // We stopped reading before the request ended (too long, malformed): its rest is still
        // coming.
        linger(stream, Instant::now() + LINGER).await;
        Ok(())
    }
}

/// The head of `reply`, whose body is `len` bytes.
fn reply_head(reply: &Reply, len: usize) -> String {
    let content_type = match reply.body {
        Body::Pac => pac::CONTENT_TYPE,
        Body::Text(_) => TEXT,
    };
    let allow = if reply.status.starts_with("405") { "Allow: GET, HEAD, CONNECT\r\n" } else { "" };
    response_head(reply.status, content_type, len, allow)
}

#[cfg(test)]
mod tests;
