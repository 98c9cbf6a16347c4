//! From the head of an absolute-form request (`GET http://host:port/path HTTP/1.1`) to the head
//! that goes upstream, and how its body is framed; no I/O. The rules, each for a reason:
//!
//! - **Target.** The URL's authority, checked as every SOCKS and CONNECT host is
//!   ([`Target::from_host`]); port 80 unless given. A user name in it (`http://user@host/`) is
//!   refused (RFC 9110 §4.2.4). Upstream, the request line is origin-form (`GET /path?query`), and
//!   `*` for an `OPTIONS` of the bare authority (RFC 9112 §3.2.4). A client's `Host` is replaced by
//!   the URL's authority (RFC 9112 §3.2.2: a proxy must ignore it); more than one is refused.
//! - **Framing, no smuggling** (RFC 9112 §6). The body is what the one parse says it is, and
//!   upstream it gets a framing of kharond's own (hyper writes it): a `Content-Length`, or chunks.
//!   Anything two parsers could read two ways is refused with 400 rather than guessed at: a
//!   `Transfer-Encoding` beside a `Content-Length` (§6.3 lets a proxy pick one; kharond refuses),
//!   more than one `Content-Length`, one that is not plain digits, a `Transfer-Encoding` in
//!   HTTP/1.0, and `chunked` twice; a coding other than `chunked` is 501 (§6.1). The head itself
//!   is bounded ([`MAX_REQUEST`](super::super::request::MAX_REQUEST) bytes,
//!   [`MAX_HEADERS`](super::super::request::MAX_HEADERS) lines) by the port's one parser, httparse,
//!   which also refuses whitespace before a colon and line folding.
//! - **Hop-by-hop fields** (RFC 9110 §7.6.1) are this connection's, not the target's: `Connection`
//!   and every field it names, `Proxy-Connection`, `Keep-Alive`, `TE`, `Transfer-Encoding` (the
//!   framing is redone), `Upgrade` (kharond relays no protocol switch over plain HTTP: WebSockets
//!   go through CONNECT), `Trailer` (trailers are not forwarded) and `Proxy-Authorization` (the
//!   proxy's credentials, checked and consumed here: [`authorization`]). `Expect: 100-continue` is
//!   answered by kharond once the target is connected (any other expectation: 417).
//! - **Via** (RFC 9110 §7.6.3): every forwarded message gets `Via: 1.1 kharon` (the received
//!   protocol version, and a pseudonym rather than this machine's name).
//! - `Max-Forwards` of an `OPTIONS` is counted down, and one of 0 is answered here (§7.6.2);
//!   `TRACE` is not forwarded at all: it echoes the request, cookies included, back to whoever can
//!   read the answer.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Version};

use crate::observe::failures::Notice;
use crate::proxy::credentials::Credentials;
use crate::proxy::http::authorization::{self, Given, Problem};
use crate::routing::target::{self, Shown, Target};

/// The pseudonym kharond gives itself in `Via`.
pub const VIA: &str = "kharon";

/// How a request's body is delimited on the client's side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body.
    Empty,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A request to forward: where, what goes upstream, and how to read the rest from the client.
pub struct Forward {
    pub target: Target,
    /// The head that goes upstream: origin-form, HTTP/1.1, hop-by-hop fields removed, `Host`,
    /// `Content-Length` and `Via` kharond's own.
    pub head: http::Request<()>,
    pub framing: Framing,
    /// The client waits for `100 Continue` before it sends the body.
    pub expect_continue: bool,
    /// The client may send another request on this connection after the answer.
    pub keep_alive: bool,
    /// HTTP/1.0: the answer cannot be chunked.
    pub http10: bool,
    /// Credentials to check before anything is dialled, when kharond requires them.
    pub credentials: Option<Given>,
}

impl Forward {
    /// HEAD: the answer's head says how long a body would be, and no body follows.
    pub fn head_only(&self) -> bool {
        self.head.method() == Method::HEAD
    }
}

/// Why a request is not forwarded: answered by kharond with the status of [`Refused::status`].
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("request target {0} is not an http:// URL with a host and a port of 1 to 65535")]
    Url(Shown),
    #[error("request target {0} holds a user name (user@host), which HTTP forbids (RFC 9110 section 4.2.4)")]
    Userinfo(Shown),
    #[error("request target")]
    Target(#[from] target::Error),
    #[error("more than one Host header")]
    Hosts,
    #[error(
        "both Content-Length and Transfer-Encoding: refused, as either could frame the body (RFC 9112 section 6.3)"
    )]
    LengthAndChunked,
    #[error("a Content-Length that is not one number of decimal digits")]
    Length,
    #[error("Transfer-Encoding in an HTTP/1.0 request (RFC 9112 section 6.1)")]
    ChunkedHttp10,
    #[error("Transfer-Encoding {0}: kharond takes only chunked, once")]
    Coding(Shown),
    #[error("Expect {0}: kharond knows only 100-continue")]
    Expectation(Shown),
    #[error(
        "TRACE is not forwarded: it would echo the request, cookies included, to whoever reads the answer"
    )]
    Trace,
    #[error("header {0} has a value kharond cannot forward")]
    Header(Shown),
    #[error("HTTP proxy request {0}")]
    Credentials(#[from] Problem),
    #[error("OPTIONS with Max-Forwards: 0 ends at kharond")]
    LastHop,
    #[error("on an HTTP proxy connection every request must have an http:// URL as its target")]
    NotProxy,
    #[error("request head over the size limit (16 KiB, 64 header lines)")]
    TooLarge,
    #[error("malformed HTTP request")]
    Malformed,
    #[error("malformed chunked request body: {0}")]
    Chunks(&'static str),
}

impl Refused {
    /// The status line kharond answers with.
    pub fn status(&self) -> &'static str {
        match self {
            Refused::Credentials(_) => "407 Proxy Authentication Required",
            Refused::Coding(_) => "501 Not Implemented",
            Refused::Expectation(_) => "417 Expectation Failed",
            Refused::Trace => "405 Method Not Allowed",
            Refused::LastHop => "200 OK",
            Refused::TooLarge => "431 Request Header Fields Too Large",
            _ => "400 Bad Request",
        }
    }

    /// Whether the log of failures explains it (`observe/failures.rs`).
    pub fn notice(&self) -> Notice {
        match self {
            Refused::Credentials(Problem::Missing) | Refused::LastHop => Notice::Quiet,
            Refused::Credentials(Problem::Wrong) => Notice::Warned,
            _ => Notice::Explain,
        }
    }
}

/// Judges a complete absolute-form request head (`request`, as the port's one parse read it):
/// what to forward, or why not. Credentials are only decoded here, and judged first: a client
/// without them learns nothing else.
pub fn decide(request: &httparse::Request<'_, '_>, auth: Option<&Credentials>) -> Result<Forward, Refused> {
    let credentials = authorization::demand(request.headers, auth)?;
    let (method, raw) = (request.method.unwrap_or(""), request.path.unwrap_or(""));
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| Refused::Malformed)?;
    if method == Method::TRACE {
        return Err(Refused::Trace);
    }
    let (target, authority, path) = url(raw, &method)?;
    let http10 = request.version == Some(0);
    let fields = Fields::of(request.headers);
    let framing = framing(&fields, http10)?;
    let expect_continue = expectation(&fields)?;
    let mut headers = forwarded_headers(request.headers, &fields)?;
    headers.insert(header::HOST, value(authority.as_bytes())?);
    if let Framing::Length(n) = framing {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    let protocol = if http10 { "1.0" } else { "1.1" };
    let via = fields
        .values("via")
        .chain(std::iter::once(format!("{protocol} {VIA}").into_bytes()))
        .collect::<Vec<_>>();
    headers.insert(header::VIA, value(&via.join(&b", "[..]))?);
    if method == Method::OPTIONS {
        max_forwards(&fields, &mut headers)?;
    }
    let mut head = http::Request::new(());
    *head.method_mut() = method;
    *head.uri_mut() = path.parse().map_err(|_| Refused::Url(Shown::of(raw.as_bytes())))?;
    *head.version_mut() = Version::HTTP_11;
    *head.headers_mut() = headers;
    let keep_alive = !http10 && !fields.connection.iter().any(|t| t == "close");
    Ok(Forward { target, head, framing, expect_continue, keep_alive, http10, credentials })
}

/// The target, the authority for `Host`, and the origin-form path of an absolute `http://` URL.
fn url(raw: &str, method: &Method) -> Result<(Target, String, String), Refused> {
    let bad = || Refused::Url(Shown::of(raw.as_bytes()));
    let uri: http::Uri = raw.parse().map_err(|_| bad())?;
    let authority = uri.authority().ok_or_else(bad)?;
    if authority.as_str().contains('@') {
        return Err(Refused::Userinfo(Shown::of(raw.as_bytes())));
    }
    // What follows the host: `:port`, `:` or nothing (the http crate takes an out-of-range port
    // for none at all).
    let port = match authority.as_str().get(authority.host().len()..).unwrap_or("") {
        "" | ":" => 80,
        rest => {
            let digits = rest.strip_prefix(':').ok_or_else(bad)?;
            if digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            digits.parse::<u16>().map_err(|_| bad())?
        }
    };
    let target = Target::from_host(authority.host().as_bytes(), port)?;
    // The URL without its scheme and authority: empty for `http://host`.
    let rest = raw.get("http://".len() + authority.as_str().len()..).unwrap_or("");
    let path = match uri.path_and_query() {
        _ if *method == Method::OPTIONS && rest.is_empty() => "*".to_owned(),
        Some(pq) => pq.as_str().to_owned(),
        None => "/".to_owned(),
    };
    Ok((target, authority.as_str().to_owned(), path))
}

/// The fields that decide framing and forwarding, as sent.
struct Fields<'a> {
    headers: &'a [httparse::Header<'a>],
    /// The lower-cased tokens of every `Connection` field.
    connection: Vec<String>,
}

impl<'a> Fields<'a> {
    fn of(headers: &'a [httparse::Header<'a>]) -> Self {
        let mut fields = Fields { headers, connection: Vec::new() };
        fields.connection = fields.list("connection").map(|t| t.to_ascii_lowercase()).collect();
        fields
    }

    fn values(&self, name: &'static str) -> impl Iterator<Item = Vec<u8>> + '_ {
        self.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.trim_ascii().to_vec())
    }

    /// The comma-separated members of every field called `name`, trimmed, empty ones left out.
    fn list(&self, name: &'static str) -> impl Iterator<Item = String> + '_ {
        self.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .flat_map(|h| h.value.split(|b| *b == b','))
            .map(|member| String::from_utf8_lossy(member.trim_ascii()).into_owned())
            .filter(|member| !member.is_empty())
    }
}

/// How the body is delimited (module doc: anything ambiguous is refused).
fn framing(fields: &Fields<'_>, http10: bool) -> Result<Framing, Refused> {
    let lengths: Vec<Vec<u8>> = fields.values("content-length").collect();
    let codings: Vec<String> = fields.list("transfer-encoding").collect();
    let encoded = fields.headers.iter().any(|h| h.name.eq_ignore_ascii_case("transfer-encoding"));
    if encoded {
        if !lengths.is_empty() {
            return Err(Refused::LengthAndChunked);
        }
        if http10 {
            return Err(Refused::ChunkedHttp10);
        }
        return match &codings[..] {
            [chunked] if chunked.eq_ignore_ascii_case("chunked") => Ok(Framing::Chunked),
            _ => Err(Refused::Coding(Shown::of(codings.join(", ").as_bytes()))),
        };
    }
    match &lengths[..] {
        [] => Ok(Framing::Empty),
        [digits] if (1..=19).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) => {
            let n = std::str::from_utf8(digits).ok().and_then(|d| d.parse().ok()).ok_or(Refused::Length)?;
            Ok(if n == 0 { Framing::Empty } else { Framing::Length(n) })
        }
        _ => Err(Refused::Length),
    }
}

/// Whether the client waits for `100 Continue`; another expectation is refused.
fn expectation(fields: &Fields<'_>) -> Result<bool, Refused> {
    let mut expect_continue = false;
    for member in fields.list("expect") {
        if !member.eq_ignore_ascii_case("100-continue") {
            return Err(Refused::Expectation(Shown::of(member.as_bytes())));
        }
        expect_continue = true;
    }
    Ok(expect_continue)
}

/// Fields kharond never forwards as sent: hop-by-hop ones (RFC 9110 §7.6.1), and those it sets
/// itself (an OPTIONS request's `Max-Forwards` is replaced, others' go on as sent).
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "transfer-encoding",
    "upgrade",
    "trailer",
    "proxy-authorization",
    "host",
    "content-length",
    "expect",
    "via",
];

/// Whether a field is one of this hop's: `NOT_FORWARDED`, or named by `Connection`.
pub fn hop_by_hop(name: &str, connection: &[String]) -> bool {
    NOT_FORWARDED.iter().any(|n| name.eq_ignore_ascii_case(n))
        || connection.iter().any(|t| name.eq_ignore_ascii_case(t))
}

/// The client's fields that go upstream as they are, in their order.
fn forwarded_headers(headers: &[httparse::Header<'_>], fields: &Fields<'_>) -> Result<HeaderMap, Refused> {
    if headers.iter().filter(|h| h.name.eq_ignore_ascii_case("host")).count() > 1 {
        return Err(Refused::Hosts);
    }
    let mut out = HeaderMap::with_capacity(headers.len() + 3);
    for h in headers.iter().filter(|h| !hop_by_hop(h.name, &fields.connection)) {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| Refused::Header(Shown::of(h.name.as_bytes())))?;
        let value =
            HeaderValue::from_bytes(h.value).map_err(|_| Refused::Header(Shown::of(h.name.as_bytes())))?;
        out.append(name, value);
    }
    Ok(out)
}

/// Counts down an OPTIONS request's `Max-Forwards` (RFC 9110 §7.6.2); at 0 the request ends here.
fn max_forwards(fields: &Fields<'_>, headers: &mut HeaderMap) -> Result<(), Refused> {
    let Some(given) = fields.values("max-forwards").next() else { return Ok(()) };
    let left: u32 =
        std::str::from_utf8(&given).ok().and_then(|d| d.parse().ok()).ok_or(Refused::Malformed)?;
    if left == 0 {
        return Err(Refused::LastHop);
    }
    headers.insert(header::MAX_FORWARDS, HeaderValue::from(left - 1));
    Ok(())
}

fn value(bytes: &[u8]) -> Result<HeaderValue, Refused> {
    HeaderValue::from_bytes(bytes).map_err(|_| Refused::Malformed)
}
