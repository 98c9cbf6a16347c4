//! The clusters of the table in force, as the `Clusters` RPC answers them: a Lieutenant
//! `/clusters` JSON array, `kharonIgnore`d clusters left out, kept deflate-compressed.
//!
//! Why compressed: the RPC is kharonctl's fallback (no cache, no inventory of its own), so the
//! clusters are read rarely, yet a table keeps them for as long as it is in force. As plain JSON,
//! 50,000 clusters held 25 MB of the daemon's memory (bench/inventory.sh: 82 → 107 MB RSS at
//! start). Inventory JSON repeats its keys and domains, so deflate at its fastest level keeps a
//! tenth of that, and the JSON is inflated again only when a `Clusters` request comes.

use std::io::{BufWriter, Read};

use flate2::Compression;
use flate2::read::DeflateDecoder;
use flate2::write::DeflateEncoder;
use kharon_shared::inventory::Cluster;

/// The compressed JSON array; see the module doc.
#[derive(Debug)]
pub struct Catalog {
    deflated: Box<[u8]>,
    /// Length of the JSON once inflated: the answer's buffer is allocated once.
    json_len: usize,
}

impl Catalog {
    /// `clusters` minus the ignored ones, serialized straight into the compressor (the plain JSON
    /// never exists whole). `Err`: not expected, facts are JSON already.
    pub fn of(clusters: &[Cluster]) -> Result<Self, String> {
        let kept: Vec<&Cluster> = clusters.iter().filter(|c| !c.is_ignored()).collect();
        let encoder = DeflateEncoder::new(Vec::new(), Compression::fast());
        // serde writes a few bytes at a time, and the encoder runs its compressor on every write.
        let mut writer = BufWriter::with_capacity(64 * 1024, encoder);
        serde_json::to_writer(&mut writer, &kept).map_err(|e| e.to_string())?;
        let encoder = writer.into_inner().map_err(|e| e.error().to_string())?;
        let json_len = usize::try_from(encoder.total_in()).map_err(|e| e.to_string())?;
        let deflated = encoder.finish().map_err(|e| e.to_string())?.into_boxed_slice();
        Ok(Catalog { deflated, json_len })
    }

    /// The JSON array, inflated.
    pub fn json(&self) -> std::io::Result<Vec<u8>> {
        let mut json = Vec::with_capacity(self.json_len);
        DeflateDecoder::new(&self.deflated[..]).read_to_end(&mut json)?;
        Ok(json)
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
    use kharon_shared::inventory;

    #[test]
    fn the_json_comes_back_whole_without_the_ignored_clusters_and_is_held_compressed() {
        let clusters: Vec<Cluster> = (0..500)
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
        let catalog = Catalog::of(&clusters).unwrap();
        let json = catalog.json().unwrap();
        assert_eq!(json.len(), catalog.json_len);
        let back = inventory::parse_clusters(&json).unwrap();
        assert_eq!(back.len(), 499);
        assert!(back.iter().all(|c| c.id != "c-0007"));
        assert_eq!(back[100].id, "c-0101");
        assert_eq!(back[100].fact_str("jumphost"), Some("jump-1"));
        assert_eq!(back[100].dynamic_facts["nested"]["n"], 101);
        // Inventory JSON is repetitive: far less than the plain JSON is held.
        assert!(catalog.held() * 4 < json.len(), "{} of {}", catalog.held(), json.len());

        let empty = Catalog::of(&[]).unwrap();
        assert_eq!(empty.json().unwrap(), b"[]");
    }
}
