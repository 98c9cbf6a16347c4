//! Finding a resource by name and reading its secret (docs/emergency-credentials.md, "The bucket list").
//!
//! `GET /resources.json` lists what is shared with us. Before Passbolt v5 each resource carries its
//! `name`; v5 resource types keep `name` empty and put it in `metadata`, an OpenPGP message
//! encrypted either to our own key or to a shared metadata key whose private half the server
//! keeps encrypted to each user (`GET /metadata/keys.json`). We try our key first, then the shared
//! keys, as the Passbolt clients do. `GET /secrets/resource/<id>.json` then gives the secret,
//! also encrypted to our key: JSON with a `password` field, or (legacy "password-string" type)
//! the password itself.

pub use kharon_common::Secret;
use serde::Deserialize;
use serde_json::Value;

use super::{Endpoint, Error, Session};
use crate::emergency::openpgp::{self, Passphrase, PrivateKey};

#[derive(Debug, Deserialize)]
struct Resource {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    metadata: Option<String>,
}

#[derive(Deserialize)]
struct MetadataKey {
    #[serde(default)]
    metadata_private_keys: Vec<MetadataPrivateKey>,
}

#[derive(Deserialize)]
struct MetadataPrivateKey {
    data: String,
}

/// What a metadata private key entry decrypts to.
#[derive(Deserialize)]
struct SharedKeyData {
    armored_key: String,
    #[serde(default)]
    passphrase: String,
}

#[derive(Deserialize)]
struct Metadata {
    #[serde(default)]
    name: String,
}

impl Session {
    /// The secret of the resource named `name` that is shared with us.
    pub async fn secret_by_name(&mut self, name: &str) -> Result<Secret, Error> {
        let id = self.find_resource(name).await?;
        let body = self
            .call(
                reqwest::Method::GET,
                &Endpoint::at("secrets/resource").segment(format!("{id}.json")),
                None,
                "reading the secret",
            )
            .await?;
        let Some(armored) = body.get("data").and_then(Value::as_str) else {
            return Err(Error::Decode { what: format!("the secret of {name:?}"), reason: "no data".into() });
        };
        let plain = self
            .key
            .decrypt(armored)
            .map_err(|source| Error::Decrypt { what: format!("the secret of {name:?}"), source })?;
        let text = String::from_utf8(plain).map_err(|_| Error::Decode {
            what: format!("the secret of {name:?}"),
            reason: "not UTF-8".into(),
        })?;
        Ok(Secret::new(password_of(text)))
    }

    /// The id of the resource named `name`: by its plain name, else by its decrypted v5 metadata.
    async fn find_resource(&mut self, name: &str) -> Result<String, Error> {
        let list = self
            .call(reqwest::Method::GET, &Endpoint::at("resources.json"), None, "listing resources")
            .await?;
        let resources: Vec<Resource> = serde_json::from_value(list)
            .map_err(|e| Error::Decode { what: "the resource list".into(), reason: e.to_string() })?;
        if let Some(r) = resources.iter().find(|r| r.name.as_deref() == Some(name)) {
            return checked_id(&r.id);
        }
        let encrypted: Vec<&Resource> = resources
            .iter()
            .filter(|r| r.name.as_deref().unwrap_or_default().is_empty() && r.metadata.is_some())
            .collect();
        let mut shared_keys: Option<Vec<PrivateKey>> = None;
        let mut undecryptable = 0;
        for r in encrypted {
            let Some(armored) = r.metadata.as_deref() else { continue };
            let plain = match self.key.decrypt(armored) {
                Ok(plain) => Some(plain),
                Err(openpgp::Error::NotForUs) => {
                    if shared_keys.is_none() {
                        shared_keys = Some(self.shared_metadata_keys().await?);
                    }
                    shared_keys.iter().flatten().find_map(|k| k.decrypt(armored).ok())
                }
                Err(_) => None,
            };
            let Some(plain) = plain else {
                undecryptable += 1;
                continue;
            };
            let found = serde_json::from_slice::<Metadata>(&plain).is_ok_and(|m| m.name == name);
            if found {
                return checked_id(&r.id);
            }
        }
        Err(Error::NoResource { name: name.to_owned(), seen: resources.len(), undecryptable })
    }

    /// The shared metadata keys whose private half the server keeps encrypted to us.
    async fn shared_metadata_keys(&mut self) -> Result<Vec<PrivateKey>, Error> {
        let body = self
            .call(
                reqwest::Method::GET,
                &Endpoint::at("metadata/keys.json").query("contain[metadata_private_keys]", "1"),
                None,
                "listing the shared metadata keys",
            )
            .await?;
        let keys: Vec<MetadataKey> = serde_json::from_value(body)
            .map_err(|e| Error::Decode { what: "the metadata key list".into(), reason: e.to_string() })?;
        let mut out = Vec::new();
        for entry in keys.iter().flat_map(|k| &k.metadata_private_keys) {
            let Ok(plain) = self.key.decrypt(&entry.data) else { continue };
            let Ok(data) = serde_json::from_slice::<SharedKeyData>(&plain) else { continue };
            let Ok(mut key) = PrivateKey::parse(&data.armored_key) else { continue };
            if key.unlock(Passphrase::new(data.passphrase)).is_ok() {
                out.push(key);
            }
        }
        Ok(out)
    }
}

/// Resource ids go into a URL path: only a UUID's characters get there.
fn checked_id(id: &str) -> Result<String, Error> {
    if !id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
        Ok(id.to_owned())
    } else {
        Err(Error::Decode {
            what: "the resource list".into(),
            reason: format!("resource id {id:?} is not a UUID"),
        })
    }
}

/// The `password` of a "password-and-description" (or v5) secret; the text itself otherwise.
fn password_of(text: String) -> String {
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => match map.get("password").and_then(Value::as_str) {
            Some(p) => p.to_owned(),
            None => text,
        },
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_json_with_a_password_or_the_password_itself() {
        assert_eq!(password_of(r#"{"password": "buckets: []", "description": "d"}"#.into()), "buckets: []");
        assert_eq!(password_of("buckets: []".into()), "buckets: []");
        assert_eq!(password_of("\"just a string\"".into()), "\"just a string\"");
    }

    #[test]
    fn resource_ids_must_look_like_uuids() {
        checked_id("8e3874ae-4b40-590b-968a-418f704b9d9a").unwrap();
        assert!(checked_id("../users/me").is_err());
        assert!(checked_id("").is_err());
    }
}
