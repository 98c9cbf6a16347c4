//! The redirect half of the authorization code flow: the one-shot HTTP server on
//! `http://localhost:18000` that receives the IdP's redirect (opening the browser and speaking
//! HTTP to it: [`crate::browser`]).
//!
//! The redirect must be `http://localhost:18000`, the one VSHN's IdP client is known to accept
//! (docs/lieutenant-and-oidc.md, "Redirect URI"), so the port is fixed: we bind `127.0.0.1:18000`
//! (a busy port is a clear error, not a hang) and, if possible, `[::1]:18000`, since browsers may
//! try `localhost` over IPv6 first. The server answers
//! `GET /?code=…&state=…` (checking `state`), `GET /?error=…` (the IdP refused), `/healthz`, and
//! 404 for anything else (a browser also asks for `/favicon.ico`), until the flow ends or times
//! out.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

use super::error::Error;
use crate::browser;

/// The redirect URI registered at the IdP, byte for byte.
pub const REDIRECT_URI: &str = "http://localhost:18000";
/// Its port.
pub const PORT: u16 = 18000;
/// A browser gets this long to send its request line and headers.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

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
        tokio::time::timeout(timeout, serve).await.map_err(|_| Error::Timeout { after: timeout })?
    }
}

/// Answers one connection; `Some` when the flow is over.
async fn handle(mut stream: TcpStream, state: &str) -> Option<Result<String, Error>> {
    let target = match tokio::time::timeout(REQUEST_TIMEOUT, browser::read_get_target(&mut stream)).await {
        Ok(Some(target)) => target,
        _ => {
            browser::respond(&mut stream, 400, "Bad request", "kharon could not read this request.").await;
            return None;
        }
    };
    // The target is origin-form ("/path?query"); give it a base to parse it with `url`.
    let Ok(url) = url::Url::parse(&format!("http://localhost{target}")) else {
        browser::respond(&mut stream, 400, "Bad request", "kharon could not parse this request.").await;
        return None;
    };
    match url.path() {
        "/" => {}
        "/healthz" | "/readyz" => {
            browser::respond_raw(&mut stream, 200, "text/plain", "ok").await;
            return None;
        }
        _ => {
            browser::respond(&mut stream, 404, "Not found", "Nothing here.").await;
            return None;
        }
    }
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    if let Some(error) = param("error") {
        let description = param("error_description");
        let shown = description.clone().unwrap_or_else(|| error.clone());
        browser::respond(&mut stream, 400, "Login failed", &format!("The identity provider said: {shown}"))
            .await;
        return Some(Err(Error::Denied { error, description }));
    }
    let Some(code) = param("code") else {
        browser::respond(&mut stream, 400, "Bad request", "This page expects a login callback with a code.")
            .await;
        return None;
    };
    if param("state").as_deref() != Some(state) {
        // A stale tab or a forged request: refuse it and keep waiting for the real one.
        browser::respond(
            &mut stream,
            400,
            "Login failed",
            "This callback does not belong to the running `kharonctl login` (state mismatch).",
        )
        .await;
        return None;
    }
    browser::respond(
        &mut stream,
        200,
        "Logged in",
        "kharonctl is logged in to Lieutenant. You can close this window and return to the terminal.",
    )
    .await;
    Some(Ok(code))
}
