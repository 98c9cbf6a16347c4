//! GPGAuth login (go-passbolt `api/auth.go`, `Login`; docs/emergency-credentials.md) and the
//! `/users/me.json` key check.
//!
//! 1. `POST /auth/login.json {"gpg_auth": {"keyid": FINGERPRINT}}`: the server answers with a
//!    token encrypted to our key in `X-GPGAuth-User-Auth-Token` (PHP-`urlencode`d, then
//!    `quotemeta`-escaped: `\+`, `\.`, …). Some servers call this answer an error ("The
//!    authentication failed."); the header is what counts.
//! 2. The same POST with the decrypted token as `user_token_result`: a session cookie
//!    (`passbolt_session`, `CAKEPHP` or `PHPSESSID`) and `X-GPGAuth-Authenticated: true`.
//! 3. `GET /users/me.json` (the first call MFA may stop): the server's copy of our public key
//!    must be our key, or we are not talking to our Passbolt.

use serde_json::json;

use super::{Endpoint, Error, Session};
use crate::emergency::openpgp;

/// Session cookie names of the Passbolt flavours (self-hosted, older, cloud).
const SESSION_COOKIES: [&str; 3] = ["passbolt_session", "CAKEPHP", "PHPSESSID"];

impl Session {
    /// Logs in with the session's key; afterwards the session's cookies authenticate every call.
    pub async fn login(&mut self) -> Result<(), Error> {
        let fingerprint = self.key.fingerprint();
        let stage1 = self
            .send(
                reqwest::Method::POST,
                &Endpoint::at("auth/login.json"),
                Some(&json!({"gpg_auth": {"keyid": fingerprint}})),
            )
            .await?;
        let Some(encoded) = stage1.headers.get("X-GPGAuth-User-Auth-Token").and_then(|v| v.to_str().ok())
        else {
            let debug = stage1
                .headers
                .get("X-GPGAuth-Debug")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            if debug.to_ascii_lowercase().contains("no user associated") {
                return Err(Error::UnknownKey { url: self.base.clone(), fingerprint });
            }
            let mut message = super::message(&stage1);
            if !debug.is_empty() {
                message = format!("{message} ({})", one_line(&debug));
            }
            return Err(Error::Refused {
                what: "the login with your key".into(),
                status: stage1.status,
                message,
            });
        };
        let armored = decode_token_header(encoded);
        let token = match self.key.decrypt(&armored) {
            Ok(plain) => {
                String::from_utf8(plain).map_err(|_| Error::BadChallenge("the token is not text".into()))?
            }
            Err(openpgp::Error::NotForUs) => {
                return Err(Error::BadChallenge(format!(
                    "it is not encrypted to your key {}; is this the key of your Passbolt account?",
                    self.key.fingerprint()
                )));
            }
            Err(source) => return Err(Error::Decrypt { what: "Passbolt's login token".into(), source }),
        };
        check_token(&token)?;

        let stage2 = self
            .send(
                reqwest::Method::POST,
                &Endpoint::at("auth/login.json"),
                Some(&json!({"gpg_auth": {"keyid": self.key.fingerprint(), "user_token_result": token}})),
            )
            .await?;
        let authenticated = stage2
            .headers
            .get("X-GPGAuth-Authenticated")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        if !(authenticated && self.has_cookie(&SESSION_COOKIES)) {
            return Err(Error::Refused {
                what: "the login token we decrypted".into(),
                status: stage2.status,
                message: super::message(&stage2),
            });
        }

        let me = self
            .call(
                reqwest::Method::GET,
                &Endpoint::at("users/me.json"),
                None,
                "reading your user (/users/me.json)",
            )
            .await?;
        let Some(armored_key) = me.pointer("/gpgkey/armored_key").and_then(|k| k.as_str()) else {
            return Err(Error::Decode {
                what: "/users/me.json".into(),
                reason: "no gpgkey.armored_key".into(),
            });
        };
        let matches = self
            .key
            .matches_public(armored_key)
            .map_err(|e| Error::Decode { what: "/users/me.json".into(), reason: e.to_string() })?;
        if !matches {
            return Err(Error::KeyMismatch {
                url: self.base.clone(),
                ours: self.key.fingerprint(),
                theirs: openpgp::PrivateKey::public_fingerprint(armored_key)
                    .unwrap_or_else(|_| "unreadable".into()),
            });
        }
        Ok(())
    }
}

/// Undoes PHP's `quotemeta(urlencode(…))`: `+` is a space, `%XX` a byte, `\c` the character `c`.
/// (go-passbolt does `QueryUnescape` and replaces `\ ` by a space, which leaves `\.` in armor
/// header lines; neither escape can occur in the base64 part, so removing them all is safe.)
pub fn decode_token_header(value: &str) -> String {
    let spaced = value.replace('+', " ");
    let decoded = percent_encoding::percent_decode_str(&spaced).decode_utf8_lossy();
    let mut out = String::with_capacity(decoded.len());
    let mut chars = decoded.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// `gpgauthv1.3.0|36|<uuid>|gpgauthv1.3.0`: four fields, first equals last and starts with
/// `gpgauth`, the second is the length of the third.
pub fn check_token(token: &str) -> Result<(), Error> {
    let bad = |why: &str| Error::BadChallenge(why.to_owned());
    let fields: Vec<&str> = token.split('|').collect();
    let [version, length, uuid, version_again] = fields[..] else {
        return Err(bad("the token does not have four |-separated fields"));
    };
    if version != version_again || !version.starts_with("gpgauth") {
        return Err(bad("the token's version fields are not gpgauth…"));
    }
    if length.parse::<usize>().ok() != Some(uuid.len()) || uuid.len() != 36 {
        return Err(bad("the token's length field does not match its UUID"));
    }
    Ok(())
}

fn one_line(text: &str) -> String {
    let line: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    line.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_header_is_urldecoded_and_unescaped() {
        // quotemeta(urlencode("-----BEGIN PGP MESSAGE-----\nVersion: OpenPGP.js\n\nab+c/=\n")).
        let header = "-----BEGIN\\+PGP\\+MESSAGE-----%0AVersion%3A\\+OpenPGP\\.js%0A%0Aab%2Bc%2F%3D%0A";
        assert_eq!(
            decode_token_header(header),
            "-----BEGIN PGP MESSAGE-----\nVersion: OpenPGP.js\n\nab+c/=\n"
        );
    }

    #[test]
    fn tokens_must_have_the_gpgauth_shape() {
        check_token("gpgauthv1.3.0|36|6e9ac0d4-7d91-4d3e-9d47-1f0d0e5b9a3c|gpgauthv1.3.0").unwrap();
        for bad in [
            "gpgauthv1.3.0|36|6e9ac0d4-7d91-4d3e-9d47-1f0d0e5b9a3c",
            "gpgauthv1.3.0|35|6e9ac0d4-7d91-4d3e-9d47-1f0d0e5b9a3c|gpgauthv1.3.0",
            "other|36|6e9ac0d4-7d91-4d3e-9d47-1f0d0e5b9a3c|other",
            "gpgauthv1.3.0|3|abc|gpgauthv1.3.0",
        ] {
            assert!(check_token(bad).is_err(), "{bad}");
        }
    }
}
