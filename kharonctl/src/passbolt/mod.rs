//! A Passbolt API client, just what emergency credentials need (protocols.md §3.2–3.4), following
//! go-passbolt v0.7.2, which both VSHN tools use:
//!
//! - [`Session::login`] ([`gpgauth`]): GPGAuth with the user's OpenPGP key, the `/users/me.json`
//!   key check, TOTP when the account has MFA;
//! - [`Session::secret_by_name`] ([`resources`]): the resource list, the name also inside Passbolt
//!   v5's encrypted metadata, and the decrypted secret.
//!
//! Conventions of every call: the base URL may carry a path (`https://cloud.passbolt.com/vshn`),
//! each request gets `?api-version=v2`, JSON in and out, an `{"header": …, "body": …}` envelope
//! back. Cookies (session, `csrfToken`, `passbolt_mfa`) are kept here for the one server this
//! session talks to, and `csrfToken`'s value goes back as `X-CSRF-Token`. Any call may be answered
//! with an MFA challenge: then the TOTP code is verified and the call repeated, once.
//!
//! The HTTP client ignores `HTTP(S)_PROXY` (as the Lieutenant client does) and follows no
//! redirects. Nothing secret (key, passphrase, code, cookies, decrypted data) is ever logged or
//! put into an error.

pub mod gpgauth;
pub mod resources;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use crate::openpgp::PrivateKey;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Messages carry their causes themselves (no `#[source]`): `kharonctl`'s `{:#}` would repeat them.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot build the HTTP client: {0}")]
    Client(reqwest::Error),
    #[error("cannot reach Passbolt at {url}: {}", crate::lieutenant::chain(cause))]
    Connect { url: String, cause: reqwest::Error },
    #[error(
        "{url} answered HTTP {status} with something that is not a Passbolt API reply; is the Passbolt \
         URL right (setting passbolt_url, env KHARON_PASSBOLT_URL, flag --passbolt-url)?"
    )]
    NotPassbolt { url: String, status: u16 },
    #[error("Passbolt refused {what} (HTTP {status}): {message}")]
    Refused { what: String, status: u16, message: String },
    #[error(
        "Passbolt at {url} knows no user with key {fingerprint}: use the key of your Passbolt account \
         ({url}/app/settings/keys)"
    )]
    UnknownKey { url: String, fingerprint: String },
    #[error("Passbolt's login challenge is not what GPGAuth sends: {0}")]
    BadChallenge(String),
    #[error("cannot decrypt {what} with your key: {cause}")]
    Decrypt { what: String, cause: crate::openpgp::Error },
    #[error(
        "Passbolt at {url} answered /users/me.json with a different key ({theirs}, yours is {ours}); \
         refusing to go on: something between you and Passbolt is not Passbolt"
    )]
    KeyMismatch { url: String, ours: String, theirs: String },
    #[error(
        "Passbolt refused the TOTP code ({message}); give the current code from your authenticator \
         app (KHARON_PASSBOLT_TOTP or EMR_TOTP_TOKEN must hold a fresh one)"
    )]
    TotpRejected { message: String },
    #[error(
        "Passbolt asks for a second factor kharonctl cannot give (offered: {offered}); only TOTP is supported"
    )]
    MfaUnsupported { offered: String },
    #[error("Passbolt asked for the second factor again right after accepting the TOTP code")]
    MfaAgain,
    #[error("cannot read the TOTP code: {0}")]
    Totp(String),
    #[error("no Passbolt resource named {name:?} is shared with you ({seen} resources looked at{})", encrypted_note(*undecryptable))]
    NoResource { name: String, seen: usize, undecryptable: usize },
    #[error("Passbolt sent {what} that is not what its API describes: {reason}")]
    Decode { what: String, reason: String },
}

fn encrypted_note(n: usize) -> String {
    if n == 0 { String::new() } else { format!(", {n} of them with names encrypted to keys you do not have") }
}

/// Where the TOTP code comes from when Passbolt asks for it (environment or a hidden prompt).
pub type TotpSource = Box<dyn FnMut() -> Result<String, String> + Send>;

/// The `header` of every reply.
#[derive(Debug, Default, Deserialize)]
struct Header {
    #[serde(default)]
    status: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    url: String,
    #[serde(default)]
    code: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Envelope {
    header: Header,
    #[serde(default)]
    body: Value,
}

/// One reply: HTTP status, the response headers we look at, and the envelope.
struct Reply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    header: Header,
    body: Value,
}

impl Reply {
    fn ok(&self) -> bool {
        self.header.status == "success" && (200..300).contains(&self.status)
    }

    /// Passbolt's MFA challenge: a 403 whose envelope points at `/mfa/verify/error.json`.
    fn is_mfa_challenge(&self) -> bool {
        let code = self.header.code.as_ref().and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()));
        (self.status == 403 || code == Some(403)) && self.header.url.contains("/mfa/verify/error.json")
    }
}

/// A logged-in (or logging-in) session with one Passbolt server.
pub struct Session {
    http: reqwest::Client,
    base: String,
    cookies: BTreeMap<String, String>,
    totp: TotpSource,
    key: PrivateKey,
}

impl Session {
    /// A session for `base_url` that will log in with `key` (already unlocked).
    pub fn new(base_url: &str, key: PrivateKey, totp: TotpSource) -> Result<Self, Error> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("kharon/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(Error::Client)?;
        Ok(Self {
            http,
            base: base_url.trim_end_matches('/').to_owned(),
            cookies: BTreeMap::new(),
            totp,
            key,
        })
    }

    pub fn key(&self) -> &PrivateKey {
        &self.key
    }

    fn url(&self, path: &str) -> String {
        let sep = if path.contains('?') { '&' } else { '?' };
        format!("{}/{}{sep}api-version=v2", self.base, path.trim_start_matches('/'))
    }

    /// Keeps every cookie the server sets (name=value only: one server, and it is always it).
    fn keep_cookies(&mut self, headers: &reqwest::header::HeaderMap) {
        for value in headers.get_all(reqwest::header::SET_COOKIE) {
            let Ok(text) = value.to_str() else { continue };
            let pair = text.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                let (name, value) = (name.trim(), value.trim());
                if name.is_empty() {
                    continue;
                }
                // An expired or emptied cookie is a deletion.
                if value.is_empty() || text.to_ascii_lowercase().contains("max-age=0") {
                    self.cookies.remove(name);
                } else {
                    self.cookies.insert(name.to_owned(), value.to_owned());
                }
            }
        }
    }

    /// Whether the server has set a cookie with one of `names`.
    fn has_cookie(&self, names: &[&str]) -> bool {
        names.iter().any(|n| self.cookies.contains_key(*n))
    }

    /// One request, no MFA handling; any envelope comes back, successful or not.
    async fn send(
        &mut self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Reply, Error> {
        let url = self.url(path);
        let mut request = self.http.request(method, &url).header(reqwest::header::ACCEPT, "application/json");
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
            request = request.header(reqwest::header::COOKIE, jar.join("; "));
        }
        if let Some(csrf) = self.cookies.get("csrfToken") {
            request = request.header("X-CSRF-Token", csrf);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response =
            request.send().await.map_err(|cause| Error::Connect { url: self.base.clone(), cause })?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        self.keep_cookies(&headers);
        let bytes =
            response.bytes().await.map_err(|cause| Error::Connect { url: self.base.clone(), cause })?;
        let envelope: Envelope = serde_json::from_slice(&bytes)
            .map_err(|_| Error::NotPassbolt { url: format!("{}/{}", self.base, path), status })?;
        Ok(Reply { status, headers, header: envelope.header, body: envelope.body })
    }

    /// One API call whose success body is returned; an MFA challenge is answered once, then the
    /// call is repeated.
    async fn call(
        &mut self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, Error> {
        let mut reply = self.send(method.clone(), path, body).await?;
        if reply.is_mfa_challenge() {
            self.verify_totp(&reply.body).await?;
            reply = self.send(method, path, body).await?;
            if reply.is_mfa_challenge() {
                return Err(Error::MfaAgain);
            }
        }
        if !reply.ok() {
            return Err(Error::Refused {
                what: what.to_owned(),
                status: reply.status,
                message: message(&reply),
            });
        }
        Ok(reply.body)
    }

    /// `POST /mfa/verify/totp.json`; the reply's `passbolt_mfa` cookie opens the door.
    async fn verify_totp(&mut self, challenge: &Value) -> Result<(), Error> {
        let offered = offered_providers(challenge);
        if !offered.is_empty() && !offered.iter().any(|p| p == "totp") {
            return Err(Error::MfaUnsupported { offered: offered.join(", ") });
        }
        let code = (self.totp)().map_err(Error::Totp)?;
        let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        let reply = self
            .send(reqwest::Method::POST, "/mfa/verify/totp.json", Some(&serde_json::json!({"totp": code})))
            .await?;
        if !reply.ok() {
            return Err(Error::TotpRejected { message: message(&reply) });
        }
        Ok(())
    }
}

/// The server's message, or the HTTP status when it sent none.
fn message(reply: &Reply) -> String {
    let m = reply.header.message.trim();
    if m.is_empty() { format!("HTTP {}", reply.status) } else { m.to_owned() }
}

/// Provider names of an MFA challenge body: `{"mfa_providers": ["totp"], "providers": {"totp": url}}`.
fn offered_providers(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body
        .get("mfa_providers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if let Some(map) = body.get("providers").and_then(Value::as_object) {
        names.extend(map.keys().cloned());
    }
    names.sort();
    names.dedup();
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mfa_challenges_are_recognised_by_their_url() {
        let reply = |status, url: &str| Reply {
            status,
            headers: Default::default(),
            header: Header { status: "error".into(), url: url.into(), ..Default::default() },
            body: Value::Null,
        };
        assert!(reply(403, "https://p.example/vshn/mfa/verify/error.json").is_mfa_challenge());
        assert!(!reply(403, "https://p.example/vshn/users/me.json").is_mfa_challenge());
        let body = serde_json::json!({"mfa_providers": ["totp", "yubikey"], "providers": {"totp": "u"}});
        assert_eq!(offered_providers(&body), ["totp", "yubikey"]);
    }

    #[test]
    fn cookies_are_kept_replaced_and_deleted() {
        let key =
            PrivateKey::parse(&crate::openpgp::tests::armored_secret(&crate::openpgp::tests::new_key("p")))
                .unwrap();
        let mut s = Session::new("https://p.example/vshn/", key, Box::new(|| Ok(String::new()))).unwrap();
        assert_eq!(s.url("/auth/login.json"), "https://p.example/vshn/auth/login.json?api-version=v2");
        let mut h = reqwest::header::HeaderMap::new();
        h.append(reqwest::header::SET_COOKIE, "csrfToken=abc; Path=/; Secure".parse().unwrap());
        h.append(reqwest::header::SET_COOKIE, "passbolt_session=s1; HttpOnly".parse().unwrap());
        s.keep_cookies(&h);
        assert_eq!(s.cookies.get("csrfToken").map(String::as_str), Some("abc"));
        assert!(s.has_cookie(&["PHPSESSID", "passbolt_session"]));
        let mut h = reqwest::header::HeaderMap::new();
        h.append(reqwest::header::SET_COOKIE, "passbolt_session=; Max-Age=0".parse().unwrap());
        s.keep_cookies(&h);
        assert!(!s.has_cookie(&["passbolt_session"]));
    }
}
