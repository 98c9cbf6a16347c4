//! A **provider's domain**: a registrable domain that anchors the clusters of more than one tenant
//! (every VSHN-managed cluster's jump host lives in `vshnmanaged.net`), or one the config file's
//! `provider_domains` names. An anchor (`anchor`) ties a domain to a cluster; a domain that many
//! customers' clusters share is no customer's, so there it ties only the names that are visibly
//! the cluster's own: those that carry its id as a label (`owner`) and those at or below its static
//! names. Any other dynamic name in it is refused
//! ([`crate::trust::Refusal::ProviderDomain`]): otherwise one customer's cluster-admin could
//! draw the provider's own hosts (`vault.vshnmanaged.net`) into that customer's network.
//!
//! The tenant is Lieutenant's `tenant` field of each cluster (VSHN's word, like the id). The
//! domains are those the inventory shows: a cache of one tenant (`kharonctl update --tenant`)
//! shows no other tenant, which is what `provider_domains` is for. A zone of `dynamic_domains` is
//! where the engineer lets any cluster's names route, so a domain at or below one is never a
//! provider's domain (and `config` refuses to name one in both lists).

use std::collections::{HashMap, HashSet};

use crate::anchor::Anchors;
use crate::inventory::Cluster;
use crate::trust::{self, ProviderWhy};

/// How many tenants a refusal names (the count says the rest).
const NAMED_TENANTS: usize = 3;

/// One provider's domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderDomain {
    /// Normalised: lowercase, no trailing dot.
    pub domain: String,
    pub why: ProviderWhy,
}

/// The provider's domains of one inventory, sorted by domain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProviderDomains {
    list: Vec<ProviderDomain>,
}

impl ProviderDomains {
    /// From each cluster's tenant and own anchors ([`crate::anchor::ClusterAnchors::own`]), and
    /// the config file's domains that `anchors` carries.
    pub fn derive<'a>(
        clusters: impl IntoIterator<Item = (&'a str, &'a [String])>,
        anchors: &Anchors,
    ) -> Self {
        type Set<'t> = HashSet<&'t str, foldhash::fast::RandomState>;
        let mut tenants: HashMap<&str, Set<'_>, foldhash::fast::RandomState> = HashMap::default();
        for (tenant, own) in clusters {
            for anchor in own {
                tenants.entry(anchor.as_str()).or_default().insert(tenant);
            }
        }
        let mut list: Vec<ProviderDomain> = anchors
            .providers()
            .iter()
            .map(|domain| ProviderDomain { domain: domain.clone(), why: ProviderWhy::Configured })
            .collect();
        for (domain, tenants) in tenants {
            if tenants.len() < 2 || anchors.in_zone(domain) || list.iter().any(|p| p.domain == domain) {
                continue;
            }
            let mut some: Vec<&str> = tenants.iter().copied().collect();
            some.sort_unstable();
            some.truncate(NAMED_TENANTS);
            let some = some.into_iter().map(str::to_owned).collect();
            list.push(ProviderDomain {
                domain: domain.to_owned(),
                why: ProviderWhy::Tenants { count: tenants.len(), some },
            });
        }
        list.sort_by(|a, b| a.domain.cmp(&b.domain));
        ProviderDomains { list }
    }

    /// The provider's domains of `clusters` as [`crate::table::RoutingTable::compile_with`]
    /// finds them, without compiling: for `kharonctl config`.
    pub fn of_inventory(clusters: &[Cluster], anchors: &Anchors) -> Self {
        let owned: Vec<Vec<String>> = kharon_common::parallel::map(clusters, |cluster| {
            match (cluster.is_ignored(), cluster.jumphost()) {
                (false, Some(jumphost)) => {
                    let facts = cluster.routing_facts();
                    anchors.of(jumphost, &facts.statics()).own().to_vec()
                }
                _ => Vec::new(),
            }
        });
        let tenants = clusters.iter().map(|c| c.tenant.as_str());
        Self::derive(tenants.zip(owned.iter().map(Vec::as_slice)), anchors)
    }

    /// The provider's domain `name` lies at or below, if any.
    pub fn holding(&self, name: &str) -> Option<&ProviderDomain> {
        self.list.iter().find(|p| trust::at_or_below(name, &p.domain))
    }

    pub fn iter(&self) -> impl Iterator<Item = &ProviderDomain> {
        self.list.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own(domains: &[&str]) -> Vec<String> {
        domains.iter().map(|d| (*d).to_owned()).collect()
    }

    #[test]
    fn a_domain_that_anchors_clusters_of_two_tenants_is_a_providers() {
        let (shared, a, b) =
            (own(&["vshnmanaged.net", "a.ch"]), own(&["vshnmanaged.net"]), own(&["b.ch", "a.ch"]));
        let clusters = [("t-a", shared.as_slice()), ("t-a", a.as_slice()), ("t-b", b.as_slice())];
        let found = ProviderDomains::derive(clusters, &Anchors::default());
        let domains: Vec<(&str, String)> =
            found.iter().map(|p| (p.domain.as_str(), p.why.to_string())).collect();
        assert_eq!(
            domains,
            [("a.ch", "it anchors clusters of 2 tenants: t-a, t-b".to_owned())],
            "vshnmanaged.net anchors one tenant's clusters only"
        );
        assert_eq!(found.holding("api.c-1.a.ch").map(|p| p.domain.as_str()), Some("a.ch"));
        assert_eq!(found.holding("a.ch.evil.example"), None);
    }

    #[test]
    fn configured_domains_count_and_zones_lift_derived_ones() {
        let anchors =
            Anchors::new(&["shared.example".to_owned()]).with_providers(&["vshnmanaged.net".to_owned()]);
        let (one, other) = (own(&["shared.example", "x.example"]), own(&["shared.example", "x.example"]));
        let clusters = [("t-1", one.as_slice()), ("t-2", other.as_slice())];
        let found = ProviderDomains::derive(clusters, &anchors);
        let domains: Vec<(&str, &ProviderWhy)> = found.iter().map(|p| (p.domain.as_str(), &p.why)).collect();
        assert_eq!(
            domains,
            [
                ("vshnmanaged.net", &ProviderWhy::Configured),
                (
                    "x.example",
                    &ProviderWhy::Tenants { count: 2, some: vec!["t-1".to_owned(), "t-2".to_owned()] }
                )
            ]
        );
        assert_eq!(ProviderWhy::Configured.to_string(), "named in provider_domains in your config file");
        let many = ProviderWhy::Tenants { count: 500, some: vec!["t-0".into(), "t-1".into(), "t-10".into()] };
        assert_eq!(many.to_string(), "it anchors clusters of 500 tenants: t-0, t-1, t-10, …");
    }
}
