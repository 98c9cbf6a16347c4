//! Plain HTTP proxying: a client that takes the port for an HTTP proxy (`http_proxy=http://…`,
//! Java's `http.proxyHost`, many IDEs and build tools) sends `GET http://host/path HTTP/1.1`
//! (absolute form) for an `http://` URL. Each such request is routed exactly like a CONNECT
//! (same table, same dial, same owner and credential checks, no PAC-port checks), forwarded to
//! the target in origin form, and its response passed back; the connection stays open for the
//! next one (keep-alive), which may go to another target: a new target gets a new upstream
//! connection, each listed and counted as a connection of its own ([`Legs`]).
//!
//! # One parser, no smuggling
//! Every request head on the port is parsed by httparse, once ([`request::parse`]); the head rules
//! are [`head`]'s, the request body is read by [`body`] as its head framed it, and the response
//! is written back by [`answer`]. Towards the target, hyper's HTTP/1.1 client writes the request
//! (with a framing of its own choosing: the target never sees the client's) and parses the
//! response (`upstream`). hyper's server side is not used for the client: it settles a request
//! with both `Content-Length` and `Transfer-Encoding` by dropping the length (RFC 9112 §6.3 allows
//! that), and gives its caller no way to refuse one, which kharond does (400); and the first head
//! is already parsed, by the parse that tells a proxy request from a PAC fetch, where hyper would
//! parse it a second time.
//!
//! # Who can send one
//! As with CONNECT ([`connect`]), no web page: a browser sends an absolute-form request only to a
//! proxy its user configured. A page's own requests to this port are origin-form, take the PAC
//! path and its checks, and get one answer before the connection closes; only a connection whose
//! first request was absolute-form reads further requests.
//!
//! # Limits
//! A head must arrive within `handshake_timeout_secs` once it has begun; a kept-alive connection
//! waits at most [`IDLE`] for its next request. A refused request gets its answer and the
//! connection closes; a request or response that breaks off closes it too, since where the next
//! message would start is then unknown.

pub mod answer;
pub mod body;
pub mod head;
mod upstream;

#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::time::Duration;

use futures::FutureExt as _;
use kharon_common::errors::Chain;

use kharon_relay::{Counters, Way};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;
use zeroize::Zeroizing;

pub use head::{Forward, Framing, Refused};
use upstream::{Link, Sent};

use crate::observe::failures::Notice;
use crate::proxy::credentials::{Caller, Credentials};
use crate::proxy::http::{authorization, connect, request};
use crate::proxy::linger::{LINGER, linger};
use crate::routing::dial::{Failed, Upstream};
use crate::routing::target::{Target, Unreachable};

/// How long a kept-alive connection waits for the client's next request. Browsers and HTTP
/// libraries reuse a proxy connection within seconds or open a new one; a server that closes an
/// idle one is what every client expects (nginx's default is 75 s).
pub const IDLE: Duration = Duration::from_secs(60);

/// What the spine does for each target a connection's requests go to: route and dial it, and
/// record it as a connection of its own (registry, trace, log). Implemented by the spine
/// (`proxy/connection.rs`), which knows routing; this module only speaks HTTP.
pub trait Legs {
    /// Routes and dials `target` for the next requests; the previous leg, if any, is over. A
    /// failure has been recorded (and logged) when this returns it.
    fn open(&mut self, target: &Target) -> impl Future<Output = Result<Upstream, Box<Failed>>> + Send;
    /// The current leg's byte counts.
    fn counters(&self) -> &Counters;
    /// The current leg's first response is on its way to the client.
    fn answering(&self);
    /// A request failed after the handshake: a later one refused (the first is the handshake's),
    /// or one that got no whole response. For the log, not counted as a failed connection.
    fn failed(&self, why: &dyn fmt::Display, notice: Notice);
}

/// A client whose first request was an admitted absolute-form one.
pub struct Session {
    pub client: TcpStream,
    /// Read from the client past the first head (the start of a body, or the next request). May
    /// hold a pipelined request's credentials: wiped when dropped.
    pub input: Zeroizing<Vec<u8>>,
    pub first: Box<Forward>,
}

/// What a connection's later requests are checked and waited for with.
#[derive(Clone, Copy)]
pub struct Limits<'a> {
    pub auth: Option<&'a Credentials>,
    pub caller: Caller,
    /// How long a head may take once it has begun (`handshake_timeout_secs`).
    pub head: Duration,
    /// How long a kept-alive connection waits for the next request.
    pub idle: Duration,
}

/// Forwards the session's requests until the client or an error ends it.
pub async fn serve(session: Session, legs: &mut impl Legs, limits: Limits<'_>) {
    let Session { mut client, mut input, first } = session;
    let mut forward = first;
    let mut link: Option<Link> = None;
    loop {
        if !exchange(&mut client, &mut input, forward, &mut link, legs).await {
            // The answer may be followed by input not read (a body the target did not wait
            // for): read away, so that closing does not reset the answer away.
            linger(&mut client, Instant::now() + LINGER).await;
            return;
        }
        forward = match next(&mut client, &mut input, limits).await {
            Next::Request(forward) => forward,
            Next::Done => return,
            Next::Refused(refused) => {
                legs.failed(
                    &format_args!("HTTP proxy request refused: {}", Chain(&refused)),
                    refused.notice(),
                );
                if answer::refuse(&mut client, &refused).await.is_ok() {
                    linger(&mut client, Instant::now() + LINGER).await;
                }
                return;
            }
        };
    }
}

/// Forwards one request and passes its response back; whether the connection can carry another.
/// Every failure is answered (when nothing of the response was written yet) and logged here.
async fn exchange(
    client: &mut TcpStream,
    input: &mut Vec<u8>,
    forward: Box<Forward>,
    link: &mut Option<Link>,
    legs: &mut impl Legs,
) -> bool {
    let asked = answer::Asked {
        head_only: forward.head_only(),
        http10: forward.http10,
        keep_alive: forward.keep_alive,
    };
    let Forward { target, head, framing, expect_continue, .. } = *forward;
    let mut reused = link.as_ref().is_some_and(|l| l.serves(&target));
    if !reused && !connect_link(client, link, &target, legs).await {
        return false;
    }
    if expect_continue && framing != Framing::Empty && client.write_all(answer::CONTINUE).await.is_err() {
        return false;
    }
    let (feed, outgoing) = body::channel(framing);
    let mut request = head.map(|()| outgoing);
    let (mut reader, mut writer) = client.split();
    let mut pump = pin!(body::pump(&mut reader, input, framing, feed));
    let mut pumped = None;
    let response = loop {
        let Some(current) = link.as_mut() else { return false };
        match alongside(current.send(request), pump.as_mut(), &mut pumped).await {
            Sent::Answered(response) => break response,
            // A kept link the target had closed: once more on a fresh one.
            Sent::Unsent(unsent, _) if reused => {
                (request, reused) = (unsent, false);
                if !connect_link(&mut writer, link, &target, legs).await {
                    return false;
                }
            }
            Sent::Unsent(_, e) | Sent::Failed(e) => {
                if pumped.is_none() {
                    pumped = pump.as_mut().now_or_never();
                }
                unanswered(&mut writer, &target, &e, pumped.as_ref(), legs).await;
                return false;
            }
        }
    };
    legs.answering();
    let counters = legs.counters();
    let relayed =
        alongside(answer::relay(&mut writer, response, asked, counters), pump.as_mut(), &mut pumped).await;
    let body_read = match pumped {
        Some(Ok(passed)) => {
            counters.add(Way::Up, passed);
            true
        }
        _ => false,
    };
    match relayed {
        Ok(keep_alive) => keep_alive && body_read,
        Err(e) => {
            let why = format!("because {}", Chain(&e));
            legs.failed(&format_args!("HTTP request to {target} failed {why}"), Notice::Explain);
            if matches!(e, answer::Error::Switched) {
                let _ = connect::reply_failure(&mut writer, &target, Unreachable::General, &why).await;
            }
            false
        }
    }
}

/// Answers a request that got no response: 400 when the client's own body was malformed, nothing
/// when the client left in the middle of it, else 502 naming what the target did.
async fn unanswered<W: AsyncWrite + Unpin>(
    client: &mut W,
    target: &Target,
    e: &hyper::Error,
    pumped: Option<&Result<u64, body::Error>>,
    legs: &mut impl Legs,
) {
    match pumped {
        Some(Err(body::Error::Chunks(why))) => {
            let refused = Refused::Chunks(why);
            legs.failed(&format_args!("HTTP proxy request refused: {}", Chain(&refused)), refused.notice());
            let _ = answer::refuse(client, &refused).await;
        }
        Some(Err(_)) => {}
        _ => {
            let why = format!("because {target} answered no HTTP response: {}", Chain(e));
            legs.failed(&format_args!("HTTP request to {target} failed {why}"), Notice::Explain);
            let _ = connect::reply_failure(client, target, Unreachable::General, &why).await;
        }
    }
}

/// Opens a link to `target` in place of `link`, or answers the client why not.
async fn connect_link<W: AsyncWrite + Unpin>(
    client: &mut W,
    link: &mut Option<Link>,
    target: &Target,
    legs: &mut impl Legs,
) -> bool {
    *link = None;
    let why = match legs.open(target).await {
        Ok(upstream) => match Link::open(target.clone(), upstream).await {
            Ok(opened) => {
                *link = Some(opened);
                return true;
            }
            Err(e) => (Unreachable::General, format!("because the HTTP connection failed: {}", Chain(&e))),
        },
        Err(failed) => (Unreachable::from(failed.error.kind()), failed.to_string()),
    };
    let _ = connect::reply_failure(client, target, why.0, &why.1).await;
    false
}

/// Runs `work` while the request body goes on being read (`pump`, until it is done: `pumped`).
async fn alongside<F, P>(work: F, mut pump: Pin<&mut P>, pumped: &mut Option<P::Output>) -> F::Output
where
    F: Future,
    P: Future,
{
    let mut work = pin!(work);
    loop {
        tokio::select! {
            out = work.as_mut() => return out,
            done = pump.as_mut(), if pumped.is_none() => *pumped = Some(done),
        }
    }
}

/// What a kept-alive connection brought next.
enum Next {
    Request(Box<Forward>),
    /// The client closed, went idle, or stopped in the middle of a head.
    Done,
    Refused(Refused),
}

/// Waits for the next request (at most `limits.idle` for its first byte, `limits.head` for the
/// rest of its head) and admits it.
async fn next(client: &mut TcpStream, input: &mut Vec<u8>, limits: Limits<'_>) -> Next {
    if input.is_empty() {
        input.reserve(body::READ);
        match tokio::time::timeout(limits.idle, client.read_buf(input)).await {
            Ok(Ok(n)) if n > 0 => {}
            _ => return Next::Done,
        }
    }
    let read = tokio::time::timeout(limits.head, read_head(client, input, limits.auth)).await;
    let forward = match read {
        Ok(Ok(Some(forward))) => forward,
        Ok(Ok(None)) | Err(_) => return Next::Done,
        Ok(Err(refused)) => return Next::Refused(refused),
    };
    match authorization::check(limits.auth, forward.credentials.as_ref(), limits.caller).await {
        Ok(()) => Next::Request(forward),
        Err(problem) => Next::Refused(problem.into()),
    }
}

/// Reads and judges one request head from `input` and the client; `None` when the client closed
/// before its end. The head's bytes are wiped from `input` (they may hold credentials).
async fn read_head(
    client: &mut TcpStream,
    input: &mut Vec<u8>,
    auth: Option<&Credentials>,
) -> Result<Option<Box<Forward>>, Refused> {
    loop {
        let parsed = request::parse(input, |request, len| {
            let verdict = match request::is_proxy_request(request) && request.method != Some("CONNECT") {
                true => head::decide(request, auth).map(Box::new),
                false => Err(Refused::NotProxy),
            };
            (len, verdict)
        });
        match parsed {
            request::Parsed::Complete((len, verdict)) => {
                input[..len].fill(0);
                input.drain(..len);
                return verdict.map(Some);
            }
            request::Parsed::Partial => {
                input.reserve(body::READ);
                if client.read_buf(input).await.unwrap_or(0) == 0 {
                    return Ok(None);
                }
            }
            request::Parsed::TooLarge => return Err(Refused::TooLarge),
            request::Parsed::Malformed => return Err(Refused::Malformed),
        }
    }
}
