//! The one HTTP resource on the SOCKS port: `GET /proxy.pac`. A SOCKS5 client's first byte is
//! 0x05, an HTTP request's is a letter, so the listener tells them apart without a second port.
//!
//! The PAC is rendered once per routing table into one shared buffer (kept in the table), so it
//! follows reloads. Anything else gets a 4xx and the connection is closed; there is no keep-alive
//! to manage.
//!
//! # Who may read the PAC
//! The PAC lists every cluster domain, so it is for the browser's proxy resolver (and for tools
//! such as curl), never for a web page:
//! - DNS rebinding: a page under an attacker's name that resolves to 127.0.0.1 sends that name as
//!   `Host`. Exactly one `Host` is accepted, and it must name this machine; a second one could
//!   smuggle a foreign name past a check that reads only one of them.
//! - Cross-origin script: a page's `<script src=http://localhost:PORT/proxy.pac>` used to run the
//!   PAC in the page, which then read `RULES`. Chromium (148) fetches a `--proxy-pac-url` with no
//!   `Sec-Fetch-*` header at all, a typed URL with `Sec-Fetch-Site: none` and `Sec-Fetch-Dest:
//!   document`, and a page's script with `Sec-Fetch-Site: cross-site` (`same-site` from another
//!   localhost port) and `Sec-Fetch-Dest: script`. So any `Sec-Fetch-Site` but `none` and any
//!   `Sec-Fetch-Dest` but `empty`/`document` is refused. For browsers that send no `Sec-Fetch-*`,
//!   every answer carries `X-Content-Type-Options: nosniff` (a script with the PAC's content type
//!   is then not run) and `Cross-Origin-Resource-Policy: same-origin`.
//!
//! # Memory
//! A large inventory's PAC is about 12 MB. Every answer writes from the table's one shared buffer,
//! and a client that does not take the whole answer within [`WRITE_DEADLINE`] is reset: a client
//! that asks and never reads holds a socket, not a copy of the PAC.

use std::io;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use kharon_shared::routing::RoutingTable;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::pac;
use crate::state::State;

/// Requests larger than this are not a PAC fetch; browsers send well under 2 KiB.
const MAX_REQUEST: usize = 16 * 1024;

/// Header lines parsed at most; a browser sends about 15.
const MAX_HEADERS: usize = 64;

/// Time a client gets to take the whole answer. A browser reads even a 12 MB PAC over loopback in
/// well under a second on a busy machine; 10 s leaves room for one that is still starting up, and
/// bounds how long a client that never reads holds a task, a descriptor and (after a reload) the
/// superseded PAC buffer.
const WRITE_DEADLINE: Duration = Duration::from_secs(10);

/// After refusing a request we stopped reading (too long, malformed), how long its remaining bytes
/// are read away before closing: closing with unread input makes the kernel send a reset, which
/// can destroy the answer before the client has read it.
const DRAIN_DEADLINE: Duration = Duration::from_secs(1);

/// Most bytes read away in [`DRAIN_DEADLINE`].
const DRAIN_LIMIT: usize = 64 * 1024;

/// Whether the first byte starts an HTTP request rather than a SOCKS5 greeting.
pub fn looks_like_http(first: u8) -> bool {
    first.is_ascii_uppercase()
}

/// Answers one HTTP request that must arrive within `deadline`.
pub async fn serve(state: &State, mut stream: TcpStream, deadline: Duration) -> io::Result<()> {
    let pac = || {
        let loaded = state.table();
        shared_pac(&loaded.pac, &loaded.table, state.listen)
    };
    let result = answer(&mut stream, deadline, WRITE_DEADLINE, pac).await;
    if result.as_ref().is_err_and(|e| e.kind() == io::ErrorKind::TimedOut) {
        // Reset rather than close: a closed socket would keep the unsent answer queued in the
        // kernel for a peer that does not read it.
        let _ = stream.set_zero_linger();
    }
    result
}

/// The table's PAC, rendered on first use; every caller gets the same buffer.
fn shared_pac(cell: &OnceLock<Bytes>, table: &RoutingTable, listen: SocketAddr) -> Bytes {
    cell.get_or_init(|| Bytes::from(pac::render(table, listen))).clone()
}

/// Reads one request (within `read_deadline`) and writes its answer (within `write_deadline`,
/// else an error of kind `TimedOut`). `pac` is called only for a request that gets the PAC.
async fn answer<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    read_deadline: Duration,
    write_deadline: Duration,
    pac: impl FnOnce() -> Bytes,
) -> io::Result<()> {
    let mut request = Vec::with_capacity(1024);
    let read = tokio::time::timeout(read_deadline, async {
        let mut buf = [0u8; 1024];
        loop {
            if let Some(reply) = judge(&request) {
                return Ok::<_, io::Error>(Some(reply));
            }
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                // Cut short: whatever arrived is not a request.
                return Ok((!request.is_empty()).then_some(Reply::bad_request()));
            }
            request.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    let reply = match read {
        Ok(Ok(Some(reply))) => reply,
        // Silent until the deadline, or gone: there is no one to answer.
        Ok(Ok(None)) | Ok(Err(_)) | Err(_) => return Ok(()),
    };
    let body = match reply.body {
        Body::Pac => pac(),
        Body::Text(text) => Bytes::from_static(text.as_bytes()),
    };
    let head = reply.head(body.len());
    let write = tokio::time::timeout(write_deadline, async {
        stream.write_all(head.as_bytes()).await?;
        if !reply.head_only {
            stream.write_all(&body).await?;
        }
        stream.shutdown().await
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
    if !reply.whole_request_read {
        let _ = tokio::time::timeout(DRAIN_DEADLINE, async {
            let mut sink = [0u8; 4096];
            let mut left = DRAIN_LIMIT;
            while left > 0 {
                let n = stream.read(&mut sink).await?;
                if n == 0 {
                    break;
                }
                left = left.saturating_sub(n);
            }
            Ok::<_, io::Error>(())
        })
        .await;
    }
    Ok(())
}

/// What an answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Pac,
    Text(&'static str),
}

/// The answer to a request, decided before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reply {
    status: &'static str,
    body: Body,
    /// HEAD: the head says how long the body would be, and no body follows.
    head_only: bool,
    /// False when we stopped reading before the request ended (too long, malformed).
    whole_request_read: bool,
}

impl Reply {
    fn text(status: &'static str, text: &'static str) -> Self {
        Reply { status, body: Body::Text(text), head_only: false, whole_request_read: true }
    }

    fn bad_request() -> Self {
        Reply { whole_request_read: false, ..Reply::text("400 Bad Request", "malformed HTTP request\n") }
    }

    fn head(&self, len: usize) -> String {
        let content_type = match self.body {
            Body::Pac => pac::CONTENT_TYPE,
            Body::Text(_) => "text/plain; charset=utf-8",
        };
        let allow = if self.status.starts_with("405") { "Allow: GET, HEAD\r\n" } else { "" };
        format!(
            "HTTP/1.1 {}\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n\
             X-Content-Type-Options: nosniff\r\nCross-Origin-Resource-Policy: same-origin\r\n\
             Cache-Control: no-cache\r\n{allow}Connection: close\r\n\r\n",
            self.status
        )
    }
}

/// The answer to the request bytes received so far, or `None` while the request is incomplete.
fn judge(request: &[u8]) -> Option<Reply> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut headers);
    match parsed.parse(request) {
        Ok(httparse::Status::Complete(_)) => Some(decide(&parsed)),
        Ok(httparse::Status::Partial) if request.len() < MAX_REQUEST => None,
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => Some(Reply {
            whole_request_read: false,
            ..Reply::text("431 Request Header Fields Too Large", "request too large for a PAC fetch\n")
        }),
        Err(_) => Some(Reply::bad_request()),
    }
}

/// The answer to a complete request.
fn decide(request: &httparse::Request<'_, '_>) -> Reply {
    let values = |name: &'static str| header_values(request.headers, name);
    let hosts: Vec<&str> = values("host").collect();
    let [host] = hosts[..] else {
        return Reply::text("400 Bad Request", "exactly one Host header is required\n");
    };
    if !is_local_host(host) {
        return Reply::text("403 Forbidden", "use http://localhost:PORT/proxy.pac\n");
    }
    let from_page = values("sec-fetch-site").any(|v| !v.eq_ignore_ascii_case("none"))
        || values("sec-fetch-dest")
            .any(|v| !v.eq_ignore_ascii_case("empty") && !v.eq_ignore_ascii_case("document"));
    if from_page {
        return Reply::text(
            "403 Forbidden",
            "the PAC is for the browser's proxy settings, not for web pages\n",
        );
    }
    let method = request.method.unwrap_or("");
    let path = request.path.unwrap_or("").split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/proxy.pac") => {
            Reply { status: "200 OK", body: Body::Pac, head_only: method == "HEAD", whole_request_read: true }
        }
        ("GET" | "HEAD", _) => Reply {
            head_only: method == "HEAD",
            ..Reply::text("404 Not Found", "only /proxy.pac is served here\n")
        },
        _ => Reply::text("405 Method Not Allowed", "only GET /proxy.pac is served here\n"),
    }
}

/// The values of every header called `name`, trimmed; a value that is not UTF-8 reads as U+FFFD.
fn header_values<'a>(headers: &'a [httparse::Header<'_>], name: &'a str) -> impl Iterator<Item = &'a str> {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| std::str::from_utf8(h.value).unwrap_or("\u{fffd}").trim())
}

/// Whether a Host header names this machine (`localhost`, a loopback IP), with or without port.
fn is_local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests;
