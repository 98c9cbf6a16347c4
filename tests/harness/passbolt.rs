//! A fake Passbolt on loopback, written from passbolt_api's code (not from our docs or our
//! client), with real OpenPGP (rPGP) and real TOTP codes. Every behaviour names where upstream
//! does it; paths are in `passbolt/passbolt_api` at e3aa15fe (2026-05-12, CakePHP 5.2.12) unless
//! they start with `cakephp:` (`cakephp/cakephp` 5.x at e15d186e). `CE/MFA/` stands for
//! `plugins/PassboltCe/MultiFactorAuthentication/src/`.
//!
//! Middleware order (`src/Application.php::middleware`, then `CE/MFA/MultiFactorAuthenticationPlugin.php`
//! inserting after `SetUserIdentityInRequestMiddleware`): authentication, **MFA check**, GPGAuth
//! headers, **CSRF**, then the controller. So the MFA redirect is answered before the CSRF
//! middleware runs and carries no `csrfToken` cookie.
//!
//! - Everything under a path prefix (`/vshn`, as on the cloud instance); a path outside it gets
//!   the web server's HTML 404, not an API envelope.
//! - Envelopes `{"header": {id, status, servertime, action, message, url, code}, "body": …}`
//!   (`src/Controller/AppController.php::success/error`); `url` is `Router::url()`, the request
//!   target with the base (`cakephp: src/Routing/Router.php::url`). Errors thrown as exceptions are
//!   rendered by `src/Controller/ErrorController.php`: `body` is the exception's validation errors
//!   or `""`.
//! - Not logged in, any JSON call: 403 "You need to login to access this location."
//!   (`src/Authenticator/GpgAuthenticator.php::unauthenticated`, thrown).
//! - GPGAuth (`src/Authenticator/GpgAuthenticator.php`, `src/Controller/Auth/AuthLoginController.php`):
//!   an unknown key gets 400 with message and `X-GPGAuth-Debug` "There is no user associated with
//!   this key. User not found." (`_missingUserError`); stage 1 answers **HTTP 200** with status
//!   `error` and "The authentication failed." ("BExt relies on this status code"), the token
//!   `gpgauthv1.3.0|36|<uuid>|gpgauthv1.3.0` encrypted to the user in `X-GPGAuth-User-Auth-Token`
//!   as `quotemeta(urlencode(…))`; a wrong stage 2 token gets 400 "The authentication failed."
//!   and `X-GPGAuth-Error` (the debug header only exists in debug mode, which this fake is not);
//!   stage 2 answers 200 "You are successfully logged in.", `X-GPGAuth-Authenticated: true`,
//!   `X-GPGAuth-Refer: /` and the PHP session cookie `passbolt_session` (`config/app.default.php`
//!   `Session.cookie`; path = the base, `HttpOnly`, `SameSite=Lax` from `session.cookie_samesite`).
//!   The real server also signs the token with its key; this fake does not (no client here checks).
//! - CSRF (`src/Middleware/CsrfProtectionMiddleware.php` over `cakephp: src/Http/Middleware/
//!   CsrfProtectionMiddleware.php`, exemptions in `config/default.php`
//!   `passbolt.security.csrfProtection.unlockedActions`): a **GET without a `csrfToken` cookie** gets
//!   one (128 hex digits, `hash('sha512', …)`, path = the base with a trailing slash, not HttpOnly),
//!   unless the controller threw; a POST/PUT/PATCH/DELETE must send `X-CSRF-Token` equal to the
//!   cookie (Passbolt's `_verifyToken` accepts any cookie value; only the two must match), else 403
//!   "Missing or incorrect CSRF cookie type." (no cookie) or "CSRF token from either the request
//!   body or request headers did not match or is missing."; the login POST (`AuthLogin.loginPost`)
//!   is exempt and gets no cookie.
//! - MFA (`CE/MFA/Middleware/MfaRequiredCheckMiddleware.php`, asserted by
//!   `tests/TestCase/Middleware/MfaRequiredCheckMiddlewareIntegrationTest.php`): a logged-in
//!   session of an account with TOTP and no valid `passbolt_mfa` cookie gets, on any path but the
//!   whitelist (`/login`, `/auth/login`, `/auth/jwt/login`, `/mfa/verify`, `/auth/logout`,
//!   `/logout`, `/scim/v2/`), **302 with `Location: <App.fullBaseUrl>/mfa/verify/error.json`** for a
//!   JSON request (`.json` or `Accept: application/json`, `cakephp: ServerRequest` `json` detector)
//!   and an empty body. `GET /mfa/verify/error.json` (`CE/MFA/Controller/MfaVerifyAjaxErrorController.php`)
//!   answers 403 "MFA authentication is required." with `{"mfa_providers": ["totp"], "providers":
//!   {"totp": "<App.fullBaseUrl>/mfa/verify/totp.json"}}` and **clears `passbolt_mfa`** as
//!   `CE/MFA/Utility/MfaVerifiedCookie::clearCookie` does: a fresh UUID as value, `expires=Thu,
//!   01-Jan-1970 00:00:01 GMT+0000` (`cakephp: Cookie::withExpired`, `EXPIRES_FORMAT`), path `/`,
//!   httponly. A request that sends such a cleared value back is recorded ([`FakePassbolt::stale`]).
//! - `POST /mfa/verify/totp.json` (`CE/MFA/Controller/Totp/TotpVerifyPostController.php`,
//!   `CE/MFA/Form/MfaForm.php`, `CE/MFA/Form/Totp/TotpVerifyForm.php`): a wrong code is a thrown
//!   `CustomValidationException`, 400 "Something went wrong when validating the one-time
//!   password." with body `{"totp": {"isValidOtp": "This OTP is not valid."}}` (or the rule that
//!   failed first: `_required`, `_empty`, `numeric`, `minLength`); a right one 200 "The
//!   multi-factor authentication was a success." and `passbolt_mfa=<token>; path=/; httponly`. A
//!   session whose `passbolt_mfa` is still valid gets 400 "The multi-factor authentication is not
//!   required."; an invalid one is ignored (`MfaVerifyController::_handleVerifiedNotRequired`).
//!   Deviation: OTPHP's `verify($otp)` takes the current 30 s period only; this fake also takes
//!   the neighbouring ones (totp-rs's skew 1), because tests read the code seconds before the
//!   server checks it. The failed-attempts lock-out (`MfaRateLimiterService`) is not modelled.
//! - Cookies carry `secure` only over HTTPS (`makeCsrfCookieSecureIfRequestIsSsl`,
//!   `AbstractSecureCookieService::isSslOrCookiesSecure`); this fake speaks plain HTTP.
//! - `/users/me.json` returns the user's public key (or, in [`Options::me_key`], another one);
//!   `/resources.json` lists a plain resource, a v5 resource whose name is only in metadata
//!   encrypted to the user's key, and `emergency-cedentials-buckets` as a v5 resource (empty
//!   `name`) whose metadata is encrypted to a shared metadata key, whose private half
//!   `/metadata/keys.json` hands out encrypted to the user; `/secrets/resource/<id>.json` the
//!   bucket YAML inside `{"password", "description"}`, encrypted to the user.
//!
//! Cross-checked by a client we did not write: `tests/scenarios/passbolt_clients.rs` logs in with
//! PyPI's `passbolt-python-api` (requests' redirect handling and cookie jar) with and without TOTP.
//!
//! Each connection carries one request (`Connection: close`). [`FakePassbolt::log`] lists what
//! was asked, for tests that check the order of the protocol.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use pgp::composed::{
    ArmorOptions, EncryptionCaps, KeyType, MessageBuilder, SecretKeyParamsBuilder, SignedPublicKey,
    SignedSecretKey, SubkeyParamsBuilder,
};
use pgp::crypto::ecc_curve::ECCCurve;
use pgp::crypto::sym::SymmetricKeyAlgorithm;
use pgp::types::KeyDetails as _;
use serde_json::{Value, json};

/// The path prefix, like the cloud instance's `/vshn`.
pub const PREFIX: &str = "/vshn";
/// The bucket list's resource name, typo included.
pub const BUCKETS_RESOURCE: &str = "emergency-cedentials-buckets";

/// The bucket list's resource id.
pub const BUCKETS_ID: &str = "8e3874ae-4b40-590b-968a-418f704b9d9a";
const PLAIN_ID: &str = "1b4a2f9e-0c3d-4e5f-8a7b-6c5d4e3f2a1b";
const PERSONAL_V5_ID: &str = "2c5b3a0f-1d4e-4f60-9b8c-7d6e5f4a3b2c";
/// Entities carry `created` and `modified` (`src/Model/Entity/Secret.php`), CakePHP's JSON dates.
const CREATED: &str = "2026-01-05T09:30:00+00:00";
const USER_ID: &str = "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6";

/// A passphrase-protected Curve25519 key (EdDSA primary, ECDH subkey), as OpenPGP.js and the
/// Passbolt browser extension make them.
pub fn new_key(passphrase: &str) -> SignedSecretKey {
    let mut sub = SubkeyParamsBuilder::default();
    sub.key_type(KeyType::ECDH(ECCCurve::Curve25519Legacy)).can_encrypt(EncryptionCaps::All);
    let mut params = SecretKeyParamsBuilder::default();
    params
        .key_type(KeyType::Ed25519Legacy)
        .can_certify(true)
        .can_sign(true)
        .primary_user_id("Test Engineer <engineer@example.com>".into());
    if !passphrase.is_empty() {
        sub.passphrase(Some(passphrase.into()));
        params.passphrase(Some(passphrase.into()));
    }
    params.subkeys(vec![sub.build().expect("subkey params")]);
    params.build().expect("key params").generate(rand08::thread_rng()).expect("generate key")
}

pub fn armored_secret(key: &SignedSecretKey) -> String {
    key.to_armored_string(ArmorOptions::default()).expect("armor secret key")
}

pub fn public_of(key: &SignedSecretKey) -> SignedPublicKey {
    SignedPublicKey::from(key.clone())
}

pub fn armored_public(key: &SignedPublicKey) -> String {
    key.to_armored_string(ArmorOptions::default()).expect("armor public key")
}

/// Upper-case hex fingerprint of a public key's primary key.
pub fn fingerprint(key: &SignedPublicKey) -> String {
    key.primary_key.fingerprint().as_bytes().iter().map(|b| format!("{b:02X}")).collect()
}

/// Encrypts `data` to each of `recipients` (their encryption subkeys) as one armored message with
/// the `Version`/`Comment` armor headers OpenPGP.js writes.
pub fn encrypt(recipients: &[&SignedPublicKey], data: &[u8]) -> String {
    let mut builder = MessageBuilder::from_bytes("", data.to_vec())
        .seipd_v1(rand08::thread_rng(), SymmetricKeyAlgorithm::AES256);
    for key in recipients {
        let sub = key
            .public_subkeys
            .iter()
            .find(|s| s.key.algorithm().can_encrypt())
            .expect("an encryption subkey");
        builder.encrypt_to_key(rand08::thread_rng(), sub).expect("encrypt to key");
    }
    let mut headers = std::collections::BTreeMap::new();
    headers.insert("Version".to_owned(), vec!["OpenPGP.js v4.10.10".to_owned()]);
    headers.insert("Comment".to_owned(), vec!["https://openpgpjs.org".to_owned()]);
    builder
        .to_armored_string(
            rand08::thread_rng(),
            ArmorOptions { headers: Some(&headers), include_checksum: true },
        )
        .expect("armor message")
}

/// PHP's `urlencode` (spaces as `+`), then `quotemeta` — what Passbolt puts in the token header.
pub fn php_quotemeta_urlencode(text: &str) -> String {
    let mut encoded = String::new();
    for b in text.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => encoded.push(b as char),
            b' ' => encoded.push('+'),
            _ => encoded.push_str(&format!("%{b:02X}")),
        }
    }
    let mut quoted = String::new();
    for c in encoded.chars() {
        if ".\\+*?[^]$()".contains(c) {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted
}

fn random_hex(bytes: usize) -> String {
    use rand08::RngCore as _;
    let mut buf = vec![0u8; bytes];
    rand08::thread_rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

fn uuid() -> String {
    let h = random_hex(16);
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

/// How the fake behaves.
pub struct Options {
    /// The user's public key (the account's key).
    pub user: SignedPublicKey,
    /// TOTP secret (raw bytes, ≥ 16); `None` = the account has no MFA.
    pub totp_secret: Option<Vec<u8>>,
    /// The bucket list YAML (the resource's password).
    pub buckets_yaml: String,
    /// What `/users/me.json` returns instead of the user's key (a man in the middle).
    pub me_key: Option<SignedPublicKey>,
    /// Passbolt's `App.fullBaseUrl` with the base path, where its redirects and provider URLs
    /// point; `None` = this fake's own URL. Another host plays a misconfigured server.
    pub full_base_url: Option<String>,
}

impl Options {
    /// An account with `user`'s key, no MFA, an empty bucket list, nothing odd.
    pub fn new(user: SignedPublicKey) -> Self {
        Self { user, totp_secret: None, buckets_yaml: String::new(), me_key: None, full_base_url: None }
    }
}

struct State {
    options: Options,
    metadata_key: SignedSecretKey,
    /// keyid → the token stage 1 issued.
    pending: HashMap<String, String>,
    sessions: HashSet<String>,
    mfa: HashSet<String>,
    /// Values `passbolt_mfa` was cleared with.
    cleared: HashSet<String>,
    log: Vec<String>,
    stale: Vec<String>,
}

pub struct FakePassbolt {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
}

impl FakePassbolt {
    pub fn start(options: Options) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake passbolt");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(Mutex::new(State {
            options,
            metadata_key: new_key(""),
            pending: HashMap::new(),
            sessions: HashSet::new(),
            mfa: HashSet::new(),
            cleared: HashSet::new(),
            log: Vec::new(),
            stale: Vec::new(),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, stopping) = (Arc::clone(&state), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let st = Arc::clone(&st);
                std::thread::spawn(move || serve(stream, &st, addr));
            }
        });
        Self { addr, state, stop }
    }

    /// `http://127.0.0.1:PORT/vshn`
    pub fn url(&self) -> String {
        format!("http://{}{PREFIX}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The current TOTP code (what the user's authenticator app shows).
    pub fn totp_now(&self) -> String {
        let secret = self.state.lock().expect("state").options.totp_secret.clone().expect("fake has MFA");
        totp(&secret).generate_current().to_string()
    }

    /// "METHOD /path" of every request so far, without the prefix and query.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().map(|s| s.log.clone()).unwrap_or_default()
    }

    /// "METHOD /path" of every request that sent back a `passbolt_mfa` the server had cleared.
    pub fn stale(&self) -> Vec<String> {
        self.state.lock().map(|s| s.stale.clone()).unwrap_or_default()
    }

    /// Replaces the bucket list (the resource's secret) for the next reads.
    pub fn set_buckets(&self, yaml: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.options.buckets_yaml = yaml.to_owned();
        }
    }
}

impl Drop for FakePassbolt {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(self.addr);
    }
}

fn totp(secret: &[u8]) -> totp_rs::Totp {
    totp_rs::Builder::new()
        .with_secret(totp_rs::Secret::from(secret.to_vec()))
        .with_skew(1)
        .build()
        .expect("totp")
}

struct Request {
    method: String,
    /// Path and query as sent (`Router::url()` of the envelope).
    target: String,
    path: String,
    headers: HashMap<String, String>,
    cookies: HashMap<String, String>,
    body: Value,
}

impl Request {
    /// `cakephp: ServerRequest::is('json')`: the `.json` extension or `Accept: application/json`.
    fn is_json(&self) -> bool {
        self.path.ends_with(".json")
            || self.headers.get("accept").is_some_and(|a| a.contains("application/json"))
    }

    fn cookie(&self, name: &str) -> Option<&str> {
        self.cookies.get(name).map(String::as_str).filter(|v| !v.is_empty())
    }
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    message: String,
    body: Value,
    /// `success()` rather than `error()` (stage 1 is an error answered with 200).
    success: bool,
    /// Thrown as an exception: rendered by the ErrorController, past the CSRF middleware's
    /// cookie (the exception unwinds through it).
    thrown: bool,
}

impl Response {
    fn ok(message: &str, body: Value) -> Self {
        Self { status: 200, headers: Vec::new(), message: message.into(), body, success: true, thrown: false }
    }

    /// `AppController::error()`: a rendered error, not an exception.
    fn error(status: u16, message: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            message: message.into(),
            body: Value::Null,
            success: false,
            thrown: false,
        }
    }

    /// An `HttpException`; `ErrorController` sets the body to `""` unless it carries errors.
    fn thrown(status: u16, message: &str) -> Self {
        Self {
            status,
            headers: Vec::new(),
            message: message.into(),
            body: json!(""),
            success: false,
            thrown: true,
        }
    }

    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    let cookies = headers
        .get("cookie")
        .map(|c| {
            c.split(';')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_owned();
    Some(Request {
        method,
        target,
        path,
        headers,
        cookies,
        body: if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&body).unwrap_or(Value::Null)
        },
    })
}

fn write_response(stream: &mut TcpStream, status: u16, headers: &[(String, String)], body: &str) {
    let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

/// The MFA check's whitelist (`MfaRequiredCheckMiddleware::isRouteWhiteListed`), by prefix.
const MFA_WHITELIST: [&str; 7] =
    ["/login", "/auth/login", "/auth/jwt/login", "/mfa/verify", "/auth/logout", "/logout", "/scim/v2/"];

fn serve(mut stream: TcpStream, state: &Mutex<State>, addr: SocketAddr) {
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let Some(req) = read_request(&stream) else { return };
    let Some(path) = req.path.strip_prefix(PREFIX).map(str::to_owned) else {
        // Not Passbolt's: the web server in front answers.
        let page = "<html><body><h1>404 Not Found</h1></body></html>";
        write_response(&mut stream, 404, &[("Content-Type".into(), "text/html".into())], page);
        return;
    };
    let response = {
        let Ok(mut s) = state.lock() else { return };
        s.log.push(format!("{} {path}", req.method));
        if req.cookie("passbolt_mfa").is_some_and(|v| s.cleared.contains(v)) {
            s.stale.push(format!("{} {path}", req.method));
        }
        let full_base = s.options.full_base_url.clone().unwrap_or_else(|| format!("http://{addr}{PREFIX}"));
        let logged_in = req.cookie("passbolt_session").is_some_and(|c| s.sessions.contains(c));
        let mfa_done =
            s.options.totp_secret.is_none() || req.cookie("passbolt_mfa").is_some_and(|c| s.mfa.contains(c));
        // MfaRequiredCheckMiddleware: before the GPGAuth headers and CSRF middlewares.
        if logged_in && !mfa_done && !MFA_WHITELIST.iter().any(|w| path.starts_with(w)) {
            let location = if req.is_json() {
                format!("{full_base}/mfa/verify/error.json")
            } else {
                format!("{full_base}/mfa/verify/totp?redirect={PREFIX}{path}")
            };
            drop(s);
            write_response(&mut stream, 302, &[("Location".into(), location)], "");
            return;
        }
        let mut response = csrf(&mut s, &req, &path, logged_in, &full_base);
        for (k, v) in [
            ("X-GPGAuth-Version", "1.3.0"),
            ("X-GPGAuth-Login-URL", "/auth/login"),
            ("X-GPGAuth-Logout-URL", "/auth/logout"),
            ("X-GPGAuth-Verify-URL", "/auth/verify"),
            ("X-GPGAuth-Pubkey-URL", "/auth/verify.json"),
        ] {
            response.headers.push((k.into(), v.into()));
        }
        response
    };
    let envelope = json!({
        "header": {
            "id": uuid(), "status": if response.success { "success" } else { "error" },
            "servertime": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            "action": uuid(), "message": response.message, "url": req.target, "code": response.status,
        },
        "body": response.body,
    });
    let mut headers = response.headers;
    headers.push(("Content-Type".into(), "application/json".into()));
    write_response(&mut stream, response.status, &headers, &envelope.to_string());
}

/// The CSRF middleware around the controller.
fn csrf(s: &mut State, req: &Request, path: &str, logged_in: bool, full_base: &str) -> Response {
    let has_data = matches!(req.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE");
    let exempt = req.method == "POST" && path == "/auth/login.json";
    if has_data && exempt {
        return controller(s, req, path, logged_in, full_base);
    }
    let cookie = req.cookie("csrfToken");
    if req.method == "GET" && cookie.is_none() {
        let mut response = controller(s, req, path, logged_in, full_base);
        if !response.thrown {
            let token = random_hex(64);
            response.headers.push(("Set-Cookie".into(), format!("csrfToken={token}; path={PREFIX}/")));
        }
        return response;
    }
    if has_data {
        let Some(cookie) = cookie else {
            return Response::thrown(403, "Missing or incorrect CSRF cookie type.");
        };
        if req.headers.get("x-csrf-token").map(String::as_str) != Some(cookie) {
            return Response::thrown(
                403,
                "CSRF token from either the request body or request headers did not match or is missing.",
            );
        }
    }
    controller(s, req, path, logged_in, full_base)
}

fn controller(s: &mut State, req: &Request, path: &str, logged_in: bool, full_base: &str) -> Response {
    if path == "/auth/login.json" && req.method == "POST" {
        return login(s, req);
    }
    if !logged_in {
        return Response::thrown(403, "You need to login to access this location.");
    }
    if path == "/mfa/verify/error.json" && req.method == "GET" {
        let providers = if s.options.totp_secret.is_some() {
            json!({"totp": format!("{full_base}/mfa/verify/totp.json")})
        } else {
            json!({})
        };
        let mut r = Response::error(403, "MFA authentication is required.");
        r.body = json!({"mfa_providers": providers.as_object().map(|p| p.keys().cloned().collect::<Vec<_>>()), "providers": providers});
        let clear = uuid();
        s.cleared.insert(clear.clone());
        return r.header(
            "Set-Cookie",
            &format!("passbolt_mfa={clear}; expires=Thu, 01-Jan-1970 00:00:01 GMT+0000; path=/; httponly"),
        );
    }
    if path == "/mfa/verify/totp.json" && req.method == "POST" {
        return verify_totp(s, req);
    }
    let user = &s.options.user;
    match (req.method.as_str(), path) {
        ("GET", "/users/me.json") => {
            let key = s.options.me_key.as_ref().unwrap_or(user);
            Response::ok(
                "The operation was successful.",
                json!({
                    "id": USER_ID, "username": "engineer@example.com", "active": true,
                    "gpgkey": {"armored_key": armored_public(key), "fingerprint": fingerprint(key), "user_id": USER_ID},
                }),
            )
        }
        ("GET", "/resources.json") => {
            let metadata_public = public_of(&s.metadata_key);
            let personal = json!({"object_type": "PASSBOLT_RESOURCE_METADATA", "name": "my own v5 note"});
            let shared = json!({"object_type": "PASSBOLT_RESOURCE_METADATA", "name": BUCKETS_RESOURCE,
                                "username": "", "uris": []});
            Response::ok(
                "The operation was successful.",
                json!([
                    {"id": PLAIN_ID, "name": "some other secret", "username": "x", "description": ""},
                    {"id": PERSONAL_V5_ID, "name": "", "metadata_key_type": "user_key",
                     "metadata": encrypt(&[user], personal.to_string().as_bytes())},
                    {"id": BUCKETS_ID, "name": "", "metadata_key_type": "shared_key",
                     "metadata_key_id": "4e8bb1c2-0000-4000-a000-000000000001",
                     "metadata": encrypt(&[&metadata_public], shared.to_string().as_bytes())},
                ]),
            )
        }
        ("GET", "/metadata/keys.json") => {
            let private = json!({"object_type": "PASSBOLT_METADATA_PRIVATE_KEY",
                                 "armored_key": armored_secret(&s.metadata_key), "passphrase": ""});
            let metadata_public = public_of(&s.metadata_key);
            Response::ok(
                "The operation was successful.",
                json!([{
                    "id": "4e8bb1c2-0000-4000-a000-000000000001",
                    "fingerprint": fingerprint(&metadata_public),
                    "armored_key": armored_public(&metadata_public),
                    "metadata_private_keys": [{"user_id": USER_ID, "data": encrypt(&[user], private.to_string().as_bytes())}],
                }]),
            )
        }
        ("GET", p) if p == format!("/secrets/resource/{BUCKETS_ID}.json") => {
            let secret = json!({"password": s.options.buckets_yaml, "description": "S3 buckets of the emergency credentials"});
            Response::ok(
                "The operation was successful.",
                json!({"id": uuid(), "resource_id": BUCKETS_ID, "user_id": USER_ID,
                       "data": encrypt(&[user], secret.to_string().as_bytes()),
                       "created": CREATED, "modified": CREATED}),
            )
        }
        _ => Response::thrown(404, "The requested address was not found on this server."),
    }
}

/// `TotpVerifyPostController::post` with `TotpVerifyForm`'s rules, first failing rule wins.
fn verify_totp(s: &mut State, req: &Request) -> Response {
    if req.cookie("passbolt_mfa").is_some_and(|c| s.mfa.contains(c)) {
        return Response::thrown(400, "The multi-factor authentication is not required.");
    }
    let Some(secret) = s.options.totp_secret.clone() else {
        return Response::thrown(400, "No valid multi-factor authentication settings found.");
    };
    let code = req.body.get("totp").map(|v| v.as_str().map(str::to_owned).unwrap_or_else(|| v.to_string()));
    let failed = match code.as_deref() {
        None => Some(("_required", "An OTP is required.".to_owned())),
        Some("") => Some(("_empty", "The OTP should not be empty.".to_owned())),
        Some(c) if c.parse::<f64>().is_err() => {
            Some(("numeric", "The OTP should be composed of numbers only.".to_owned()))
        }
        Some(c) if c.chars().count() < 6 => {
            Some(("minLength", "The OTP should be at least 6 characters long.".to_owned()))
        }
        Some(c) if totp(&secret).check_current(c).is_none() => {
            Some(("isValidOtp", "This OTP is not valid.".to_owned()))
        }
        Some(_) => None,
    };
    if let Some((rule, message)) = failed {
        let mut r = Response::thrown(400, "Something went wrong when validating the one-time password.");
        r.body = json!({"totp": {rule: message}});
        return r;
    }
    let token = uuid();
    s.mfa.insert(token.clone());
    Response::ok("The multi-factor authentication was a success.", Value::Null)
        .header("Set-Cookie", &format!("passbolt_mfa={token}; path=/; httponly"))
}

/// `GpgAuthenticator::authenticate` and `AuthLoginController::loginPost`.
fn login(s: &mut State, req: &Request) -> Response {
    let auth = req.body.get("gpg_auth");
    let keyid = auth.and_then(|a| a.get("keyid")).and_then(Value::as_str).map(str::to_owned);
    let user = s.options.user.clone();
    let known = keyid.as_deref().is_some_and(|k| k.eq_ignore_ascii_case(&fingerprint(&user)));
    if !known {
        let why = if keyid.is_none() { "No key id set." } else { "User not found." };
        let message = format!("There is no user associated with this key. {why}");
        return Response::error(400, &message)
            .header("X-GPGAuth-Authenticated", "false")
            .header("X-GPGAuth-Progress", "stage0")
            .header("X-GPGAuth-Error", "true")
            .header("X-GPGAuth-Debug", &message);
    }
    let keyid = keyid.unwrap_or_default().to_ascii_uppercase();
    match auth.and_then(|a| a.get("user_token_result")).and_then(Value::as_str) {
        None => {
            let token = format!("gpgauthv1.3.0|36|{}|gpgauthv1.3.0", uuid());
            let header = php_quotemeta_urlencode(&encrypt(&[&user], token.as_bytes()));
            s.pending.insert(keyid, token);
            // "We return 200 because it's partial success and BExt relies on this status code."
            Response::error(200, "The authentication failed.")
                .header("X-GPGAuth-Authenticated", "false")
                .header("X-GPGAuth-Progress", "stage1")
                .header("X-GPGAuth-User-Auth-Token", &header)
        }
        Some(result) => {
            if s.pending.remove(&keyid).as_deref() != Some(result) {
                return Response::error(400, "The authentication failed.")
                    .header("X-GPGAuth-Authenticated", "false")
                    .header("X-GPGAuth-Progress", "stage2")
                    .header("X-GPGAuth-Error", "true");
            }
            let session = random_hex(16);
            s.sessions.insert(session.clone());
            Response::ok(
                "You are successfully logged in.",
                json!({"id": USER_ID, "username": "engineer@example.com", "role": {"name": "user"}}),
            )
            .header("X-GPGAuth-Authenticated", "true")
            .header("X-GPGAuth-Progress", "complete")
            .header("X-GPGAuth-Refer", "/")
            .header(
                "Set-Cookie",
                &format!("passbolt_session={session}; path={PREFIX}; HttpOnly; SameSite=Lax"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotemeta_urlencode_is_what_php_does() {
        assert_eq!(php_quotemeta_urlencode("a b+c.d\n"), "a\\+b%2Bc\\.d%0A");
    }

    /// One raw HTTP/1.1 exchange with the fake: status line, headers (lower-case names), body.
    fn exchange(fake: &FakePassbolt, request: &str) -> (u16, Vec<(String, String)>, String) {
        let mut stream = TcpStream::connect(fake.addr).expect("connect");
        stream.write_all(request.as_bytes()).expect("send");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).expect("read");
        let (head, body) = reply.split_once("\r\n\r\n").expect("a head");
        let mut lines = head.lines();
        let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok());
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        (status.expect("a status"), headers, body.to_owned())
    }

    fn set_cookies(headers: &[(String, String)]) -> Vec<&str> {
        headers.iter().filter(|(k, _)| k == "set-cookie").map(|(_, v)| v.as_str()).collect()
    }

    /// What a client sees before it is logged in, as passbolt_api answers it: the login POST is
    /// exempt from CSRF and gets no token cookie, stage 1 is HTTP 200 with status "error", a call
    /// without a session is a thrown 403 (no cookie either), a POST without the CSRF cookie is
    /// refused, and a path outside the base is the web server's, not Passbolt's.
    #[test]
    fn before_login_the_fake_answers_as_passbolt_api() {
        let user = public_of(&new_key(""));
        let fake = FakePassbolt::start(Options::new(user.clone()));
        let body = json!({"gpg_auth": {"keyid": fingerprint(&user)}}).to_string();
        let (status, headers, text) = exchange(
            &fake,
            &format!(
                "POST {PREFIX}/auth/login.json?api-version=v2 HTTP/1.1\r\nHost: x\r\nContent-Type: \
                 application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
        );
        let envelope: Value = serde_json::from_str(&text).expect("JSON");
        assert_eq!((status, envelope["header"]["status"].as_str()), (200, Some("error")), "{text}");
        assert_eq!(envelope["header"]["message"], "The authentication failed.");
        assert_eq!(envelope["header"]["url"], format!("{PREFIX}/auth/login.json?api-version=v2"));
        assert!(headers.iter().any(|(k, _)| k == "x-gpgauth-user-auth-token"), "{headers:?}");
        assert_eq!(set_cookies(&headers), Vec::<&str>::new(), "the exempt login POST got a cookie");

        let (status, headers, text) =
            exchange(&fake, &format!("GET {PREFIX}/users/me.json HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert_eq!(status, 403, "{text}");
        assert!(text.contains("You need to login to access this location."), "{text}");
        assert_eq!(set_cookies(&headers), Vec::<&str>::new(), "a thrown error got the CSRF cookie");

        let (status, _, text) = exchange(
            &fake,
            &format!(
                "POST {PREFIX}/mfa/verify/totp.json HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}"
            ),
        );
        assert_eq!(status, 403, "{text}");
        assert!(text.contains("Missing or incorrect CSRF cookie type."), "{text}");
        let (status, _, text) = exchange(
            &fake,
            &format!(
                "POST {PREFIX}/mfa/verify/totp.json HTTP/1.1\r\nHost: x\r\nCookie: csrfToken=a\r\n\
                 X-CSRF-Token: b\r\nContent-Length: 2\r\n\r\n{{}}"
            ),
        );
        assert_eq!(status, 403, "{text}");
        assert!(text.contains("did not match or is missing"), "{text}");

        let (status, headers, text) =
            exchange(&fake, "GET /elsewhere/users/me.json HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status, 404);
        assert!(headers.iter().any(|(k, v)| k == "content-type" && v == "text/html"), "{headers:?}");
        assert!(!text.contains("header"), "{text}");
    }
}
