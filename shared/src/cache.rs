//! STUB — being written by a helper. The public surface below is the contract kharond builds on.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::inventory::Cluster;

/// File name of the inventory cache inside the cache directory.
pub const FILE_NAME: &str = "inventory.json";
/// The envelope version this build writes and understands.
pub const VERSION: u32 = 1;

/// The cache file: raw clusters as Lieutenant returned them plus where and when they came from.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub version: u32,
    pub api_url: String,
    pub fetched_at: SystemTime,
    pub clusters: Vec<Cluster>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no inventory cache at {}; run `kharonctl update` to fetch routing information from Lieutenant", path.display())]
    Missing { path: PathBuf },
    #[error("cannot read inventory cache {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
}

/// The cache file inside `cache_dir`.
pub fn path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(FILE_NAME)
}

/// Reads and checks the cache file.
pub fn load(path: &Path) -> Result<Envelope, Error> {
    Err(Error::Missing { path: path.to_owned() })
}
