//! OpenShift tokens for the kubeconfig exec entries: the per-cluster token store (one 0600 JSON file
//! per cluster in our cache dir) and the `ExecCredential` answer kubectl expects (docs/kubeconfig.md).
//!
//! The exec entry `kharonctl clusters ID token --exec-credential` reads from here, so a token stored
//! once (by `clusters ID login`) is what every kubeconfig of that cluster sends: the main one, the
//! per-cluster shell files and merged copies alike.
//!
//! [`web_login`] is what `oc login --web` does, without `oc`: discover the cluster's OAuth server
//! from `/.well-known/oauth-authorization-server` on the API server (RFC 8414), send the browser to
//! its authorize endpoint (authorization code with PKCE S256, client `openshift-cli-client`,
//! redirect to a loopback port we pick), receive the code on that port and exchange it for a token.
//! The `oauth2` crate does the protocol: the PKCE verifier and its S256 challenge (RFC 7636), the
//! random `state`, the authorization URL's parameters (RFC 6749 §4.1.1), the code exchange's form
//! (§4.1.3) and reading the token or error answer (§5.1, §5.2). What stays here is discovery (the
//! crate has none for plain OAuth), the loopback callback and the HTTP client, so that every
//! request to the cluster goes through kharond (`socks5h://`) when the cluster is routed and a
//! refused certificate is explained in words.
//!
//! # Output discipline
//! This runs inside kubectl's exec plugin, whose stdout must hold only the ExecCredential JSON:
//! messages go to stderr, and so does the browser command's stdout.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kharon_common::time;
use kharon_routing::inventory::Cluster;
use oauth2::basic::{BasicClient, BasicErrorResponse, BasicTokenResponse};
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, CsrfToken, EndpointNotSet, EndpointSet, HttpRequest, HttpResponse,
    PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, RequestTokenError, TokenResponse as _, TokenUrl,
};
use serde::{Deserialize, Serialize};
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
    #[error("{url} answered HTTP {status}: {}", kharon_common::text::Escaped(body))]
    Status { url: String, status: u16, body: String },
    #[error("{url} did not return OAuth server metadata")]
    Metadata { url: String, source: reqwest::Error },
    /// The token endpoint answered, but not with a token (nor an OAuth error).
    #[error("{url} answered without a usable token: {}", kharon_common::text::Escaped(reason))]
    NoToken { url: String, reason: String },
    #[error("cannot listen for the browser on 127.0.0.1: {0}")]
    Bind(std::io::Error),
    #[error("the OAuth server refused the login: {}{}", kharon_common::text::Escaped(error), in_parens(description.as_deref()))]
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
    text.map(|d| format!(" ({})", kharon_common::text::Escaped(d))).unwrap_or_default()
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
    kharon_common::files::write_private(path, &bytes)
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

/// `oc login --web`'s OAuth client at one cluster's OAuth server: authorize and token endpoints set.
type OcClient = BasicClient<EndpointSet, EndpointNotSet, EndpointNotSet, EndpointNotSet, EndpointSet>;

/// Where the browser goes, and what the callback and the exchange check against.
struct Authorization {
    url: url::Url,
    state: CsrfToken,
    verifier: PkceCodeVerifier,
}

/// The whole `oc login --web` flow; returns the new token.
pub async fn web_login(opts: &WebLogin) -> Result<StoredToken, Error> {
    let http = client(opts)?;
    let own_ca = opts.ca_pem.is_some();
    let discovery = discovery_url(&opts.api_url)?;
    let meta: Metadata = checked(&http, http.get(discovery.clone()), discovery.as_str(), own_ca)
        .await?
        .json()
        .await
        .map_err(|source| Error::Metadata { url: discovery.to_string(), source })?;

    let listener = TcpListener::bind(("127.0.0.1", 0)).await.map_err(Error::Bind)?;
    let port = listener.local_addr().map_err(Error::Bind)?.port();
    let oauth = oauth_client(&meta, format!("http://127.0.0.1:{port}{CALLBACK_PATH}"))?;
    let auth = authorization(&oauth, opts.idp.as_deref());
    eprintln!(
        "Log in to {} in your browser:\n  {}",
        kharon_common::text::Escaped(&opts.api_url),
        kharon_common::text::Escaped(auth.url.as_str())
    );
    if let Err(e) = browser::open(auth.url.as_str(), opts.browser.as_deref()) {
        eprintln!("kharonctl: cannot open a browser ({e}); open the URL above yourself");
    }
    let code = tokio::time::timeout(opts.timeout, wait_for_code(&listener, auth.state.secret()))
        .await
        .map_err(|_| Error::Timeout { after: opts.timeout })??;
    exchange(&oauth, &http, own_ca, code, auth.verifier).await
}

/// `/.well-known/oauth-authorization-server` under the API URL's path, where OpenShift serves it and
/// `oc login` asks; the API URL's own query (if any) stays a query.
fn discovery_url(api_url: &str) -> Result<url::Url, Error> {
    let bad = |reason: &str| Error::BadUrl { url: api_url.to_owned(), reason: reason.to_owned() };
    let mut url = url::Url::parse(api_url).map_err(|e| bad(&e.to_string()))?;
    url.path_segments_mut()
        .map_err(|()| bad("it cannot have a path"))?
        .pop_if_empty()
        .extend([".well-known", "oauth-authorization-server"]);
    Ok(url)
}

/// The OAuth client for the discovered endpoints and our loopback redirect. It has no secret (a
/// public client, RFC 6749 §2.1), so `oauth2` sends `client_id` in the token request's form body, as
/// §4.1.3 asks of a client that does not authenticate.
fn oauth_client(meta: &Metadata, redirect_uri: String) -> Result<OcClient, Error> {
    fn bad(url: &str) -> impl FnOnce(url::ParseError) -> Error + '_ {
        move |e| Error::BadUrl { url: url.to_owned(), reason: e.to_string() }
    }
    let auth_url =
        AuthUrl::new(meta.authorization_endpoint.clone()).map_err(bad(&meta.authorization_endpoint))?;
    let token_url = TokenUrl::new(meta.token_endpoint.clone()).map_err(bad(&meta.token_endpoint))?;
    let redirect = RedirectUrl::new(redirect_uri.clone()).map_err(bad(&redirect_uri))?;
    Ok(BasicClient::new(ClientId::new(CLIENT_ID.to_owned()))
        .set_auth_uri(auth_url)
        .set_token_uri(token_url)
        .set_redirect_uri(redirect))
}

/// The authorize URL: code flow, a fresh PKCE S256 challenge and `state`, and `--idp` when given.
fn authorization(oauth: &OcClient, idp: Option<&str>) -> Authorization {
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let mut request = oauth.authorize_url(CsrfToken::new_random).set_pkce_challenge(challenge);
    if let Some(idp) = idp {
        request = request.add_extra_param("idp", idp);
    }
    let (url, state) = request.url();
    Authorization { url, state, verifier }
}

/// Trades the callback's code (and the PKCE verifier) for a token at the token endpoint.
async fn exchange(
    oauth: &OcClient,
    http: &reqwest::Client,
    own_ca: bool,
    code: String,
    verifier: PkceCodeVerifier,
) -> Result<StoredToken, Error> {
    let token_url = oauth.token_uri().to_string();
    let send = |request: HttpRequest| send_oauth(http, request, own_ca);
    let response: BasicTokenResponse = oauth
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .request_async(&send)
        .await
        .map_err(|e| exchange_error(&token_url, e))?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    Ok(StoredToken {
        token: response.access_token().secret().clone(),
        expires_at: response.expires_in().map(|d| now.saturating_add(d.as_secs())),
    })
}

/// What a failed exchange tells the user: our own errors as they are, the server's OAuth error
/// (RFC 6749 §5.2) as a refused login, anything else as an answer without a token.
fn exchange_error(url: &str, error: RequestTokenError<Error, BasicErrorResponse>) -> Error {
    match error {
        RequestTokenError::Request(e) => e,
        RequestTokenError::ServerResponse(e) => Error::Denied {
            error: e.error().as_ref().to_owned(),
            description: e.error_description().cloned(),
        },
        RequestTokenError::Parse(e, _) => Error::NoToken { url: url.to_owned(), reason: e.to_string() },
        RequestTokenError::Other(reason) => Error::NoToken { url: url.to_owned(), reason },
    }
}

/// `oauth2`'s HTTP client: our reqwest client (its proxy, trust and timeouts), with refused
/// certificates explained. A failure answer that is not an OAuth error document (a proxy's HTML
/// page, an empty 502) is reported with its status here, since `oauth2` would only say it cannot
/// parse it.
async fn send_oauth(
    http: &reqwest::Client,
    request: HttpRequest,
    own_ca: bool,
) -> Result<HttpResponse, Error> {
    let url = request.uri().to_string();
    let request = reqwest::Request::try_from(request).map_err(Error::Client)?;
    let response = send(http, request, &url, own_ca).await?;
    let (status, headers) = (response.status(), response.headers().clone());
    let body = response.bytes().await.map_err(|source| Error::Http { url: url.clone(), source })?;
    if !status.is_success() && serde_json::from_slice::<BasicErrorResponse>(&body).is_err() {
        let body = String::from_utf8_lossy(&body).chars().take(300).collect();
        return Err(Error::Status { url, status: status.as_u16(), body });
    }
    let mut answer = HttpResponse::new(body.to_vec());
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
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

/// Sends `request` and insists on a success status.
async fn checked(
    http: &reqwest::Client,
    request: reqwest::RequestBuilder,
    url: &str,
    own_ca: bool,
) -> Result<reqwest::Response, Error> {
    let request = request.header("Accept", "application/json").build().map_err(Error::Client)?;
    let response = send(http, request, url, own_ca).await?;
    if response.status().is_success() {
        return Ok(response);
    }
    let status = response.status().as_u16();
    let body: String = response.text().await.unwrap_or_default().chars().take(300).collect();
    Err(Error::Status { url: url.to_owned(), status, body })
}

/// Sends `request`; a certificate the server is refused for is said in words (trust.rs).
async fn send(
    http: &reqwest::Client,
    request: reqwest::Request,
    url: &str,
    own_ca: bool,
) -> Result<reqwest::Response, Error> {
    let host = request.url().host_str().unwrap_or_default().to_owned();
    http.execute(request).await.map_err(|source| {
        let detail = kharon_common::errors::chain(&source);
        match super::trust::explain(&detail, &host, own_ca) {
            Some(words) => Error::Certificate { url: url.to_owned(), words, detail },
            None => Error::Http { url: url.to_owned(), source },
        }
    })
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

    fn oc_client() -> OcClient {
        let meta = Metadata {
            authorization_endpoint: "https://oauth.c.example/oauth/authorize?tenant=a".into(),
            token_endpoint: "https://oauth.c.example/oauth/token".into(),
        };
        oauth_client(&meta, "http://127.0.0.1:4242/callback".into()).unwrap()
    }

    fn query(url: &url::Url, name: &str) -> Vec<String> {
        url.query_pairs().filter(|(k, _)| k == name).map(|(_, v)| v.into_owned()).collect()
    }

    #[test]
    fn the_authorize_url_carries_the_s256_challenge_of_its_verifier_and_an_idp_whole() {
        use base64::Engine as _;
        use sha2::Digest as _;
        let idp = "corp & co#1?x=y";
        let auth = authorization(&oc_client(), Some(idp));
        let q = |name| query(&auth.url, name);
        assert_eq!(q("tenant"), ["a"], "the endpoint's own query is kept: {}", auth.url);
        assert_eq!(q("response_type"), ["code"]);
        assert_eq!(q("client_id"), [CLIENT_ID]);
        assert_eq!(q("redirect_uri"), ["http://127.0.0.1:4242/callback"]);
        assert_eq!(q("code_challenge_method"), ["S256"]);
        let verifier = auth.verifier.secret();
        assert!((43..=128).contains(&verifier.len()), "RFC 7636 §4.1: {verifier}");
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(sha2::Sha256::digest(verifier.as_bytes()));
        assert_eq!(q("code_challenge"), [challenge]);
        assert_eq!(q("state"), [auth.state.secret().as_str()]);
        assert_eq!(q("idp"), [idp]);
        assert_eq!(auth.url.fragment(), None);

        let again = authorization(&oc_client(), None);
        assert_ne!(again.state.secret(), auth.state.secret());
        assert_ne!(again.verifier.secret(), auth.verifier.secret());
        assert!(query(&again.url, "idp").is_empty(), "{}", again.url);
    }

    #[test]
    fn discovery_is_under_the_api_urls_path_whatever_its_query_holds() {
        let at = |api: &str| discovery_url(api).map(|u| u.to_string()).map_err(|e| e.to_string());
        let well_known = "/.well-known/oauth-authorization-server";
        assert_eq!(at("https://api.c.example:6443"), Ok(format!("https://api.c.example:6443{well_known}")));
        assert_eq!(at("https://api.c.example:6443/"), Ok(format!("https://api.c.example:6443{well_known}")));
        assert_eq!(at("https://gw.example/c1/"), Ok(format!("https://gw.example/c1{well_known}")));
        assert_eq!(
            at("https://api.c.example:6443?a=1&b=/x#y"),
            Ok(format!("https://api.c.example:6443{well_known}?a=1&b=/x#y"))
        );
        assert!(
            at("api.c.example:6443").is_err_and(|e| e.starts_with(r#"bad API URL "api.c.example:6443""#))
        );
        assert!(at("mailto:ops@c.example").is_err_and(|e| e.contains("it cannot have a path")));
    }

    #[test]
    fn an_endpoint_that_is_no_url_is_named() {
        let meta = Metadata { authorization_endpoint: "/oauth/authorize".into(), token_endpoint: "x".into() };
        let Err(e) = oauth_client(&meta, "http://127.0.0.1:1/callback".into()) else {
            panic!("a relative authorize endpoint was taken");
        };
        assert!(e.to_string().starts_with(r#"bad API URL "/oauth/authorize": "#), "{e}");
    }

    #[test]
    fn the_token_endpoints_oauth_error_is_a_refused_login_in_escaped_words() {
        use oauth2::StandardErrorResponse;
        use oauth2::basic::BasicErrorResponseType;
        let refused = StandardErrorResponse::new(
            BasicErrorResponseType::InvalidGrant,
            Some("code expired\n\u{1b}[2J".into()),
            None,
        );
        let e = exchange_error("https://oauth/token", RequestTokenError::ServerResponse(refused));
        assert_eq!(
            e.to_string(),
            "the OAuth server refused the login: invalid_grant (code expired\\n\\x1b[2J)"
        );
        let odd = exchange_error("https://oauth/token", RequestTokenError::Other("no body\r".into()));
        assert_eq!(odd.to_string(), "https://oauth/token answered without a usable token: no body\\r");
    }

    /// An HTTP/1.1 answer with `body`.
    fn reply(status: &str, content_type: &str, body: &str) -> String {
        let length = body.len();
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n\
             Connection: close\r\n\r\n{body}"
        )
    }

    /// A token endpoint on loopback that answers one request with `response` and hands back
    /// what it was sent.
    async fn token_endpoint(response: String) -> (String, tokio::task::JoinHandle<String>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let url = format!("http://{}/oauth/token", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // The head, then as many body bytes as it announces.
            while !String::from_utf8_lossy(&request).split_once("\r\n\r\n").is_some_and(|(head, body)| {
                let length = head
                    .lines()
                    .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                body.len() >= length
            }) {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            stream.write_all(response.as_bytes()).await.unwrap();
            String::from_utf8(request).unwrap()
        });
        (url, served)
    }

    async fn exchange_with(response: String) -> (Result<StoredToken, Error>, String) {
        let (token_endpoint, served) = token_endpoint(response).await;
        let meta = Metadata {
            authorization_endpoint: "https://oauth.c.example/oauth/authorize".into(),
            token_endpoint,
        };
        let oauth = oauth_client(&meta, "http://127.0.0.1:4242/callback".into()).unwrap();
        let auth = authorization(&oauth, None);
        let http = client(&WebLogin::default()).unwrap();
        let verifier = auth.verifier.secret().clone();
        let result = exchange(&oauth, &http, false, "the code".into(), auth.verifier).await;
        let request = served.await.unwrap();
        assert!(request.contains(&format!("code_verifier={verifier}")), "{request}");
        (result, request)
    }

    #[tokio::test]
    async fn the_code_exchange_sends_the_verifier_and_reads_the_token() {
        let body = r#"{"access_token":"sha256~t","token_type":"Bearer","expires_in":86400,"x":"y"}"#;
        let (token, request) = exchange_with(reply("200 OK", "application/json", body)).await;
        let token = token.unwrap();
        assert_eq!(token.token, "sha256~t");
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        assert!(token.expires_at.is_some_and(|at| at.abs_diff(now + 86400) < 60), "{token:?}");
        assert!(request.starts_with("POST /oauth/token "), "{request}");
        for field in ["grant_type=authorization_code", "code=the+code", "client_id=openshift-cli-client"] {
            assert!(request.contains(field), "{field} missing: {request}");
        }
        assert!(request.contains("redirect_uri=http%3A%2F%2F127.0.0.1%3A4242%2Fcallback"), "{request}");
        assert!(!request.to_ascii_lowercase().contains("authorization:"), "a public client: {request}");
    }

    #[tokio::test]
    async fn a_refused_code_an_error_page_and_an_answer_without_a_token_each_say_so() {
        let refused = r#"{"error":"invalid_grant","error_description":"code expired"}"#;
        let err = exchange_with(reply("400 Bad Request", "application/json", refused)).await.0.unwrap_err();
        let err = err.to_string();
        assert_eq!(err, "the OAuth server refused the login: invalid_grant (code expired)");

        let page = "<h1>no upstream\n</h1>";
        let err = exchange_with(reply("502 Bad Gateway", "text/html", page)).await.0.unwrap_err().to_string();
        assert!(err.ends_with("/oauth/token answered HTTP 502: <h1>no upstream\\n</h1>"), "{err}");

        let no_token = r#"{"token_type":"Bearer"}"#;
        let err =
            exchange_with(reply("200 OK", "application/json", no_token)).await.0.unwrap_err().to_string();
        assert!(err.contains("/oauth/token answered without a usable token: "), "{err}");
        assert!(err.contains("access_token"), "{err}");
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
