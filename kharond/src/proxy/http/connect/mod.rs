//! HTTP `CONNECT host:port` on the SOCKS port, for clients that speak no SOCKS (Python without
//! PySocks, Java's `https.proxyHost`, many Node tools): `HTTPS_PROXY=http://127.0.0.1:12000`.
//!
//! This module only reads the request and writes the answers. The target goes through the same
//! checks as a SOCKS name ([`Target::from_host`]: normalised, IP literals recognised, anything
//! that is not a DNS name refused), and the request then takes the same path as a SOCKS one
//! ([`proxy::Request`](crate::proxy::handshake::Request)): routing, dial, deadlines, relay, counters, logs.
//! A failure to reach the target is answered with the status for its [`Unreachable`] and one line
//! naming the route; a refusal before that (bad target, credentials) with 400 or 407.
//!
//! # Credentials
//! As for every HTTP proxy request ([`authorization`]): with a `[socks]` password, exactly one
//! `Proxy-Authorization: Basic`, checked by the gated check SOCKS5 passes too; else 407.
//!
//! # Who can send CONNECT
//! The PAC path checks `Host` and `Sec-Fetch-*` to keep web pages out (see [`super`]); CONNECT
//! needs neither, and cannot have them: its `Host` names the *target* by design, and proxy
//! clients send no `Sec-Fetch-*`.
//! - A web page cannot send CONNECT. Fetch lists it as a forbidden method (`fetch()` and
//!   `XMLHttpRequest` throw), forms send only GET and POST, and any other method needs a CORS
//!   preflight, whose `OPTIONS` gets a 405 here. DNS rebinding changes where a page's request
//!   goes, never which method it may use, so a rebinding page is no closer to a tunnel.
//! - A page's GET or POST does reach this port, and takes the PAC path with its checks. A
//!   `CONNECT` line in a POST body is never read as a request: the connection is closed after
//!   one answer, so no body is ever parsed as a second request.
//! - A local program that is not a browser can open a tunnel, exactly as it can over SOCKS on the
//!   same port: the listener is loopback-only unless a password is set, and then CONNECT needs it.

use std::fmt;

use kharon_common::errors::Chain;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::authorization::{self, CHALLENGE, Given, Problem};
use super::response::{TEXT, response_head};
use crate::observe::failures::Notice;
use crate::proxy::credentials::{Caller, Credentials};
use crate::routing::target::{self, Shown, Target, Unreachable};

/// The answer that opens the tunnel. RFC 9110 §9.3.6: no Content-Length, no body.
const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// Why a CONNECT request was refused before its target was dialled.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("HTTP CONNECT without Proxy-Authorization, but [socks] username and password are set")]
    NoCredentials,
    #[error("HTTP CONNECT with a Proxy-Authorization that is not one `Basic base64(user:password)`")]
    MalformedCredentials,
    #[error("HTTP CONNECT with a wrong username or password")]
    AuthRejected,
    #[error(
        "HTTP CONNECT target {0} is not host:port (the port is required, an IPv6 address goes in \
         brackets: [2001:db8::1]:443)"
    )]
    Authority(Shown),
    #[error("HTTP CONNECT")]
    Target(#[from] target::Error),
}

impl Error {
    /// Whether the log of failures explains it: the 407 challenge of a client that sends its
    /// password only when asked is part of the protocol, a wrong password has its own WARN
    /// (`credentials.rs`).
    pub fn notice(&self) -> Notice {
        match self {
            Error::NoCredentials => Notice::Quiet,
            Error::AuthRejected => Notice::Warned,
            Error::MalformedCredentials | Error::Authority(_) | Error::Target(_) => Notice::Explain,
        }
    }
}

/// A complete CONNECT request as the parse read it: its target (or why that is refused) and, when
/// kharond requires them, the credentials it carries, not checked yet ([`admit`] does).
pub struct Connect {
    target: Result<Target, Error>,
    credentials: Option<Given>,
}

/// A complete CONNECT request's target and credentials ([`read_head`](super::read_head) calls
/// this from the parse that found the head's end), or why it is refused at once: missing or
/// malformed credentials. Credentials first: without them, a client learns nothing about targets.
pub fn decide(request: &httparse::Request<'_, '_>, auth: Option<&Credentials>) -> Result<Connect, Error> {
    let credentials = authorization::demand(request.headers, auth)?;
    Ok(Connect { target: authority(request.path.unwrap_or("").as_bytes()), credentials })
}

/// The target of a decided CONNECT, once its credentials passed the gated check (which may wait
/// its turn: credentials.rs); or why it is refused. `caller` is who asks (credentials.rs).
pub async fn admit(
    decided: Result<Connect, Error>,
    auth: Option<&Credentials>,
    caller: Caller,
) -> Result<Target, Error> {
    let connect = decided?;
    authorization::check(auth, connect.credentials.as_ref(), caller).await?;
    connect.target
}

impl From<Problem> for Error {
    fn from(problem: Problem) -> Self {
        match problem {
            Problem::Missing => Error::NoCredentials,
            Problem::Malformed => Error::MalformedCredentials,
            Problem::Wrong => Error::AuthRejected,
        }
    }
}

/// The request target in authority form (RFC 9112 §3.2.3): `host:port` or `[IPv6]:port`, the
/// port required and in decimal. The host then passes the checks a SOCKS name passes.
fn authority(raw: &[u8]) -> Result<Target, Error> {
    let bad = || Error::Authority(Shown::of(raw));
    let colon = raw.iter().rposition(|b| *b == b':').ok_or_else(bad)?;
    let (host, port) = (&raw[..colon], &raw[colon + 1..]);
    // `u16::from_str` would also take a sign.
    if port.is_empty() || port.len() > 5 || !port.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let port = std::str::from_utf8(port).ok().and_then(|p| p.parse::<u16>().ok()).ok_or_else(bad)?;
    if let Some(inner) = host.strip_prefix(b"[") {
        let ip = inner
            .strip_suffix(b"]")
            .and_then(|ip| std::str::from_utf8(ip).ok())
            .and_then(|ip| ip.parse::<std::net::Ipv6Addr>().ok())
            .ok_or_else(bad)?;
        return Ok(Target::from_addr((ip, port).into())?);
    }
    // An unbracketed colon: a bare IPv6 address, whose port cannot be told from its last group.
    if host.contains(&b':') {
        return Err(bad());
    }
    Ok(Target::from_host(host, port)?)
}

/// Tells the client why its request was refused.
pub async fn refuse<S: AsyncWrite + Unpin>(client: &mut S, error: &Error) -> std::io::Result<()> {
    client.write_all(refusal(error).as_bytes()).await
}

/// Tells the client its tunnel is up: every byte after this is the target's.
pub async fn reply_success<S: AsyncWrite + Unpin>(client: &mut S) -> std::io::Result<()> {
    client.write_all(ESTABLISHED).await
}

/// Tells the client why `target` could not be reached; `why` names the route and what failed.
pub async fn reply_failure<S: AsyncWrite + Unpin>(
    client: &mut S,
    target: &Target,
    failure: Unreachable,
    why: &(dyn fmt::Display + Sync),
) -> std::io::Result<()> {
    let answer = failure_answer(target, failure, &why.to_string());
    client.write_all(answer.as_bytes()).await
}

/// The status for a failure to reach the target: 504 for a timeout, 403 for a refusal by policy,
/// 502 for every other way the next hop failed us.
fn failure_status(failure: Unreachable) -> &'static str {
    match failure {
        Unreachable::TimedOut => "504 Gateway Timeout",
        Unreachable::NotAllowed => "403 Forbidden",
        Unreachable::General | Unreachable::Network | Unreachable::Host | Unreachable::Refused => {
            "502 Bad Gateway"
        }
    }
}

fn failure_answer(target: &Target, failure: Unreachable, why: &str) -> String {
    // One line: an SSH or OS error text could carry line breaks, escapes or bidi overrides.
    let needs = kharon_common::text::needs_escape;
    let why: String = why.chars().map(|c| if needs(c) { ' ' } else { c }).collect();
    let body = format!("kharond cannot reach {target} {why}\n");
    response_head(failure_status(failure), TEXT, body.len(), "") + &body
}

fn refusal(error: &Error) -> String {
    let (status, extra, body) = match error {
        Error::NoCredentials | Error::MalformedCredentials | Error::AuthRejected => {
            ("407 Proxy Authentication Required", CHALLENGE, authorization::HOW.to_owned())
        }
        Error::Authority(_) | Error::Target(_) => ("400 Bad Request", "", format!("{}\n", Chain(error))),
    };
    response_head(status, TEXT, body.len(), extra) + &body
}

#[cfg(test)]
mod tests;
