//! OpenShift tokens for the kubeconfig exec entries: the per-cluster token store (one 0600 JSON file
//! per cluster in our cache dir) and the `ExecCredential` answer kubectl expects (docs/kubeconfig.md).
//!
//! The exec entry `kharonctl clusters ID token --exec-credential` reads from here, so a token stored
//! once (by `clusters ID login`) is what every kubeconfig of that cluster sends: the main one, the
//! per-cluster shell files and merged copies alike.
//!
//! [`web_login`] is what `oc login --web` does, without `oc`: discover the cluster's OAuth server
//! from `/.well-known/oauth-authorization-server` on the API server, send the browser to its
//! authorize endpoint (authorization code with PKCE S256, client `openshift-cli-client`, redirect to
//! a loopback port we pick), receive the code on that port and exchange it for a token. Every
//! request to the cluster goes through kharond (`socks5h://`) when the cluster is routed.
//!
//! # Output discipline
//! This runs inside kubectl's exec plugin, whose stdout must hold only the ExecCredential JSON:
//! messages go to stderr, and so does the browser command's stdout.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kharon_shared::inventory::Cluster;
use kharon_shared::time;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use tokio::net::{TcpListener, TcpStream};

use crate::browser;
use crate::context::Context;

/// The public OAuth client every OpenShift cluster has for `oc login --web`; it accepts any
/// loopback redirect port.
pub const CLIENT_ID: &str = "openshift-cli-client";
/// The callback path on our loopback port.
const CALLBACK_PATH: &str = "/callback";
/// A browser gets this long to send one request on the callback port.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A token this close to its expiry is not handed out any more (Go kharon answers expiry − 5 min).
const EXPIRY_MARGIN_SECS: u64 = 5 * 60;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read token file {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The parse error stays inside the sentence, before the advice, so it is not a `source()`.
    #[error("token file {} is corrupt ({cause}); log in again", path.display())]
    Corrupt { path: PathBuf, cause: serde_json::Error },
    #[error("cannot write token file {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("bad API URL {url:?}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("cannot set up the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("{url}")]
    Http { url: String, source: reqwest::Error },
    /// The server's certificate is refused (kube/trust.rs says why in words; `test` says the same).
    #[error("{url}: {words} ({detail})")]
    Certificate { url: String, words: String, detail: String },
    #[error("{url} answered HTTP {status}: {}", kharon_shared::text::Escaped(body))]
    Status { url: String, status: u16, body: String },
    #[error("{url} did not return OAuth server metadata")]
    Metadata { url: String, source: reqwest::Error },
    #[error("cannot listen for the browser on 127.0.0.1: {0}")]
    Bind(std::io::Error),
    #[error("the OAuth server refused the login: {}{}", kharon_shared::text::Escaped(error), in_parens(description.as_deref()))]
    Denied { error: String, description: Option<String> },
    #[error(
        "no login within {}; open the URL printed above, or run the command again",
        crate::duration::show(*after)
    )]
    Timeout { after: Duration },
    #[error("{id} has no API URL fact, so there is nothing to log in to")]
    NoApiUrl { id: String },
}

fn in_parens(text: Option<&str>) -> String {
    // The server's words (or a callback's query string): escaped where they are taken in.
    text.map(|d| format!(" ({})", kharon_shared::text::Escaped(d))).unwrap_or_default()
}

/// One cluster's stored bearer token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredToken {
    pub token: String,
    /// Unix seconds; `None` when the server did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

impl StoredToken {
    /// Still usable at `now` (with the margin).
    pub fn is_fresh(&self, now: SystemTime) -> bool {
        let now = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        self.expires_at.is_none_or(|at| at > now.saturating_add(EXPIRY_MARGIN_SECS))
    }
}

/// Where cluster `id`'s token lives.
pub fn path(cache_dir: &Path, id: &str) -> PathBuf {
    cache_dir.join("openshift-tokens").join(format!("{}.json", crate::kube::file_stem(id)))
}

pub fn load(path: &Path) -> Result<Option<StoredToken>, Error> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|cause| Error::Corrupt { path: path.to_owned(), cause }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read { path: path.to_owned(), source }),
    }
}

pub fn save(path: &Path, token: &StoredToken) -> Result<(), Error> {
    let bytes =
        serde_json::to_vec_pretty(token).map_err(|cause| Error::Corrupt { path: path.to_owned(), cause })?;
    kharon_shared::files::write_private(path, &bytes)
        .map_err(|source| Error::Write { path: path.to_owned(), source })
}

/// The API version to answer in: the one kubectl sent in `KUBERNETES_EXEC_INFO`, else v1.
pub fn exec_api_version(exec_info: Option<&str>) -> String {
    exec_info
        .and_then(|info| serde_json::from_str::<serde_json::Value>(info).ok())
        .and_then(|v| v.get("apiVersion").and_then(|a| a.as_str()).map(str::to_owned))
        .unwrap_or_else(|| crate::kube::EXEC_API_V1.to_owned())
}

/// The `ExecCredential` kubectl reads from an exec plugin's stdout.
pub fn exec_credential(token: &StoredToken, api_version: &str) -> serde_json::Value {
    let mut status = serde_json::json!({ "token": token.token });
    if let Some(at) = token.expires_at {
        // Expire it early on kubectl's side too, so it asks again before the server refuses. The
        // server chose `at`: past the year 9999 it is clamped, kubectl parses no "forever".
        let at = at.saturating_sub(EXPIRY_MARGIN_SECS).min(time::LAST_RFC3339);
        status["expirationTimestamp"] = serde_json::json!(time::rfc3339(at));
    }
    serde_json::json!({
        "kind": "ExecCredential",
        "apiVersion": api_version,
        "spec": { "interactive": false },
        "status": status,
    })
}

/// How [`web_login`] reaches the cluster and the user.
#[derive(Debug, Clone, Default)]
pub struct WebLogin {
    /// The cluster's API URL, e.g. `https://api.c.example:6443`.
    pub api_url: String,
    /// `socks5h://HOST:PORT` of kharond for a routed cluster; `None` connects directly.
    pub proxy: Option<String>,
    /// Extra trusted CA (PEM), e.g. from `talosAPICertificateAuthorityData`.
    pub ca_pem: Option<Vec<u8>>,
    /// `--idp`: skip the OAuth server's identity provider chooser.
    pub idp: Option<String>,
    /// `KHARON_BROWSER`, then `BROWSER`: a command run through `sh` with the URL as `$1`.
    pub browser: Option<String>,
    pub timeout: Duration,
}

impl WebLogin {
    /// How to log in to `cluster`: through kharond when it is routed, trusting the CA fact when
    /// there is one, with the user's browser command.
    pub async fn for_cluster(ctx: &Context, cluster: &Cluster, idp: Option<String>) -> Result<Self, Error> {
        let Some(api_url) = cluster.api_url() else {
            return Err(Error::NoApiUrl { id: cluster.id.clone() });
        };
        let ca_pem = super::trust::cluster_ca(cluster);
        let places = ctx.oidc_places();
        Ok(Self {
            api_url: api_url.to_owned(),
            // socks5h here (reqwest resolves nothing itself then); kubeconfigs need socks5 instead.
            proxy: match cluster.jumphost() {
                Some(_) => Some(ctx.proxy().await.url("socks5h")),
                None => None,
            },
            ca_pem,
            idp,
            browser: places.kharon_browser.or(places.browser),
            timeout: Duration::from_secs(180),
        })
    }
}

/// What `/.well-known/oauth-authorization-server` says (RFC 8414; only what we use).
#[derive(Debug, Deserialize)]
struct Metadata {
    authorization_endpoint: String,
    token_endpoint: String,
}

#[derive(Debug, Deserialize)]
struct TokenResponse {
    access_token: String,
    #[serde(default)]
    expires_in: Option<u64>,
}

/// The whole `oc login --web` flow; returns the new token.
pub async fn web_login(opts: &WebLogin) -> Result<StoredToken, Error> {
    let client = client(opts)?;
    let base = opts.api_url.trim_end_matches('/');
    let discovery = format!("{base}/.well-known/oauth-authorization-server");
    let meta: Metadata = checked(&client, client.get(&discovery), &discovery, opts.ca_pem.is_some())
        .await?
        .json()
        .await
        .map_err(|source| Error::Metadata { url: discovery.clone(), source })?;

    let listener = TcpListener::bind(("127.0.0.1", 0)).await.map_err(Error::Bind)?;
    let port = listener.local_addr().map_err(Error::Bind)?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
    let verifier = random_token(48);
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(&verifier));
    let state = random_token(24);
    let mut authorize = url::Url::parse(&meta.authorization_endpoint)
        .map_err(|e| Error::BadUrl { url: meta.authorization_endpoint.clone(), reason: e.to_string() })?;
    {
        let mut q = authorize.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", CLIENT_ID)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state);
        if let Some(idp) = &opts.idp {
            q.append_pair("idp", idp);
        }
    }
    eprintln!(
        "Log in to {} in your browser:\n  {}",
        kharon_shared::text::Escaped(&opts.api_url),
        kharon_shared::text::Escaped(authorize.as_str())
    );
    if let Err(e) = browser::open(authorize.as_str(), opts.browser.as_deref()) {
        eprintln!("kharonctl: cannot open a browser ({e}); open the URL above yourself");
    }
    let code = tokio::time::timeout(opts.timeout, wait_for_code(&listener, &state))
        .await
        .map_err(|_| Error::Timeout { after: opts.timeout })??;

    let form = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect_uri.as_str()),
        ("client_id", CLIENT_ID),
        ("code_verifier", verifier.as_str()),
    ];
    let token_url = meta.token_endpoint;
    let response: TokenResponse =
        checked(&client, client.post(&token_url).form(&form), &token_url, opts.ca_pem.is_some())
            .await?
            .json()
            .await
            .map_err(|source| Error::Http { url: token_url.clone(), source })?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Ok(StoredToken {
        token: response.access_token,
        expires_at: response.expires_in.map(|s| now.saturating_add(s)),
    })
}

fn client(opts: &WebLogin) -> Result<reqwest::Client, Error> {
    // The trust `test` checks with too (trust.rs).
    let mut builder = super::trust::builder(opts.ca_pem.as_deref())
        .map_err(Error::Client)?
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(20))
        .timeout(Duration::from_secs(60));
    // Our route, not the environment's: *_PROXY may point at kharond with socks5, or elsewhere.
    builder = builder.no_proxy();
    if let Some(proxy) = &opts.proxy {
        builder = builder.proxy(reqwest::Proxy::all(proxy).map_err(Error::Client)?);
    }
    builder.build().map_err(Error::Client)
}

async fn checked(
    client: &reqwest::Client,
    request: reqwest::RequestBuilder,
    url: &str,
    own_ca: bool,
) -> Result<reqwest::Response, Error> {
    let request = request.header("Accept", "application/json").build().map_err(Error::Client)?;
    let host = request.url().host_str().unwrap_or_default().to_owned();
    let response = client.execute(request).await.map_err(|source| {
        let detail = kharon_shared::errors::chain(&source);
        match super::trust::explain(&detail, &host, own_ca) {
            Some(words) => Error::Certificate { url: url.to_owned(), words, detail },
            None => Error::Http { url: url.to_owned(), source },
        }
    })?;
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let body: String = response.text().await.unwrap_or_default().chars().take(300).collect();
    Err(Error::Status { url: url.to_owned(), status, body })
}

/// URL-safe random text (`bytes` random bytes): PKCE verifier (RFC 7636 §4.1: 43–128 chars) and state.
fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::fill(&mut buf[..]);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// Serves the loopback port until the redirect with our `state` arrives.
async fn wait_for_code(listener: &TcpListener, state: &str) -> Result<String, Error> {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if let Some(outcome) = callback(stream, state).await {
            return outcome;
        }
    }
}

/// One browser request; `Some` when it ended the flow.
async fn callback(mut stream: TcpStream, state: &str) -> Option<Result<String, Error>> {
    let target =
        tokio::time::timeout(REQUEST_TIMEOUT, browser::read_get_target(&mut stream)).await.ok().flatten();
    let url = target.and_then(|t| url::Url::parse(&format!("http://127.0.0.1{t}")).ok());
    let Some(url) = url.filter(|u| u.path() == CALLBACK_PATH) else {
        browser::respond(&mut stream, 404, "Not found", "Nothing here.").await;
        return None;
    };
    let param = |name: &str| url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    if param("state").as_deref() != Some(state) {
        // Not our flow (a stale tab, or someone else's request): ignore it, keep waiting.
        browser::respond(
            &mut stream,
            400,
            "Login failed",
            "This login link is stale; start again from kharonctl.",
        )
        .await;
        return None;
    }
    if let Some(error) = param("error") {
        browser::respond(&mut stream, 200, "Login refused", "You can close this tab.").await;
        return Some(Err(Error::Denied { error, description: param("error_description") }));
    }
    let code = param("code")?;
    browser::respond(&mut stream, 200, "Logged in", "You can close this tab and return to the terminal.")
        .await;
    Some(Ok(code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_expiry_past_the_year_9999_is_clamped_to_a_date_kubectl_parses() {
        let token = StoredToken { token: "t".into(), expires_at: Some(u64::MAX) };
        let credential = exec_credential(&token, crate::kube::EXEC_API_V1);
        assert_eq!(credential["status"]["expirationTimestamp"], "9999-12-31T23:59:59Z");
    }

    #[test]
    fn a_servers_words_in_an_error_cannot_start_a_line_or_drive_the_terminal() {
        let refused =
            Error::Status { url: "https://oauth".into(), status: 500, body: "no\n\u{1b}[2Jforged".into() };
        assert_eq!(refused.to_string(), "https://oauth answered HTTP 500: no\\n\\x1b[2Jforged");
        let denied = Error::Denied { error: "x\ny".into(), description: Some("a\rb".into()) };
        assert_eq!(denied.to_string(), "the OAuth server refused the login: x\\ny (a\\rb)");
    }

    #[test]
    fn freshness_keeps_a_margin() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let t = |at| StoredToken { token: "t".into(), expires_at: at };
        assert!(t(None).is_fresh(now));
        assert!(t(Some(1_000_000 + 3600)).is_fresh(now));
        assert!(!t(Some(1_000_000 + 60)).is_fresh(now));
    }

    #[test]
    fn answers_in_the_callers_version_and_round_trips() {
        assert_eq!(exec_api_version(None), "client.authentication.k8s.io/v1");
        let info = r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential"}"#;
        assert_eq!(exec_api_version(Some(info)), "client.authentication.k8s.io/v1beta1");
        let cred =
            exec_credential(&StoredToken { token: "sha256~x".into(), expires_at: Some(1_767_225_900) }, "v");
        assert_eq!(cred["status"]["token"], "sha256~x");
        assert_eq!(cred["status"]["expirationTimestamp"], "2026-01-01T00:00:00Z");
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), "c-a");
        assert_eq!(load(&p).unwrap(), None);
        let tok = StoredToken { token: "abc".into(), expires_at: None };
        save(&p, &tok).unwrap();
        assert_eq!(load(&p).unwrap(), Some(tok));
    }
}
