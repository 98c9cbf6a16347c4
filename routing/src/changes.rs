//! What one routing table routes and refuses that the one before it did not, per cluster: so that
//! a cluster that starts claiming new names is visible to the engineer the day it happens.
//! `kharonctl update` compares against the cache it replaces, kharond's reload against
//! the table in force; both say it the same way.

use std::collections::{BTreeMap, BTreeSet};

use crate::trust::Refused;

/// What a table routes and refuses, as far as a comparison needs it.
#[derive(Debug, Default)]
pub struct Snapshot<'a> {
    /// (suffix, jumphost, cluster): [`crate::table::RoutingTable::routes`], or a cache's.
    pub routes: &'a [(String, String, String)],
    pub refused: &'a [Refused],
}

/// One cluster's changes, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterChange {
    pub cluster: String,
    /// (suffix, jumphost) it routes now and did not before.
    pub added: Vec<(String, String)>,
    /// (suffix, jumphost) it routed before and does not now.
    pub removed: Vec<(String, String)>,
    /// Names refused now that were not before (by cluster, fact and value: a new reason for an
    /// old refusal is no news).
    pub refused: Vec<Refused>,
}

impl ClusterChange {
    fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.refused.is_empty()
    }
}

/// Every cluster whose routes or refusals changed from `old` to `new`, in cluster id order; empty
/// when nothing changed.
pub fn between(old: &Snapshot<'_>, new: &Snapshot<'_>) -> Vec<ClusterChange> {
    let old_routes: BTreeSet<&(String, String, String)> = old.routes.iter().collect();
    let new_routes: BTreeSet<&(String, String, String)> = new.routes.iter().collect();
    let mut by_cluster: BTreeMap<String, ClusterChange> = BTreeMap::new();
    for (suffix, jumphost, cluster) in new_routes.difference(&old_routes) {
        entry(&mut by_cluster, cluster).added.push((suffix.clone(), jumphost.clone()));
    }
    for (suffix, jumphost, cluster) in old_routes.difference(&new_routes) {
        entry(&mut by_cluster, cluster).removed.push((suffix.clone(), jumphost.clone()));
    }
    let key = |r: &Refused| (r.cluster.clone(), r.fact, r.value.clone());
    let before: BTreeSet<_> = old.refused.iter().map(key).collect();
    for refused in new.refused.iter().filter(|r| !before.contains(&key(r))) {
        entry(&mut by_cluster, &refused.cluster).refused.push(refused.clone());
    }
    by_cluster.into_values().filter(|c| !c.is_empty()).collect()
}

fn entry<'m>(by_cluster: &'m mut BTreeMap<String, ClusterChange>, cluster: &str) -> &'m mut ClusterChange {
    by_cluster
        .entry(cluster.to_owned())
        .or_insert_with(|| ClusterChange { cluster: cluster.to_owned(), ..ClusterChange::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust::Refusal;

    fn route(suffix: &str, jumphost: &str, cluster: &str) -> (String, String, String) {
        (suffix.to_owned(), jumphost.to_owned(), cluster.to_owned())
    }

    fn refused(cluster: &str, value: &str) -> Refused {
        Refused {
            cluster: cluster.to_owned(),
            fact: "openshiftApiURL",
            value: value.to_owned(),
            reason: Refusal::TopLevel { name: value.to_owned() },
        }
    }

    #[test]
    fn names_added_removed_and_newly_refused_per_cluster_and_nothing_when_nothing_changed() {
        let old_routes = [route("a.example", "j-a", "c-a"), route("b.example", "j-b", "c-b")];
        let old_refused = [refused("c-a", "x")];
        let new_routes = [
            route("a.example", "j-a", "c-a"),
            route("b2.example", "j-b", "c-b"),
            route("c.example", "j-c", "c-c"),
        ];
        let new_refused = [refused("c-a", "x"), refused("c-b", "y")];
        let old = Snapshot { routes: &old_routes, refused: &old_refused };
        let new = Snapshot { routes: &new_routes, refused: &new_refused };
        let changes = between(&old, &new);
        let pair = |s: &str, j: &str| (s.to_owned(), j.to_owned());
        assert_eq!(
            changes,
            [
                ClusterChange {
                    cluster: "c-b".into(),
                    added: vec![pair("b2.example", "j-b")],
                    removed: vec![pair("b.example", "j-b")],
                    refused: vec![refused("c-b", "y")],
                },
                ClusterChange {
                    cluster: "c-c".into(),
                    added: vec![pair("c.example", "j-c")],
                    ..Default::default()
                },
            ]
        );
        assert!(between(&new, &new).is_empty());
    }
}
