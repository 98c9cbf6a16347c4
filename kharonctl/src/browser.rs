//! The user's browser: opening a URL in it, and the one request it sends back to a loopback port
//! when a login redirects there. Both logins that send the user to a browser use this: Lieutenant's
//! OIDC login ([`crate::lieutenant::oidc::callback`]) and the OpenShift web login ([`crate::kube::openshift_login`]);
//! `clusters NAME console` only opens one.
//!
//! The callback side speaks just enough HTTP/1.1 for one `GET` per connection: the request head is
//! read up to [`MAX_REQUEST`] bytes, the answer is a small HTML page, and the connection is closed.

use std::process::Stdio;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// We read at most this much of a request; a callback URL is well below it.
pub const MAX_REQUEST: usize = 16 * 1024;

/// Opens `url` with `command` (`KHARON_BROWSER`, else `BROWSER`: run through `sh` with the URL as
/// `$1`), else the platform opener. The caller always prints the URL too. The browser's stdout goes
/// to our stderr: kubectl reads only an ExecCredential from ours when a login runs as its exec plugin.
///
/// Only an `http` or `https` URL with a host, in printable ASCII, is opened ([`web_url`]): these
/// URLs come from clusters (a console URL fact, an OAuth server's authorize endpoint), and the
/// opener picks a program by the scheme (`file:`, a desktop entry, a custom handler), so a cluster
/// must not choose one.
pub fn open(url: &str, command: Option<&str>) -> std::io::Result<()> {
    let url = web_url(url)?;
    let url = url.as_str();
    let mut cmd = match command {
        Some(command) => {
            let mut cmd = tokio::process::Command::new("sh");
            // "$1" keeps the URL one argument whatever it contains.
            cmd.arg("-c").arg(format!("{command} \"$1\"")).arg("kharon-browser").arg(url);
            cmd.stdout(std::io::stderr());
            cmd
        }
        None => {
            let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
            let mut cmd = tokio::process::Command::new(opener);
            cmd.arg(url).stdout(Stdio::null()).stderr(Stdio::null());
            cmd
        }
    };
    let mut child = cmd.stdin(Stdio::null()).spawn()?;
    // Reap it in the background; its exit status does not matter, the callback does.
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}

/// `url` if it is an `http(s)` URL with a host and nothing but printable ASCII; else why not.
pub fn web_url(url: &str) -> std::io::Result<url::Url> {
    let parsed = url::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .filter(|_| url.bytes().all(|b| b.is_ascii_graphic()));
    parsed.ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{:?} is not an http(s) URL; it is not opened", kharon_common::text::cap(url, 200)),
        )
    })
}

/// Reads the request head and returns the origin-form target (`/path?query`) of a `GET`; `None`
/// for anything else, or a head longer than [`MAX_REQUEST`].
pub async fn read_get_target(stream: &mut TcpStream) -> Option<String> {
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

/// Answers with a small HTML page titled `title` saying `message`, and closes the connection.
pub async fn respond(stream: &mut TcpStream, status: u16, title: &str, message: &str) {
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kharon: {title}</title>\
         <style>body{{font-family:sans-serif;max-width:36em;margin:4em auto;color:#222}}</style></head>\
         <body><h1>{title}</h1><p>{}</p></body></html>\n",
        html_escape(message)
    );
    respond_raw(stream, status, "text/html; charset=utf-8", &body).await;
}

/// Answers with `body` as it is, and closes the connection.
pub async fn respond_raw(stream: &mut TcpStream, status: u16, content_type: &str, body: &str) {
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

#[cfg(test)]
mod tests {
    #[test]
    fn only_web_urls_with_a_host_are_opened() {
        for ok in ["https://console.apps.x.example/", "http://127.0.0.1:18000/cb?code=a&state=b"] {
            assert!(super::web_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "file:///home/me/.bashrc",
            "vscode://evil/open",
            "-x https://a.example",
            "javascript:alert(1)",
            "https://a.example/\n--new-window",
            "https://a.example/ x",
            "console.x.example",
        ] {
            let err = super::web_url(bad).unwrap_err().to_string();
            assert!(err.contains("is not an http(s) URL"), "{bad:?}: {err}");
            assert!(super::open(bad, Some("exit 1")).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn messages_are_escaped() {
        assert_eq!(super::html_escape("<b>&\"</b>"), "&lt;b&gt;&amp;&quot;&lt;/b&gt;");
    }
}
