//! Where the routing information comes from (an `--inventory` file or the local cache written by
//! `kharonctl update`) and turning it into a [`LoadedTable`].
//!
//! Used at start and on every reload, so both fail the same way: a clear error naming the file.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use kharon_shared::routing::RoutingTable;
use kharon_shared::{cache, inventory};

/// Where the routing information is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A Lieutenant `/clusters` JSON file given with `--inventory`.
    File(PathBuf),
    /// The cache `kharonctl update` writes.
    Cache(PathBuf),
}

impl Source {
    pub fn kind(&self) -> &'static str {
        match self {
            Source::File(_) => "file",
            Source::Cache(_) => "cache",
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            Source::File(p) | Source::Cache(p) => p,
        }
    }
}

/// A compiled table plus what `Status` says about it.
#[derive(Debug)]
pub struct LoadedTable {
    pub table: RoutingTable,
    pub loaded_at: SystemTime,
    /// When the data was produced: the cache's fetch time, else the file's modification time.
    pub modified_at: Option<SystemTime>,
    /// API endpoints (cluster id, host, port) for `Test`, in cluster id order.
    pub endpoints: Vec<Endpoint>,
    /// The PAC file for this table, rendered on the first request (it needs the bound listen
    /// address, which a table loaded at start does not know yet); every answer then writes from
    /// this one buffer, never from a copy.
    pub pac: std::sync::OnceLock<bytes::Bytes>,
}

/// Where a cluster's API server listens, from `openshiftApiURL` / `talosApiURL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub cluster: String,
    pub host: String,
    pub port: u16,
}

fn endpoints(clusters: &[inventory::Cluster]) -> Vec<Endpoint> {
    let mut out: Vec<Endpoint> = clusters
        .iter()
        .filter(|c| !c.is_ignored())
        .filter_map(|c| {
            let url = url::Url::parse(c.api_url()?).ok()?;
            let host = url.host_str()?.trim_start_matches('[').trim_end_matches(']').to_owned();
            Some(Endpoint { cluster: c.id.clone(), host, port: url.port_or_known_default().unwrap_or(443) })
        })
        .collect();
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    File(#[from] inventory::Error),
    #[error(transparent)]
    Cache(#[from] cache::Error),
}

/// Reads and compiles the inventory. Nothing is swapped here: a failure leaves the caller's
/// current table in place.
pub fn load(source: &Source) -> Result<LoadedTable, Error> {
    let (clusters, modified_at) = match source {
        Source::File(path) => {
            let clusters = inventory::load_file(path)?;
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
            (clusters, modified)
        }
        Source::Cache(path) => {
            let envelope = cache::load(path)?;
            (envelope.clusters, Some(envelope.fetched_at))
        }
    };
    Ok(LoadedTable {
        table: RoutingTable::compile(&clusters),
        loaded_at: SystemTime::now(),
        modified_at,
        endpoints: endpoints(&clusters),
        pac: std::sync::OnceLock::new(),
    })
}
