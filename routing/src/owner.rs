//! Whose a name is by its cluster id. A cluster's id in Lieutenant is the name of its Cluster
//! object: VSHN's word, not something the cluster reports, and VSHN names a cluster's domains
//! after it (`c-bettersmarter-prod01.vshnmanaged.net`). So a name that carries a cluster's id as a
//! whole label, where the name from that label on lies in one of that cluster's anchors (`anchor`),
//! is that cluster's at the strength of a static fact:
//!
//! - another cluster's dynamic claim on or below it is refused
//!   ([`crate::trust::Refusal::NamedAfter`]) and the owner keeps every name there;
//! - the owner's own dynamic names there are [`crate::trust::Tier::Owned`]: no other cluster's
//!   dynamic name contests them, and in a provider's domain (`provider`) they still route;
//! - static names are not judged here: another cluster's `jumphostDomains` entry inside
//!   `c-outer.example.net` nests, the longest suffix deciding, as static names always do.
//!
//! Only ids in Lieutenant's own form count ([`is_lieutenant_id`]): a letter, a dash and more,
//! lowercase, one DNS label (the `Id` schema of tests/fixtures/lieutenant/openapi.yaml,
//! `<letter>-<adjective>-<noun>-<digits>`). A hand-written inventory's `api` or `www` would
//! otherwise own every `api.` and `www.` name of its anchors.

use crate::anchor::{AnchorSets, Anchors, ClusterAnchors};
use crate::inventory::{Cluster, MAX_LABEL_LEN};
use crate::trust;

/// Every cluster's id and anchors, to tell whose id a name carries. A cluster's anchors are its
/// list in [`AnchorSets`] (its own: [`ClusterAnchors::own`]) and the config file's zones.
///
/// Looked up by binary search in the clusters as the compile sorts them, and only for a label in
/// Lieutenant's form that is not the asking cluster's own id: in a real inventory hardly a name
/// carries another cluster's id, so no index of tens of thousands of ids is built for it.
pub struct Owners<'a> {
    /// Sorted by id.
    clusters: &'a [&'a Cluster],
    /// Each cluster's list in `sets`, in the same order; `None` for an ignored one, which owns
    /// nothing.
    lists: &'a [Option<u32>],
    sets: AnchorSets,
    zones: &'a Anchors,
}

/// Another cluster whose id a name carries inside that cluster's anchors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other<'a> {
    pub owner: &'a str,
    /// The name from the id's label on, e.g. `c-victim.vshnmanaged.net`.
    pub zone: String,
    /// The anchor the zone lies in.
    pub anchor: String,
}

impl<'a> Owners<'a> {
    /// From `clusters`, sorted by id, each with the index of its own anchors in `sets` (`lists`,
    /// in the same order). Copies of one id (a broken inventory) own what each copy's anchors
    /// hold.
    pub fn new(
        sets: AnchorSets,
        zones: &'a Anchors,
        clusters: &'a [&'a Cluster],
        lists: &'a [Option<u32>],
    ) -> Self {
        debug_assert!(clusters.windows(2).all(|w| w[0].id <= w[1].id), "clusters sorted by id");
        Owners { clusters, lists, sets, zones }
    }

    /// The first other cluster than `claimant` whose id `name` (normalised) carries as a label,
    /// with the name from that label on inside that cluster's anchors.
    pub fn other(&self, name: &str, claimant: &str) -> Option<Other<'a>> {
        for (label, zone) in labels(name) {
            // The dash first: it passes over nearly every label that is no id at once.
            if label.as_bytes().get(1) != Some(&b'-') || label == claimant || !is_lieutenant_id(label) {
                continue;
            }
            let from = self.clusters.partition_point(|c| c.id.as_str() < label);
            let copies = self.clusters.get(from..).unwrap_or_default().iter().take_while(|c| c.id == label);
            for (cluster, list) in copies.zip(self.lists.get(from..).unwrap_or_default()) {
                let Some(list) = list else { continue };
                let own = self.sets.get(*list).iter().map(String::as_str);
                let mut anchors = own.chain(self.zones.zones().iter().map(String::as_str));
                if let Some(anchor) = anchors.find(|a| trust::at_or_below(zone, a)) {
                    let zone = zone.to_owned();
                    return Some(Other { owner: cluster.id.as_str(), zone, anchor: anchor.to_owned() });
                }
            }
        }
        None
    }
}

/// Whether `name` (normalised) carries the cluster's own `id`, one in Lieutenant's form
/// ([`is_lieutenant_id`], the caller's to check once), as a label, with the name from that label
/// on inside one of its `anchors`: then it is the cluster's own ([`crate::trust::Tier::Owned`]).
pub fn own(name: &str, id: &str, anchors: &ClusterAnchors<'_>) -> bool {
    labels(name).any(|(label, zone)| label == id && anchors.hold(zone))
}

/// Each label of a normalised `name` with the name from it on, leftmost first: (`api`,
/// `api.c-x.example`), (`c-x`, `c-x.example`), (`example`, `example`). One pass over the bytes.
fn labels(name: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut rest = Some(name);
    std::iter::from_fn(move || {
        let zone = rest?;
        match zone.bytes().position(|b| b == b'.') {
            Some(dot) => {
                rest = zone.get(dot + 1..);
                Some((zone.get(..dot)?, zone))
            }
            None => {
                rest = None;
                Some((zone, zone))
            }
        }
    })
}

/// Whether `id` has Lieutenant's form of a cluster id: a lowercase letter, a dash, then at least
/// one more of lowercase letters, digits and dashes; one DNS label at most 63 characters long.
pub fn is_lieutenant_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    bytes.len() > 2
        && bytes.len() <= MAX_LABEL_LEN
        && bytes[0].is_ascii_lowercase()
        && bytes[1] == b'-'
        && bytes[2..].iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_ids_in_lieutenants_form_count() {
        for id in ["c-victim", "c-bettersmarter-prod01", "t-x", "c-1", "c-green-meadow-1234"] {
            assert!(is_lieutenant_id(id), "{id}");
        }
        let long = format!("c-{}", "x".repeat(62));
        for id in ["c1", "api", "www", "c-", "C-Victim", "c-a.b", "-c-x", "c_x", &long] {
            assert!(!is_lieutenant_id(id), "{id}");
        }
    }

    #[test]
    fn a_name_carrying_an_id_inside_that_clusters_anchor_is_that_clusters() {
        let shared = Anchors::new(&["zone.example".to_owned()]);
        let victim = shared.of("jump.vshnmanaged.net", &[]);
        let mallory = shared.of("jump-m.vshnmanaged.net", &[]);
        let elsewhere = shared.of("jump.customer.ch", &[]);
        let cluster =
            |id: &str| -> Cluster { serde_json::from_value(serde_json::json!({"id": id})).unwrap() };
        let clusters = ["api", "c-far", "c-gone", "c-mallory", "c-victim"].map(cluster);
        let sorted: Vec<&Cluster> = clusters.iter().collect();
        let mut sets = AnchorSets::default();
        let lists = [
            Some(sets.intern(victim.own())),
            Some(sets.intern(elsewhere.own())),
            None,
            Some(sets.intern(mallory.own())),
            Some(sets.intern(victim.own())),
        ];
        assert_eq!(lists[0], lists[3], "one list for both");
        let owners = Owners::new(sets, &shared, &sorted, &lists);
        let other = |owner, zone: &str, anchor: &str| {
            Some(Other { owner, zone: zone.to_owned(), anchor: anchor.to_owned() })
        };
        for name in ["c-victim.vshnmanaged.net", "api.c-victim.vshnmanaged.net"] {
            assert_eq!(
                owners.other(name, "c-mallory"),
                other("c-victim", "c-victim.vshnmanaged.net", "vshnmanaged.net"),
                "{name}"
            );
            assert_eq!(owners.other(name, "c-victim"), None, "{name}");
        }
        assert!(own("api.c-victim.vshnmanaged.net", "c-victim", &victim));
        assert!(own("c-mallory.vshnmanaged.net", "c-mallory", &mallory));
        assert!(!own("c-victim.vshnmanaged.net", "c-mallory", &mallory));
        assert!(!own("c-far.vshnmanaged.net", "c-far", &elsewhere), "outside its anchors");
        let walked: Vec<(&str, &str)> = labels("api.c-x.example").collect();
        assert_eq!(walked, [("api", "api.c-x.example"), ("c-x", "c-x.example"), ("example", "example")]);
        // In the config file's zone, every cluster's anchor.
        assert_eq!(
            owners.other("x.c-far.zone.example", "c-mallory"),
            other("c-far", "c-far.zone.example", "zone.example")
        );
        // Outside the owner's anchors an id is just a label; a part of a label is none; an id not
        // in Lieutenant's form, and an ignored cluster's, own nothing.
        for name in [
            "c-far.vshnmanaged.net",
            "xc-victim.vshnmanaged.net",
            "vault.vshnmanaged.net",
            "api.c-mallory.vshnmanaged.net",
            "c-gone.vshnmanaged.net",
            "c-nobody.vshnmanaged.net",
        ] {
            assert_eq!(owners.other(name, "c-mallory"), None, "{name}");
        }
        // Its own id and another's: the other's counts.
        assert_eq!(
            owners.other("c-mallory.c-victim.vshnmanaged.net", "c-mallory"),
            other("c-victim", "c-victim.vshnmanaged.net", "vshnmanaged.net")
        );
    }
}
