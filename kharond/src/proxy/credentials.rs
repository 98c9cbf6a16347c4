//! The one credentials check for every proxy protocol: SOCKS5's RFC 1929 username/password and
//! HTTP CONNECT's `Proxy-Authorization: Basic` both end here, against `[socks]` in the config.
//!
//! The configured username and password are hashed once, when the daemon starts ([`Credentials`]);
//! an authentication hashes only what the client sent.

use kharon_shared::Secret;
use kharon_shared::config::SocksAuth;
use subtle::ConstantTimeEq;

type Digest = [u8; 32];

/// `[socks]` username and password as SHA-256 digests, the form [`matches()`] compares.
#[derive(Debug, Clone)]
pub struct Credentials {
    username: Secret<Digest>,
    password: Secret<Digest>,
}

impl Credentials {
    pub fn new(auth: &SocksAuth) -> Self {
        Credentials {
            username: Secret::new(digest(auth.username.as_bytes())),
            password: Secret::new(digest(auth.password.as_bytes())),
        }
    }
}

fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// Compares the client's credentials with ours in constant time: the SHA-256 digests are
/// compared, not the bytes, since comparing slices of different lengths returns early and would
/// tell the length; both fields are always compared, so neither tells which one was wrong.
pub fn matches(expected: &Credentials, username: &[u8], password: &[u8]) -> bool {
    let same = |given: &[u8], wanted: &Secret<Digest>| digest(given).ct_eq(wanted.expose());
    bool::from(same(username, &expected.username) & same(password, &expected.password))
}
