//! The compile's step between what each cluster says on its own and the contest of all names
//! ([`crate::trust::arbitrate`]): each cluster's dynamic names judged against every cluster's id
//! (`owner`) and the provider's domains (`provider`). A name that carries another cluster's id
//! inside that cluster's anchors is refused; one in a provider's domain that is neither the
//! cluster's own by its id ([`Tier::Owned`], told apart while gathering), nor at or below one of
//! its static names (its jump host, its `jumphostDomains`), nor in a zone of `dynamic_domains`, is
//! refused too.

use super::gathered::Gathered;
use crate::anchor::Anchors;
use crate::inventory;
use crate::owner::{Other, Owners};
use crate::provider::ProviderDomains;
use crate::trust::{self, Refusal, Refused, Tier};

/// Judges the names of every gathered cluster (across the cores: each cluster's refusals depend
/// only on shared, read-only data), refusals told to the cluster's slot in `told`.
pub(super) fn judge(
    gathered: &mut [(usize, Gathered<'_>)],
    owners: &Owners<'_>,
    providers: &ProviderDomains,
    anchors: &Anchors,
    told: &mut [(Vec<String>, Vec<Refused>)],
) {
    // Few clusters have any: each part lists only its refusals, by cluster and name index.
    let parts = kharon_common::parallel::chunks(gathered, |offset, part| {
        let mut found: Vec<(usize, usize, Refusal)> = Vec::new();
        for (k, (_, g)) in part.iter().enumerate() {
            found.extend(refusals(g, owners, providers, anchors).map(|(n, reason)| (offset + k, n, reason)));
        }
        found
    });
    let mut refused: Vec<(usize, usize)> = Vec::new();
    for (k, n, reason) in parts.into_iter().flatten() {
        let (at, g) = &gathered[k];
        // Only dynamic names are judged here: each has its fact.
        if let Some(fact) = g.live[n].2 {
            told[*at].1.push(g.cluster.refused_fact(fact, reason));
        }
        refused.push((k, n));
    }
    // Highest index first, so the indices of the rest stay valid.
    for (k, n) in refused.into_iter().rev() {
        gathered[k].1.live.remove(n);
    }
}

/// The refusals of one cluster's dynamic names, by index into its names, in order.
fn refusals<'g>(
    g: &'g Gathered<'_>,
    owners: &'g Owners<'_>,
    providers: &'g ProviderDomains,
    anchors: &'g Anchors,
) -> impl Iterator<Item = (usize, Refusal)> + 'g {
    let id = g.cluster.id.as_str();
    g.live.iter().enumerate().filter_map(move |(n, (name, tier, _))| {
        if *tier == Tier::Static {
            return None;
        }
        if let Some(Other { owner, zone, anchor }) = owners.other(name, id) {
            return Some((
                n,
                Refusal::NamedAfter { name: name.clone(), owner: owner.to_owned(), zone, anchor },
            ));
        }
        if *tier == Tier::Owned || anchors.in_zone(name) {
            return None;
        }
        let provider = providers.holding(name)?;
        if below_a_static_name(g, name) {
            return None;
        }
        let reason = Refusal::ProviderDomain {
            name: name.clone(),
            domain: provider.domain.clone(),
            why: provider.why.clone(),
            id: id.to_owned(),
        };
        Some((n, reason))
    })
}

/// Whether `name` lies at or below one of the cluster's static names: its `jumphostDomains`
/// entries, or its jump host when that is a host name.
fn below_a_static_name(g: &Gathered<'_>, name: &str) -> bool {
    let statics = g.live.iter().filter(|(_, tier, _)| *tier == Tier::Static);
    statics.map(|(s, _, _)| s.as_str()).any(|s| trust::at_or_below(name, s))
        || (g.jumphost.contains('.')
            && inventory::normalize_suffix(g.jumphost).is_ok_and(|jump| trust::at_or_below(name, &jump)))
}
