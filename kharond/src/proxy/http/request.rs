//! The PAC port's request judge: from the bytes of a request head to what it asks for (a proxy
//! request, CONNECT or an absolute-form `http://` URL, judged by the caller, or the answer to
//! anything else), with no I/O. Its own file so that the
//! fuzz crate (`fuzz/`, target `http_request`) can compile it alone: it needs nothing but
//! `httparse`.

/// Request heads larger than this are refused; browsers and proxy clients send well under 2 KiB.
pub const MAX_REQUEST: usize = 16 * 1024;

/// Header lines parsed at most; a browser sends about 15.
pub const MAX_HEADERS: usize = 64;

/// What an answer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    Pac,
    Text(&'static str),
}

/// The answer to a request, decided before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: &'static str,
    pub body: Body,
    /// HEAD: the head says how long the body would be, and no body follows.
    pub head_only: bool,
    /// False when we stopped reading before the request ended (too long, malformed).
    pub whole_request_read: bool,
}

impl Reply {
    pub fn text(status: &'static str, text: &'static str) -> Self {
        Reply { status, body: Body::Text(text), head_only: false, whole_request_read: true }
    }

    pub fn bad_request() -> Self {
        Reply { whole_request_read: false, ..Reply::text("400 Bad Request", "malformed HTTP request\n") }
    }

    pub fn too_large() -> Self {
        Reply {
            whole_request_read: false,
            ..Reply::text("431 Request Header Fields Too Large", "request head too large\n")
        }
    }
}

/// How the bytes received so far stand as a request head.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<T> {
    Partial,
    /// The head is complete; what the caller made of it.
    Complete(T),
    /// Over [`MAX_REQUEST`] without an end, or over [`MAX_HEADERS`] header lines.
    TooLarge,
    Malformed,
}

/// The one HTTP parser of the port: once the head is complete, `f` gets it and its length.
pub fn parse<T>(bytes: &[u8], f: impl FnOnce(&httparse::Request<'_, '_>, usize) -> T) -> Parsed<T> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => Parsed::Complete(f(&request, len)),
        Ok(httparse::Status::Partial) if bytes.len() < MAX_REQUEST => Parsed::Partial,
        Ok(httparse::Status::Partial) | Err(httparse::Error::TooManyHeaders) => Parsed::TooLarge,
        Err(_) => Parsed::Malformed,
    }
}

/// What the bytes of a request head received so far ask for, from one parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judged<T> {
    /// The head has not ended yet.
    Partial,
    /// A complete proxy request's head (`CONNECT host:port`, or any method with an absolute-form
    /// `http://` target), `len` bytes long, and what the caller's `proxy` made of it.
    Proxy { len: usize, verdict: T },
    /// The answer to any other request: a complete head of `len` bytes, or one refused before its
    /// end (`len` is `None`: too large or malformed, the rest still unread).
    Answer { len: Option<usize>, reply: Reply },
}

/// Judges the bytes of a request head received so far: the parse that finds the head's end also
/// decides what it asks for, so the head is never parsed again. `proxy` judges a proxy request
/// ([`is_proxy_request`]: its target and credentials are the proxy's business, not this file's).
pub fn judge<T>(bytes: &[u8], proxy: impl FnOnce(&httparse::Request<'_, '_>) -> T) -> Judged<T> {
    let parsed = parse(bytes, |request, len| match is_proxy_request(request) {
        true => Judged::Proxy { len, verdict: proxy(request) },
        false => Judged::Answer { len: Some(len), reply: decide(request) },
    });
    match parsed {
        Parsed::Complete(judged) => judged,
        Parsed::Partial => Judged::Partial,
        Parsed::TooLarge => Judged::Answer { len: None, reply: Reply::too_large() },
        Parsed::Malformed => Judged::Answer { len: None, reply: Reply::bad_request() },
    }
}

/// Whether a complete request is one for the proxy: `CONNECT` (methods are case-sensitive, RFC
/// 9110 §9.1), or any method with an absolute-form `http://` target (RFC 9112 §3.2.2), as a client
/// sends it to what it takes for an HTTP proxy (`http_proxy=http://…`).
pub fn is_proxy_request(request: &httparse::Request<'_, '_>) -> bool {
    let path = request.path.unwrap_or("");
    request.method == Some("CONNECT")
        || path.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"))
}

/// The answer to a complete request that is not a proxy request.
fn decide(request: &httparse::Request<'_, '_>) -> Reply {
    // Absolute form with another scheme: a client that sends https:// (or ftp://) URLs to an HTTP
    // proxy instead of tunnelling them. Told before the Host check, which its Host (the
    // target's) would fail with a misleading answer.
    if request.path.is_some_and(|path| !path.starts_with('/') && path.contains("://")) {
        return Reply::text(
            "501 Not Implemented",
            "kharond proxies http:// URLs and tunnels others with CONNECT: for https:// use \
             HTTPS_PROXY=http://HOST:PORT (CONNECT) or socks5h://HOST:PORT\n",
        );
    }
    // `connect host:port`: methods are case-sensitive (RFC 9110 §9.1), so this is another method,
    // which no server knows (§9.1: 501); one that differs from CONNECT only in case is a typo.
    if request.method.is_some_and(|m| m.eq_ignore_ascii_case("CONNECT")) {
        return Reply::text(
            "501 Not Implemented",
            "method names are case-sensitive (RFC 9110 section 9.1): send CONNECT host:port in capitals\n",
        );
    }
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
        _ => Reply::text(
            "405 Method Not Allowed",
            "only GET /proxy.pac and CONNECT host:port are served here\n",
        ),
    }
}

/// The values of every header called `name`, trimmed; a value that is not UTF-8 reads as U+FFFD.
pub fn header_values<'a>(
    headers: &'a [httparse::Header<'_>],
    name: &'a str,
) -> impl Iterator<Item = &'a str> {
    headers
        .iter()
        .filter(move |h| h.name.eq_ignore_ascii_case(name))
        .map(|h| std::str::from_utf8(h.value).unwrap_or("\u{fffd}").trim())
}

/// Whether a Host header names this machine (`localhost`, a loopback IP), with or without port.
pub fn is_local_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}
