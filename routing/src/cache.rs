//! The local inventory cache: what `kharonctl update` fetched from Lieutenant, and what kharond
//! routes by when no `--inventory` file is given.
//!
//! The file is one JSON [`Envelope`]: a format `version`, the Lieutenant `api_url` and `fetched_at`
//! time, the raw `clusters` exactly as Lieutenant returned them, and the `routes` derived from them
//! when they were written (for `kharonctl update`'s "what changed" report; kharond recompiles the
//! clusters itself, so routes written by another build, or edited by hand, are never trusted).
//!
//! There is no TTL: the cache serves until the next successful update, also when Lieutenant is down.
//! [`store`] writes atomically with mode 0600 ([`kharon_common::files::write_private`]: a temp file in the
//! same directory, fsync, rename, fsync of the directory), so a reader sees the old file or the new
//! one, never half of one. A corrupt file or one from a future
//! version is an error that names the file and says what to do.
//!
//! This module knows nothing of Lieutenant, HTTP or the daemon.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::inventory::{Cluster, Keep};

/// File name of the inventory cache inside the cache directory.
pub const FILE_NAME: &str = "inventory.json";
/// How both binaries say that the cache does not exist yet (`kharonctl update` never ran): in
/// kharond's start log, its `Route` answer, and kharonctl's `status`, `route` and `test`.
pub const NO_INVENTORY_YET: &str = "no inventory yet: run `kharonctl update`";
/// The envelope version this build writes and understands.
pub const VERSION: u32 = 1;

/// The cache file: raw clusters as Lieutenant returned them plus where and when they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub version: u32,
    pub api_url: String,
    pub fetched_at: SystemTime,
    pub clusters: Vec<Cluster>,
    /// The routes derived from `clusters` when the file was written, sorted by suffix.
    pub routes: Vec<RouteEntry>,
    /// The OIDC issuer of the token the clusters were fetched with, when known: kharond then keeps
    /// it out of every cluster's dynamic routes, as it does Lieutenant's own host (`trust`).
    pub oidc_issuer: Option<String>,
}

/// One derived route: hosts under `suffix` go through `jumphost`, claimed by `cluster`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RouteEntry {
    pub suffix: String,
    pub jumphost: String,
    pub cluster: String,
}

impl Envelope {
    /// A current-version envelope fetched now.
    pub fn new(api_url: impl Into<String>, clusters: Vec<Cluster>, routes: Vec<RouteEntry>) -> Self {
        Self {
            version: VERSION,
            api_url: api_url.into(),
            fetched_at: SystemTime::now(),
            clusters,
            routes,
            oidc_issuer: None,
        }
    }

    /// The hosts this cache names that kharon itself talks to: the Lieutenant it came from, and
    /// the issuer of the token that fetched it.
    pub fn own_hosts(&self, into: &mut crate::trust::OwnHosts) {
        into.add_url("Lieutenant", &self.api_url);
        if let Some(issuer) = &self.oidc_issuer {
            into.add_url("the OIDC issuer", issuer);
        }
    }

    /// How long ago the data was fetched (zero if the clock went backwards).
    pub fn age(&self) -> Duration {
        SystemTime::now().duration_since(self.fetched_at).unwrap_or_default()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no inventory cache at {}; run `kharonctl update` to fetch routing information from Lieutenant", path.display())]
    Missing { path: PathBuf },
    #[error("cannot read inventory cache {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The parse error stays inside the sentence, before the advice, so it is not a `source()`
    /// (a chain would print it after the advice).
    #[error(
        "inventory cache {} is corrupt ({cause}); run `kharonctl update` to fetch it again",
        path.display()
    )]
    Corrupt { path: PathBuf, cause: serde_json::Error },
    #[error(
        "inventory cache {} has format version {found}, newer than the {supported} this build reads; \
         upgrade kharon, or run `kharonctl update` with this version to rewrite it",
        path.display(),
        supported = VERSION
    )]
    FutureVersion { path: PathBuf, found: u32 },
    #[error("cannot write inventory cache {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// The on-disk shape. `fetched_at` is Unix seconds so the file reads well with `jq`. `C`: the
/// clusters, parsed (`Vec<Cluster>`) or held as the file's text (`&RawValue`).
#[derive(Serialize, Deserialize)]
struct OnDisk<C> {
    version: u32,
    api_url: String,
    fetched_at: u64,
    clusters: C,
    #[serde(default)]
    routes: Vec<RouteEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    oidc_issuer: Option<String>,
}

/// Only the version, read first so a future format with other fields is reported as such, not as
/// corrupt.
#[derive(Deserialize)]
struct VersionOnly {
    version: u32,
}

/// The cache file inside `cache_dir`.
pub fn path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(FILE_NAME)
}

/// Reads and checks the cache file.
pub fn load(path: &Path) -> Result<Envelope, Error> {
    parse(path, &read(path)?, Keep::All)
}

/// The cache file's bytes, unchecked: [`parse`] checks them.
pub fn read(path: &Path) -> Result<Vec<u8>, Error> {
    match kharon_common::files::read_regular(path) {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::Missing { path: path.to_owned() }),
        Err(source) => Err(Error::Read { path: path.to_owned(), source }),
    }
}

/// The clusters of a cache file's bytes that [`parse`] accepted: for a holder of the bytes who
/// needs them again later, and nothing else of the cache.
pub fn clusters_of(bytes: &[u8]) -> Result<Vec<Cluster>, serde_json::Error> {
    let disk: OnDisk<&RawValue> = serde_json::from_slice(bytes)?;
    crate::inventory::parse_clusters(disk.clusters.get().as_bytes())
}

/// Checks the cache file's `bytes` (`path` names it in errors), keeping of its clusters what
/// `keep` says.
pub fn parse(path: &Path, bytes: &[u8], keep: Keep) -> Result<Envelope, Error> {
    let corrupt = |cause| Error::Corrupt { path: path.to_owned(), cause };
    let future = |found| Error::FutureVersion { path: path.to_owned(), found };
    // The clusters are most of the file: held unparsed first, then parsed as an inventory file's
    // are (across the cores when large, `inventory::parse_kept`).
    let disk = match serde_json::from_slice::<OnDisk<&RawValue>>(bytes) {
        Ok(disk) if disk.version > VERSION => return Err(future(disk.version)),
        Ok(disk) => disk,
        // A newer format may not parse as this one: its version is the better error.
        Err(cause) => {
            return Err(match serde_json::from_slice::<VersionOnly>(bytes) {
                Ok(VersionOnly { version }) if version > VERSION => future(version),
                _ => corrupt(cause),
            });
        }
    };
    let clusters = match crate::inventory::parse_kept(disk.clusters.get().as_bytes(), keep) {
        Ok(clusters) => clusters,
        // Parsed again as one document, the error says where in the file (line, column) it is.
        Err(inner) => {
            let whole = serde_json::from_slice::<OnDisk<Vec<Cluster>>>(bytes).err();
            return Err(corrupt(whole.unwrap_or(inner)));
        }
    };
    let fetched_at = UNIX_EPOCH.checked_add(Duration::from_secs(disk.fetched_at)).ok_or_else(|| {
        corrupt(serde::de::Error::custom(format!(
            "fetched_at {} is not a representable time",
            disk.fetched_at
        )))
    })?;
    Ok(Envelope {
        version: disk.version,
        api_url: disk.api_url,
        fetched_at,
        clusters,
        routes: disk.routes,
        oidc_issuer: disk.oidc_issuer,
    })
}

/// Writes `envelope` to `path` atomically with mode 0600, creating the directory (0700) if needed.
pub fn store(path: &Path, envelope: &Envelope) -> Result<(), Error> {
    let disk = OnDisk {
        version: envelope.version,
        api_url: envelope.api_url.clone(),
        fetched_at: envelope.fetched_at.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
        clusters: envelope.clusters.clone(),
        routes: envelope.routes.clone(),
        oidc_issuer: envelope.oidc_issuer.clone(),
    };
    let bytes = serde_json::to_vec_pretty(&disk)
        .map_err(|e| Error::Write { path: path.to_owned(), source: std::io::Error::other(e) })?;
    kharon_common::files::write_private(path, &bytes)
        .map_err(|source| Error::Write { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn cluster(id: &str) -> Cluster {
        serde_json::from_value(serde_json::json!({
            "id": id, "tenant": "t-a",
            "facts": {"jumphost": "jh", "distribution": "openshift4"},
            "dynamicFacts": {"openshiftBaseDomain": "c.example.net", "kubernetesVersion": {"major": "1"}}
        }))
        .unwrap()
    }

    #[test]
    fn envelope_round_trips_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(&dir.path().join("sub"));
        let route =
            RouteEntry { suffix: "c.example.net".into(), jumphost: "jh".into(), cluster: "c-a".into() };
        let mut env = Envelope::new("https://api.example/", vec![cluster("c-a")], vec![route]);
        env.oidc_issuer = Some("https://id.example/realms/x".into());
        // The file keeps whole seconds.
        env.fetched_at = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        store(&path, &env).unwrap();
        assert_eq!(load(&path).unwrap(), env);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Overwriting keeps the mode and leaves no temp files behind.
        store(&path, &env).unwrap();
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn missing_cache_says_run_update() {
        let dir = tempfile::tempdir().unwrap();
        let err = load(&path(dir.path())).unwrap_err();
        assert!(matches!(err, Error::Missing { .. }));
        assert!(err.to_string().contains("run `kharonctl update`"), "{err}");
    }

    #[test]
    fn corrupt_cache_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        std::fs::write(&path, b"{\"version\": 1, \"clusters\": [").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("corrupt"), "{err}");
        std::fs::write(&path, b"{\"version\": 1}").unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("corrupt") && err.contains("api_url"), "{err}");
    }

    #[test]
    fn a_cluster_that_does_not_parse_is_named_where_the_whole_file_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        // The clusters are parsed apart from the rest of the file; the error's place is the file's.
        let text = r#"{"version": 1, "api_url": "https://a/", "fetched_at": 0,
            "clusters": [{"id": "c-a", "tenant": "t"}, {"id": "c-b", "tenant": 5}]}"#;
        std::fs::write(&path, text).unwrap();
        let whole = serde_json::from_str::<OnDisk<Vec<Cluster>>>(text).err().unwrap().to_string();
        assert!(whole.contains("line 2"), "{whole}");
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("corrupt") && err.contains(&whole), "{err}");
    }

    #[test]
    fn a_fetched_at_beyond_any_clock_is_corrupt_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        let text = format!(
            r#"{{"version": 1, "api_url": "https://a/", "fetched_at": {}, "clusters": []}}"#,
            u64::MAX
        );
        std::fs::write(&path, text).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains("corrupt") && err.contains("not a representable time"), "{err}");
        assert!(err.contains("kharonctl update"), "{err}");
    }

    #[test]
    fn a_fifo_in_place_of_the_cache_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
        let err = kharon_common::errors::chain(&load(&path).unwrap_err());
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("not a regular file (it is a FIFO)"), "{err}");
    }

    #[test]
    fn future_version_is_refused_with_both_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        std::fs::write(&path, br#"{"version": 7, "something": "else"}"#).unwrap();
        let err = load(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("version 7") && err.contains("upgrade kharon"), "{err}");
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        let env = Envelope::new("https://a/", vec![cluster("c-a")], vec![]);
        store(&path, &env).unwrap();
        // A directory where the file should be: the rename fails, the temp file is cleaned up.
        let blocked = dir.path().join("blocked");
        std::fs::create_dir(&blocked).unwrap();
        assert!(store(&blocked, &env).is_err());
        assert_eq!(load(&path).unwrap().clusters.len(), 1);
    }
}
