//! The one HTTP resource on the SOCKS port: `GET /proxy.pac`. A SOCKS5 client's first byte is
//! 0x05, an HTTP request's is a letter, so the listener tells them apart without a second port.
//!
//! The PAC is rendered once per routing table (cached in it), so it follows reloads. Anything
//! else gets a 404 (or 405) and the connection is closed; there is no keep-alive to manage.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::pac;
use crate::state::State;

/// Requests larger than this are not a PAC fetch; browsers send well under 2 KiB.
const MAX_REQUEST: usize = 16 * 1024;

/// Whether the first byte starts an HTTP request rather than a SOCKS5 greeting.
pub fn looks_like_http(first: u8) -> bool {
    first.is_ascii_uppercase()
}

/// Answers one HTTP request within `deadline`.
pub async fn serve(state: &State, mut stream: TcpStream, deadline: Duration) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(1024);
    let complete = tokio::time::timeout(deadline, async {
        let mut buf = [0u8; 1024];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < MAX_REQUEST {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
    if !matches!(complete, Ok(Ok(()))) {
        return Ok(());
    }
    let line = request.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let text = String::from_utf8_lossy(&request);
    let host = text
        .lines()
        .find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.trim().eq_ignore_ascii_case("host")).map(|(_, v)| v.trim())
        })
        .unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        // DNS rebinding: a web page under an attacker's name could read the PAC (the list of
        // cluster domains) through the victim's browser; such requests carry that name as Host.
        _ if !is_local_host(host) => {
            ("403 Forbidden", "text/plain", "use http://localhost:PORT/proxy.pac\n".to_owned())
        }
        ("GET" | "HEAD", "/proxy.pac") => {
            let loaded = state.table();
            let body = loaded.pac.get_or_init(|| pac::render(&loaded.table, state.listen)).clone();
            ("200 OK", pac::CONTENT_TYPE, body)
        }
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "only /proxy.pac is served here\n".to_owned()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET /proxy.pac is served here\n".to_owned()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-cache\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes()).await?;
    }
    stream.shutdown().await
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
mod tests {
    use super::*;

    #[test]
    fn only_local_host_headers_are_served() {
        for ok in ["localhost", "localhost:12000", "127.0.0.1:12000", "[::1]:12000", "LOCALHOST"] {
            assert!(is_local_host(ok), "{ok}");
        }
        for bad in ["", "evil.example", "evil.example:12000", "10.0.0.1:12000", "localhost.evil.example"] {
            assert!(!is_local_host(bad), "{bad}");
        }
    }
}
