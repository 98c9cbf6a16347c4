//! The OpenPGP operations emergency credentials need, on rPGP (`pgp`): read the user's armored
//! private key, check its passphrase, decrypt armored messages addressed to it (RSA or Curve25519
//! subkeys, as OpenPGP.js and gopenpgp produce them), and tell whether a public key a server sent
//! is this same key. Nothing here touches the network or the disk.
//!
//! Signatures on messages are not checked: the senders' keys are unknown here
//! (docs/emergency-credentials.md, "The bucket list").

use std::fmt;

use kharon_common::Secret;
use pgp::composed::{Deserializable as _, Message, SignedPublicKey, SignedSecretKey};
use pgp::types::{KeyDetails as _, Password};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not an armored OpenPGP private key ({0})")]
    BadPrivateKey(String),
    #[error("not an armored OpenPGP public key ({0})")]
    BadPublicKey(String),
    #[error("the passphrase does not unlock the key")]
    WrongPassphrase,
    /// The message has no session key for any of our (sub)keys.
    #[error("the message is not encrypted to this key")]
    NotForUs,
    #[error("not a readable OpenPGP message ({0})")]
    BadMessage(String),
}

/// A passphrase; `Debug` never shows it. It lives only in memory for one command.
#[derive(Debug, Clone, Default)]
pub struct Passphrase(Secret);

impl Passphrase {
    pub fn new(text: impl Into<String>) -> Self {
        Self(Secret::new(text.into()))
    }

    /// The text itself, for the one place that must send it on (a TOTP code to Passbolt).
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }

    fn password(&self) -> Password {
        Password::from(self.0.as_str())
    }
}

/// The user's private key and its passphrase.
pub struct PrivateKey {
    key: SignedSecretKey,
    passphrase: Passphrase,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrivateKey").field("fingerprint", &self.fingerprint()).finish_non_exhaustive()
    }
}

/// rPGP's parse errors end in a dump of the input bytes: the first line of sense is enough.
fn short(e: &dyn fmt::Display) -> String {
    let text = e.to_string();
    let cut = text.find(" Error(").or_else(|| text.find(" [")).unwrap_or(text.len()).min(160);
    let mut out: String = text.chars().take(cut).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// Upper-case hex, as gopenpgp prints fingerprints and Passbolt expects them in `keyid`.
fn hex_upper(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

impl PrivateKey {
    /// Parses an armored private key (a transferable secret key block).
    pub fn parse(armored: &str) -> Result<Self, Error> {
        let (key, _headers) =
            SignedSecretKey::from_string(armored.trim()).map_err(|e| Error::BadPrivateKey(short(&e)))?;
        Ok(Self { key, passphrase: Passphrase::default() })
    }

    /// The primary key's fingerprint, 40 upper-case hex characters for a v4 key.
    pub fn fingerprint(&self) -> String {
        hex_upper(self.key.primary_key.fingerprint().as_bytes())
    }

    /// Whether the secret key material is protected by a passphrase.
    pub fn is_protected(&self) -> bool {
        self.key.primary_key.secret_params().is_encrypted()
            || self.key.secret_subkeys.iter().any(|s| s.key.secret_params().is_encrypted())
    }

    /// Keeps `passphrase` for later decryptions once it unlocks the key (every part of it that is
    /// protected, so a wrong one fails here and not in the middle of a login).
    pub fn unlock(&mut self, passphrase: Passphrase) -> Result<(), Error> {
        let pw = passphrase.password();
        let unlocks = |r: pgp::errors::Result<pgp::errors::Result<()>>| matches!(r, Ok(Ok(())));
        if !unlocks(self.key.primary_key.unlock(&pw, |_, _| Ok(()))) {
            return Err(Error::WrongPassphrase);
        }
        for sub in &self.key.secret_subkeys {
            if !unlocks(sub.key.unlock(&pw, |_, _| Ok(()))) {
                return Err(Error::WrongPassphrase);
            }
        }
        self.passphrase = passphrase;
        Ok(())
    }

    /// Decrypts an armored message addressed to this key and returns its literal data.
    pub fn decrypt(&self, armored: &str) -> Result<Vec<u8>, Error> {
        let bad = |e: &dyn fmt::Display| Error::BadMessage(short(e));
        let (message, _headers) = Message::from_string(armored.trim()).map_err(|e| bad(&e))?;
        let mut plain = match message.decrypt(&self.passphrase.password(), &self.key) {
            Ok(plain) => plain,
            Err(pgp::errors::Error::MissingKey) => return Err(Error::NotForUs),
            Err(e) => return Err(bad(&e)),
        };
        if plain.is_compressed() {
            plain = plain.decompress().map_err(|e| bad(&e))?;
        }
        // Reading to the end also checks the integrity tag (MDC/AEAD): a tampered message fails here.
        plain.as_data_vec().map_err(|e| bad(&e))
    }

    /// Whether `armored` is this key's public half: the same primary key and no subkey that is not
    /// ours. A server that hands back a different key (or ours plus a foreign encryption subkey)
    /// is not the one we logged in to.
    pub fn matches_public(&self, armored: &str) -> Result<bool, Error> {
        let (public, _headers) =
            SignedPublicKey::from_string(armored.trim()).map_err(|e| Error::BadPublicKey(short(&e)))?;
        if public.primary_key.fingerprint() != self.key.primary_key.fingerprint() {
            return Ok(false);
        }
        let ours: Vec<_> = self.key.secret_subkeys.iter().map(|s| s.key.fingerprint()).collect();
        Ok(public.public_subkeys.iter().all(|s| ours.contains(&s.key.fingerprint())))
    }

    /// The primary fingerprint of an armored public key (for error messages).
    pub fn public_fingerprint(armored: &str) -> Result<String, Error> {
        let (public, _headers) =
            SignedPublicKey::from_string(armored.trim()).map_err(|e| Error::BadPublicKey(short(&e)))?;
        Ok(hex_upper(public.primary_key.fingerprint().as_bytes()))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pgp::composed::{
        ArmorOptions, EncryptionCaps, KeyType, MessageBuilder, SecretKeyParamsBuilder, SubkeyParamsBuilder,
    };
    use pgp::crypto::ecc_curve::ECCCurve;
    use pgp::crypto::sym::SymmetricKeyAlgorithm;

    /// A passphrase-protected Curve25519 key as OpenPGP.js makes them: EdDSA primary, ECDH subkey.
    pub(crate) fn new_key(passphrase: &str) -> SignedSecretKey {
        let mut sub = SubkeyParamsBuilder::default();
        sub.key_type(KeyType::ECDH(ECCCurve::Curve25519Legacy))
            .can_encrypt(EncryptionCaps::All)
            .passphrase(Some(passphrase.into()));
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Ed25519Legacy)
            .can_certify(true)
            .can_sign(true)
            .primary_user_id("Test <test@example.com>".into())
            .passphrase(Some(passphrase.into()))
            .subkeys(vec![sub.build().unwrap()]);
        params.build().unwrap().generate(rand08::thread_rng()).unwrap()
    }

    pub(crate) fn armored_secret(key: &SignedSecretKey) -> String {
        key.to_armored_string(ArmorOptions::default()).unwrap()
    }

    pub(crate) fn armored_public(key: &SignedSecretKey) -> String {
        SignedPublicKey::from(key.clone()).to_armored_string(ArmorOptions::default()).unwrap()
    }

    pub(crate) fn encrypt_to(key: &SignedSecretKey, data: &[u8]) -> String {
        let public = SignedPublicKey::from(key.clone());
        let mut builder = MessageBuilder::from_bytes("", data.to_vec())
            .seipd_v1(rand08::thread_rng(), SymmetricKeyAlgorithm::AES256);
        builder.encrypt_to_key(rand08::thread_rng(), &public.public_subkeys[0]).unwrap();
        builder.to_armored_string(rand08::thread_rng(), ArmorOptions::default()).unwrap()
    }

    /// Older Passbolt accounts have RSA keys (OpenPGP.js generated RSA before Curve25519): the one
    /// RSA key of the suite, 2048 bits to keep it quick.
    #[test]
    fn rsa_keys_decrypt_too() {
        let mut sub = SubkeyParamsBuilder::default();
        sub.key_type(KeyType::Rsa(2048)).can_encrypt(EncryptionCaps::All).passphrase(Some("rsa pw".into()));
        let mut params = SecretKeyParamsBuilder::default();
        params
            .key_type(KeyType::Rsa(2048))
            .can_certify(true)
            .can_sign(true)
            .primary_user_id("RSA <rsa@example.com>".into())
            .passphrase(Some("rsa pw".into()))
            .subkeys(vec![sub.build().unwrap()]);
        let rsa = params.build().unwrap().generate(rand08::thread_rng()).unwrap();
        let mut key = PrivateKey::parse(&armored_secret(&rsa)).unwrap();
        assert!(matches!(key.unlock(Passphrase::new("nope")), Err(Error::WrongPassphrase)));
        key.unlock(Passphrase::new("rsa pw")).unwrap();
        assert_eq!(key.decrypt(&encrypt_to(&rsa, b"rsa token")).unwrap(), b"rsa token");
        assert!(key.matches_public(&armored_public(&rsa)).unwrap());
    }

    #[test]
    fn decrypts_what_was_encrypted_to_it_and_knows_what_was_not() {
        let ours = new_key("correct horse");
        let theirs = new_key("other");
        let mut key = PrivateKey::parse(&armored_secret(&ours)).unwrap();
        assert!(key.is_protected());
        assert_eq!(key.fingerprint().len(), 40);
        assert!(key.fingerprint().chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()));
        assert!(matches!(key.unlock(Passphrase::new("wrong")), Err(Error::WrongPassphrase)));
        key.unlock(Passphrase::new("correct horse")).unwrap();
        assert_eq!(key.decrypt(&encrypt_to(&ours, b"token")).unwrap(), b"token");
        assert!(matches!(key.decrypt(&encrypt_to(&theirs, b"x")), Err(Error::NotForUs)));
        assert!(matches!(key.decrypt("garbage"), Err(Error::BadMessage(_))));
        // A broken armor header: the message says so without dumping the input.
        let broken = "-----BEGIN\\ PGP MESSAGE-----\n\nwV4D\n-----END PGP MESSAGE-----\n";
        let err = key.decrypt(broken).unwrap_err().to_string();
        assert!(
            err.starts_with("not a readable OpenPGP message") && err.len() < 200 && !err.contains("input"),
            "{err}"
        );
        assert!(key.matches_public(&armored_public(&ours)).unwrap());
        assert!(!key.matches_public(&armored_public(&theirs)).unwrap());
        assert!(matches!(PrivateKey::parse("nope"), Err(Error::BadPrivateKey(_))));
        assert!(!format!("{:?}", Passphrase::new("correct horse")).contains("horse"));
    }
}
