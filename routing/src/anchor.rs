//! Where a cluster's dynamic facts may route at all: inside its **anchors**, the
//! domains something other than the cluster itself ties to it. A cluster-admin can set the
//! dynamic facts a cluster reports, but not VSHN's static facts in Lieutenant, not the engineer's
//! ssh_config and not the engineer's config file; so a name outside every anchor cannot have been
//! meant by anyone but the cluster, and is refused ([`crate::trust::Refusal::Unanchored`]).
//!
//! A cluster's anchors are the registrable domains (Public Suffix List) of:
//! - its `jumphost` fact, when that is a host name (`management4.rma1.bettersmarter.vshnmanaged.net`
//!   anchors `vshnmanaged.net`);
//! - each `jumphostDomains` entry (`vcenter.bettersmarter.ch` anchors `bettersmarter.ch`);
//! - the `HostName` the engineer's ssh_config gives the jump host, where the caller read one
//!   ([`Anchors::add_host_name`]: kharond does, kharonctl has no ssh_config engine);
//!
//! and, for every cluster, the zones of the config file's `dynamic_domains`.
//!
//! The registrable domain and not the name itself: a cluster's API and console live in the
//! domain its jump host lives in, rarely below the jump host's own name. What that still allows
//! is the trust model's business (`trust`, "What is not defended").

use std::collections::HashMap;

use crate::inventory;
use crate::trust;

/// The anchors every cluster has (the config file's zones) and what each jump host alias's
/// `HostName` anchors; [`Anchors::of`] adds a cluster's own static names. Also carries the config
/// file's `provider_domains` to the compile (`provider`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Anchors {
    /// Normalised: lowercase, no trailing dot.
    zones: Vec<String>,
    /// The config file's `provider_domains` (already validated: `config`), normalised.
    providers: Vec<String>,
    /// Jump host alias → the registrable domain of its ssh_config `HostName`.
    host_names: HashMap<String, String>,
    /// Whether the caller consulted an ssh_config: a refusal then need not say it did not.
    ssh_config: bool,
}

impl Anchors {
    /// The config file's `dynamic_domains` (already validated: `config`), for every cluster.
    pub fn new(zones: &[String]) -> Self {
        Anchors {
            zones: zones.to_vec(),
            providers: Vec::new(),
            host_names: HashMap::new(),
            ssh_config: false,
        }
    }

    /// The config file's `provider_domains` (already validated: `config`): provider's domains
    /// beside those the inventory shows (`provider`).
    pub fn with_providers(mut self, domains: &[String]) -> Self {
        self.providers = domains.to_vec();
        self
    }

    /// Says that the jump host `HostName`s were looked up in an ssh_config (even if none adds an
    /// anchor), so that a refusal does not send the engineer to one.
    pub fn with_ssh_config(mut self) -> Self {
        self.ssh_config = true;
        self
    }

    /// The `HostName` the ssh_config gives the jump host `alias`; an IP address anchors nothing.
    pub fn add_host_name(&mut self, alias: &str, host_name: &str) {
        if let Some(domain) = inventory::normalize_suffix(host_name).ok().and_then(|n| registrable(&n)) {
            self.host_names.insert(alias.to_owned(), domain);
        }
        self.ssh_config = true;
    }

    pub fn zones(&self) -> &[String] {
        &self.zones
    }

    /// Whether `name` lies at or below one of the config file's zones.
    pub fn in_zone(&self, name: &str) -> bool {
        self.zones.iter().any(|zone| trust::at_or_below(name, zone))
    }

    pub fn providers(&self) -> &[String] {
        &self.providers
    }

    pub fn consulted_ssh_config(&self) -> bool {
        self.ssh_config
    }

    /// The anchors of a cluster whose jump host is `jumphost` and whose static includes (its
    /// `jumphostDomains`, as `inventory` normalised them) are `statics`.
    pub fn of<'s>(&'s self, jumphost: &str, statics: &[&str]) -> ClusterAnchors<'s> {
        let mut own: Vec<String> = Vec::with_capacity(statics.len() + 2);
        let mut add = |domain: Option<String>| {
            if let Some(domain) = domain
                && !own.contains(&domain)
            {
                own.push(domain);
            }
        };
        if jumphost.contains('.') {
            add(inventory::normalize_suffix(jumphost).ok().and_then(|n| registrable(&n)));
        }
        add(self.host_names.get(jumphost).cloned());
        for name in statics {
            add(registrable(name).or_else(|| Some((*name).to_owned())));
        }
        ClusterAnchors { own, shared: self }
    }
}

/// One cluster's anchors: its own and every cluster's.
#[derive(Debug)]
pub struct ClusterAnchors<'s> {
    own: Vec<String>,
    shared: &'s Anchors,
}

impl ClusterAnchors<'_> {
    /// Whether a dynamic fact of the cluster may route `name`.
    pub fn hold(&self, name: &str) -> bool {
        self.holding(name).is_some()
    }

    /// The first of the cluster's anchors that `name` lies at or below, if any.
    pub fn holding(&self, name: &str) -> Option<&str> {
        self.all().find(|anchor| trust::at_or_below(name, anchor))
    }

    /// The cluster's own anchors, without the config file's zones: what tells a provider's domain
    /// (`provider`).
    pub fn own(&self) -> &[String] {
        &self.own
    }

    /// The refusal of `name`, which no anchor holds.
    pub fn refusal(&self, name: &str) -> trust::Refusal {
        trust::Refusal::Unanchored {
            name: name.to_owned(),
            anchors: self.all().map(str::to_owned).collect(),
            ssh_config: self.shared.ssh_config,
        }
    }

    fn all(&self) -> impl Iterator<Item = &str> {
        self.own.iter().chain(&self.shared.zones).map(String::as_str)
    }
}

/// Distinct lists of anchors, each kept once: most clusters share theirs with many others (every
/// cluster behind one provider's jump hosts), so a compile of tens of thousands of clusters keeps
/// an index per cluster rather than a list.
#[derive(Debug, Default)]
pub struct AnchorSets {
    sets: Vec<Vec<String>>,
    index: HashMap<Vec<String>, u32, foldhash::fast::RandomState>,
}

impl AnchorSets {
    /// The index of `set`, added if new.
    pub fn intern(&mut self, set: &[String]) -> u32 {
        if let Some(&at) = self.index.get(set) {
            return at;
        }
        // More distinct lists than u32 counts cannot come out of one JSON document we can hold.
        let at = u32::try_from(self.sets.len()).unwrap_or(u32::MAX);
        self.sets.push(set.to_vec());
        self.index.insert(set.to_vec(), at);
        at
    }

    /// The list at `at` (empty for an index this never gave).
    pub fn get(&self, at: u32) -> &[String] {
        self.sets.get(at as usize).map_or(&[], Vec::as_slice)
    }

    /// Adds the lists of `other`; the answer gives each of `other`'s indices its index here.
    pub fn merge(&mut self, other: AnchorSets) -> Vec<u32> {
        other.sets.iter().map(|set| self.intern(set)).collect()
    }
}

/// The registrable domain of a normalised `name`: its public suffix and one label more, where an
/// unknown top-level domain counts as a public suffix (the list's default rule, `*`): so
/// `c-x.example` for `api.c-x.example`. `None` for a name that is itself a suffix.
pub fn registrable(name: &str) -> Option<String> {
    let domain = psl::domain(name.as_bytes())?;
    std::str::from_utf8(domain.as_bytes()).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrable_domains_follow_the_public_suffix_list_and_its_default_rule() {
        for (name, want) in [
            ("management4.rma1.bettersmarter.vshnmanaged.net", Some("vshnmanaged.net")),
            ("vcenter.bettersmarter.ch", Some("bettersmarter.ch")),
            ("a.b.example.co.uk", Some("example.co.uk")),
            ("x.someone.github.io", Some("someone.github.io")),
            ("api.c-x.example", Some("c-x.example")),
            ("c-x.example", Some("c-x.example")),
            ("example", None),
            ("co.uk", None),
        ] {
            assert_eq!(registrable(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn a_clusters_anchors_are_its_static_names_its_jump_hosts_and_the_config_zones() {
        let mut anchors = Anchors::new(&["appuio.cloud".to_owned()]);
        anchors.add_host_name("jump-x", "Bastion.Customer.CH.");
        anchors.add_host_name("jump-ip", "192.0.2.1");
        let of = anchors.of("jump-x", &["vcenter.bettersmarter.ch", "corp"]);
        for name in ["api.c-1.customer.ch", "x.bettersmarter.ch", "a.zone.appuio.cloud", "x.corp"] {
            assert!(of.hold(name), "{name}");
        }
        for name in ["www.google.com", "customer.ch.evil.example", "vshnmanaged.net.example"] {
            assert!(!of.hold(name), "{name}");
        }
        let of = anchors.of("management4.rma1.bettersmarter.vshnmanaged.net", &[]);
        assert!(of.hold("api.c-bettersmarter-prod01.vshnmanaged.net"));
        assert!(!of.hold("api.c-1.customer.ch"), "another alias's HostName");
        let of = anchors.of("jump-ip", &[]);
        assert_eq!(
            of.refusal("api.github.com").to_string(),
            "api.github.com lies outside every domain tied to the cluster by something other than \
             its own report (it has: appuio.cloud); to route it, add its domain to the cluster's \
             jumphostDomains in Lieutenant, or to dynamic_domains in your config file"
        );
    }

    #[test]
    fn without_an_ssh_config_the_refusal_says_the_jump_hosts_host_name_was_not_read() {
        let anchors = Anchors::new(&[]);
        let text = anchors.of("jump-x", &[]).refusal("api.c-x.example").to_string();
        assert!(text.contains("(it has none)"), "{text}");
        assert!(text.ends_with("kharonctl reads no ssh_config: kharond also counts the domain of the jump host's HostName there"), "{text}");
    }
}
