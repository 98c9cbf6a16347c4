//! The inventory the daemon routes by: where it is read from ([`InventorySource`]: an
//! `--inventory` file or the local cache written by `kharonctl update`), and the inventory as
//! loaded ([`LoadedInventory`]): the routing table compiled from it, with what hangs off a table
//! (the clusters the `Clusters` RPC answers, the endpoints `Test` checks, the PAC).
//!
//! Used at start and on every reload, so both fail the same way: a clear error naming the file.
//! The one difference is [`read_at_start`]: a cache that does not exist yet (`kharonctl update`
//! never ran, e.g. right after `kharonctl service-install`) starts an empty table instead of
//! failing, so a service manager does not restart the daemon in a loop and the direct path works
//! meanwhile; the first update's reload then fills it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use kharon_routing::anchor::Anchors;
use kharon_routing::cache;
use kharon_routing::inventory::{self, Keep};
use kharon_routing::table::{RoutingTable, distinct_sorted};
use kharon_routing::trust::OwnHosts;

use crate::routing::catalog::{Catalog, Shape};
use crate::routing::endpoints::{self, Endpoint};

/// Where the inventory is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InventorySource {
    /// A Lieutenant `/clusters` JSON file given with `--inventory`.
    File(PathBuf),
    /// The cache `kharonctl update` writes.
    Cache(PathBuf),
}

impl InventorySource {
    pub fn kind(&self) -> &'static str {
        match self {
            InventorySource::File(_) => "file",
            InventorySource::Cache(_) => "cache",
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            InventorySource::File(p) | InventorySource::Cache(p) => p,
        }
    }
}

/// The inventory as loaded: the table compiled from it, plus what `Status` says about it.
#[derive(Debug)]
pub struct LoadedInventory {
    pub table: RoutingTable,
    pub loaded_at: SystemTime,
    /// When the data was produced: the cache's fetch time, else the file's modification time.
    pub modified_at: Option<SystemTime>,
    /// What `Test` checks ([`LoadedInventory::endpoints`]), worked out from the catalog on the first
    /// `Test`: no start waits for them (a quarter of a second at 50,000 clusters, the size
    /// `bench/inventory.sh` starts with).
    endpoints: std::sync::OnceLock<Result<Vec<Endpoint>, String>>,
    /// The PAC file for this table, rendered on the first request (it needs the bound listen
    /// address, which a table loaded at start does not know yet); every answer then writes from
    /// this one buffer, never from a copy.
    pub pac: std::sync::OnceLock<bytes::Bytes>,
    /// The source is the cache and it does not exist yet: the table is empty and every host goes
    /// direct until `kharonctl update` writes it and reloads.
    pub missing: bool,
    /// The clusters this table was compiled from: what the `Clusters` RPC answers, so that
    /// kharonctl sees the very clusters kharond routes by (the file may have changed since). Kept
    /// as the inventory's bytes, compressed (`catalog.rs`), since the parsed clusters are freed
    /// after compiling. `Err`: they could not be compressed (not expected: it writes to memory).
    pub catalog: Result<Catalog, String>,
}

impl LoadedInventory {
    /// The table and an unrendered PAC for `clusters`, loaded now, with their `catalog`; no
    /// cluster's dynamic facts may claim a host in `own` or a name outside its `anchors`.
    fn compile(
        clusters: &[inventory::Cluster],
        catalog: Result<Catalog, String>,
        own: &OwnHosts,
        anchors: &Anchors,
        modified_at: Option<SystemTime>,
        missing: bool,
    ) -> Self {
        LoadedInventory {
            table: RoutingTable::compile_with(clusters, own, anchors),
            loaded_at: SystemTime::now(),
            modified_at,
            endpoints: std::sync::OnceLock::new(),
            pac: std::sync::OnceLock::new(),
            missing,
            catalog,
        }
    }

    /// What `Test` checks: each cluster's API, console and OAuth URLs, in cluster id order, the
    /// malformed ones included so that they are reported, not skipped. `Err`: the catalog they
    /// are read from is unusable (not expected: see [`LoadedInventory::catalog`]).
    pub fn endpoints(&self) -> Result<&[Endpoint], String> {
        let endpoints = self.endpoints.get_or_init(|| {
            let catalog = self.catalog.as_ref().map_err(Clone::clone)?;
            Ok(endpoints::of(&catalog.clusters()?))
        });
        endpoints.as_deref().map_err(Clone::clone)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    File(#[from] inventory::Error),
    #[error(transparent)]
    Cache(#[from] cache::Error),
}

/// An inventory read and not compiled yet: compiling needs the `HostName` the ssh config gives
/// each of its jump hosts ([`Read::anchors`]), which needs its jump hosts first.
pub struct Read {
    clusters: Vec<inventory::Cluster>,
    catalog: Result<Catalog, String>,
    /// The settings' hosts of kharon's own, and those a cache adds.
    own: OwnHosts,
    modified_at: Option<SystemTime>,
    missing: bool,
}

impl Read {
    /// The jump host of every cluster that may route (not ignored), sorted, each once: those whose
    /// `HostName` anchors something.
    pub fn jumphosts(&self) -> Vec<String> {
        // A fact lookup per cluster: across the cores, each part's distinct ones merged.
        let parts = kharon_common::parallel::chunks(&self.clusters, |_, part| {
            distinct_sorted(part.iter().filter(|c| !c.is_ignored()).filter_map(|c| c.jumphost()))
        });
        distinct_sorted(parts.iter().flatten().map(String::as_str))
    }

    /// `base` (the config file's zones) with the `HostName` of each of `jumphosts` that
    /// `host_name` knows (an ssh config was read: a refusal does not send the user to one).
    pub fn anchors(
        &self,
        base: &Anchors,
        jumphosts: &[String],
        host_name: &dyn Fn(&str) -> Option<String>,
    ) -> Anchors {
        let mut anchors = base.clone().with_ssh_config();
        for jumphost in jumphosts {
            if let Some(name) = host_name(jumphost) {
                anchors.add_host_name(jumphost, &name);
            }
        }
        anchors
    }

    /// Compiles the table. The parsed clusters (a large inventory's are most of what compiling
    /// allocated) are freed and their memory given back to the kernel beside whatever comes
    /// next, on a thread of their own: at 50,000 clusters (`bench/inventory.sh`) that takes a
    /// fifth of a second, which no start or reload need wait for.
    pub fn compile(self, anchors: &Anchors) -> LoadedInventory {
        let Read { clusters, catalog, own, modified_at, missing } = self;
        let loaded = LoadedInventory::compile(&clusters, catalog, &own, anchors, modified_at, missing);
        let freeing = std::thread::Builder::new().name("kharon-free".into()).spawn(move || {
            drop(clusters);
            crate::process::malloc::release_free();
        });
        // No thread to be had: the clusters went with the closure, here; the trim follows.
        if freeing.is_err() {
            crate::process::malloc::release_free();
        }
        loaded
    }
}

/// [`read`] for the start of the daemon: a cache that does not exist yet is an empty inventory
/// (its table marked [`LoadedInventory::missing`]), not an error. An `--inventory` file that does not
/// exist, and a cache that exists but cannot be read or parsed, are errors as always.
pub fn read_at_start(source: &InventorySource, own: &OwnHosts) -> Result<Read, Error> {
    match read(source, own) {
        Err(Error::Cache(cache::Error::Missing { .. })) => {
            let catalog = Catalog::of(b"[]", Shape::Clusters);
            Ok(Read { clusters: Vec::new(), catalog, own: own.clone(), modified_at: None, missing: true })
        }
        other => other,
    }
}

/// Reads the inventory. Nothing is swapped here: a failure leaves the caller's current table in
/// place. `own` is what the settings name of the hosts kharon itself talks to; a cache adds the
/// Lieutenant it came from and the issuer of its token.
pub fn read(source: &InventorySource, own: &OwnHosts) -> Result<Read, Error> {
    let mut own = own.clone();
    let (bytes, shape) = match source {
        InventorySource::File(path) => (inventory::read_file(path)?, Shape::Clusters),
        InventorySource::Cache(path) => (cache::read(path)?, Shape::Cache),
    };
    // The catalog compresses the bytes while they are parsed. The parse keeps only the facts
    // routing reads: the catalog holds the clusters whole for what needs the rest.
    let (parsed, catalog) = kharon_common::parallel::both(
        || match source {
            InventorySource::File(path) => {
                inventory::parse_file(path, &bytes, Keep::Routing).map_err(Error::from).map(|clusters| {
                    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
                    (clusters, modified)
                })
            }
            InventorySource::Cache(path) => {
                cache::parse(path, &bytes, Keep::Routing).map_err(Error::from).map(|envelope| {
                    envelope.own_hosts(&mut own);
                    (envelope.clusters, Some(envelope.fetched_at))
                })
            }
        },
        || Catalog::of(&bytes, shape),
    );
    let (clusters, modified_at) = parsed?;
    Ok(Read { clusters, catalog, own, modified_at, missing: false })
}

/// Logs what the table says about its inventory, at start and after every reload: conflicts,
/// warnings and every refused name, each at WARN (the one place kharond's log names them).
pub fn log_report(table: &RoutingTable) {
    let report = table.report();
    for conflict in &report.conflicts {
        tracing::warn!(
            "suffix {} is claimed by clusters with different jump hosts; {} ({}) wins over {}",
            conflict.suffix,
            conflict.winner.cluster,
            conflict.winner.jumphost,
            conflict
                .shadowed
                .iter()
                .map(|c| format!("{} ({})", c.cluster, c.jumphost))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for warning in &report.warnings {
        tracing::warn!("{warning}");
    }
    for refused in &report.refused {
        tracing::warn!("{refused}; it is not routed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_at_start(source: &InventorySource, own: &OwnHosts) -> Result<LoadedInventory, Error> {
        read_at_start(source, own).map(|read| read.compile(&Anchors::default()))
    }

    fn load(source: &InventorySource, own: &OwnHosts) -> Result<LoadedInventory, Error> {
        read(source, own).map(|read| read.compile(&Anchors::default()))
    }

    #[test]
    fn only_a_cache_that_does_not_exist_yet_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let cache_path = cache::path(&dir.path().join("never-updated"));
        let none = OwnHosts::default();
        let loaded = load_at_start(&InventorySource::Cache(cache_path.clone()), &none).unwrap();
        assert!(loaded.missing);
        assert_eq!(loaded.table.report().clusters_total, 0);
        assert!(loaded.table.routes().is_empty() && loaded.endpoints().unwrap().is_empty());
        // A reload still reports it missing, so the empty table stays and the user is told.
        let err = load(&InventorySource::Cache(cache_path), &none).unwrap_err().to_string();
        assert!(err.contains("run `kharonctl update`"), "{err}");

        // An --inventory file that is not there is a mistake, not a first start.
        let file = dir.path().join("inventory.json");
        let err = load_at_start(&InventorySource::File(file.clone()), &none).unwrap_err().to_string();
        assert!(err.contains(&file.display().to_string()), "{err}");

        // A cache that exists but is unusable is an error too.
        let corrupt = cache::path(dir.path());
        std::fs::write(&corrupt, "{").unwrap();
        let err = load_at_start(&InventorySource::Cache(corrupt), &none).unwrap_err().to_string();
        assert!(err.contains("is corrupt"), "{err}");
        let unreadable = dir.path().join("not-a-dir");
        std::fs::write(&unreadable, "").unwrap();
        let err =
            load_at_start(&InventorySource::Cache(cache::path(&unreadable)), &none).unwrap_err().to_string();
        assert!(err.contains("cannot read inventory cache"), "{err}");

        let cache_path = cache::path(dir.path());
        cache::store(&cache_path, &cache::Envelope::new("https://a/", vec![], vec![])).unwrap();
        assert!(!load_at_start(&InventorySource::Cache(cache_path), &none).unwrap().missing);
    }

    #[test]
    fn the_clusters_of_a_table_are_kept_as_json_without_the_ignored_ones() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("inventory.json");
        let clusters = serde_json::json!([
            {"id": "c-b", "tenant": "t", "facts": {"jumphost": "jump-b"}, "dynamicFacts": {"x": {"y": 1}}},
            {"id": "c-ignored", "tenant": "t", "facts": {"kharonIgnore": "true"}},
            {"id": "c-a", "tenant": "t"}
        ]);
        std::fs::write(&file, clusters.to_string()).unwrap();
        let loaded = load(&InventorySource::File(file.clone()), &OwnHosts::default()).unwrap();
        // The file changes afterwards: the table in force still answers what it was compiled from.
        std::fs::write(&file, "[]").unwrap();
        let kept = inventory::parse_clusters(&loaded.catalog.as_ref().unwrap().json().unwrap()).unwrap();
        let ids: Vec<&str> = kept.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c-b", "c-a"]);
        assert_eq!(kept[0].fact_str("jumphost"), Some("jump-b"));
        assert_eq!(kept[0].dynamic_facts["x"]["y"], 1);
        let empty = load_at_start(
            &InventorySource::Cache(cache::path(&dir.path().join("none"))),
            &OwnHosts::default(),
        )
        .unwrap();
        assert_eq!(empty.catalog.unwrap().json().unwrap(), b"[]");

        // From the cache, the same: its clusters, without the ignored ones.
        let cache_path = cache::path(dir.path());
        let clusters: Vec<inventory::Cluster> = serde_json::from_value(clusters).unwrap();
        cache::store(&cache_path, &cache::Envelope::new("https://a/", clusters, vec![])).unwrap();
        let loaded = load(&InventorySource::Cache(cache_path), &OwnHosts::default()).unwrap();
        let kept = inventory::parse_clusters(&loaded.catalog.as_ref().unwrap().json().unwrap()).unwrap();
        let ids: Vec<&str> = kept.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c-b", "c-a"]);
        assert_eq!(loaded.endpoints().unwrap().len(), 0, "no cluster has a URL");
    }
}
