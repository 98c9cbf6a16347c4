//! A fake Passbolt on loopback that speaks the protocol the way the real server and go-passbolt
//! do (protocols.md §3.2–3.4), with real OpenPGP (rPGP) and real TOTP codes:
//!
//! - everything under a path prefix (`/vshn`, as on the cloud instance), JSON envelopes
//!   `{"header": {status, message, url, code, …}, "body": …}`;
//! - a `csrfToken` cookie on the first answer, checked against `X-CSRF-Token` on every POST but
//!   the login (CakePHP's middleware); a `passbolt_session` cookie after GPGAuth;
//! - GPGAuth: stage 1 answers "The authentication failed." with the token encrypted to the user's
//!   key in `X-GPGAuth-User-Auth-Token` as PHP sends it, `quotemeta(urlencode(…))`, armor headers
//!   with dots included, so the escapes are exercised; stage 2 checks the token; an unknown key
//!   gets Passbolt's "There is no user associated with this key" debug header;
//! - `/users/me.json` returns the user's public key (or, in [`Options::me_key`], another one);
//! - MFA: with a TOTP secret, every call after login answers the 403 challenge pointing at
//!   `/mfa/verify/error.json` until `POST /mfa/verify/totp.json` gets a valid current code
//!   (checked with `totp-rs`) and sets `passbolt_mfa`;
//! - `/resources.json` lists a plain resource, a v5 resource whose name is only in metadata
//!   encrypted to the user's key, and `emergency-cedentials-buckets` as a v5 resource (empty
//!   `name`) whose metadata is encrypted to a shared metadata key, whose private half
//!   `/metadata/keys.json` hands out encrypted to the user; `/secrets/resource/<id>.json` the
//!   bucket YAML inside `{"password", "description"}`, encrypted to the user.
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

const BUCKETS_ID: &str = "8e3874ae-4b40-590b-968a-418f704b9d9a";
const PLAIN_ID: &str = "1b4a2f9e-0c3d-4e5f-8a7b-6c5d4e3f2a1b";
const PERSONAL_V5_ID: &str = "2c5b3a0f-1d4e-4f60-9b8c-7d6e5f4a3b2c";
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
}

struct State {
    options: Options,
    metadata_key: SignedSecretKey,
    csrf: HashSet<String>,
    /// keyid → the token stage 1 issued.
    pending: HashMap<String, String>,
    sessions: HashSet<String>,
    mfa: HashSet<String>,
    log: Vec<String>,
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
            csrf: HashSet::new(),
            pending: HashMap::new(),
            sessions: HashSet::new(),
            mfa: HashSet::new(),
            log: Vec::new(),
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

    /// The current TOTP code (what the user's authenticator app shows).
    pub fn totp_now(&self) -> String {
        let secret = self.state.lock().expect("state").options.totp_secret.clone().expect("fake has MFA");
        totp(&secret).generate_current().to_string()
    }

    /// "METHOD /path" of every request so far, without the prefix and query.
    pub fn log(&self) -> Vec<String> {
        self.state.lock().map(|s| s.log.clone()).unwrap_or_default()
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
    totp_rs::Builder::new().with_secret(totp_rs::Secret::from(secret.to_vec())).build().expect("totp")
}

struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    cookies: HashMap<String, String>,
    body: Value,
}

struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    message: String,
    body: Value,
    /// `header.url` when it is not the request's own (the MFA challenge points elsewhere).
    url: Option<String>,
}

impl Response {
    fn ok(body: Value) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            message: "The operation was successful.".into(),
            body,
            url: None,
        }
    }

    fn error(status: u16, message: &str) -> Self {
        Self { status, headers: Vec::new(), message: message.into(), body: Value::Null, url: None }
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

fn serve(mut stream: TcpStream, state: &Mutex<State>, addr: SocketAddr) {
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let Some(req) = read_request(&stream) else { return };
    let mut response = {
        let Ok(mut s) = state.lock() else { return };
        let path = req.path.strip_prefix(PREFIX).unwrap_or("/outside-prefix").to_owned();
        s.log.push(format!("{} {path}", req.method));
        let mut response = handle(&mut s, &req, &path, addr);
        // CakePHP's CSRF middleware hands out the token cookie to whoever has none.
        if !req.cookies.get("csrfToken").is_some_and(|t| s.csrf.contains(t)) {
            let token = random_hex(16);
            s.csrf.insert(token.clone());
            response
                .headers
                .push(("Set-Cookie".into(), format!("csrfToken={token}; Path={PREFIX}/; Secure")));
        }
        response
    };
    let url = response.url.take().unwrap_or_else(|| req.path.clone());
    let envelope = json!({
        "header": {
            "id": uuid(), "status": if response.status < 300 { "success" } else { "error" },
            "servertime": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
            "action": uuid(), "message": response.message, "url": url, "code": response.status,
        },
        "body": response.body,
    });
    let body = envelope.to_string();
    let mut head = format!(
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        response.status,
        body.len()
    );
    for (k, v) in &response.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

fn handle(s: &mut State, req: &Request, path: &str, addr: SocketAddr) -> Response {
    if req.method == "POST" && path != "/auth/login.json" {
        let cookie = req.cookies.get("csrfToken");
        let header = req.headers.get("x-csrf-token");
        if cookie.is_none() || cookie != header || !s.csrf.contains(cookie.map(String::as_str).unwrap_or(""))
        {
            return Response::error(403, "Missing or incorrect CSRF cookie type.");
        }
    }
    if path == "/auth/login.json" && req.method == "POST" {
        return login(s, req);
    }
    let session = req.cookies.get("passbolt_session").is_some_and(|c| s.sessions.contains(c));
    if !session {
        return Response::error(401, "Authentication is required to continue");
    }
    if path == "/mfa/verify/totp.json" && req.method == "POST" {
        let Some(secret) = s.options.totp_secret.clone() else {
            return Response::error(400, "No MFA configured");
        };
        let code = req.body.get("totp").and_then(Value::as_str).unwrap_or_default();
        if totp(&secret).check_current(code).is_none() {
            return Response::error(400, "The OTP is not valid.");
        }
        let token = random_hex(16);
        s.mfa.insert(token.clone());
        return Response::ok(Value::Null)
            .header("Set-Cookie", &format!("passbolt_mfa={token}; Path={PREFIX}/; HttpOnly; Secure"));
    }
    let mfa_ok =
        s.options.totp_secret.is_none() || req.cookies.get("passbolt_mfa").is_some_and(|c| s.mfa.contains(c));
    if !mfa_ok {
        let mut r = Response::error(403, "MFA authentication is required.");
        r.url = Some(format!("{PREFIX}/mfa/verify/error.json"));
        r.body = json!({
            "mfa_providers": ["totp"],
            "providers": {"totp": format!("http://{addr}{PREFIX}/mfa/verify/totp.json")},
        });
        return r;
    }
    let user = &s.options.user;
    match (req.method.as_str(), path) {
        ("GET", "/users/me.json") => {
            let key = s.options.me_key.as_ref().unwrap_or(user);
            Response::ok(json!({
                "id": USER_ID, "username": "engineer@example.com", "active": true,
                "gpgkey": {"armored_key": armored_public(key), "fingerprint": fingerprint(key), "user_id": USER_ID},
            }))
        }
        ("GET", "/resources.json") => {
            let metadata_public = public_of(&s.metadata_key);
            let personal = json!({"object_type": "PASSBOLT_RESOURCE_METADATA", "name": "my own v5 note"});
            let shared = json!({"object_type": "PASSBOLT_RESOURCE_METADATA", "name": BUCKETS_RESOURCE,
                                "username": "", "uris": []});
            Response::ok(json!([
                {"id": PLAIN_ID, "name": "some other secret", "username": "x", "description": ""},
                {"id": PERSONAL_V5_ID, "name": "", "metadata_key_type": "user_key",
                 "metadata": encrypt(&[user], personal.to_string().as_bytes())},
                {"id": BUCKETS_ID, "name": "", "metadata_key_type": "shared_key",
                 "metadata_key_id": "4e8bb1c2-0000-4000-a000-000000000001",
                 "metadata": encrypt(&[&metadata_public], shared.to_string().as_bytes())},
            ]))
        }
        ("GET", "/metadata/keys.json") => {
            let private = json!({"object_type": "PASSBOLT_METADATA_PRIVATE_KEY",
                                 "armored_key": armored_secret(&s.metadata_key), "passphrase": ""});
            let metadata_public = public_of(&s.metadata_key);
            Response::ok(json!([{
                "id": "4e8bb1c2-0000-4000-a000-000000000001",
                "fingerprint": fingerprint(&metadata_public),
                "armored_key": armored_public(&metadata_public),
                "metadata_private_keys": [{"user_id": USER_ID, "data": encrypt(&[user], private.to_string().as_bytes())}],
            }]))
        }
        ("GET", p) if p == format!("/secrets/resource/{BUCKETS_ID}.json") => {
            let secret = json!({"password": s.options.buckets_yaml, "description": "S3 buckets of the emergency credentials"});
            Response::ok(json!({"id": uuid(), "resource_id": BUCKETS_ID, "user_id": USER_ID,
                                "data": encrypt(&[user], secret.to_string().as_bytes())}))
        }
        _ => Response::error(404, "This page does not exist."),
    }
}

fn login(s: &mut State, req: &Request) -> Response {
    let auth = req.body.get("gpg_auth");
    let keyid = auth.and_then(|a| a.get("keyid")).and_then(Value::as_str).unwrap_or_default().to_owned();
    let user = s.options.user.clone();
    if !keyid.eq_ignore_ascii_case(&fingerprint(&user)) {
        return Response::error(404, "The authentication failed.")
            .header("X-GPGAuth-Authenticated", "false")
            .header("X-GPGAuth-Error", "true")
            .header("X-GPGAuth-Debug", &format!("There is no user associated with this key. {keyid}"));
    }
    match auth.and_then(|a| a.get("user_token_result")).and_then(Value::as_str) {
        None => {
            let token = format!("gpgauthv1.3.0|36|{}|gpgauthv1.3.0", uuid());
            let header = php_quotemeta_urlencode(&encrypt(&[&user], token.as_bytes()));
            s.pending.insert(keyid, token);
            // go-passbolt tolerates this error envelope at stage 1; the header is what counts.
            Response::error(403, "The authentication failed.")
                .header("X-GPGAuth-Authenticated", "false")
                .header("X-GPGAuth-Progress", "stage1")
                .header("X-GPGAuth-User-Auth-Token", &header)
        }
        Some(result) => {
            if s.pending.remove(&keyid).as_deref() != Some(result) {
                return Response::error(403, "The authentication failed.")
                    .header("X-GPGAuth-Authenticated", "false")
                    .header("X-GPGAuth-Error", "true")
                    .header("X-GPGAuth-Debug", "The user token result does not match");
            }
            let session = random_hex(16);
            s.sessions.insert(session.clone());
            Response::ok(Value::Null)
                .header("X-GPGAuth-Authenticated", "true")
                .header("X-GPGAuth-Progress", "complete")
                .header(
                    "Set-Cookie",
                    &format!("passbolt_session={session}; Path={PREFIX}/; HttpOnly; Secure"),
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
}
