//! [`Secret`]: a value that is never shown. Every credential the binaries hold in memory (the
//! SOCKS password and its digest, bucket keys, OIDC tokens, a Passbolt passphrase or password) is
//! one, so that no `{:?}` of a struct holding it, in a log line, a panic or a test failure, prints
//! it.
//!
//! Why not the `secrecy` crate: its `SecretString` cannot be serialized (its `SerializableSecret`
//! marker cannot be implemented for `String` outside that crate), and kharonctl writes its OIDC
//! tokens to disk; it has no `PartialEq` either, which the token store and its tests rely on.
//! What is needed here is small: a redacting `Debug`, no `Display`, and the value wiped on drop.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

/// A value that `Debug` shows as `<redacted>` and that has no `Display`, so it cannot end up in
/// a message by accident; [`Secret::expose`] (for a string also [`Secret::as_str`] or a `&str`
/// coercion) hands it to the one place that must use it. Its memory is zeroed when it is dropped.
/// (De)serializes as the plain value. Most secrets are strings, hence the default.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret<T: Zeroize = String>(T);

impl<T: Zeroize> Secret<T> {
    pub fn new(value: T) -> Self {
        Secret(value)
    }

    /// The value itself, for the one place that must send or check it.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl Secret<String> {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<T: Zeroize> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl<T: Zeroize> Drop for Secret<T> {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl Deref for Secret<String> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret<String> {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret<String> {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl PartialEq<str> for Secret<String> {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Secret<String> {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Secret<String> {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Holder {
        user: String,
        password: Secret,
        token: Option<Secret>,
        digest: Secret<[u8; 4]>,
    }

    #[test]
    fn debug_never_shows_the_value_and_the_value_stays_usable() {
        let holder = Holder {
            user: "kh".into(),
            password: "hunter2".into(),
            token: Some("eyJ.x".into()),
            digest: Secret::new([0xc0, 0xff, 0xee, 0x42]),
        };
        let shown = format!("{holder:?} {holder:#?}");
        assert!(!shown.contains("hunter2") && !shown.contains("eyJ") && !shown.contains("192"), "{shown}");
        assert!(shown.contains("password: <redacted>") && shown.contains("\"kh\""), "{shown}");
        assert_eq!(holder.password.as_str(), "hunter2");
        assert_eq!(holder.token.as_deref(), Some("eyJ.x"));
        assert!(holder.password == "hunter2");
        assert_eq!(holder.digest.expose(), &[0xc0, 0xff, 0xee, 0x42]);
    }

    #[test]
    fn it_serializes_as_the_plain_string() {
        let secret: Secret = serde_json::from_str("\"s3cret\"").unwrap();
        assert_eq!(secret, "s3cret");
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"s3cret\"");
    }
}
