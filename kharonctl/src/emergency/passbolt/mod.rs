//! A Passbolt API client, just what emergency credentials need (docs/emergency-credentials.md), following
//! go-passbolt v0.7.2, which both VSHN tools use:
//!
//! - [`Session::login`] ([`gpgauth`]): GPGAuth with the user's OpenPGP key, the `/users/me.json`
//!   key check, TOTP when the account has MFA;
//! - [`Session::secret_by_name`] ([`resources`]): the resource list, the name also inside Passbolt
//!   v5's encrypted metadata, and the decrypted secret.
//!
//! Conventions of every call: the base URL may carry a path (`https://cloud.passbolt.com/vshn`),
//! each request gets `?api-version=v2` ([`endpoint`] puts the URL together), JSON in and out, an `{"header": …, "body": …}` envelope
//! back. Cookies (session, `csrfToken`, `passbolt_mfa`) are kept in a [`cookies::Jar`] for the one
//! server this session talks to, and `csrfToken`'s value goes back as `X-CSRF-Token`.
//!
//! MFA, as passbolt_api does it: while the session still needs its second factor, any JSON call
//! is answered `302 Location: …/mfa/verify/error.json` (`MfaRequiredCheckMiddleware`), and only
//! that URL answers the 403 listing the providers (`MfaVerifyAjaxErrorController`), clearing
//! `passbolt_mfa` as it does. The redirect is followed the way go-passbolt's HTTP client follows
//! it: same scheme, host and port only (go-passbolt's `CheckRedirect`), cookies set on every hop
//! kept. Then the TOTP code is verified and the call repeated, once.
//!
//! The HTTP client ignores `HTTP(S)_PROXY` (as the Lieutenant client does); redirects are
//! followed here, not by reqwest, so that each hop's cookies are seen. Nothing secret (key,
//! passphrase, code, cookies, decrypted data) is ever logged or put into an error.

pub mod cookies;
pub mod endpoint;
pub mod gpgauth;
pub mod resources;

use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::Value;

use crate::emergency::openpgp::PrivateKey;
use endpoint::Endpoint;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed for one call, as many as Go's HTTP client follows (upstream sends one).
const MAX_REDIRECTS: usize = 10;

/// Passbolt's own words escaped; a cause is the `source()`, not part of the message.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("--passbolt-url {0:?} is not an http(s) URL without query or fragment")]
    BaseUrl(String),
    #[error("cannot reach Passbolt at {url}")]
    Connect { url: String, source: reqwest::Error },
    #[error(
        "{url} redirected to {to}, which is not the Passbolt server you gave ({base}); not following it \
         (your cookies would go along). Is Passbolt's App.fullBaseUrl right, or the Passbolt URL?"
    )]
    OffSite { url: String, to: String, base: String },
    #[error("{url} answered HTTP {status} without a usable Location to redirect to")]
    BadRedirect { url: String, status: u16 },
    #[error("{url} redirected more than {MAX_REDIRECTS} times")]
    RedirectLoop { url: String },
    #[error(
        "{url} answered HTTP {status} with something that is not a Passbolt API reply; is the Passbolt \
         URL right (setting passbolt_url, env KHARON_PASSBOLT_URL, flag --passbolt-url)?"
    )]
    NotPassbolt { url: String, status: u16 },
    #[error("Passbolt refused {what} (HTTP {status}): {}", kharon_common::text::Escaped(message))]
    Refused { what: String, status: u16, message: String },
    #[error(
        "Passbolt at {url} knows no user with key {fingerprint}: use the key of your Passbolt account \
         ({url}/app/settings/keys)"
    )]
    UnknownKey { url: String, fingerprint: String },
    #[error("Passbolt's login challenge is not what GPGAuth sends: {0}")]
    BadChallenge(String),
    #[error("cannot decrypt {what} with your key")]
    Decrypt { what: String, source: crate::emergency::openpgp::Error },
    #[error(
        "Passbolt at {url} answered /users/me.json with a different key ({theirs}, yours is {ours}); \
         refusing to go on: something between you and Passbolt is not Passbolt"
    )]
    KeyMismatch { url: String, ours: String, theirs: String },
    #[error(
        "Passbolt refused the TOTP code: {} Give the current code from your authenticator \
         app (KHARON_PASSBOLT_TOTP or EMR_TOTP_TOKEN must hold a fresh one)",
        kharon_common::text::Escaped(message)
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

    /// Passbolt's MFA challenge: the 403 of `/mfa/verify/error.json` (reached through the
    /// redirect), recognised by the URL its envelope names, as go-passbolt recognises it.
    fn is_mfa_challenge(&self) -> bool {
        let code = self.header.code.as_ref().and_then(|c| c.as_u64().or_else(|| c.as_str()?.parse().ok()));
        (self.status == 403 || code == Some(403)) && self.header.url.contains("/mfa/verify/error.json")
    }
}

/// A logged-in (or logging-in) session with one Passbolt server.
pub struct Session {
    http: reqwest::Client,
    /// The base URL without a trailing slash, path included (`https://cloud.passbolt.com/vshn`), for messages.
    base: String,
    /// The same, parsed: what every endpoint's URL is built under.
    base_url: url::Url,
    /// Where redirects may lead: the base URL's scheme, host and port.
    origin: url::Origin,
    cookies: cookies::Jar,
    totp: TotpSource,
    key: PrivateKey,
}

impl Session {
    /// A session for `base_url` that will log in with `key` (already unlocked).
    pub fn new(base_url: &str, key: PrivateKey, totp: TotpSource) -> Result<Self, Error> {
        let parsed = url::Url::parse(base_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .filter(|u| u.query().is_none() && u.fragment().is_none())
            .ok_or_else(|| Error::BaseUrl(base_url.to_owned()))?;
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
            origin: parsed.origin(),
            base_url: parsed,
            cookies: cookies::Jar::default(),
            totp,
            key,
        })
    }

    pub fn key(&self) -> &PrivateKey {
        &self.key
    }

    fn url(&self, endpoint: &Endpoint) -> Result<url::Url, Error> {
        endpoint.under(&self.base_url).ok_or_else(|| Error::BaseUrl(self.base.clone()))
    }

    /// Whether the server has set a cookie with one of `names`.
    fn has_cookie(&self, names: &[&str]) -> bool {
        self.cookies.contains_any(names)
    }

    /// One request, redirects followed (same origin only), no MFA handling; any envelope comes
    /// back, successful or not.
    async fn send(
        &mut self,
        method: reqwest::Method,
        endpoint: &Endpoint,
        body: Option<&Value>,
    ) -> Result<Reply, Error> {
        let (mut method, mut body) = (method, body);
        let mut url = self.url(endpoint)?;
        let first = without_query(&url);
        let mut shown = first.clone();
        for _ in 0..=MAX_REDIRECTS {
            let mut request = self
                .http
                .request(method.clone(), url.clone())
                .header(reqwest::header::ACCEPT, "application/json");
            if let Some(jar) = self.cookies.header() {
                request = request.header(reqwest::header::COOKIE, jar);
            }
            if let Some(csrf) = self.cookies.get("csrfToken") {
                request = request.header("X-CSRF-Token", csrf);
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let response =
                request.send().await.map_err(|source| Error::Connect { url: self.base.clone(), source })?;
            let status = response.status();
            let headers = response.headers().clone();
            self.cookies.keep(&headers, SystemTime::now());
            if status.is_redirection() && status != reqwest::StatusCode::NOT_MODIFIED {
                let next = headers
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok())
                    .ok_or_else(|| Error::BadRedirect { url: shown.clone(), status: status.as_u16() })?;
                if next.origin() != self.origin {
                    return Err(Error::OffSite {
                        url: shown,
                        to: without_query(&next),
                        base: self.base.clone(),
                    });
                }
                // What browsers and Go do: 301/302/303 turn a POST into a GET without body;
                // 307/308 repeat the request as it was.
                if matches!(status.as_u16(), 301..=303) && method != reqwest::Method::HEAD {
                    method = reqwest::Method::GET;
                    body = None;
                }
                shown = without_query(&next);
                url = next;
                continue;
            }
            let bytes =
                response.bytes().await.map_err(|source| Error::Connect { url: self.base.clone(), source })?;
            let envelope: Envelope = serde_json::from_slice(&bytes)
                .map_err(|_| Error::NotPassbolt { url: shown.clone(), status: status.as_u16() })?;
            return Ok(Reply {
                status: status.as_u16(),
                headers,
                header: envelope.header,
                body: envelope.body,
            });
        }
        Err(Error::RedirectLoop { url: first })
    }

    /// One API call whose success body is returned; an MFA challenge is answered once, then the
    /// call is repeated.
    async fn call(
        &mut self,
        method: reqwest::Method,
        endpoint: &Endpoint,
        body: Option<&Value>,
        what: &str,
    ) -> Result<Value, Error> {
        let mut reply = self.send(method.clone(), endpoint, body).await?;
        if reply.is_mfa_challenge() {
            self.verify_totp(&reply.body).await?;
            reply = self.send(method, endpoint, body).await?;
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
            .send(
                reqwest::Method::POST,
                &Endpoint::at("mfa/verify/totp.json"),
                Some(&serde_json::json!({"totp": code})),
            )
            .await?;
        if !reply.ok() {
            return Err(Error::TotpRejected { message: with_details(&reply) });
        }
        Ok(())
    }
}

/// A URL for messages: no query (`api-version`), no fragment.
fn without_query(url: &url::Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

/// The server's message and, after it, the validation messages of its body (passbolt_api's
/// `CustomValidationException`: `{"totp": {"isValidOtp": "This OTP is not valid."}}`).
fn with_details(reply: &Reply) -> String {
    fn leaves(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_owned()),
            Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
            Value::Array(list) => list.iter().for_each(|v| leaves(v, out)),
            _ => {}
        }
    }
    let mut parts = vec![message(reply)];
    leaves(&reply.body, &mut parts);
    parts.dedup();
    let mut text = parts.join(" ");
    if !text.ends_with('.') {
        text.push('.');
    }
    text
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
    fn urls_have_one_slash_between_base_and_path() {
        let armored =
            crate::emergency::openpgp::tests::armored_secret(&crate::emergency::openpgp::tests::new_key("p"));
        let session = |url: &str| {
            let key = PrivateKey::parse(&armored).unwrap();
            Session::new(url, key, Box::new(|| Ok(String::new())))
        };
        let s = session("https://p.example/vshn/").unwrap();
        let login = s.url(&Endpoint::at("/auth/login.json")).unwrap();
        assert_eq!(login.as_str(), "https://p.example/vshn/auth/login.json?api-version=v2");
        assert_eq!(without_query(&login), "https://p.example/vshn/auth/login.json");
        let root = session("http://127.0.0.1:8080").unwrap();
        let me = root.url(&Endpoint::at("users/me.json")).unwrap();
        assert_eq!(me.as_str(), "http://127.0.0.1:8080/users/me.json?api-version=v2");
        for bad in [
            "p.example/vshn",
            "ftp://p.example",
            "https://",
            "https://p.example/vshn?x=1",
            "https://p.example/#a",
        ] {
            let err = session(bad).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(err.contains("is not an http(s) URL"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_refused_totp_names_upstreams_validation_message() {
        let reply = Reply {
            status: 400,
            headers: Default::default(),
            header: Header {
                status: "error".into(),
                message: "Something went wrong when validating the one-time password.".into(),
                ..Default::default()
            },
            body: serde_json::json!({"totp": {"isValidOtp": "This OTP is not valid."}}),
        };
        assert_eq!(
            with_details(&reply),
            "Something went wrong when validating the one-time password. This OTP is not valid."
        );
        let bare = Reply { body: Value::Null, header: Header::default(), ..reply };
        assert_eq!(with_details(&bare), "HTTP 400.");
    }
}
