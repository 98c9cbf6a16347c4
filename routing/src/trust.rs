//! The trust model of the inventory: who says what about a cluster, and what each may make kharon
//! do. `inventory` reads the facts and asks [`judge_name`] about each name; `table` asks
//! [`OwnHosts`], the cluster's anchors (`anchor`), every cluster's id (`owner`), the provider's
//! domains (`provider`) and [`arbitrate`] about the names of all clusters together; kharonctl's
//! kubeconfigs follow the same split (no code from a dynamic fact). README, "Security", says the
//! same for users.
//!
//! # Who says what
//! - **Static facts** (`facts`) are set by VSHN in Lieutenant: `jumphost`, `jumphostDomains`,
//!   `jumphostSkipDomains`, `distribution`, `kharonIgnore`, and where present `kubeconfigAuthInfo`,
//!   `oidcIssuer`, `oidcClientId`. They are the engineer's own organisation's word: they choose a
//!   cluster's jump host (an ssh_config alias, checked as a plain name: `inventory::check_jumphost`)
//!   and may route any name but a public suffix (a typo must not send `.ch` through one jump host),
//!   and a static `kubeconfigAuthInfo` is used as given. So are a cluster's **id** (the name of its
//!   Cluster object) and its **tenant**: VSHN names a cluster's domains after its id
//!   (`c-bettersmarter-prod01.vshnmanaged.net`), and a domain many tenants' clusters share is the
//!   provider's, no customer's.
//! - **Dynamic facts** (`dynamicFacts`) are reported by Steward from inside the cluster, where a
//!   customer may be cluster-admin. They are the cluster's claim about itself, and may:
//!   - route names of the cluster's own domain through the cluster's own jump host (base and apps
//!     domains, the host names of the API and console URLs);
//!   - name the API server (a kubeconfig's `server`), the console URL (opened only as an http(s)
//!     URL), the API's CA;
//!   - choose the OIDC issuer and client id of a Talos cluster's `kubectl oidc-login` entry, within
//!     bounds: an `https` URL with a host name, a client id that cannot read as an option. The
//!     token kubelogin gets goes to that cluster's own API server, which the cluster controls
//!     anyway; a static `oidcIssuer`/`oidcClientId` wins over the dynamic one.
//!
//!   They may not:
//!   - route a name outside the cluster's **anchors** ([`Refusal::Unanchored`]), the domains
//!     something other than the cluster ties to it: the registrable domains of its static names
//!     (`jumphost` when a host name, each `jumphostDomains` entry) and of the `HostName` the
//!     engineer's ssh_config gives its jump host, and the zones of the config file's
//!     `dynamic_domains` (`anchor`). This is what keeps a cluster-admin from pulling the rest of
//!     the internet (`api.github.com`, another customer's domain) through the cluster's network,
//!     where its DNS answers and its proxy reads plain HTTP: no one but the cluster says those
//!     names are the cluster's, and the cluster's word alone counts only inside a domain someone
//!     else tied to it. kharonctl, without an ssh_config engine, judges without the `HostName`s
//!     and says so;
//!   - route a name that carries **another cluster's id** as a label inside that cluster's anchors
//!     ([`Refusal::NamedAfter`], `owner`): `c-victim.vshnmanaged.net` and every name below it are
//!     c-victim's, at the strength of a static fact, whoever else reports them;
//!   - route, in a **provider's domain** (a registrable domain that anchors the clusters of more
//!     than one tenant, or one the config file's `provider_domains` names: `provider`), a name
//!     that neither carries the cluster's own id nor lies at or below one of its static names
//!     ([`Refusal::ProviderDomain`]), unless a zone of `dynamic_domains` holds it: such a domain
//!     ties only the cluster's own names to it, not the provider's hosts (`vault.vshnmanaged.net`)
//!     nor other customers' names;
//!   - become code: no `exec` entry, command, argument list or executed path comes from a dynamic
//!     fact (a dynamic `kubeconfigAuthInfo` is ignored, with a warning);
//!   - claim a public suffix, a registrable domain or a top-level domain ([`judge_name`]): that
//!     would capture every host of a customer, of VSHN, or of a country that no cluster claims;
//!   - claim a name at or above a host kharon itself talks to ([`OwnHosts`]: Lieutenant, Passbolt,
//!     the OIDC issuer): its own logins would leave through a customer's network;
//!   - claim a name that equals or lies inside another cluster's claim that is at least as
//!     strong ([`arbitrate`], "Contested names" below): the longest suffix wins, so
//!     `api.<another cluster's domain>` would take over that API, through the wrong customer's
//!     jump host and DNS.
//!
//!   A refused name is dropped with its reason ([`Refused`]: cluster, fact, value, why, and what to
//!   do where something can be done), which `kharonctl update`, `reload`, `status` and kharond's
//!   log all show; the cluster keeps its static routes and its other dynamic ones.
//!
//! # Contested names
//! Every routed name has a [`Tier`]: static; owned (a dynamic name that carries the cluster's own
//! id inside its anchors: VSHN's naming, as strong as a static name); anchored (a dynamic base
//! domain, or a dynamic name at or below the same cluster's base domain); loose (any other dynamic
//! name). A dynamic name is refused when another cluster's name is the same or lies above it (on
//! label boundaries) and is at least as strong. So a cluster that reports `api.<another cluster's
//! base domain>` as its API URL loses that name and the other cluster keeps its own; two clusters
//! that report the same base domain both lose it, unless it carries one of their ids: then it is
//! that cluster's, and the other's claim is refused before any contest.
//!
//! A name that merely contains another cluster's is kept: nesting is legitimate, and the routing
//! table's longest suffix already gives the inner cluster its own names (c-outer's dynamic
//! `c-outer.example.net` routes around c-inner's static `inner.c-outer.example.net`). One
//! exception: two *equally strong dynamic* names, one inside the other, both lose
//! ([`Relation::Covers`]). The inner one lies inside a claim as strong; keeping the outer one
//! would then hand it every name of the inner cluster, and nothing tells which of the two
//! clusters owns the zone (either could be the one lying), so neither gets it: a denial, named,
//! never a capture. A static entry for the owner settles it, and so does the owner's id in the
//! inner name (`c-inner.prod.customer.ch` is owned, and nests).
//!
//! # What is not defended
//! - Static facts are trusted, and so are a cluster's id and tenant: a wrong one routes what it
//!   says.
//! - One tenant's clusters among themselves. Inside an anchor no other tenant's cluster shares (a
//!   customer's own domain), a cluster's word still counts as before: it can route any unclaimed
//!   name there that is not a public suffix, a registrable domain or at or above one of kharon's
//!   own hosts; one that reports a sibling's base domain (one without the sibling's id), or a
//!   domain holding it, as its own takes those names out of the table for both (a denial,
//!   named); one that reports a sibling's loose apps domain as its base domain takes those names.
//!   A sibling whose names carry its id is not exposed.
//! - What the inventory does not show: a domain counts as a provider's by the tenants of the
//!   clusters in it. An inventory of one tenant (`kharonctl update --tenant`, or what Lieutenant
//!   lets the engineer see) shows none, so `provider_domains` names them. kharonctl reads no
//!   ssh_config: a domain that only the jump hosts' `HostName`s put among the anchors of several
//!   tenants' clusters is a provider's to kharond (which routes), not to kharonctl.
//! - A cluster's own names are its own: under its id it can route any name, a host VSHN placed
//!   there for something else included.
//! - Only ids in Lieutenant's form own names (`owner`): a hand-written inventory's other ids do not.
//! - A name under a top-level domain the Public Suffix List does not know (`.internal`,
//!   `.example`, a private TLD) is judged by its labels only: a single label is refused, two are
//!   taken as a name inside a domain.
//! - A cluster chooses its own API URL and OIDC issuer: `kubectl` against that cluster talks to
//!   what the cluster says (as it always did), and kubelogin opens the issuer it names.

use std::collections::HashMap;
use std::fmt;

/// How strongly a cluster holds a routed name; ordered strongest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Tier {
    /// From a static fact (`jumphostDomains`): VSHN's word.
    Static,
    /// A dynamic name that carries the cluster's own id as a label inside one of its anchors
    /// (`owner`): named after the cluster by VSHN, as strong as a static name.
    Owned,
    /// A dynamic base domain (`openshiftBaseDomain`, `talosBaseDomain`), or a dynamic name at or
    /// below one of the same cluster's base domains.
    Anchored,
    /// Any other dynamic name: an apps domain or an API or console host outside the base domain.
    Loose,
}

impl Tier {
    /// How strongly, for [`arbitrate`]: a static and an owned name alike (neither is ever
    /// contested), then anchored, then loose; lower is stronger.
    fn strength(self) -> u8 {
        match self {
            Tier::Static | Tier::Owned => 0,
            Tier::Anchored => 1,
            Tier::Loose => 2,
        }
    }
}

/// How a contested name stands to the other cluster's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Relation {
    /// The same name.
    Same,
    /// Below the other's name.
    Inside,
    /// Above the other's name, both dynamic and equally strong (module doc, "Contested names").
    Covers,
}

/// Why a name a fact asks to route is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{name} is a public suffix (Public Suffix List): it would route every domain under it")]
    PublicSuffix { name: String },
    #[error(
        "{name} is a registrable domain (Public Suffix List): a cluster's dynamic facts may claim \
         names inside a domain, never a whole one"
    )]
    RegistrableDomain { name: String },
    #[error("{name} is a top-level domain: a cluster's dynamic facts may claim names inside a domain")]
    TopLevel { name: String },
    #[error("{name} covers {host}, which kharon itself talks to ({what})")]
    OwnHost { name: String, host: String, what: String },
    #[error("{}", contested(name, cluster, claim, *relation))]
    Contested { name: String, cluster: String, claim: String, relation: Relation },
    #[error(
        "{name} carries the id of cluster {owner} inside its anchor {anchor}: the names of {zone} are \
         {owner}'s (Lieutenant's cluster ids are VSHN's word, not a cluster's report); if this cluster \
         is meant to route it, add it to this cluster's jumphostDomains in Lieutenant"
    )]
    NamedAfter {
        name: String,
        /// The cluster whose id the name carries.
        owner: String,
        /// The name from that id's label on, e.g. `c-victim.vshnmanaged.net`.
        zone: String,
        anchor: String,
    },
    #[error(
        "{name} lies in {domain}, a provider's domain ({why}): there a cluster's dynamic facts route only \
         names that carry its id ({id}) as a label, or lie at or below its jumphost or jumphostDomains; \
         to route it, add it to this cluster's jumphostDomains in Lieutenant, or to dynamic_domains in \
         your config file"
    )]
    ProviderDomain {
        name: String,
        domain: String,
        why: ProviderWhy,
        /// The refused cluster's id.
        id: String,
    },
    #[error("{}", unanchored(name, anchors, *ssh_config))]
    Unanchored {
        name: String,
        /// The cluster's anchors (`anchor`), the config file's zones among them.
        anchors: Vec<String>,
        /// Whether the jump host's ssh_config `HostName` was looked at (kharond: yes).
        ssh_config: bool,
    },
}

fn unanchored(name: &str, anchors: &[String], ssh_config: bool) -> String {
    let has =
        if anchors.is_empty() { "it has none".to_owned() } else { format!("it has: {}", anchors.join(", ")) };
    let mut text = format!(
        "{name} lies outside every domain tied to the cluster by something other than its own report \
         ({has}); to route it, add its domain to the cluster's jumphostDomains in Lieutenant, or to \
         dynamic_domains in your config file"
    );
    if !ssh_config {
        text.push_str(
            "; kharonctl reads no ssh_config: kharond also counts the domain of the jump host's HostName there",
        );
    }
    text
}

fn contested(name: &str, cluster: &str, claim: &str, relation: Relation) -> String {
    match relation {
        Relation::Same => format!("cluster {cluster} claims {name} too"),
        Relation::Inside => format!("{name} lies inside {claim}, which cluster {cluster} claims"),
        Relation::Covers => format!(
            "{name} covers {claim}, which cluster {cluster} claims as strongly: which of the two owns \
             the names there cannot be told (make the owner's domain a jumphostDomains entry in Lieutenant)"
        ),
    }
}

/// Why a domain is a provider's domain (`provider`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderWhy {
    /// It anchors clusters of `count` tenants; `some` are the first of them, sorted.
    Tenants { count: usize, some: Vec<String> },
    /// The config file's `provider_domains` names it.
    Configured,
}

impl fmt::Display for ProviderWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderWhy::Configured => f.write_str("named in provider_domains in your config file"),
            ProviderWhy::Tenants { count, some } => {
                let more = if *count > some.len() { ", …" } else { "" };
                write!(f, "it anchors clusters of {count} tenants: {}{more}", some.join(", "))
            }
        }
    }
}

/// A fact value that is not routed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub cluster: String,
    /// The fact that held it, e.g. `openshiftApiURL`.
    pub fact: &'static str,
    /// The fact's value (for a list: the one entry).
    pub value: String,
    pub reason: Refusal,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&refusal_text(&self.cluster, self.fact, &self.value, &self.reason))
    }
}

/// A refusal as `update`, `reload`, `status` and kharond's log all say it: cluster, fact, value
/// (at most [`kharon_common::text::MAX_CELL`] characters of it) and why. Not escaped: each output escapes.
pub fn refusal_text(cluster: &str, fact: &str, value: &str, reason: &dyn fmt::Display) -> String {
    let value = kharon_common::text::cap(value, kharon_common::text::MAX_CELL);
    format!("cluster {cluster}: {fact} {value:?} refused: {reason}")
}

/// Whether a fact may route `name` (normalised: lowercase, no trailing dot), judged by the name
/// alone against the Public Suffix List: never a public suffix; for a dynamic fact also never a
/// registrable domain (the domain a registrant owns, `vshnmanaged.net`, `example.co.uk`) nor a
/// single label. Only rules the list names count: under a top-level domain it does not know, only
/// a single label is refused (see the module doc).
pub fn judge_name(name: &str, dynamic: bool) -> Result<(), Refusal> {
    let suffix = psl::suffix(name.as_bytes()).filter(psl::Suffix::is_known);
    let refuse = |make: fn(String) -> Refusal| Err(make(name.to_owned()));
    if suffix.is_some_and(|s| s.as_bytes() == name.as_bytes()) {
        return refuse(|name| Refusal::PublicSuffix { name });
    }
    if !dynamic {
        return Ok(());
    }
    if !name.contains('.') {
        return refuse(|name| Refusal::TopLevel { name });
    }
    let registrable =
        suffix.is_some() && psl::domain(name.as_bytes()).is_some_and(|d| d.as_bytes() == name.as_bytes());
    if registrable {
        return refuse(|name| Refusal::RegistrableDomain { name });
    }
    Ok(())
}

/// A host kharon itself talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnHost {
    /// Lowercase, without a trailing dot.
    pub host: String,
    /// What it is, for the refusal: "Lieutenant", "Passbolt", "the OIDC issuer".
    pub what: String,
}

/// The hosts kharon itself talks to: Lieutenant (its inventory and logins), Passbolt (emergency
/// credentials) and the OIDC issuer of the Lieutenant login. No dynamic fact may claim a name at
/// or above one of them. Filled from the settings (`lieutenant_url`, `passbolt_url`,
/// `oidc_discovery_url`) and from what `kharonctl update` recorded in the cache (the Lieutenant it
/// fetched from and the issuer of its token).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnHosts {
    hosts: Vec<OwnHost>,
}

impl OwnHosts {
    /// Adds the host of `url`, when it is a URL with a DNS name (an IP literal is never routed).
    pub fn add_url(&mut self, what: &str, url: &str) {
        let Some(url::Host::Domain(host)) =
            url::Url::parse(url).ok().and_then(|u| u.host().map(|h| h.to_owned()))
        else {
            return;
        };
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        if host.is_empty() || self.hosts.iter().any(|h| h.host == host) {
            return;
        }
        self.hosts.push(OwnHost { host, what: what.to_owned() });
    }

    pub fn iter(&self) -> impl Iterator<Item = &OwnHost> {
        self.hosts.iter()
    }

    /// The first host `name` covers (the host is `name` or lies below it), if any.
    pub fn covered_by(&self, name: &str) -> Option<&OwnHost> {
        self.hosts.iter().find(|h| at_or_below(&h.host, name))
    }
}

/// One cluster's routed name, for [`arbitrate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    pub cluster: &'a str,
    /// Normalised: lowercase, no trailing dot.
    pub name: &'a str,
    pub tier: Tier,
}

/// The dynamic claims that another cluster's claim contests (module doc, "Contested names"): each
/// one's index in `claims` and why, in index order. The reason names the contesting claim lowest
/// by (cluster, name), so the answer does not depend on the order of `claims`.
///
/// Every claim walks its own label suffixes once, with one hash lookup each: linear in the number
/// of claims times their labels.
pub fn arbitrate<'a>(claims: &[Claim<'a>]) -> Vec<(usize, Refusal)> {
    let names = Names::of(claims);
    // The walks only read: the claims are split across the cores, each part listing the contests
    // it finds (few: most names are nobody else's), merged below.
    let parts = kharon_common::parallel::chunks(claims, |offset, part| {
        let mut found: Vec<(usize, Contest<'a>)> = Vec::new();
        for (n, other) in part.iter().enumerate() {
            walk(claims, &names, offset + n, other, &mut |refused, by: &Claim<'a>, relation| {
                found.push((refused, (by.cluster, by.name, relation)));
            });
        }
        found
    });
    // For each refused claim: the contesting claim that names it, lowest first.
    let mut found: HashMap<usize, Contest<'a>> = HashMap::new();
    for (refused, key) in parts.into_iter().flatten() {
        let slot = found.entry(refused).or_insert(key);
        if key < *slot {
            *slot = key;
        }
    }
    let mut refused: Vec<(usize, Refusal)> = found
        .into_iter()
        .map(|(i, (cluster, claim, relation))| {
            let reason = Refusal::Contested {
                name: claims[i].name.to_owned(),
                cluster: cluster.to_owned(),
                claim: claim.to_owned(),
                relation,
            };
            (i, reason)
        })
        .collect();
    refused.sort_by_key(|(i, _)| *i);
    refused
}

/// Who contests a claim, and how: the contesting claim's cluster and name.
type Contest<'a> = (&'a str, &'a str, Relation);

/// Claim `j` (`other`) walks its own label suffixes once, with one hash lookup each, and tells
/// `contest` each claim it contests (refused index, contesting claim, relation).
fn walk<'a>(
    claims: &[Claim<'a>],
    names: &Names<'a>,
    j: usize,
    other: &Claim<'a>,
    contest: &mut impl FnMut(usize, &Claim<'a>, Relation),
) {
    for (depth, parent) in label_suffixes(other.name).enumerate() {
        let head = names.head(parent);
        for i in names.from(head) {
            let dynamic = &claims[i];
            if i == j || dynamic.tier.strength() == 0 || dynamic.cluster == other.cluster {
                continue;
            }
            // `dynamic` is `other`'s name: it loses when `other` is as strong. Or it lies above
            // `other`: that alone is nesting, which the longest suffix settles, unless the two
            // are equally strong and dynamic, when `other` loses as lying inside (below) and
            // the one above would take every name of it (module doc, "Contested names").
            if depth == 0 && other.tier.strength() <= dynamic.tier.strength() {
                contest(i, other, Relation::Same);
            } else if depth > 0 && other.tier.strength() == dynamic.tier.strength() {
                contest(i, other, Relation::Covers);
            }
        }
        // And `other` lies inside a name of its own parent: seen from `other` when it is dynamic.
        if depth == 0 || other.tier.strength() == 0 {
            continue;
        }
        for i in names.from(head) {
            let above = &claims[i];
            if above.cluster != other.cluster && above.tier.strength() <= other.tier.strength() {
                contest(j, above, Relation::Inside);
            }
        }
    }
}

/// The claims by name, for [`arbitrate`]'s walks: the first claim of each name, the next claim of
/// the same name after each claim (a chain through one array: no list per name), and which name
/// lengths occur at all, so that most label suffixes of a name are skipped without hashing them.
/// A 50,000-cluster inventory has a quarter of a million names.
struct Names<'a> {
    first: HashMap<&'a str, u32, foldhash::fast::RandomState>,
    next: Vec<u32>,
    lengths: Lengths,
}

/// Which name lengths occur in a set of names (one bit per length up to 255 bytes, the longest a
/// DNS name may be): most label suffixes of a name asked about can be skipped without hashing
/// them. Used by [`arbitrate`] and by the routing table's lookups.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Lengths([u64; 4]);

impl Lengths {
    pub(crate) fn insert(&mut self, len: usize) {
        if let Some(word) = self.0.get_mut(len / 64) {
            *word |= 1 << (len % 64);
        }
    }

    pub(crate) fn contains(&self, len: usize) -> bool {
        self.0.get(len / 64).is_some_and(|word| word & (1 << (len % 64)) != 0)
    }
}

impl<'a> Names<'a> {
    const END: u32 = u32::MAX;

    fn of(claims: &[Claim<'a>]) -> Self {
        let mut names = Names {
            first: HashMap::with_capacity_and_hasher(claims.len(), Default::default()),
            next: vec![Self::END; claims.len()],
            lengths: Lengths::default(),
        };
        // Backwards, so that each chain runs in index order.
        for (i, claim) in claims.iter().enumerate().rev() {
            // More claims than u32 can count cannot come out of one JSON document we can hold.
            let i = u32::try_from(i).unwrap_or(Self::END - 1);
            names.lengths.insert(claim.name.len());
            if let Some(head) = names.first.insert(claim.name, i) {
                names.next[i as usize] = head;
            }
        }
        names
    }

    /// The first claim on `name` ([`Names::END`] for none): one hash, for both of a walk's looks.
    fn head(&self, name: &str) -> u32 {
        if !self.lengths.contains(name.len()) {
            return Self::END;
        }
        self.first.get(name).copied().unwrap_or(Self::END)
    }

    /// The indices of the claims from `head` on (all the claims on one name).
    fn from(&self, head: u32) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(Some(head), |&i| self.next.get(i as usize).copied())
            .take_while(|&i| i != Self::END)
            .map(|i| i as usize)
    }
}

/// `a.b.c`, `b.c`, `c`: a name's label suffixes, longest first.
pub(crate) fn label_suffixes(name: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(name), |s| s.find('.').map(|dot| &s[dot + 1..]))
}

/// Whether `name` is `suffix` or lies below it, on a label boundary.
pub fn at_or_below(name: &str, suffix: &str) -> bool {
    name.strip_suffix(suffix).is_some_and(|rest| rest.is_empty() || rest.ends_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_suffixes_registrable_domains_and_top_levels() {
        for name in ["ch", "co.uk", "net", "github.io", "s3.amazonaws.com"] {
            assert!(matches!(judge_name(name, false), Err(Refusal::PublicSuffix { .. })), "{name}");
            assert!(matches!(judge_name(name, true), Err(Refusal::PublicSuffix { .. })), "{name}");
        }
        for name in ["vshnmanaged.net", "example.co.uk", "bettersmarter.ch", "someone.github.io"] {
            assert_eq!(judge_name(name, false), Ok(()), "{name}: static may");
            assert!(matches!(judge_name(name, true), Err(Refusal::RegistrableDomain { .. })), "{name}");
        }
        for name in ["example", "internal", "corp"] {
            assert_eq!(judge_name(name, false), Ok(()), "{name}: unknown to the list, static may");
            assert!(matches!(judge_name(name, true), Err(Refusal::TopLevel { .. })), "{name}");
        }
        for name in [
            "c-x.vshnmanaged.net",
            "apps.c-x.vshnmanaged.net",
            "ocp.customer.co.uk",
            "a.example",
            "x.internal",
        ] {
            assert_eq!(judge_name(name, true), Ok(()), "{name}");
            assert_eq!(judge_name(name, false), Ok(()), "{name}");
        }
        assert_eq!(
            judge_name("co.uk", true).unwrap_err().to_string(),
            "co.uk is a public suffix (Public Suffix List): it would route every domain under it"
        );
    }

    #[test]
    fn own_hosts_are_protected_from_names_that_cover_them() {
        let mut own = OwnHosts::default();
        own.add_url("Lieutenant", "https://API.syn.vshn.net./");
        own.add_url("Passbolt", "https://cloud.passbolt.com/vshn");
        own.add_url("the OIDC issuer", "http://127.0.0.1:4000/realms/x");
        own.add_url("Lieutenant", "not a url");
        let hosts: Vec<&str> = own.iter().map(|h| h.host.as_str()).collect();
        assert_eq!(hosts, ["api.syn.vshn.net", "cloud.passbolt.com"]);
        assert_eq!(own.covered_by("syn.vshn.net").map(|h| h.what.as_str()), Some("Lieutenant"));
        assert_eq!(own.covered_by("api.syn.vshn.net").map(|h| h.what.as_str()), Some("Lieutenant"));
        assert_eq!(own.covered_by("x.api.syn.vshn.net"), None);
        assert_eq!(own.covered_by("yn.vshn.net"), None, "labels, not characters");
    }

    fn claim<'a>(cluster: &'a str, name: &'a str, tier: Tier) -> Claim<'a> {
        Claim { cluster, name, tier }
    }

    fn judged(claims: &[Claim<'_>]) -> Vec<(usize, String)> {
        arbitrate(claims).into_iter().map(|(i, r)| (i, r.to_string())).collect()
    }

    #[test]
    fn a_loose_name_inside_another_clusters_domain_loses_and_the_owner_keeps_it() {
        let claims = [
            claim("c-victim", "c-victim.example", Tier::Anchored),
            claim("c-victim", "api.c-victim.example", Tier::Anchored),
            claim("c-x", "c-x.example", Tier::Anchored),
            claim("c-x", "api.c-victim.example", Tier::Loose),
            claim("c-x", "api.c-x.example", Tier::Anchored),
        ];
        assert_eq!(
            judged(&claims),
            [(3, "cluster c-victim claims api.c-victim.example too".to_owned())],
            "only the attacker's out-of-domain name goes"
        );
    }

    #[test]
    fn anchored_names_of_two_clusters_that_overlap_both_lose_and_static_names_always_win() {
        let claims = [
            claim("c-a", "shared.example", Tier::Anchored),
            claim("c-b", "x.shared.example", Tier::Anchored),
            claim("c-s", "static.example", Tier::Static),
            claim("c-d", "static.example", Tier::Anchored),
            claim("c-e", "deep.static.example", Tier::Loose),
            claim("c-f", "example", Tier::Static),
            claim("c-g", "other.example", Tier::Static),
        ];
        assert_eq!(
            judged(&claims),
            [
                (
                    0,
                    "shared.example covers x.shared.example, which cluster c-b claims as strongly: which \
                     of the two owns the names there cannot be told (make the owner's domain a \
                     jumphostDomains entry in Lieutenant)"
                        .to_owned()
                ),
                (1, "x.shared.example lies inside shared.example, which cluster c-a claims".to_owned()),
                (3, "static.example lies inside example, which cluster c-f claims".to_owned()),
                (4, "deep.static.example lies inside static.example, which cluster c-d claims".to_owned()),
            ]
        );
        // Static claims of different clusters may nest: that is the routing table's business
        // (longest suffix, conflicts), not a refusal.
        let claims =
            [claim("c-1", "example.com", Tier::Static), claim("c-2", "api.example.com", Tier::Static)];
        assert!(arbitrate(&claims).is_empty());
        // One cluster's own names never contest each other, nor two copies of one cluster.
        let claims = [
            claim("c-1", "c-1.example", Tier::Anchored),
            claim("c-1", "apps.c-1.example", Tier::Loose),
            claim("c-1", "c-1.example", Tier::Anchored),
        ];
        assert!(arbitrate(&claims).is_empty());
    }

    #[test]
    fn the_verdict_does_not_depend_on_the_order() {
        let claims = [
            claim("c-b", "a.example", Tier::Loose),
            claim("c-c", "a.example", Tier::Anchored),
            claim("c-a", "x.a.example", Tier::Anchored),
        ];
        let forward = judged(&claims);
        let mut reversed = claims;
        reversed.reverse();
        let mut backward: Vec<(usize, String)> =
            judged(&reversed).into_iter().map(|(i, r)| (claims.len() - 1 - i, r)).collect();
        backward.sort();
        assert_eq!(forward, backward);
        assert_eq!(forward[0], (0, "cluster c-c claims a.example too".to_owned()));
    }

    #[test]
    fn a_name_that_only_contains_a_stronger_one_keeps_routing_around_it() {
        // c-outer's dynamic base domain holds c-inner's static name, a loose name holds
        // another cluster's anchored one; nothing is refused, the longest suffix decides.
        let claims = [
            claim("c-outer", "c-outer.example.net", Tier::Anchored),
            claim("c-inner", "inner.c-outer.example.net", Tier::Static),
            claim("c-apps", "apps.example.org", Tier::Loose),
            claim("c-deep", "c-deep.apps.example.org", Tier::Anchored),
        ];
        assert!(arbitrate(&claims).is_empty(), "{:?}", judged(&claims));
        // The other way round, the inner name lies inside a stronger claim and loses.
        let claims = [
            claim("c-outer", "outer.example.net", Tier::Static),
            claim("c-inner", "inner.outer.example.net", Tier::Anchored),
            claim("c-base", "c-base.example.org", Tier::Anchored),
            claim("c-api", "api.c-base.example.org", Tier::Loose),
        ];
        assert_eq!(
            judged(&claims),
            [
                (
                    1,
                    "inner.outer.example.net lies inside outer.example.net, which cluster c-outer claims"
                        .to_owned()
                ),
                (
                    3,
                    "api.c-base.example.org lies inside c-base.example.org, which cluster c-base claims"
                        .to_owned()
                ),
            ]
        );
    }

    #[test]
    fn two_equally_strong_dynamic_names_one_inside_the_other_both_lose() {
        // Keeping the outer one would hand it every name of the inner cluster, keeping the inner
        // one its pick of the outer cluster's names; which is the owner cannot be told.
        let claims =
            [claim("c-a", "zone.example", Tier::Anchored), claim("c-b", "c-b.zone.example", Tier::Anchored)];
        assert_eq!(
            judged(&claims),
            [
                (
                    0,
                    "zone.example covers c-b.zone.example, which cluster c-b claims as strongly: which of \
                     the two owns the names there cannot be told (make the owner's domain a \
                     jumphostDomains entry in Lieutenant)"
                        .to_owned()
                ),
                (1, "c-b.zone.example lies inside zone.example, which cluster c-a claims".to_owned()),
            ]
        );
    }
}
