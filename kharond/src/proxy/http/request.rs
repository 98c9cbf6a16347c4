//! The PAC port's request judge: from the bytes of a request head to what it asks for (a CONNECT,
//! judged by the caller, or the answer to anything else), with no I/O. Its own file so that the
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
    /// A complete `CONNECT` head, `len` bytes long, and what the caller's `connect` made of it.
    Connect { len: usize, verdict: T },
    /// The answer to any other request: a complete head of `len` bytes, or one refused before its
    /// end (`len` is `None`: too large or malformed, the rest still unread).
    Answer { len: Option<usize>, reply: Reply },
}

/// Judges the bytes of a request head received so far: the parse that finds the head's end also
/// decides what it asks for, so the head is never parsed again. `connect` judges a CONNECT
/// request (its target and credentials are the proxy's business, not this file's).
pub fn judge<T>(bytes: &[u8], connect: impl FnOnce(&httparse::Request<'_, '_>) -> T) -> Judged<T> {
    let parsed = parse(bytes, |request, len| match request.method {
        Some("CONNECT") => Judged::Connect { len, verdict: connect(request) },
        _ => Judged::Answer { len: Some(len), reply: decide(request) },
    });
    match parsed {
        Parsed::Complete(judged) => judged,
        Parsed::Partial => Judged::Partial,
        Parsed::TooLarge => Judged::Answer { len: None, reply: Reply::too_large() },
        Parsed::Malformed => Judged::Answer { len: None, reply: Reply::bad_request() },
    }
}

/// The answer to a complete request that is not CONNECT.
fn decide(request: &httparse::Request<'_, '_>) -> Reply {
    // Absolute form: a client that took us for a plain-HTTP proxy. Told before the Host check,
    // which its Host (the target's) would fail with a misleading answer. An http:// URL came
    // through HTTP_PROXY (or `curl -x http://…`): CONNECT cannot carry it (HTTPS_PROXY is not
    // even read for it), a SOCKS proxy can.
    if let Some(path) = request.path.filter(|path| !path.starts_with('/') && path.contains("://")) {
        let plain_http = path.get(..7).is_some_and(|scheme| scheme.eq_ignore_ascii_case("http://"));
        return Reply::text(
            "501 Not Implemented",
            if plain_http {
                "kharond does not proxy plain HTTP requests: for http:// URLs use it as a SOCKS proxy, \
                 HTTP_PROXY=socks5h://HOST:PORT (curl: -x socks5h://HOST:PORT), HOST:PORT being the \
                 address this request was sent to\n"
            } else {
                "kharond does not proxy plain HTTP requests: use HTTPS_PROXY=http://HOST:PORT (CONNECT) \
                 or socks5h://HOST:PORT\n"
            },
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
