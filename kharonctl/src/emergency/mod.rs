//! Emergency credentials of one cluster (docs/emergency-credentials.md): the bucket list from
//! Passbolt, one S3 object per bucket downloaded by kharond (through its routing: the storage may
//! sit behind a jump host), and the one `secrets[].data` entry of each object that our key decrypts.
//!
//! - [`key`]: where the user's Passbolt key comes from and where it is kept.
//! - [`passbolt`]: the Passbolt client (GPGAuth, MFA, resources and their secrets).
//! - [`openpgp`]: reading the key and decrypting with it; no network, no disk.
//! - here: the bucket list format, the object name, the object format, and collecting the tokens
//!   (a failing bucket is one line in [`Outcome::failures`], never the end of the run).
//!
//! The command is `cmd/clusters/emergency_credentials.rs`.

pub mod key;
pub mod openpgp;
pub mod passbolt;

use kharon_common::Secret;
use kharon_common::errors::{Chain, chain};
use kharon_proto::v1 as pb;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use crate::daemon::Daemon;
use crate::emergency::openpgp::PrivateKey;

/// The Passbolt resource holding the bucket list. The typo is the real name, as in the other two clients
/// (docs/emergency-credentials.md, "The pieces").
pub const BUCKETS_RESOURCE: &str = "emergency-cedentials-buckets";

/// `em-` + hex SHA-256 of the cluster id: the object name VSHN's controller configuration uses
/// and Go kharon hard-codes (a bucket's `objectNameTemplate` is ignored, as Go kharon does).
pub fn object_key(cluster_id: &str) -> String {
    format!("em-{:x}", Sha256::digest(cluster_id.as_bytes()))
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the bucket list in Passbolt resource {BUCKETS_RESOURCE:?} is not the expected YAML: {0}")]
    BucketList(String),
    #[error("the bucket list in Passbolt resource {BUCKETS_RESOURCE:?} names no bucket")]
    NoBuckets,
}

/// One bucket of the list. `Debug` never shows the secret key.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Bucket {
    pub endpoint: String,
    pub bucket: String,
    pub access_key_id: String,
    pub secret_access_key: Secret,
    #[serde(default)]
    pub region: Option<String>,
    /// Plain HTTP (emergency-credentials-receive's option).
    #[serde(default)]
    pub insecure: bool,
}

impl Bucket {
    /// How the bucket is named in messages: `bucket at endpoint`.
    pub fn label(&self) -> String {
        format!("{} at {}", self.bucket, self.endpoint)
    }
}

#[derive(Deserialize)]
struct BucketList {
    #[serde(default)]
    buckets: Vec<Bucket>,
}

/// Parses the resource's password: `buckets: [{endpoint, bucket, accessKeyId, secretAccessKey, …}]`.
pub fn parse_buckets(yaml: &str) -> Result<Vec<Bucket>, Error> {
    // The error of serde_norway may quote the document; the document holds secret keys.
    let list: BucketList = serde_norway::from_str(yaml).map_err(|e| {
        let at =
            e.location().map(|l| format!(" at line {}, column {}", l.line(), l.column())).unwrap_or_default();
        // Only messages that cannot hold a value from the document (which holds secret keys).
        let text = e.to_string();
        let what = if text.starts_with("missing field") {
            text.split(" at line").next().unwrap_or_default().to_owned()
        } else {
            "cannot read it".to_owned()
        };
        Error::BucketList(format!("{what}{at}"))
    })?;
    if list.buckets.is_empty() {
        return Err(Error::NoBuckets);
    }
    Ok(list.buckets)
}

/// Why a downloaded object gave no token.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    #[error("the object is not the expected JSON {{\"secrets\": [{{\"data\": …}}]}}")]
    NotJson,
    #[error("the object holds no secrets")]
    Empty,
    #[error("none of its {0} entries is encrypted to your key (ask a colleague whose key is in the list)")]
    NoneForUs(usize),
    #[error("an entry that may be encrypted to your key cannot be read")]
    Bad(#[source] openpgp::Error),
    #[error("the decrypted token is empty or not text")]
    NotAToken,
}

#[derive(Deserialize)]
struct Object {
    secrets: Vec<Entry>,
}

#[derive(Deserialize)]
struct Entry {
    data: String,
}

/// The token in an object: the first `secrets[].data` our key decrypts; entries for other keys are
/// skipped without a word.
pub fn token_from_object(key: &PrivateKey, bytes: &[u8]) -> Result<String, ObjectError> {
    let object: Object = serde_json::from_slice(bytes).map_err(|_| ObjectError::NotJson)?;
    if object.secrets.is_empty() {
        return Err(ObjectError::Empty);
    }
    let mut first_error = None;
    for entry in &object.secrets {
        match key.decrypt(&entry.data) {
            Ok(plain) => {
                let token = String::from_utf8(plain).map_err(|_| ObjectError::NotAToken)?;
                let token = token.trim();
                if token.is_empty() {
                    return Err(ObjectError::NotAToken);
                }
                return Ok(token.to_owned());
            }
            Err(openpgp::Error::NotForUs) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(match first_error {
        // A broken entry for someone else looks the same as one for us: say what we saw.
        Some(e) => ObjectError::Bad(e),
        None => ObjectError::NoneForUs(object.secrets.len()),
    })
}

/// A token and the bucket it came from. `Debug` never shows the token.
#[derive(Debug)]
pub struct Token {
    pub token: Secret,
    pub bucket: String,
}

/// What the buckets gave: distinct tokens in bucket order, and one line per bucket that failed.
#[derive(Debug, Default)]
pub struct Outcome {
    pub tokens: Vec<Token>,
    pub failures: Vec<String>,
}

/// Downloads the cluster's object from every bucket through kharond and decrypts what it can.
pub async fn collect(daemon: &mut Daemon, key: &PrivateKey, buckets: &[Bucket], cluster_id: &str) -> Outcome {
    let object = object_key(cluster_id);
    let mut outcome = Outcome::default();
    for b in buckets {
        let request = pb::FetchObjectRequest {
            endpoint: b.endpoint.clone(),
            bucket: b.bucket.clone(),
            key: object.clone(),
            access_key_id: b.access_key_id.clone(),
            secret_access_key: b.secret_access_key.as_str().to_owned(),
            region: b.region.clone().unwrap_or_default(),
            insecure: b.insecure,
        };
        let fetched = match daemon.fetch_object(request).await {
            Ok(fetched) => fetched,
            Err(e) => {
                outcome.failures.push(format!("{}: {}", b.label(), strip_daemon_prefix(&chain(&e))));
                continue;
            }
        };
        match token_from_object(key, &fetched.body) {
            Ok(token) => {
                // Mirrored buckets hold the same token: one context for it is enough.
                if !outcome.tokens.iter().any(|t| t.token == token) {
                    outcome.tokens.push(Token { token: token.into(), bucket: b.label() });
                }
            }
            Err(e) => outcome.failures.push(format!("{}: object {object}: {}", b.label(), Chain(&e))),
        }
    }
    outcome
}

/// The daemon's errors read "kharond: …"; per-bucket lines say "kharond" once, in the header.
fn strip_daemon_prefix(text: &str) -> &str {
    text.strip_prefix("kharond: ").unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::emergency::openpgp::Passphrase;
    use crate::emergency::openpgp::tests::{armored_secret, encrypt_to, new_key};

    #[test]
    fn object_key_is_em_and_sha256_hex_of_the_id() {
        // printf c-cluster-1 | sha256sum
        assert_eq!(object_key("c-cluster-1"), format!("em-{:x}", Sha256::digest(b"c-cluster-1")));
        assert_eq!(object_key(""), "em-e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn bucket_list_is_read_and_secrets_stay_out_of_errors_and_debug() {
        let yaml = "buckets:\n- endpoint: objects.example.net\n  bucket: em\n  accessKeyId: AK\n  \
                    secretAccessKey: s3cr3t\n  region: rma\n- endpoint: b:9000\n  bucket: em2\n  \
                    accessKeyId: AK2\n  secretAccessKey: x\n  insecure: true\n";
        let buckets = parse_buckets(yaml).unwrap();
        assert_eq!(buckets.len(), 2);
        assert_eq!(buckets[0].region.as_deref(), Some("rma"));
        assert!(buckets[1].insecure);
        assert!(!format!("{buckets:?}").contains("s3cr3t"));
        let err =
            parse_buckets("buckets:\n- endpoint: e\n  secretAccessKey: s3cr3t\n").unwrap_err().to_string();
        assert!(!err.contains("s3cr3t"), "{err}");
        assert!(matches!(parse_buckets("buckets: []"), Err(Error::NoBuckets)));
    }

    #[test]
    fn the_entry_for_our_key_gives_the_token_others_are_skipped() {
        let (ours, theirs) = (new_key("pw"), new_key("other"));
        let mut key = PrivateKey::parse(&armored_secret(&ours)).unwrap();
        key.unlock(Passphrase::new("pw")).unwrap();
        let object = serde_json::json!({"secrets": [
            {"data": encrypt_to(&theirs, b"not ours")},
            {"data": encrypt_to(&ours, b"eyJ.token.sig\n")},
        ]});
        assert_eq!(token_from_object(&key, object.to_string().as_bytes()).unwrap(), "eyJ.token.sig");
        let foreign = serde_json::json!({"secrets": [{"data": encrypt_to(&theirs, b"x")}]});
        let err = token_from_object(&key, foreign.to_string().as_bytes()).unwrap_err();
        assert!(matches!(err, ObjectError::NoneForUs(1)), "{err}");
        assert!(matches!(token_from_object(&key, b"<html>"), Err(ObjectError::NotJson)));
        assert!(matches!(token_from_object(&key, br#"{"secrets": []}"#), Err(ObjectError::Empty)));
    }
}
