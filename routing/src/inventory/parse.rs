//! Reading a Lieutenant `/clusters` JSON array into [`Cluster`]s, whole or lean.
//!
//! - **Whole** ([`Keep::All`]): every field and fact as Lieutenant gave it, for what shows or
//!   writes clusters (kharonctl's kubeconfigs, the `Clusters` RPC, the cache).
//! - **Lean** ([`Keep::Routing`]): only the facts routing reads ([`ROUTING_FACTS`],
//!   [`ROUTING_DYNAMIC_FACTS`]); every other fact, the annotations and the display name are
//!   checked as the whole parse checks them, then skipped without being built. A real cluster
//!   reports dozens of dynamic facts (versions, node counts, objects), and a daemon that routes
//!   50,000 clusters would otherwise allocate and free every one of them at each start and reload
//!   (`bench/inventory.sh` measures the start).
//!
//! Both accept and refuse exactly the same documents, with the same error: the lean parse keeps
//! less, never checks less.
//!
//! A large array is parsed across the cores: serde_json first checks the whole document and
//! hands back each element's bytes ([`RawValue`]); the elements are then parsed in contiguous
//! parts side by side (`kharon_common::parallel::chunks`). Any failure, of the check or of an element,
//! sends the whole document to one parse, so that an error is always that parse's, with its line
//! and column in the document, not in an element.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::cluster::{Cluster, fact};

/// What of each cluster a parse keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Every field and fact.
    All,
    /// The id, the tenant, and the facts routing reads; see the module doc.
    Routing,
}

/// The static facts routing reads ([`Cluster::routing_facts`], [`Cluster::jumphost`],
/// [`Cluster::is_ignored`]) and the distribution that picks a URL fact.
pub const ROUTING_FACTS: [&str; 5] = [
    fact::JUMPHOST,
    fact::JUMPHOST_DOMAINS,
    fact::JUMPHOST_SKIP_DOMAINS,
    fact::KHARON_IGNORE,
    fact::DISTRIBUTION,
];

/// The dynamic facts routing reads: the domains and the URLs whose host names it routes (the
/// base domains that anchor a name are among the domains). The tests check that a lean parse
/// routes as the whole one does.
pub const ROUTING_DYNAMIC_FACTS: [&str; 8] = [
    fact::OPENSHIFT_BASE_DOMAIN,
    fact::OPENSHIFT_APPS_DOMAIN,
    fact::TALOS_BASE_DOMAIN,
    fact::TALOS_APPS_DOMAIN,
    fact::OPENSHIFT_API_URL,
    fact::OPENSHIFT_CONSOLE_URL,
    fact::TALOS_API_URL,
    fact::TALOS_CONSOLE_URL,
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read inventory {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("inventory {}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
}

/// A Lieutenant `/clusters` JSON array, every field kept.
pub fn parse_clusters(bytes: &[u8]) -> Result<Vec<Cluster>, serde_json::Error> {
    parse_kept(bytes, Keep::All)
}

/// A Lieutenant `/clusters` JSON array, keeping what `keep` says.
pub fn parse_kept(bytes: &[u8], keep: Keep) -> Result<Vec<Cluster>, serde_json::Error> {
    if bytes.len() < ACROSS_CORES_FROM {
        return whole(bytes, keep);
    }
    let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(bytes) else {
        return whole(bytes, keep);
    };
    let parts = kharon_common::parallel::chunks(&elements, |_, part| {
        part.iter().map(|raw| element(raw.get(), keep)).collect::<Result<Vec<_>, _>>()
    });
    let mut clusters = Vec::with_capacity(elements.len());
    for part in parts {
        match part {
            Ok(part) => clusters.extend(part),
            Err(_) => return whole(bytes, keep),
        }
    }
    Ok(clusters)
}

/// Below this size one thread parses faster than the check of the whole and the threads cost.
const ACROSS_CORES_FROM: usize = 1 << 20;

fn whole(bytes: &[u8], keep: Keep) -> Result<Vec<Cluster>, serde_json::Error> {
    match keep {
        Keep::All => serde_json::from_slice(bytes),
        Keep::Routing => {
            let lean: Vec<Lean> = serde_json::from_slice(bytes)?;
            Ok(lean.into_iter().map(Cluster::from).collect())
        }
    }
}

fn element(text: &str, keep: Keep) -> Result<Cluster, serde_json::Error> {
    match keep {
        Keep::All => serde_json::from_str(text),
        Keep::Routing => serde_json::from_str::<Lean>(text).map(Cluster::from),
    }
}

pub fn load_file(path: &Path) -> Result<Vec<Cluster>, Error> {
    parse_file(path, &read_file(path)?, Keep::All)
}

/// An inventory file's bytes, unparsed: [`parse_file`] parses them.
pub fn read_file(path: &Path) -> Result<Vec<u8>, Error> {
    // A FIFO or device as --inventory would block start and every reload: refused up front.
    kharon_common::files::read_regular(path).map_err(|source| Error::Read { path: path.to_owned(), source })
}

/// The clusters of an inventory file's `bytes` (`path` names it in errors).
pub fn parse_file(path: &Path, bytes: &[u8], keep: Keep) -> Result<Vec<Cluster>, Error> {
    parse_kept(bytes, keep).map_err(|source| Error::Parse { path: path.to_owned(), source })
}

/// A cluster as [`Keep::Routing`] reads it. Each field is the whole parse's, type for type, so
/// that both refuse the same documents: a skipped map is still required to be a map.
#[derive(Deserialize)]
struct Lean {
    id: String,
    #[serde(default)]
    tenant: String,
    #[serde(rename = "displayName", default, deserialize_with = "skipped_name")]
    _display_name: (),
    #[serde(default, deserialize_with = "routing_facts")]
    facts: Map<String, Value>,
    #[serde(rename = "dynamicFacts", default, deserialize_with = "routing_dynamic_facts")]
    dynamic_facts: Map<String, Value>,
    #[serde(rename = "annotations", default, deserialize_with = "skipped_map")]
    _annotations: (),
}

impl From<Lean> for Cluster {
    fn from(lean: Lean) -> Self {
        Cluster {
            id: lean.id,
            tenant: lean.tenant,
            display_name: None,
            facts: lean.facts,
            dynamic_facts: lean.dynamic_facts,
            annotations: Map::new(),
        }
    }
}

fn routing_facts<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    d.deserialize_map(Only(&ROUTING_FACTS))
}

fn routing_dynamic_facts<'de, D: Deserializer<'de>>(d: D) -> Result<Map<String, Value>, D::Error> {
    d.deserialize_map(Only(&ROUTING_DYNAMIC_FACTS))
}

fn skipped_map<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    d.deserialize_map(Only(&[])).map(drop)
}

/// `Option<String>`'s check (a string or null) without the string.
fn skipped_name<'de, D: Deserializer<'de>>(d: D) -> Result<(), D::Error> {
    struct StringOrNull;
    impl<'de> Visitor<'de> for StringOrNull {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_str(StringOrNull)
        }
    }
    d.deserialize_option(StringOrNull)
}

/// A JSON object of which only the keys in `.0` are kept; the values of the others are checked
/// for syntax and skipped. A key given twice keeps its last value, as `Map` does.
struct Only(&'static [&'static str]);

impl<'de> Visitor<'de> for Only {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Map::new();
        while let Some(name) = map.next_key_seed(Known(self.0))? {
            match name {
                Some(name) => {
                    kept.insert(name.to_owned(), map.next_value()?);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(kept)
    }
}

/// A map key: which of the known names it is, if any, without allocating it.
struct Known(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Known {
    type Value = Option<&'static str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Known {
    type Value = Option<&'static str>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().copied().find(|known| *known == key))
    }
}

#[cfg(test)]
mod tests;
