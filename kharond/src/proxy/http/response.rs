//! The head every answer on the PAC port carries (CONNECT's 200 aside): the PAC, its refusals and
//! CONNECT's refusals and failures.

/// The content type of every answer but the PAC.
pub const TEXT: &str = "text/plain; charset=utf-8";

/// The head of every answer but CONNECT's 200. `extra` is more header lines, each ending in CRLF.
pub fn response_head(status: &str, content_type: &str, len: usize, extra: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len}\r\n\
         X-Content-Type-Options: nosniff\r\nCross-Origin-Resource-Policy: same-origin\r\n\
         Cache-Control: no-cache\r\n{extra}Connection: close\r\n\r\n"
    )
}
