//! What the client reads back: the target's response passed on ([`relay`]), kharond's own
//! answers (a refusal, a failure to reach the target), and `100 Continue`.
//!
//! A response is framed again for the client, whatever framing the target used (hyper read it):
//! no body for HEAD, 204 and 304 (their `Content-Length`, if any, kept as the target sent it);
//! `Content-Length` when the length is known; chunked otherwise, or, for an HTTP/1.0 client,
//! the end of the connection. The target's hop-by-hop fields stay behind (RFC 9110 §7.6.1, as for
//! requests: `head.rs`), and `Via` gets kharond's entry (§7.6.3).

use std::io::{self, Write as _};

use http::header::{self, HeaderMap};
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::{Body as _, Incoming};
use kharon_relay::{Counters, Way};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::head::{Refused, VIA, hop_by_hop};
use crate::proxy::http::authorization::{CHALLENGE, HOW};
use crate::proxy::http::response::{TEXT, response_head};

/// The interim answer to `Expect: 100-continue`.
pub const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// How the client asked, as far as its answer's framing goes.
#[derive(Debug, Clone, Copy)]
pub struct Asked {
    pub head_only: bool,
    pub http10: bool,
    /// The connection stays open after this answer (else it says `Connection: close`).
    pub keep_alive: bool,
}

/// Why a response could not be passed on whole.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the target switched protocols (101), which kharond does not relay over plain HTTP: use CONNECT")]
    Switched,
    #[error("the target's response body broke off")]
    Target(#[source] hyper::Error),
    #[error("writing the response to the client")]
    Client(#[from] io::Error),
}

/// Passes `response` on to the client. Returns whether the connection can carry another request
/// afterwards (the answer was delimited by a length or chunks, not by the end of the connection).
/// Nothing is written for an [`Error::Switched`]; after any other error the client's connection
/// must be closed: the answer is incomplete.
pub async fn relay<W: AsyncWrite + Unpin>(
    client: &mut W,
    response: Response<Incoming>,
    asked: Asked,
    counters: &Counters,
) -> Result<bool, Error> {
    if response.status() == StatusCode::SWITCHING_PROTOCOLS {
        return Err(Error::Switched);
    }
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    let bodiless = asked.head_only || status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED;
    let framing = match body.size_hint().exact() {
        _ if bodiless => Delimited::Nothing,
        Some(n) => Delimited::Length(n),
        None if asked.http10 => Delimited::Close,
        None => Delimited::Chunks,
    };
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>().map(|r| r.as_bytes().to_vec());
    let reason = reason.unwrap_or_else(|| status.canonical_reason().unwrap_or("").as_bytes().to_vec());
    let keep_alive = asked.keep_alive && framing != Delimited::Close;
    let head = response_head_bytes(status, &reason, &parts.headers, framing, keep_alive);
    client.write_all(&head).await?;
    if framing != Delimited::Nothing {
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.map_err(Error::Target)?.into_data() else { continue };
            if framing == Delimited::Chunks {
                client.write_all(format!("{:x}\r\n", data.len()).as_bytes()).await?;
                client.write_all(&data).await?;
                client.write_all(b"\r\n").await?;
            } else {
                client.write_all(&data).await?;
            }
            counters.add(Way::Down, data.len() as u64);
        }
        if framing == Delimited::Chunks {
            client.write_all(b"0\r\n\r\n").await?;
        }
    }
    client.flush().await?;
    Ok(keep_alive)
}

/// How a response's body ends for the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delimited {
    Nothing,
    Length(u64),
    Chunks,
    /// By the end of the connection (an HTTP/1.0 client, and a length not known up front).
    Close,
}

fn response_head_bytes(
    status: StatusCode,
    reason: &[u8],
    headers: &HeaderMap,
    framing: Delimited,
    keep_alive: bool,
) -> Vec<u8> {
    let connection: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .collect();
    let mut head = Vec::with_capacity(512);
    let _ = write!(head, "HTTP/1.1 {} ", status.as_u16());
    head.extend_from_slice(reason);
    head.extend_from_slice(b"\r\n");
    let mut field = |name: &str, value: &[u8]| {
        head.extend_from_slice(name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    };
    for (name, value) in headers {
        let kept = name == header::CONTENT_LENGTH && framing == Delimited::Nothing;
        if kept || !hop_by_hop(name.as_str(), &connection) {
            field(name.as_str(), value.as_bytes());
        }
    }
    let mut via: Vec<&[u8]> = headers.get_all(header::VIA).iter().map(|v| v.as_bytes()).collect();
    let ours = format!("1.1 {VIA}");
    via.push(ours.as_bytes());
    field("via", &via.join(&b", "[..]));
    match framing {
        Delimited::Length(n) => field("content-length", n.to_string().as_bytes()),
        Delimited::Chunks => field("transfer-encoding", b"chunked"),
        Delimited::Nothing | Delimited::Close => {}
    }
    if !keep_alive {
        field("connection", b"close");
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// kharond's own answer to a request it does not forward; the connection closes after it.
pub fn refusal(refused: &Refused) -> String {
    let (extra, body) = match refused {
        Refused::Credentials(_) => (CHALLENGE, HOW.to_owned()),
        _ => ("", format!("{}\n", kharon_common::errors::chain(refused))),
    };
    response_head(refused.status(), TEXT, body.len(), extra) + &body
}

/// Writes kharond's own answer to a request it does not forward.
pub async fn refuse<W: AsyncWrite + Unpin>(client: &mut W, refused: &Refused) -> io::Result<()> {
    client.write_all(refusal(refused).as_bytes()).await
}
