//! The browser half of the authorization code flow: open the user's browser at the IdP, and the
//! one-shot HTTP server on `http://localhost:18000` that receives the redirect.
//!
//! The deployed IdP client only allows the redirect `http://localhost:18000` (protocols.md §2.4), so
//! the port is fixed: we bind `127.0.0.1:18000` (a busy port is a clear error, not a hang) and, if
//! possible, `[::1]:18000`, since browsers may try `localhost` over IPv6 first. The server answers
//! `GET /?code=…&state=…` (checking `state`), `GET /?error=…` (the IdP refused), `/healthz`, and
//! 404 for anything else (a browser also asks for `/favicon.ico`), until the flow ends or times
//! out. It speaks just enough HTTP/1.1 for one browser request per connection.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::error::Error;

/// The redirect URI registered at the IdP, byte for byte.
pub const REDIRECT_URI: &str = "http://localhost:18000";
/// Its port.
pub const PORT: u16 = 18000;
/// A browser gets this long to send its request line and headers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// We read at most this much of a request; the callback URL is well below it.
const MAX_REQUEST: usize = 16 * 1024;

/// The bound callback listeners.
pub struct Callback {
    v4: TcpListener,
    v6: Option<TcpListener>,
}

impl Callback {
    /// Binds the callback port. Fails with [`Error::PortBusy`] if another program holds it.
    pub async fn bind() -> Result<Self, Error> {
        let v4_addr = SocketAddr::from(([127, 0, 0, 1], PORT));
        let v4 = TcpListener::bind(v4_addr).await.map_err(|source| match source.kind() {
            std::io::ErrorKind::AddrInUse => Error::PortBusy { port: PORT },
            _ => Error::Bind { addr: v4_addr, source },
        })?;
        // IPv6 is best effort: no ::1 on the machine, or someone else holding it, is not fatal.
        let v6 = TcpListener::bind(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, PORT))).await.ok();
        Ok(Self { v4, v6 })
    }

    /// Serves requests until the IdP redirects back with a code for `state` (returned), or with an
    /// error, or until `timeout`.
    pub async fn wait_for_code(self, state: &str, timeout: Duration) -> Result<String, Error> {
        let serve = async {
            loop {
                let stream = match &self.v6 {
                    Some(v6) => tokio::select! {
                        r = self.v4.accept() => r,
                        r = v6.accept() => r,
                    },
                    None => self.v4.accept().await,
                };
                // A failed accept (e.g. out of file descriptors) is retried; the timeout bounds it.
                let Ok((stream, _)) = stream else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                if let Some(outcome) = handle(stream, state).await {
                    return outcome;
                }
            }
        };
        tokio::time::timeout(timeout, serve).await.map_err(|_| Error::Timeout { secs: timeout.as_secs() })?
    }
}

/// Answers one connection; `Some` when the flow is over.
async fn handle(mut stream: TcpStream, state: &str) -> Option<Result<String, Error>> {
    let target = match tokio::time::timeout(REQUEST_TIMEOUT, read_target(&mut stream)).await {
        Ok(Some(target)) => target,
        _ => {
            respond(&mut stream, 400, "Bad request", "kharon could not read this request.").await;
            return None;
        }
    };
    // The target is origin-form ("/path?query"); give it a base to parse it with `url`.
    let Ok(url) = url::Url::parse(&format!("http://localhost{target}")) else {
        respond(&mut stream, 400, "Bad request", "kharon could not parse this request.").await;
        return None;
    };
    match url.path() {
        "/" => {}
        "/healthz" | "/readyz" => {
            respond_raw(&mut stream, 200, "text/plain", "ok").await;
            return None;
        }
        _ => {
            respond(&mut stream, 404, "Not found", "Nothing here.").await;
            return None;
        }
    }
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    if let Some(error) = param("error") {
        let description = param("error_description");
        let shown = description.clone().unwrap_or_else(|| error.clone());
        respond(&mut stream, 400, "Login failed", &format!("The identity provider said: {shown}")).await;
        return Some(Err(Error::Denied { error, description }));
    }
    let Some(code) = param("code") else {
        respond(&mut stream, 400, "Bad request", "This page expects a login callback with a code.").await;
        return None;
    };
    if param("state").as_deref() != Some(state) {
        // A stale tab or a forged request: refuse it and keep waiting for the real one.
        respond(
            &mut stream,
            400,
            "Login failed",
            "This callback does not belong to the running `kharonctl login` (state mismatch).",
        )
        .await;
        return None;
    }
    respond(
        &mut stream,
        200,
        "Logged in",
        "kharonctl is logged in to Lieutenant. You can close this window and return to the terminal.",
    )
    .await;
    Some(Ok(code))
}

/// Reads the request head and returns the request target of a `GET`.
async fn read_target(stream: &mut TcpStream) -> Option<String> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        if buf.len() > MAX_REQUEST {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next()?.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(target)) if target.starts_with('/') => Some(target.to_owned()),
        _ => None,
    }
}

async fn respond(stream: &mut TcpStream, status: u16, title: &str, message: &str) {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kharon: {title}</title>\
         <style>body{{font-family:sans-serif;max-width:36em;margin:4em auto;color:#222}}</style></head>\
         <body><h1>{title}</h1><p>{}</p></body></html>\n",
        html_escape(message)
    );
    respond_raw(stream, status, "text/html; charset=utf-8", &body).await;
}

async fn respond_raw(stream: &mut TcpStream, status: u16, content_type: &str, body: &str) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Not Found",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         cache-control: no-store\r\nconnection: close\r\n\r\n",
        body.len()
    );
    // The browser may be gone already; nothing to do about a failed write.
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(body.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// How to open the browser: `KHARON_BROWSER`, else `BROWSER` (a command run through `sh` with the
/// URL as its last argument), else the platform opener. The caller always prints the URL too.
pub fn open_browser(
    url: &str,
    kharon_browser: Option<String>,
    browser: Option<String>,
) -> Result<(), String> {
    let mut cmd = match kharon_browser.or(browser) {
        Some(command) => {
            let mut cmd = tokio::process::Command::new("sh");
            // "$1" keeps the URL one argument whatever it contains.
            cmd.arg("-c").arg(format!("{command} \"$1\"")).arg("kharon-browser").arg(url);
            cmd
        }
        None => {
            let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
            let mut cmd = tokio::process::Command::new(opener);
            cmd.arg(url).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
            cmd
        }
    };
    cmd.stdin(std::process::Stdio::null());
    let mut child = cmd.spawn().map_err(|e| e.to_string())?;
    // Reap it in the background; its exit status does not matter, the callback does.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn messages_are_escaped() {
        assert_eq!(super::html_escape("<b>&\"</b>"), "&lt;b&gt;&amp;&quot;&lt;/b&gt;");
    }
}
