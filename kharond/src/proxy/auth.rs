//! The one credentials check for every proxy protocol: SOCKS5's RFC 1929 username/password and
//! HTTP CONNECT's `Proxy-Authorization: Basic` both end here, against `[socks]` in the config.

use kharon_shared::config::SocksAuth;
use subtle::ConstantTimeEq;

/// Compares the client's credentials with ours in constant time: the SHA-256 digests are
/// compared, not the bytes, since comparing slices of different lengths returns early and would
/// tell the length; both fields are always compared, so neither tells which one was wrong.
pub fn matches(expected: &SocksAuth, username: &[u8], password: &[u8]) -> bool {
    let digest = |bytes: &[u8]| ring::digest::digest(&ring::digest::SHA256, bytes);
    let same = |given: &[u8], wanted: &str| digest(given).as_ref().ct_eq(digest(wanted.as_bytes()).as_ref());
    bool::from(same(username, &expected.username) & same(password, &expected.password))
}
