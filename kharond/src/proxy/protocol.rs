//! Which protocol a client speaks on the proxy port: the one word for it in the handshake's
//! answers, the registry (`kharonctl connections`) and a trace. Depends on nothing, so every one
//! of them can name it.

/// The protocol a client speaks on the proxy port, which decides how it is answered; the
/// registry lists connections by it (`kharonctl connections`) and a trace names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Socks5,
    /// An HTTP CONNECT request: a proxy request like a SOCKS one.
    HttpConnect,
    /// A plain HTTP request on the proxy port: the PAC file (or an error answer).
    Http,
    /// An absolute-form HTTP request (`GET http://…`), forwarded: plain HTTP proxying.
    Forward,
}

impl Protocol {
    /// Its word in `kharonctl connections` and in a trace.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Socks5 => "SOCKS",
            Protocol::HttpConnect => "CONNECT",
            Protocol::Http => "HTTP",
            Protocol::Forward => "HTTP proxy",
        }
    }

    /// The success reply, as a trace tells it.
    pub fn success_reply(self) -> &'static str {
        match self {
            Protocol::Socks5 => "SOCKS5 success reply",
            Protocol::HttpConnect | Protocol::Http => "HTTP/1.1 200 Connection established",
            Protocol::Forward => "the target's response",
        }
    }
}
