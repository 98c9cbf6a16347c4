//! The clusters of the table in force, as the `Clusters` RPC answers them (a Lieutenant
//! `/clusters` JSON array, `kharonIgnore`d clusters left out) and `Test` reads their URLs: the
//! inventory's own bytes, kept deflate-compressed.
//!
//! Why compressed: the RPC is kharonctl's fallback (no cache, no inventory of its own), so the
//! clusters are read rarely, yet a table keeps them for as long as it is in force. As plain JSON,
//! 50,000 clusters held 25 MB of the daemon's memory (bench/inventory.sh: 82 → 107 MB RSS at
//! start). Inventory JSON repeats its keys and domains, so deflate at its fastest level keeps a
//! tenth of that, and the JSON is parsed again only when a request needs it.
//!
//! Why the bytes as read, not the parsed clusters written out again: they are compressed while
//! the other core parses them, so no start waits for it (writing 50,000 clusters out again would
//! add about a fifth of a second to the start `bench/inventory.sh` measures), and they are the
//! clusters exactly as the file or Lieutenant gave them.

use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use kharon_routing::cache;
use kharon_routing::inventory::{self, Cluster};

/// What the bytes of a catalog are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A Lieutenant `/clusters` JSON array (an `--inventory` file).
    Clusters,
    /// The cache `kharonctl update` writes: its `clusters` are the ones.
    Cache,
}

/// The compressed bytes; see the module doc.
#[derive(Debug)]
pub struct Catalog {
    deflated: Box<[u8]>,
    /// Length once inflated: the buffer is allocated once.
    raw_len: usize,
    shape: Shape,
}

impl Catalog {
    /// Keeps `bytes`, an inventory of `shape` that parsed. `Err`: not expected (the compressor
    /// writes to memory).
    pub fn of(bytes: &[u8], shape: Shape) -> Result<Self, String> {
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(bytes).map_err(|e| e.to_string())?;
        let deflated = encoder.finish().map_err(|e| e.to_string())?.into_boxed_slice();
        Ok(Catalog { deflated, raw_len: bytes.len(), shape })
    }

    /// The clusters, `kharonIgnore`d ones left out. `Err`: not expected, the bytes parsed before.
    pub fn clusters(&self) -> Result<Vec<Cluster>, String> {
        let mut raw = Vec::with_capacity(self.raw_len);
        DeflateDecoder::new(&self.deflated[..]).read_to_end(&mut raw).map_err(|e| e.to_string())?;
        let mut clusters = match self.shape {
            Shape::Clusters => inventory::parse_clusters(&raw),
            Shape::Cache => cache::clusters_of(&raw),
        }
        .map_err(|e| e.to_string())?;
        clusters.retain(|c| !c.is_ignored());
        Ok(clusters)
    }

    /// The clusters as a JSON array, `kharonIgnore`d ones left out.
    pub fn json(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec(&self.clusters()?).map_err(|e| e.to_string())
    }

    /// Bytes held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.deflated.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clusters_come_back_whole_without_the_ignored_ones_and_are_held_compressed() {
        let clusters: Vec<serde_json::Value> = (0..500)
            .map(|i| {
                let ignored = if i == 7 { r#", "kharonIgnore": "true""# } else { "" };
                serde_json::from_str(&format!(
                    r#"{{"id": "c-{i:04}", "tenant": "t-{}", "facts": {{"jumphost": "jump-{}"{ignored}}},
                        "dynamicFacts": {{"openshiftBaseDomain": "c-{i:04}.zone.example.net",
                        "openshiftApiURL": "https://api.c-{i:04}.zone.example.net:6443", "nested": {{"n": {i}}}}}}}"#,
                    i % 9,
                    i % 4
                ))
                .unwrap()
            })
            .collect();
        let file = serde_json::to_vec(&clusters).unwrap();
        // The cache as `kharonctl update` writes it.
        let dir = tempfile::tempdir().unwrap();
        let path = cache::path(dir.path());
        let parsed: Vec<Cluster> =
            serde_json::from_value(serde_json::Value::Array(clusters.clone())).unwrap();
        cache::store(&path, &cache::Envelope::new("https://lieutenant.example/", parsed, vec![])).unwrap();
        let cache = std::fs::read(&path).unwrap();
        for (bytes, shape) in [(file, Shape::Clusters), (cache, Shape::Cache)] {
            let catalog = Catalog::of(&bytes, shape).unwrap();
            assert_eq!(catalog.raw_len, bytes.len());
            let back = inventory::parse_clusters(&catalog.json().unwrap()).unwrap();
            assert_eq!(back.len(), 499, "{shape:?}");
            assert!(back.iter().all(|c| c.id != "c-0007"));
            assert_eq!(back[100].id, "c-0101");
            assert_eq!(back[100].fact_str("jumphost"), Some("jump-1"));
            assert_eq!(back[100].dynamic_facts["nested"]["n"], 101);
            assert_eq!(catalog.clusters().unwrap().len(), 499);
            // Inventory JSON is repetitive: far less than the plain JSON is held.
            assert!(catalog.held() * 4 < bytes.len(), "{} of {}", catalog.held(), bytes.len());
        }

        let empty = Catalog::of(b"[]", Shape::Clusters).unwrap();
        assert_eq!(empty.json().unwrap(), b"[]");
    }
}
