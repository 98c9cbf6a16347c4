//! The `[socks]` username and password the SOCKS listener requires ([`SocksAuth`]).

use kharon_common::secret::Secret;

/// RFC 1929 username/password the SOCKS listener requires. The password is never printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocksAuth {
    pub username: String,
    pub password: Secret,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socks_password_is_not_in_debug_output() {
        let auth = SocksAuth { username: "u".into(), password: "hunter2".into() };
        assert!(!format!("{auth:?}").contains("hunter2"));
    }
}
