//! [`Secret`]: a string that is never shown. Every credential the binaries hold in memory (the
//! SOCKS password, bucket keys, OIDC tokens, a Passbolt passphrase or password) is one, so that no
//! `{:?}` of a struct holding it, in a log line, a panic or a test failure, prints it.
//!
//! Why not the `secrecy` crate: its `SecretString` cannot be serialized (its `SerializableSecret`
//! marker cannot be implemented for `String` outside that crate), and kharonctl writes its OIDC
//! tokens to disk; it has no `PartialEq` either, which the token store and its tests rely on.
//! What is needed here is small: a redacting `Debug`, no `Display`, and the value wiped on drop.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Serialize};
use zeroize::Zeroize;

/// A string that `Debug` shows as `<redacted>` and that has no `Display`, so it cannot end up in
/// a message by accident; [`Secret::as_str`] (or a `&str` coercion) hands it to the one place that
/// must use it. Its memory is zeroed when it is dropped. (De)serializes as the plain string.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The value itself, for the one place that must send or check it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Deref for Secret {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl PartialEq<str> for Secret {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Secret {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Secret {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
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
    }

    #[test]
    fn debug_never_shows_the_value_and_the_value_stays_usable() {
        let holder = Holder { user: "kh".into(), password: "hunter2".into(), token: Some("eyJ.x".into()) };
        let shown = format!("{holder:?} {holder:#?}");
        assert!(!shown.contains("hunter2") && !shown.contains("eyJ"), "{shown}");
        assert!(shown.contains("password: <redacted>") && shown.contains("\"kh\""), "{shown}");
        assert_eq!(holder.password.as_str(), "hunter2");
        assert_eq!(holder.token.as_deref(), Some("eyJ.x"));
        assert!(holder.password == "hunter2");
    }

    #[test]
    fn it_serializes_as_the_plain_string() {
        let secret: Secret = serde_json::from_str("\"s3cret\"").unwrap();
        assert_eq!(secret, "s3cret");
        assert_eq!(serde_json::to_string(&secret).unwrap(), "\"s3cret\"");
    }
}
