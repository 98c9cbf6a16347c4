//! Where the routing information comes from (an `--inventory` file or the local cache written by
//! `kharonctl update`) and turning it into a [`LoadedTable`].
//!
//! Used at start and on every reload, so both fail the same way: a clear error naming the file.
//! The one difference is [`load_at_start`]: a cache that does not exist yet (`kharonctl update`
//! never ran, e.g. right after `kharonctl service-install`) starts an empty table instead of
//! failing, so a service manager does not restart the daemon in a loop and the direct path works
//! meanwhile; the first update's reload then fills it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use kharon_shared::inventory::fact;
use kharon_shared::routing::RoutingTable;
use kharon_shared::{cache, inventory};

use crate::target::Target;

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
    /// What `Test` checks: each cluster's API, console and OAuth URLs, in cluster id order, the
    /// malformed ones included so that they are reported, not skipped.
    pub endpoints: Vec<Endpoint>,
    /// The PAC file for this table, rendered on the first request (it needs the bound listen
    /// address, which a table loaded at start does not know yet); every answer then writes from
    /// this one buffer, never from a copy.
    pub pac: std::sync::OnceLock<bytes::Bytes>,
    /// The source is the cache and it does not exist yet: the table is empty and every host goes
    /// direct until `kharonctl update` writes it and reloads.
    pub missing: bool,
}

impl LoadedTable {
    /// The table, `Test`'s endpoints and an unrendered PAC for `clusters`, loaded now.
    fn compile(clusters: &[inventory::Cluster], modified_at: Option<SystemTime>, missing: bool) -> Self {
        LoadedTable {
            table: RoutingTable::compile(clusters),
            loaded_at: SystemTime::now(),
            modified_at,
            endpoints: endpoints(clusters),
            pac: std::sync::OnceLock::new(),
            missing,
        }
    }
}

/// One URL of a cluster that `Test` checks, from one fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub cluster: String,
    /// What it is: "api", "console" or "oauth".
    pub kind: &'static str,
    /// The fact it came from, e.g. `openshiftConsoleURL`.
    pub fact: &'static str,
    /// The URL as checked (for the OAuth route: `https://` and the fact's host name, as Go kharon
    /// checks it, kharon-go.md §8).
    pub url: String,
    /// What to connect to, checked as strictly as a SOCKS client's target (it is inventory data),
    /// or why the URL is unusable.
    pub target: Result<Target, String>,
}

/// Each cluster's API and console URL (the distribution's own fact first, as `Cluster::api_url`
/// reads them) and OAuth route. Go kharon's test checks the same three (kharon-go.md §8).
fn endpoints(clusters: &[inventory::Cluster]) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for c in clusters.iter().filter(|c| !c.is_ignored()) {
        let own_first = |openshift: &'static str, talos: &'static str| match c.distribution() {
            inventory::Distribution::Talos => [talos, openshift],
            _ => [openshift, talos],
        };
        let first = |facts: [&'static str; 2]| {
            facts.into_iter().find_map(|f| c.dynamic_fact_str(f).map(|v| (f, v.to_owned())))
        };
        let urls = [
            ("api", first(own_first(fact::OPENSHIFT_API_URL, fact::TALOS_API_URL))),
            ("console", first(own_first(fact::OPENSHIFT_CONSOLE_URL, fact::TALOS_CONSOLE_URL))),
            (
                "oauth",
                c.dynamic_fact_str(fact::OPENSHIFT_OAUTH_ROUTE)
                    .map(|host| (fact::OPENSHIFT_OAUTH_ROUTE, format!("https://{host}"))),
            ),
        ];
        for (kind, found) in urls {
            if let Some((fact, url)) = found {
                out.push(Endpoint { cluster: c.id.clone(), kind, fact, target: target(&url), url });
            }
        }
    }
    // Stable, so a cluster's endpoints stay in api, console, oauth order.
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out
}

/// What an http(s) URL points at, or what is wrong with it.
fn target(url: &str) -> Result<Target, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} is not an http(s) URL"));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(format!("{url:?} has no host")),
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    Target::from_host(host.as_bytes(), port).map_err(|e| e.to_string())
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    File(#[from] inventory::Error),
    #[error(transparent)]
    Cache(#[from] cache::Error),
}

/// [`load`] for the start of the daemon: a cache that does not exist yet is an empty table (marked
/// [`LoadedTable::missing`]), not an error. An `--inventory` file that does not exist, and a cache
/// that exists but cannot be read or parsed, are errors as always.
pub fn load_at_start(source: &Source) -> Result<LoadedTable, Error> {
    match load(source) {
        Err(Error::Cache(cache::Error::Missing { .. })) => Ok(LoadedTable::compile(&[], None, true)),
        other => other,
    }
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
    let loaded = LoadedTable::compile(&clusters, modified_at, false);
    drop(clusters);
    crate::malloc::release_free();
    Ok(loaded)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(json: &str) -> inventory::Cluster {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn only_a_cache_that_does_not_exist_yet_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let cache_path = cache::path(&dir.path().join("never-updated"));
        let loaded = load_at_start(&Source::Cache(cache_path.clone())).unwrap();
        assert!(loaded.missing);
        assert_eq!(loaded.table.report().clusters_total, 0);
        assert!(loaded.table.routes().is_empty() && loaded.endpoints.is_empty());
        // A reload still reports it missing, so the empty table stays and the user is told.
        let err = load(&Source::Cache(cache_path)).unwrap_err().to_string();
        assert!(err.contains("run `kharonctl update`"), "{err}");

        // An --inventory file that is not there is a mistake, not a first start.
        let file = dir.path().join("inventory.json");
        let err = load_at_start(&Source::File(file.clone())).unwrap_err().to_string();
        assert!(err.contains(&file.display().to_string()), "{err}");

        // A cache that exists but is unusable is an error too.
        let corrupt = cache::path(dir.path());
        std::fs::write(&corrupt, "{").unwrap();
        let err = load_at_start(&Source::Cache(corrupt)).unwrap_err().to_string();
        assert!(err.contains("is corrupt"), "{err}");
        let unreadable = dir.path().join("not-a-dir");
        std::fs::write(&unreadable, "").unwrap();
        let err = load_at_start(&Source::Cache(cache::path(&unreadable))).unwrap_err().to_string();
        assert!(err.contains("cannot read inventory cache"), "{err}");

        let cache_path = cache::path(dir.path());
        cache::store(&cache_path, &cache::Envelope::new("https://a/", vec![], vec![])).unwrap();
        assert!(!load_at_start(&Source::Cache(cache_path)).unwrap().missing);
    }

    #[test]
    fn endpoints_are_api_console_and_oauth_and_malformed_urls_say_why() {
        let clusters = [
            cluster(
                r#"{"id": "c-b", "facts": {"distribution": "openshift4"}, "dynamicFacts": {
                    "openshiftApiURL": "https://api.b.example:6443",
                    "openshiftConsoleURL": "https://console.apps.b.example",
                    "openshiftOAuthRoute": "oauth-openshift.apps.b.example"}}"#,
            ),
            cluster(
                r#"{"id": "c-a", "facts": {"distribution": "talos"}, "dynamicFacts": {
                    "talosApiURL": "https://[::1]:6443", "openshiftConsoleURL": "https://:99/"}}"#,
            ),
            cluster(
                r#"{"id": "c-gone", "facts": {"kharonIgnore": ""}, "dynamicFacts": {"openshiftApiURL": "https://x"}}"#,
            ),
            cluster(r#"{"id": "c-none", "dynamicFacts": {"openshiftApiURL": "api.none.example:6443"}}"#),
        ];
        let got = endpoints(&clusters);
        let row = |i: usize| (got[i].cluster.as_str(), got[i].kind, got[i].fact, got[i].url.as_str());
        let target = |i: usize| got[i].target.clone();
        let ok = |h: &str, p: u16| Target::from_host(h.as_bytes(), p).map_err(|e| e.to_string());
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(row(0), ("c-a", "api", fact::TALOS_API_URL, "https://[::1]:6443"));
        assert_eq!(target(0), ok("::1", 6443));
        assert_eq!(row(1), ("c-a", "console", fact::OPENSHIFT_CONSOLE_URL, "https://:99/"));
        assert!(target(1).unwrap_err().contains("\"https://:99/\" is not a URL"), "{got:?}");
        assert_eq!(row(2), ("c-b", "api", fact::OPENSHIFT_API_URL, "https://api.b.example:6443"));
        assert_eq!(target(2), ok("api.b.example", 6443));
        assert_eq!(target(3), ok("console.apps.b.example", 443));
        // The OAuth route is a host name; Go kharon checks https:// it.
        assert_eq!(
            row(4),
            ("c-b", "oauth", fact::OPENSHIFT_OAUTH_ROUTE, "https://oauth-openshift.apps.b.example")
        );
        assert_eq!(target(4), ok("oauth-openshift.apps.b.example", 443));
        // Ignored clusters are not checked; a URL without a scheme is malformed, not skipped.
        assert_eq!(row(5), ("c-none", "api", fact::OPENSHIFT_API_URL, "api.none.example:6443"));
        assert!(target(5).unwrap_err().contains("is not an http(s) URL"), "{got:?}");
    }
}
