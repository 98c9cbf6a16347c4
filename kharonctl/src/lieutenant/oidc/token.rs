//! The tokens one login yields, and when the `id_token` (the Lieutenant bearer) is stale.
//!
//! The `id_token` is decoded without checking its signature: Lieutenant (really the Kubernetes API
//! server behind it) verifies it; we only read `exp` to avoid sending a token that is about to
//! expire (docs/lieutenant-and-oidc.md, "Tokens"). A token without `exp`, or one that is not a JWT, counts as
//! long-lived, as commodore does; so does an `exp` no clock can represent (1e300, 1.8e19): the
//! token is untrusted input and must never panic us.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use kharon_common::Secret;
use serde::{Deserialize, Serialize};

/// An `id_token` expiring within this margin is refreshed first (commodore's margin).
pub const STALE_MARGIN: Duration = Duration::from_secs(10);

/// What we keep of a token response. Never printed: `Debug` redacts every token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub id_token: Secret,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<Secret>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_token: Option<Secret>,
}

impl Tokens {
    /// Whether the id_token must be refreshed before use at `now`.
    pub fn is_stale(&self, now: SystemTime) -> bool {
        is_stale(&self.id_token, now)
    }

    /// Merges a refresh reply: a provider that does not rotate refresh tokens sends none back, and
    /// then the old one stays valid (RFC 6749 §6).
    pub fn refreshed(self, new: Tokens) -> Tokens {
        Tokens { refresh_token: new.refresh_token.or(self.refresh_token), ..new }
    }
}

/// What a token endpoint said beyond the tokens. Kept only to write commodore's cache the way
/// commodore writes it (oauthlib's parse of the response, [`super::commodore`]); our own cache
/// does not store it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details {
    /// `token_type`, as RFC 6749 §7.1 names it (`Bearer`).
    pub token_type: String,
    /// `expires_in`: seconds the access token lasts, when the provider said.
    pub expires_in: Option<u64>,
    /// `scope`, one scope a string, when the provider said.
    pub scope: Option<Vec<String>>,
}

/// A token endpoint's answer to a login or a refresh.
#[derive(Debug, Clone)]
pub struct Grant {
    pub tokens: Tokens,
    pub details: Details,
}

/// The claims we read from a JWT payload.
#[derive(Debug, Deserialize)]
struct Claims {
    exp: Option<f64>,
    iss: Option<String>,
    preferred_username: Option<String>,
    email: Option<String>,
    sub: Option<String>,
}

/// A JWT's payload claims, without checking its signature (we only read our own tokens).
fn claims(jwt: &str) -> Option<Claims> {
    let payload = jwt.split('.').nth(1)?;
    let bytes =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `iss` of a JWT: the issuer a Lieutenant token came from (kept out of every cluster's routes).
pub fn issuer(jwt: &str) -> Option<String> {
    claims(jwt)?.iss.filter(|iss| !iss.is_empty())
}

/// Who a JWT says it belongs to, as a person knows their account: `preferred_username`, else
/// `email`, else `sub` (OpenID Connect Core 1.0 §5.1). Data from a token: escape it to show it.
pub fn account(jwt: &str) -> Option<String> {
    let claims = claims(jwt)?;
    [claims.preferred_username, claims.email, claims.sub].into_iter().flatten().find(|v| !v.is_empty())
}

/// `exp` of a JWT as a time, if it is a JWT with an `exp` that is a representable time.
pub fn expiry(jwt: &str) -> Option<SystemTime> {
    let claims = claims(jwt)?;
    // try_from_secs_f64 refuses negative, NaN and too large values; checked_add refuses a
    // Duration that fits but a SystemTime that does not (beyond year ~292 billion).
    let exp = Duration::try_from_secs_f64(claims.exp?).ok()?;
    UNIX_EPOCH.checked_add(exp)
}

/// Whether `jwt` expires within [`STALE_MARGIN`] of `now`. No `exp` (or no JWT) → never stale.
pub fn is_stale(jwt: &str, now: SystemTime) -> bool {
    match (expiry(jwt), now.checked_add(STALE_MARGIN)) {
        (Some(exp), Some(soon)) => exp <= soon,
        // `now` at the end of time: everything has expired.
        (Some(_), None) => true,
        (None, _) => false,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An unsigned JWT with the given payload (the signature part is junk; we never check it).
    pub(crate) fn jwt(payload: serde_json::Value) -> String {
        let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!("{}.{}.c2ln", enc(br#"{"alg":"RS256"}"#), enc(payload.to_string().as_bytes()))
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn token_is_stale_within_ten_seconds_of_exp() {
        let token = jwt(serde_json::json!({"exp": 1_000, "aud": "kharon"}));
        assert!(!is_stale(&token, at(900)));
        assert!(!is_stale(&token, at(989)));
        assert!(is_stale(&token, at(990)));
        assert!(is_stale(&token, at(2_000)));
        assert_eq!(expiry(&token), Some(at(1_000)));
        assert_eq!(issuer(&token), None);
        let token = jwt(serde_json::json!({"exp": 1_000, "iss": "https://id.example/realms/x"}));
        assert_eq!(issuer(&token).as_deref(), Some("https://id.example/realms/x"));
        assert_eq!(expiry(&token), Some(at(1_000)));
    }

    #[test]
    fn token_without_exp_or_not_a_jwt_is_long_lived() {
        assert!(!is_stale(&jwt(serde_json::json!({"sub": "a"})), at(u32::MAX as u64)));
        assert!(!is_stale("opaque-token", at(0)));
        assert!(!is_stale("a.%%%.c", at(0)));
        assert!(!is_stale(&jwt(serde_json::json!({"exp": "soon"})), at(0)));
    }

    #[test]
    fn an_exp_no_clock_can_hold_counts_as_long_lived_without_panicking() {
        // Past u64 seconds, past SystemTime, and far past both.
        for exp in ["1e300", "1.8e19", "1.7976931348623157e308", "18446744073709551615"] {
            let payload = format!(r#"{{"exp": {exp}}}"#);
            let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
            let token = format!("{}.{}.c2ln", enc(b"{}"), enc(payload.as_bytes()));
            assert_eq!(expiry(&token), None, "{exp}");
            assert!(!is_stale(&token, at(0)), "{exp}");
        }
        // Negative, and NaN-like values JSON can only carry as strings (or not at all).
        assert_eq!(expiry(&jwt(serde_json::json!({"exp": -1}))), None);
        assert_eq!(expiry(&jwt(serde_json::json!({"exp": "NaN"}))), None);
        assert_eq!(expiry(&jwt(serde_json::json!({"exp": "inf"}))), None);
        let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        assert_eq!(expiry(&format!("{}.{}.c2ln", enc(b"{}"), enc(br#"{"exp": NaN}"#))), None);
        // A fractional exp still counts.
        assert_eq!(
            expiry(&jwt(serde_json::json!({"exp": 1000.5}))),
            Some(at(1000) + Duration::from_millis(500))
        );
    }

    #[test]
    fn a_clock_at_the_end_of_time_finds_every_dated_token_stale() {
        let end = UNIX_EPOCH + Duration::from_secs(i64::MAX as u64);
        assert!(is_stale(&jwt(serde_json::json!({"exp": 1_000})), end));
    }

    #[test]
    fn refresh_keeps_the_old_refresh_token_when_none_comes_back() {
        let old = Tokens { id_token: "a".into(), refresh_token: Some("r1".into()), access_token: None };
        let new = Tokens { id_token: "b".into(), refresh_token: None, access_token: Some("x".into()) };
        let merged = old.clone().refreshed(new);
        assert_eq!(merged.id_token, "b");
        assert_eq!(merged.refresh_token.as_deref(), Some("r1"));
        let rotated = Tokens { id_token: "c".into(), refresh_token: Some("r2".into()), access_token: None };
        assert_eq!(old.refreshed(rotated).refresh_token.as_deref(), Some("r2"));
    }

    #[test]
    fn debug_output_has_no_tokens() {
        let t = Tokens {
            id_token: "secret-id".into(),
            refresh_token: Some("secret-refresh".into()),
            access_token: Some("secret-access".into()),
        };
        let shown = format!("{t:?}");
        assert!(!shown.contains("secret"), "{shown}");
    }
}
