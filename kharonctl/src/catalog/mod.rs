//! The clusters kharonctl knows ([`Catalog`]): loaded from a Lieutenant `/clusters` JSON
//! (`--inventory FILE`, or the configured `inventory`), else from the inventory cache `kharonctl
//! update` writes, else, when there is no cache, from the table kharond routes by (the `Clusters`
//! RPC: kharond started with `--inventory FILE` has clusters this shell has no file for);
//! `kharonIgnore`d ones dropped; filtered by id glob and tenant; and one cluster found by name,
//! with closest-id suggestions when the name is unknown.
//!
//! A cache that exists but cannot be used is an error, never a reason to ask kharond instead: the
//! user would act on other clusters than the ones they fetched, without a word.
//!
//! [`picker`]: choosing one of them, fuzzily on a terminal, or the listing when nobody is there.
//!
//! It knows nothing of kubeconfigs ([`crate::kube`]) or of how clusters are printed
//! (`cmd/clusters/list.rs`).

pub mod picker;

use kharon_common::errors::Chain;
use kharon_common::text::{Escaped, cell};
use std::path::{Path, PathBuf};

use kharon_config::Config;
use kharon_routing::inventory::Cluster;

use crate::daemon::{self, Daemon};

/// How many ids an "unknown cluster" error suggests at most.
const MAX_SUGGESTIONS: usize = 3;

impl From<kharon_routing::cache::Error> for Error {
    fn from(e: kharon_routing::cache::Error) -> Self {
        Error::Cache(e)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Inventory(#[from] kharon_routing::inventory::Error),
    /// A cache that exists and is unusable. Not a `source`: the cache error (with its own cause)
    /// stays before the advice, inside the sentence.
    #[error(
        "{}; or pass --inventory FILE (a Lieutenant /clusters JSON). kharond's clusters are not used \
         in place of a cache that exists",
        Chain(.0)
    )]
    Cache(kharon_routing::cache::Error),
    /// No cache, and kharond could not be asked for its table. Not a `source`: why kharond could
    /// not be asked stays before the advice, inside the sentence.
    #[error(
        "no inventory cache at {} and no kharond to ask for its clusters: {}. Run `kharonctl \
         update` to fetch them from Lieutenant, start kharond (it serves the clusters of its \
         --inventory FILE or cache), or pass --inventory FILE (a Lieutenant /clusters JSON)",
        cache.display(),
        Chain(daemon)
    )]
    NoCatalog { cache: PathBuf, daemon: daemon::Error },
    /// No cache, and kharond has none either (it reads a cache that does not exist yet).
    #[error(
        "no inventory cache at {} and kharond has no clusters either (its {kind} {path} does not \
         exist yet); run `kharonctl update` to fetch them from Lieutenant, or pass --inventory FILE",
        cache.display()
    )]
    DaemonHasNone { cache: PathBuf, kind: String, path: String },
    #[error("kharond answered a cluster list that is not a Lieutenant /clusters JSON")]
    DaemonReply(#[source] serde_json::Error),
    #[error("unknown cluster {name:?}{}", did_you_mean(suggestions))]
    Unknown { name: String, suggestions: Vec<String> },
    #[error("no cluster matches {filter:?}{}", tenant_note(tenant.as_deref()))]
    NoMatch { filter: String, tenant: Option<String> },
    #[error("no cluster is in tenant {tenant:?}{}", did_you_mean(suggestions))]
    NoTenant { tenant: String, suggestions: Vec<String> },
    /// A partial id or glob that several clusters match, where one is wanted and nobody is at a
    /// terminal to pick: exit code 2 (`main`), the matches listed one a line.
    #[error(
        "{name:?} matches {} clusters; name one (or run this on a terminal to pick):\n  {}",
        lines.len(),
        lines.join("\n  ")
    )]
    Ambiguous { name: String, lines: Vec<String> },
}

fn did_you_mean(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        "; `kharonctl clusters` lists them (`kharonctl update` fetches new ones)".to_owned()
    } else {
        let shown: Vec<String> = suggestions.iter().map(|s| cell(s)).collect();
        format!("; did you mean {}?", shown.join(", "))
    }
}

fn tenant_note(tenant: Option<&str>) -> String {
    tenant.map(|t| format!(" in tenant {t:?}")).unwrap_or_default()
}

/// Where the clusters of a [`Catalog`] came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--inventory FILE` or the configured `inventory`.
    File(PathBuf),
    /// The inventory cache.
    Cache(PathBuf),
    /// kharond's table in force, because there is no cache at `cache`: kharond read it from its
    /// `kind` ("file" or "cache") at `path`.
    Daemon { cache: PathBuf, kind: String, path: String },
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "inventory file {}", path.display()),
            Source::Cache(path) => write!(f, "inventory cache {}", path.display()),
            Source::Daemon { kind, path, .. } => write!(f, "kharond's routing table (its {kind} {path})"),
        }
    }
}

/// The clusters of one inventory, sorted by id, and where they came from.
#[derive(Debug, Clone)]
pub struct Catalog {
    clusters: Vec<Cluster>,
    source: Source,
}

impl Catalog {
    /// Every cluster that is not `kharonIgnore`d, from `flag` (`--inventory`), else the configured
    /// inventory (`KHARON_INVENTORY`, config file), else the cache in the configured cache dir, else
    /// (no cache at all) the table of the kharond at the configured control socket.
    pub async fn load(flag: Option<&Path>, config: &Config) -> Result<Self, Error> {
        let configured = config.inventory.as_ref().map(|s| s.value.as_path());
        let (mut clusters, source) = match flag.or(configured).map(absolute) {
            Some(path) => (kharon_routing::inventory::load_file(&path)?, Source::File(path)),
            None => {
                let cache = kharon_routing::cache::path(&config.cache_dir.value);
                match kharon_routing::cache::load(&cache) {
                    Ok(envelope) => (envelope.clusters, Source::Cache(cache)),
                    Err(kharon_routing::cache::Error::Missing { .. }) => {
                        from_daemon(&config.control_socket.value, cache).await?
                    }
                    Err(e) => return Err(Error::Cache(e)),
                }
            }
        };
        clusters.retain(|c| !c.is_ignored());
        clusters.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Self { clusters, source })
    }

    pub fn clusters(&self) -> &[Cluster] {
        &self.clusters
    }

    pub fn source(&self) -> &Source {
        &self.source
    }

    /// The inventory file, if that is where the clusters come from (an exec credential entry must
    /// read the same inventory when kubectl runs it later). kharond's table is none: the entry
    /// then asks kharond again, as this run did.
    pub fn inventory_file(&self) -> Option<&Path> {
        match &self.source {
            Source::File(path) => Some(path),
            Source::Cache(_) | Source::Daemon { .. } => None,
        }
    }

    /// A line on stderr when the clusters are kharond's and that may surprise: kharond reads an
    /// inventory cache, but not the one this shell would (another cache dir), so this shell's
    /// `kharonctl update` would not change what it lists. kharond on an inventory file (the
    /// README's first command, `kharond --inventory FILE`) is no surprise and goes unmentioned;
    /// `kharonctl config` shows the source either way.
    pub fn print_source(&self) {
        if let Source::Daemon { cache, kind, path } = &self.source
            && kind == "cache"
        {
            eprintln!(
                "kharonctl: no inventory cache at {}; clusters from kharond's, {} (kharond and \
                 kharonctl use different cache directories: give both the same cache_dir)",
                cache.display(),
                Escaped(path)
            );
        }
    }
}

/// The clusters of the kharond listening on `socket`, for want of the cache at `cache`.
async fn from_daemon(socket: &Path, cache: PathBuf) -> Result<(Vec<Cluster>, Source), Error> {
    let answer = async { Daemon::connect(socket).await?.clusters().await };
    let reply = answer.await.map_err(|daemon| Error::NoCatalog { cache: cache.clone(), daemon })?;
    let inventory = reply.inventory.unwrap_or_default();
    if inventory.missing {
        return Err(Error::DaemonHasNone { cache, kind: inventory.source_kind, path: inventory.source_path });
    }
    let clusters =
        kharon_routing::inventory::parse_clusters(&reply.clusters_json).map_err(Error::DaemonReply)?;
    Ok((clusters, Source::Daemon { cache, kind: inventory.source_kind, path: inventory.source_path }))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The clusters a listing selects (`clusters [FILTER]`, `kubeconfig [FILTER]`): [`filter`], and
/// when a filter or tenant selects none, the error a single cluster gets: an id no cluster has is
/// [`Error::Unknown`] with the closest ids, as `switch ID` and `clusters ID …` say it; a glob is
/// [`Error::NoMatch`]; a tenant with no cluster, [`Error::NoTenant`]. No filter and no tenant
/// select every cluster, however few.
pub fn select<'a>(
    clusters: &'a [Cluster],
    name: Option<&str>,
    tenant: Option<&str>,
) -> Result<Vec<&'a Cluster>, Error> {
    let found = filter(clusters, name, tenant);
    if !found.is_empty() {
        return Ok(found);
    }
    let of_tenant = || clusters.iter().filter(|c| tenant.is_none_or(|t| c.tenant == t));
    match name {
        None => match tenant {
            None => Ok(found),
            Some(tenant) => {
                let mut tenants: Vec<&str> = clusters.iter().map(|c| c.tenant.as_str()).collect();
                tenants.sort_unstable();
                tenants.dedup();
                Err(Error::NoTenant {
                    tenant: tenant.to_owned(),
                    suggestions: suggest(tenant, tenants.into_iter()),
                })
            }
        },
        Some(glob) if is_glob(glob) => {
            Err(Error::NoMatch { filter: glob.to_owned(), tenant: tenant.map(str::to_owned) })
        }
        Some(name) => Err(Error::Unknown {
            name: name.to_owned(),
            suggestions: suggest(name, of_tenant().map(|c| c.id.as_str())),
        }),
    }
}

/// Whether `pattern` contains glob characters.
pub fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?'])
}

/// The clusters whose id matches `filter` (a glob, or a substring when it has no glob characters)
/// and whose tenant is `tenant`.
pub fn filter<'a>(clusters: &'a [Cluster], filter: Option<&str>, tenant: Option<&str>) -> Vec<&'a Cluster> {
    clusters
        .iter()
        .filter(|c| tenant.is_none_or(|t| c.tenant == t))
        .filter(|c| match filter {
            None => true,
            Some(f) if is_glob(f) => kharon_common::wildcard::matches(&c.id, f),
            Some(f) => c.id.contains(f) || c.display_name.as_deref().is_some_and(|d| d.contains(f)),
        })
        .collect()
}

/// The clusters a name given for one cluster may mean, among those `eligible` (an exact id is taken
/// whatever `eligible` says, so that its own error can explain why it does not fit): an exact id
/// (any case) is that cluster alone; a glob, every id it matches; anything else is a partial id, and
/// means every id containing it (any case). The caller picks among several or says they are too
/// many. Nothing: [`Error::Unknown`] with the closest ids, or for a glob [`Error::NoMatch`].
pub fn candidates<'a>(
    clusters: &'a [Cluster],
    name: &str,
    tenant: Option<&str>,
    eligible: impl Fn(&Cluster) -> bool,
) -> Result<Vec<&'a Cluster>, Error> {
    if is_glob(name) {
        let found: Vec<_> =
            filter(clusters, Some(name), tenant).into_iter().filter(|c| eligible(c)).collect();
        if found.is_empty() {
            return Err(Error::NoMatch { filter: name.to_owned(), tenant: tenant.map(str::to_owned) });
        }
        return Ok(found);
    }
    let unknown = match find(clusters, name) {
        Ok(exact) => return Ok(vec![exact]),
        Err(e) => e,
    };
    let lower = name.to_ascii_lowercase();
    let found: Vec<_> = clusters
        .iter()
        .filter(|c| tenant.is_none_or(|t| c.tenant == t))
        .filter(|c| !lower.is_empty() && c.id.to_ascii_lowercase().contains(&lower) && eligible(c))
        .collect();
    if found.is_empty() {
        return Err(unknown);
    }
    Ok(found)
}

/// One line per cluster, in columns: id, display name, tenant, and how it is reached (`direct`, or
/// `via` its jump host). What a person sees of a cluster when asked to choose one.
pub fn lines(clusters: &[&Cluster]) -> Vec<String> {
    let cells: Vec<[String; 4]> = clusters
        .iter()
        .map(|c| {
            // Data, shown to a person: escaped and capped (kharon_common::text).
            [
                cell(&c.id),
                c.display_name.as_deref().filter(|d| !d.is_empty()).map_or_else(|| "-".to_owned(), cell),
                cell(&c.tenant),
                match c.jumphost() {
                    Some(jumphost) => format!("via {}", cell(jumphost)),
                    None => kharon_routing::table::Via::Direct.as_str().to_owned(),
                },
            ]
        })
        .collect();
    let width = |i: usize| cells.iter().map(|row| row[i].chars().count()).max().unwrap_or(0);
    let (w0, w1, w2) = (width(0), width(1), width(2));
    cells
        .iter()
        .map(|[id, name, tenant, route]| format!("{id:w0$}  {name:w1$}  {tenant:w2$}  {route}"))
        .collect()
}

/// The cluster with id `name` (case-insensitively, as ids are DNS labels).
pub fn find<'a>(clusters: &'a [Cluster], name: &str) -> Result<&'a Cluster, Error> {
    clusters
        .iter()
        .find(|c| c.id == name)
        .or_else(|| clusters.iter().find(|c| c.id.eq_ignore_ascii_case(name)))
        .ok_or_else(|| Error::Unknown {
            name: name.to_owned(),
            suggestions: suggest(name, clusters.iter().map(|c| c.id.as_str())),
        })
}

/// Up to three ids closest to `name`: ids containing it first, then by edit distance, only those
/// close enough to be a plausible typo.
pub fn suggest<'a>(name: &str, ids: impl Iterator<Item = &'a str>) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let mut scored: Vec<(usize, &str)> = ids
        .filter_map(|id| {
            let id_lower = id.to_ascii_lowercase();
            if !lower.is_empty() && id_lower.contains(&lower) {
                return Some((0, id));
            }
            let distance = strsim::levenshtein(&lower, &id_lower);
            // A third of the longer string, at least 2: "c-foo-1" for "c-fo0-1", not every id.
            let limit = (lower.len().max(id_lower.len()) / 3).max(2);
            (distance <= limit).then_some((distance, id))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(MAX_SUGGESTIONS).map(|(_, id)| id.to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(id: &str, tenant: &str) -> Cluster {
        serde_json::from_value(serde_json::json!({"id": id, "tenant": tenant})).unwrap()
    }

    #[test]
    fn filters_by_glob_substring_and_tenant() {
        let all = vec![cluster("c-a-1", "t-x"), cluster("c-b-2", "t-y"), cluster("c-ab-3", "t-x")];
        let ids = |v: Vec<&Cluster>| v.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(filter(&all, Some("c-a*"), None)), ["c-a-1", "c-ab-3"]);
        assert_eq!(ids(filter(&all, Some("b"), None)), ["c-b-2", "c-ab-3"]);
        assert_eq!(ids(filter(&all, None, Some("t-x"))), ["c-a-1", "c-ab-3"]);
        assert!(matches!(candidates(&all, "z*", None, |_| true), Err(Error::NoMatch { .. })));
    }

    #[test]
    fn a_listing_that_selects_nothing_is_an_error_worded_as_for_one_cluster() {
        let all = vec![cluster("c-green-tree-1", "t-a"), cluster("c-red-3", "t-b")];
        let one = find(&all, "c-gren-tree-1").unwrap_err().to_string();
        let listed = select(&all, Some("c-gren-tree-1"), None).unwrap_err().to_string();
        assert_eq!(listed, one, "`clusters ID` and `switch ID` say the same");
        assert_eq!(one, "unknown cluster \"c-gren-tree-1\"; did you mean c-green-tree-1?");
        assert!(matches!(select(&all, Some("c-x*"), None), Err(Error::NoMatch { .. })));
        let tenant = select(&all, None, Some("t-c")).unwrap_err().to_string();
        assert!(tenant.contains("did you mean t-a, t-b?"), "{tenant}");
        assert_eq!(select(&all, None, None).unwrap().len(), 2);
        assert!(select(&[], None, None).unwrap().is_empty(), "an empty inventory lists as empty");
        assert_eq!(select(&all, Some("red"), None).unwrap().len(), 1);
    }

    #[test]
    fn unknown_names_suggest_close_ids() {
        let all = vec![cluster("c-green-tree-1", "t"), cluster("c-blue-sky-2", "t"), cluster("c-red-3", "t")];
        let err = find(&all, "c-gren-tree-1").unwrap_err();
        let Error::Unknown { suggestions, .. } = &err else { panic!("{err}") };
        assert_eq!(suggestions, &["c-green-tree-1"]);
        assert!(err.to_string().contains("did you mean c-green-tree-1?"), "{err}");
        assert_eq!(suggest("blue", all.iter().map(|c| c.id.as_str())), ["c-blue-sky-2"]);
        assert!(suggest("zzzzzzzzzzzz", all.iter().map(|c| c.id.as_str())).is_empty());
        assert_eq!(find(&all, "C-RED-3").unwrap().id, "c-red-3");
    }

    #[test]
    fn a_partial_id_means_every_id_containing_it_and_an_exact_id_only_itself() {
        let all = vec![cluster("c-green-1", "t-a"), cluster("c-green-10", "t-b"), cluster("c-red-3", "t-a")];
        let ids = |found: Result<Vec<&Cluster>, Error>| {
            found.unwrap().iter().map(|c| c.id.clone()).collect::<Vec<_>>()
        };
        assert_eq!(ids(candidates(&all, "RED", None, |_| true)), ["c-red-3"]);
        assert_eq!(ids(candidates(&all, "green", None, |_| true)), ["c-green-1", "c-green-10"]);
        // An exact id is itself even when it is part of another one.
        assert_eq!(ids(candidates(&all, "c-green-1", None, |_| true)), ["c-green-1"]);
        assert_eq!(ids(candidates(&all, "green", Some("t-b"), |_| true)), ["c-green-10"]);
        assert_eq!(ids(candidates(&all, "green", None, |c| c.tenant == "t-a")), ["c-green-1"]);
        assert!(matches!(candidates(&all, "blue", None, |_| true), Err(Error::Unknown { .. })));
        assert!(matches!(candidates(&all, "", None, |_| true), Err(Error::Unknown { .. })));
        let err = Error::Ambiguous { name: "green".into(), lines: lines(&[&all[0], &all[1]]) };
        assert_eq!(
            err.to_string(),
            "\"green\" matches 2 clusters; name one (or run this on a terminal to pick):\n  \
             c-green-1   -  t-a  direct\n  c-green-10  -  t-b  direct"
        );
    }
}
