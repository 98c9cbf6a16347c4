//! The routing table: compiled once from the inventory, consulted on every SOCKS connection.
//!
//! This module owns the rules that turn a target host name into a [`Route`]:
//! - suffixes match whole DNS labels, ignoring case and one trailing dot;
//! - IP literals always go direct ([`Rule::IpLiteral`]), names that are not valid go direct too
//!   ([`Rule::Invalid`]);
//! - an exclusion beats an inclusion *of the same cluster*: a host under one of cluster C's
//!   `jumphostSkipDomains` is never routed through C, yet another cluster may still route it;
//! - among the clusters that still claim the host, the longest matching include suffix decides, and
//!   on the same suffix the lowest cluster id wins. Two clusters claiming one suffix with different
//!   jump hosts is a [`Conflict`], always reported, never silent.
//!
//! What a suffix is, and which facts produce one, is `inventory`'s job ([`Cluster::routing_facts`]);
//! both sides use `inventory`'s name rules so hosts and suffixes agree. Which names a cluster may
//! claim at all is [`trust`]'s: before any of this, a cluster's dynamic names that cover a host
//! kharon itself talks to ([`OwnHosts`]), lie outside its anchors (`anchor`), carry another
//! cluster's id (`owner`), lie in a provider's domain without being the cluster's own
//! (`provider`, `judge`), or that another cluster's names contest ([`trust::arbitrate`]), are
//! refused and listed in [`CompileReport::refused`]. This module is pure and synchronous: it knows
//! nothing of sockets, tokio, SSH or files.
//!
//! # How a lookup stays fast
//! `compile` drops every include of a cluster that lies at or below one of that cluster's own
//! exclusions (no host could ever use it). After that, an exclusion of C that covers a host matched by
//! a live include of C is always *longer* than that include. So one walk over the host's label
//! suffixes, longest first, has seen every relevant exclusion of C before it meets C's include, and
//! can decide in a single pass: one hash probe per label (skipped when no suffix has that length),
//! no allocation, no copying unless the host has upper-case letters.
//!
//! # Concurrency
//! A `RoutingTable` is immutable after `compile`, hence `Send + Sync`; the daemon swaps whole tables
//! on reload instead of editing one in place.

use crate::anchor::{AnchorSets, Anchors, ClusterAnchors};
use crate::inventory::{self, Cluster, MAX_NAME_LEN, SuffixError};
use crate::owner::{self, Owners};
use crate::provider::ProviderDomains;
use crate::trust::{self, OwnHosts, Refusal, Refused, Tier};
use gathered::Gathered;
use std::collections::HashMap;
use std::collections::hash_map::Entry::{Occupied, Vacant};
use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

mod gathered;
mod judge;
#[cfg(test)]
mod owner_tests;
#[cfg(test)]
mod tests;

/// How a target is reached: directly, or through a jump host's chain (its ssh_config alias). What
/// [`RoutingTable::lookup`] answers, and what a connection keeps: the alias is the table's own,
/// shared, so a route outlives the table it was read from without a copy. Which cluster and
/// suffix decided is [`RoutingTable::explain`]'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Direct,
    Jumphost(Arc<str>),
}

impl Route {
    pub fn via(&self) -> Via {
        match self {
            Route::Direct => Via::Direct,
            Route::Jumphost(_) => Via::Jumphost,
        }
    }

    /// The ssh_config alias to connect through, if the route uses one.
    pub fn jumphost(&self) -> Option<&str> {
        match self {
            Route::Direct => None,
            Route::Jumphost(jumphost) => Some(jumphost),
        }
    }

    /// The route in one word, as the control API and the logs name it: "direct", or the jump host
    /// alias (the `path` of `Test` and `FetchObject` answers, a `Status` route row).
    pub fn label(&self) -> &str {
        self.jumphost().unwrap_or(Via::Direct.as_str())
    }
}

/// How messages name the route: "via jump host J" or "directly".
impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Route::Direct => f.write_str("directly"),
            Route::Jumphost(jumphost) => write!(f, "via jump host {jumphost}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Direct,
    Jumphost,
}

impl Via {
    /// The word used for this path everywhere: log field `via`, JSON, tables.
    pub fn as_str(&self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Jumphost => "jumphost",
        }
    }
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    IpLiteral,
    NoMatch,
    Include,
    Exclude,
    Invalid,
}

impl Rule {
    pub fn as_str(&self) -> &'static str {
        match self {
            Rule::IpLiteral => "ip-literal",
            Rule::NoMatch => "no-match",
            Rule::Include => "include",
            Rule::Exclude => "exclude",
            Rule::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The host as the router saw it: lowercase, no trailing dot (an IP in its canonical form; an
    /// invalid name exactly as given).
    pub host: String,
    pub via: Via,
    /// Set only when `via` is `Jumphost`.
    pub jumphost: Option<String>,
    /// The cluster that routes the host, or for [`Rule::Exclude`] the one whose exclusion sent it direct.
    pub cluster: Option<String>,
    /// The include suffix that matched, or for [`Rule::Exclude`] the exclude suffix.
    pub suffix: Option<String>,
    pub rule: Rule,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub cluster: String,
    pub jumphost: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub suffix: String,
    pub winner: Claim,
    /// The claims on the same suffix whose jump host differs from the winner's, in cluster id order.
    pub shadowed: Vec<Claim>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompileReport {
    /// Every cluster in the inventory, ignored ones included.
    pub clusters_total: usize,
    /// Clusters dropped by `kharonIgnore`.
    pub clusters_ignored: usize,
    /// Clusters with a jumphost and at least one include suffix left after their own exclusions.
    pub clusters_routed: usize,
    /// Distinct include suffixes in the table (the length of [`RoutingTable::routes`]).
    pub include_suffixes: usize,
    /// Distinct exclude suffixes in the table (those that can affect a route).
    pub exclude_suffixes: usize,
    /// Sorted by suffix.
    pub conflicts: Vec<Conflict>,
    /// Sentences for an operator, in cluster id order: bad fact values (a refused `jumphost`
    /// among them), clusters that route nothing, exclusions without effect, duplicate cluster ids.
    pub warnings: Vec<String>,
    /// Names the trust model refuses ([`trust`]), in cluster id order: the cluster, the fact, its
    /// value and why.
    pub refused: Vec<Refused>,
    /// The provider's domains of this inventory and the settings (`provider`).
    pub providers: ProviderDomains,
}

/// Index into `RoutingTable::members`. `u32` keeps the per-suffix lists small and cache friendly.
type MemberIdx = u32;

/// A cluster that routes something.
#[derive(Debug)]
struct Member {
    id: Box<str>,
    /// Shared by every member behind the same jump host, and by the routes a lookup answers.
    jumphost: Arc<str>,
}

/// What the table knows about one suffix: the members that include it, then those that exclude
/// it, each list in ascending index order, which is cluster id order, so the first claimant not
/// excluded is the winner. One boxed slice and a split point rather than two `Vec`s: a 50,000-
/// cluster inventory has ~230,000 suffixes, and the map's buckets are most of the table's memory
/// (40 bytes each with the key instead of 64).
#[derive(Debug)]
struct Entry {
    members: Box<[MemberIdx]>,
    excludes_from: u32,
}

impl Entry {
    /// Adds a member with a higher index than all so far (a suffix named by several clusters).
    fn add(&mut self, member: MemberIdx, excluded: bool) {
        let mut members = std::mem::take(&mut self.members).into_vec();
        if excluded {
            members.push(member);
        } else {
            members.insert(self.excludes_from as usize, member);
            self.excludes_from += 1;
        }
        self.members = members.into_boxed_slice();
    }

    fn include(&self) -> &[MemberIdx] {
        self.members.get(..self.excludes_from as usize).unwrap_or(&[])
    }

    fn exclude(&self) -> &[MemberIdx] {
        self.members.get(self.excludes_from as usize..).unwrap_or(&[])
    }
}

#[derive(Debug, Default)]
pub struct RoutingTable {
    /// Routed clusters sorted by (id, jumphost); the index is the tie-break order.
    members: Vec<Member>,
    /// The members' distinct jump hosts, sorted: asked at every start, reload, `status` and
    /// connectivity test, and made once.
    jumphosts: Vec<String>,
    /// Keyed by normalised suffix; the key is what `Route` borrows. foldhash: several lookups per
    /// connection, and SipHash's protection against chosen collisions is not needed for keys
    /// that come from the inventory, seeded per process as they are here.
    suffixes: HashMap<Box<str>, Entry, foldhash::fast::RandomState>,
    /// Bit n set when some suffix is n bytes long: most label suffixes of a host can be skipped
    /// without hashing them.
    lengths: trust::Lengths,
    report: CompileReport,
}

/// The outcome of a lookup, before it is turned into a `Route` or an `Explanation`.
enum Decision<'t> {
    NoMatch,
    Routed {
        member: MemberIdx,
        suffix: &'t str,
        skipped: Option<MemberIdx>,
    },
    /// Every claimant excluded the host; `member` is the first that would have won.
    Excluded {
        member: MemberIdx,
    },
}

/// A host name that passed validation, or why not.
enum Host<'b> {
    Ip(IpAddr),
    Invalid(SuffixError),
    Name(&'b str),
}

/// Small stack of exclusion lists seen on the walk. A host rarely sits under more than one or two
/// exclusions; beyond `INLINE` the rest spills to the heap rather than failing.
struct Seen<'t> {
    inline: [&'t [MemberIdx]; Seen::INLINE],
    len: usize,
    spill: Vec<&'t [MemberIdx]>,
}

impl<'t> Seen<'t> {
    const INLINE: usize = 8;

    fn new() -> Self {
        Seen { inline: [&[]; Seen::INLINE], len: 0, spill: Vec::new() }
    }

    fn push(&mut self, list: &'t [MemberIdx]) {
        if self.len < Seen::INLINE {
            self.inline[self.len] = list;
            self.len += 1;
        } else {
            self.spill.push(list);
        }
    }

    fn contains(&self, member: MemberIdx) -> bool {
        self.inline[..self.len].iter().chain(&self.spill).any(|list| list.binary_search(&member).is_ok())
    }
}

/// One routed cluster while compiling.
struct Candidate<'c> {
    id: &'c str,
    jumphost: &'c str,
    include: Vec<String>,
    exclude: Vec<String>,
}

impl RoutingTable {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Builds the table, with no host of kharon's own to protect and no anchor but each
    /// cluster's static names: [`RoutingTable::compile_with`].
    pub fn compile(clusters: &[Cluster]) -> Self {
        Self::compile_with(clusters, &OwnHosts::default(), &Anchors::default())
    }

    /// Builds the table. Never fails: a bad fact becomes a warning in [`RoutingTable::report`], a
    /// name the trust model refuses a [`Refused`] there, and the rest of the inventory still
    /// routes. No dynamic name may cover a host in `own`, nor lie outside its cluster's `anchors`.
    /// The result does not depend on the order of `clusters`.
    pub fn compile_with(clusters: &[Cluster], own: &OwnHosts, anchors: &Anchors) -> Self {
        let mut report = CompileReport { clusters_total: clusters.len(), ..CompileReport::default() };

        // Sorted first so that warnings, tie-breaks and member indices follow cluster id order.
        let mut sorted: Vec<&Cluster> = clusters.iter().collect();
        // The jump host is a fact looked up per comparison: only asked on a tie of ids.
        sorted.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| a.jumphost().cmp(&b.jumphost())));
        let mut duplicates: Vec<&str> = sorted
            .windows(2)
            .filter(|pair| pair[0].id == pair[1].id)
            .map(|pair| pair[0].id.as_str())
            .collect();
        duplicates.dedup();
        for id in duplicates {
            report.warnings.push(format!(
                "cluster {id} appears more than once in the inventory; every copy is used, lowest jumphost first"
            ));
        }

        let candidates = judged(&sorted, own, anchors, &mut report);
        let mut table = RoutingTable::default();
        // Sized once for every name (fewer are distinct; the excess is given back below, when it
        // is a whole size class): growing a map of a quarter of a million names rehashes it
        // again and again.
        table.suffixes.reserve(candidates.iter().map(|c| c.include.len() + c.exclude.len()).sum());
        let mut jumphosts: HashMap<&str, Arc<str>> = HashMap::new();
        for (idx, candidate) in candidates.into_iter().enumerate() {
            // More than u32::MAX routed clusters cannot come out of one JSON document we can hold.
            let idx = MemberIdx::try_from(idx).unwrap_or(MemberIdx::MAX);
            let named = candidate.include.into_iter().map(|suffix| (suffix, false));
            for (suffix, excluded) in named.chain(candidate.exclude.into_iter().map(|suffix| (suffix, true)))
            {
                table.lengths.insert(suffix.len());
                match table.suffixes.entry(suffix.into_boxed_str()) {
                    Vacant(slot) => {
                        slot.insert(Entry { members: Box::new([idx]), excludes_from: u32::from(!excluded) });
                    }
                    // Members come in ascending order; an include goes before the excludes.
                    Occupied(mut slot) => slot.get_mut().add(idx, excluded),
                }
            }
            let jumphost = jumphosts.entry(candidate.jumphost).or_insert_with(|| candidate.jumphost.into());
            table.members.push(Member { id: candidate.id.into(), jumphost: Arc::clone(jumphost) });
        }
        table.suffixes.shrink_to_fit();

        for (suffix, entry) in &table.suffixes {
            let Some((&first, rest)) = entry.include().split_first() else { continue };
            let winner = &table.members[first as usize];
            let shadowed: Vec<Claim> = rest
                .iter()
                .map(|&m| &table.members[m as usize])
                .filter(|m| m.jumphost != winner.jumphost)
                .map(Member::claim)
                .collect();
            if !shadowed.is_empty() {
                report.conflicts.push(Conflict {
                    suffix: suffix.to_string(),
                    winner: winner.claim(),
                    shadowed,
                });
            }
        }
        report.conflicts.sort_by(|a, b| a.suffix.cmp(&b.suffix));
        report.clusters_routed = table.members.len();
        table.jumphosts = distinct_sorted(table.members.iter().map(|m| &*m.jumphost));
        report.include_suffixes = table.suffixes.values().filter(|e| !e.include().is_empty()).count();
        report.exclude_suffixes = table.suffixes.values().filter(|e| !e.exclude().is_empty()).count();
        table.report = report;
        table
    }

    /// The route for `host` (a SOCKS target name). This is the per-connection hot path.
    pub fn lookup(&self, host: &str) -> Route {
        let mut buf = [0u8; MAX_NAME_LEN];
        let Host::Name(name) = classify(host, &mut buf) else { return Route::Direct };
        match self.decide(name) {
            Decision::Routed { member, .. } => {
                Route::Jumphost(Arc::clone(&self.members[member as usize].jumphost))
            }
            _ => Route::Direct,
        }
    }

    /// Walks the label suffixes of a valid, lowercase `name`, longest first (see the module docs).
    fn decide(&self, name: &str) -> Decision<'_> {
        let mut seen = Seen::new();
        let mut skipped = None;
        let mut start = 0;
        loop {
            let candidate = &name[start..];
            if self.lengths.contains(candidate.len())
                && let Some((suffix, entry)) = self.suffixes.get_key_value(candidate)
            {
                if !entry.exclude().is_empty() {
                    seen.push(entry.exclude());
                }
                for &member in entry.include() {
                    if !seen.contains(member) {
                        return Decision::Routed { member, suffix, skipped };
                    }
                    skipped.get_or_insert(member);
                }
            }
            match candidate.find('.') {
                Some(dot) => start += dot + 1,
                None => break,
            }
        }
        match skipped {
            Some(member) => Decision::Excluded { member },
            None => Decision::NoMatch,
        }
    }

    /// Which rule decides `host`, and why, for `kharonctl route` and the control API.
    pub fn explain(&self, host: &str) -> Explanation {
        let mut buf = [0u8; MAX_NAME_LEN];
        let direct = |host: String, rule, reason| Explanation {
            host,
            via: Via::Direct,
            jumphost: None,
            cluster: None,
            suffix: None,
            rule,
            reason,
        };
        let name = match classify(host, &mut buf) {
            Host::Ip(ip) => {
                return direct(ip.to_string(), Rule::IpLiteral, "IP literals are never routed".into());
            }
            Host::Invalid(err) => {
                return direct(host.to_owned(), Rule::Invalid, format!("not a valid host name: {err}"));
            }
            Host::Name(name) => name,
        };
        match self.decide(name) {
            Decision::NoMatch => direct(name.to_owned(), Rule::NoMatch, "no cluster claims this host".into()),
            Decision::Routed { member, suffix, skipped } => {
                let m = &self.members[member as usize];
                let mut reason = format!(
                    "{name} matches include suffix {suffix} of cluster {} (jumphost {})",
                    m.id, m.jumphost
                );
                if let Some(skipped) = skipped {
                    let s = &self.members[skipped as usize];
                    if let Some(exclude) = self.exclusion_of(skipped, name) {
                        reason.push_str(&format!(
                            "; cluster {} also claims it but excludes it by jumphostSkipDomains {exclude}",
                            s.id
                        ));
                    }
                }
                Explanation {
                    host: name.to_owned(),
                    via: Via::Jumphost,
                    jumphost: Some(m.jumphost.to_string()),
                    cluster: Some(m.id.to_string()),
                    suffix: Some(suffix.to_owned()),
                    rule: Rule::Include,
                    reason,
                }
            }
            Decision::Excluded { member } => {
                let m = &self.members[member as usize];
                let exclude = self.exclusion_of(member, name).unwrap_or_default();
                Explanation {
                    host: name.to_owned(),
                    via: Via::Direct,
                    jumphost: None,
                    cluster: Some(m.id.to_string()),
                    suffix: Some(exclude.to_owned()),
                    rule: Rule::Exclude,
                    reason: format!("excluded by jumphostSkipDomains {exclude} of cluster {}", m.id),
                }
            }
        }
    }

    /// The longest exclude suffix of `member` that covers `name`.
    fn exclusion_of(&self, member: MemberIdx, name: &str) -> Option<&str> {
        trust::label_suffixes(name).find_map(|candidate| {
            let (suffix, entry) = self.suffixes.get_key_value(candidate)?;
            entry.exclude().binary_search(&member).is_ok().then_some(&**suffix)
        })
    }

    pub fn report(&self) -> &CompileReport {
        &self.report
    }

    /// Every (suffix, jumphost, cluster) the table routes, sorted by suffix.
    ///
    /// Only winners appear: on a contested suffix the lowest cluster id. A listed suffix may still
    /// have exclusions below it; see [`RoutingTable::excludes`].
    pub fn routes(&self) -> Vec<(String, String, String)> {
        let mut routes: Vec<(String, String, String)> = self
            .suffixes
            .iter()
            .filter_map(|(suffix, entry)| {
                let m = &self.members[*entry.include().first()? as usize];
                Some((suffix.to_string(), m.jumphost.to_string(), m.id.to_string()))
            })
            .collect();
        routes.sort();
        routes
    }

    /// Every (exclude suffix, cluster) that can send a host direct, sorted.
    pub fn excludes(&self) -> Vec<(String, String)> {
        let mut excludes: Vec<(String, String)> = self
            .suffixes
            .iter()
            .flat_map(|(suffix, entry)| {
                entry.exclude().iter().map(|&m| (suffix.to_string(), self.members[m as usize].id.to_string()))
            })
            .collect();
        excludes.sort();
        excludes
    }

    /// Every suffix the table knows (routed, contested or only excluded), in no order, borrowed:
    /// the PAC lists each with its own lookup, and for a large inventory owned copies of
    /// [`RoutingTable::routes`] would cost more than the table.
    pub fn suffixes(&self) -> impl Iterator<Item = &str> {
        self.suffixes.keys().map(|k| &**k)
    }

    /// Distinct jump hosts, sorted.
    pub fn jumphosts(&self) -> &[String] {
        &self.jumphosts
    }

    /// The clusters that route something, with their jump host, sorted by cluster id.
    pub fn clusters(&self) -> Vec<Claim> {
        self.members.iter().map(Member::claim).collect()
    }
}

/// Each of `names` once, sorted. Few are distinct among many (50,000 clusters, a few hundred jump
/// hosts): hashed first, so only the distinct ones are sorted and copied (sorting all of them
/// takes a tenth of a second of a start: `bench/inventory.sh`).
pub fn distinct_sorted<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let distinct: std::collections::HashSet<&str, foldhash::fast::RandomState> = names.into_iter().collect();
    let mut sorted: Vec<String> = distinct.into_iter().map(str::to_owned).collect();
    sorted.sort_unstable();
    sorted
}

impl Member {
    fn claim(&self) -> Claim {
        Claim { cluster: self.id.to_string(), jumphost: self.jumphost.to_string() }
    }
}

/// Validates and lowercases a target host; IP literals are recognised before name rules so that
/// `::1` is not reported as a bad character.
fn classify<'b>(host: &'b str, buf: &'b mut [u8; MAX_NAME_LEN]) -> Host<'b> {
    if let Some(inner) = host.strip_prefix('[') {
        return match inner.strip_suffix(']').and_then(|v| v.parse::<Ipv6Addr>().ok()) {
            Some(ip) => Host::Ip(IpAddr::V6(ip)),
            None => Host::Invalid(SuffixError::BadChar('[')),
        };
    }
    if host.contains(':') {
        return match host.parse::<Ipv6Addr>() {
            Ok(ip) => Host::Ip(IpAddr::V6(ip)),
            Err(_) => Host::Invalid(SuffixError::BadChar(':')),
        };
    }
    match inventory::lower_name(host, buf) {
        Err(err) => Host::Invalid(err),
        Ok(name) if inventory::ends_in_ipv4(name) => match name.parse() {
            Ok(ip) => Host::Ip(IpAddr::V4(ip)),
            Err(_) => Host::Name(name),
        },
        Ok(name) => Host::Name(name),
    }
}

/// The routing view of every cluster, its names judged by the trust model (`trust`): first what
/// each cluster says on its own, then against every cluster's id and anchors and the provider's
/// domains (`judge`), then the names of all clusters together ([`trust::arbitrate`]). Warnings and
/// refusals go to `report`, in cluster order.
fn judged<'c>(
    sorted: &[&'c Cluster],
    own: &OwnHosts,
    anchors: &'c Anchors,
    report: &mut CompileReport,
) -> Vec<Candidate<'c>> {
    // Warnings and refusals are kept per cluster and told in cluster order at the end, since
    // some come only once every cluster's names are known. What a cluster says on its own is
    // most of the work, and independent of every other cluster: it is split across the cores,
    // each part keeping the distinct lists of anchors it met.
    let parts = kharon_common::parallel::chunks(sorted, |_, part| {
        let mut sets = AnchorSets::default();
        let alone: Vec<Alone<'c>> =
            part.iter().map(|cluster| alone(cluster, own, anchors, &mut sets)).collect();
        (alone, sets)
    });
    let mut sets = AnchorSets::default();
    let mut told: Vec<(Vec<String>, Vec<Refused>)> = Vec::with_capacity(sorted.len());
    let mut gathered: Vec<(usize, Gathered<'_>)> = Vec::new();
    // Each cluster's index in `sets`, unless it is ignored.
    let mut anchored: Vec<Option<u32>> = Vec::with_capacity(sorted.len());
    for (alone, part_sets) in parts {
        let global = sets.merge(part_sets);
        for Alone { ignored, said, anchors: set, gathered: g } in alone {
            report.clusters_ignored += usize::from(ignored);
            if let Some(g) = g {
                gathered.push((told.len(), g));
            }
            anchored.push(set.and_then(|at| global.get(at as usize).copied()));
            told.push(said);
        }
    }
    let of_cluster = sorted.iter().zip(&anchored).filter_map(|(c, set)| Some((c.tenant.as_str(), (*set)?)));
    report.providers =
        ProviderDomains::derive(of_cluster.map(|(tenant, set)| (tenant, sets.get(set))), anchors);
    let owners = Owners::new(sets, anchors, sorted, &anchored);
    judge::judge(&mut gathered, &owners, &report.providers, anchors, &mut told);
    drop(owners);
    for (_, g) in &mut gathered {
        g.split();
    }
    contest(&mut gathered, &mut told);
    let mut candidates = Vec::new();
    for (at, g) in gathered {
        let (warnings, refused) = &mut told[at];
        if let Some(candidate) = candidate(g, !refused.is_empty(), warnings) {
            candidates.push(candidate);
        }
    }
    for (warnings, refused) in told {
        report.warnings.extend(warnings);
        report.refused.extend(refused);
    }
    candidates
}

/// What one cluster's own facts say, before the names of all clusters are judged together.
struct Alone<'c> {
    ignored: bool,
    /// Its warnings and refusals so far.
    said: (Vec<String>, Vec<Refused>),
    /// Its own anchors, as an index into the part's [`AnchorSets`], unless it is ignored: every
    /// cluster's id may own names (`owner`), and every cluster's tenant tells a provider's domain.
    anchors: Option<u32>,
    gathered: Option<Gathered<'c>>,
}

fn alone<'c>(cluster: &'c Cluster, own: &OwnHosts, anchors: &Anchors, sets: &mut AnchorSets) -> Alone<'c> {
    let mut said = (Vec::new(), Vec::new());
    if cluster.is_ignored() {
        return Alone { ignored: true, said, anchors: None, gathered: None };
    }
    let (anchored, gathered) = match cluster.jumphost_fact() {
        Ok(Some(jumphost)) => {
            let facts = cluster.routing_facts();
            let anchored = anchors.of(jumphost, &facts.statics());
            let gathered = gather(cluster, jumphost, facts, &anchored, own, &mut said);
            (anchored, gathered)
        }
        Ok(None) => (anchors.of("", &[]), None),
        Err(invalid) => {
            said.0.push(format!("cluster {}: {invalid}; the cluster routes nothing", cluster.id));
            (anchors.of("", &[]), None)
        }
    };
    Alone { ignored: false, said, anchors: Some(sets.intern(anchored.own())), gathered }
}

/// One cluster with a jump host, as far as its own `facts`, `own` and `anchored` (its anchors)
/// decide: its valid names minus those the trust model refuses by themselves, because they cover
/// a host of kharon's own or because they lie outside the cluster's anchors; a dynamic name that
/// carries the cluster's own id is [`Tier::Owned`] (`owner`). `None` (with a warning) when it asks
/// to route nothing at all.
fn gather<'c>(
    cluster: &'c Cluster,
    jumphost: &'c str,
    facts: inventory::RoutingFacts,
    anchored: &ClusterAnchors<'_>,
    own: &OwnHosts,
    (warnings, refused): &mut (Vec<String>, Vec<Refused>),
) -> Option<Gathered<'c>> {
    let id = cluster.id.as_str();
    for invalid in &facts.invalid {
        warnings.push(format!("cluster {id}: {invalid}; it is ignored"));
    }
    let asked_nothing = facts.include.is_empty() && facts.refused.is_empty();
    refused.extend(facts.refused);
    if asked_nothing {
        warnings.push(format!(
            "cluster {id} has jumphost {jumphost} but no domains; nothing is routed through it"
        ));
        return None;
    }
    let owns = owner::is_lieutenant_id(id);
    let mut include = Vec::with_capacity(facts.include.len());
    for suffix in facts.include {
        let Some(dynamic) = facts.dynamic.iter().find(|d| d.suffix == suffix) else {
            include.push((suffix, Tier::Static, None));
            continue;
        };
        if let Some(host) = own.covered_by(&suffix) {
            let reason = Refusal::OwnHost { name: suffix, host: host.host.clone(), what: host.what.clone() };
            refused.push(cluster.refused_fact(dynamic.fact, reason));
        } else if !anchored.hold(&suffix) {
            refused.push(cluster.refused_fact(dynamic.fact, anchored.refusal(&suffix)));
        } else {
            let tier = if owns && owner::own(&suffix, id, anchored) { Tier::Owned } else { dynamic.tier };
            include.push((suffix, tier, Some(dynamic.fact)));
        }
    }
    Some(Gathered { cluster, jumphost, live: include, dead: Vec::new(), exclude: facts.exclude })
}

/// Judges the live names of every gathered cluster together ([`trust::arbitrate`]) and drops the
/// dynamic ones another cluster contests, each told to its cluster's slot in `told`.
fn contest(gathered: &mut [(usize, Gathered<'_>)], told: &mut [(Vec<String>, Vec<Refused>)]) {
    let mut claims = Vec::new();
    let mut whose = Vec::new();
    for (g, (_, gathered)) in gathered.iter().enumerate() {
        for (n, (suffix, tier, _)) in gathered.live.iter().enumerate() {
            claims.push(trust::Claim { cluster: &gathered.cluster.id, name: suffix, tier: *tier });
            whose.push((g as u32, n as u32));
        }
    }
    let mut drop: Vec<(usize, usize)> = Vec::new();
    for (i, reason) in trust::arbitrate(&claims) {
        let (g, n) = (whose[i].0 as usize, whose[i].1 as usize);
        let (at, gathered) = &gathered[g];
        // Only dynamic names are ever contested; a name without a fact is dropped all the same.
        if let Some(fact) = gathered.live[n].2 {
            told[*at].1.push(gathered.cluster.refused_fact(fact, reason));
        }
        drop.push((g, n));
    }
    // Highest index first, so the indices of the rest stay valid.
    for (g, n) in drop.into_iter().rev() {
        gathered[g].1.live.remove(n);
    }
}

/// The routing view of one gathered cluster: its live includes, and the exclusions that can
/// still matter. Everything dropped is explained in `warnings`.
fn candidate<'c>(gathered: Gathered<'c>, refused: bool, warnings: &mut Vec<String>) -> Option<Candidate<'c>> {
    let Gathered { cluster, jumphost, live, dead, exclude: excludes } = gathered;
    let id = cluster.id.as_str();
    let include: Vec<String> = live.into_iter().map(|(suffix, _, _)| suffix).collect();
    if include.is_empty() {
        let why = match (dead.is_empty(), refused) {
            (true, _) => "every domain it claims is refused (see the refusals)",
            (false, true) => "its domains are refused or covered by its jumphostSkipDomains",
            (false, false) => "jumphostSkipDomains cover all its domains",
        };
        warnings
            .push(format!("cluster {id} has jumphost {jumphost} but {why}; nothing is routed through it"));
        return None;
    }
    // An exclusion matters if some live include lies above it (it carves a hole) or it removed an
    // include. One that does neither is most likely meant for another cluster: say so, since
    // exclusions are scoped per cluster (Go kharon kept one global list).
    let mut exclude = Vec::new();
    for exc in excludes {
        let carves = include.iter().any(|inc| trust::at_or_below(&exc, inc));
        if carves {
            exclude.push(exc);
        } else if !dead.iter().any(|inc| trust::at_or_below(inc, &exc)) {
            warnings.push(format!(
                "cluster {id}: jumphostSkipDomains {exc} is not below any domain the cluster routes; it has no effect"
            ));
        }
    }
    Some(Candidate { id, jumphost, include, exclude })
}
