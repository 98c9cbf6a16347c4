//! A Lieutenant cluster as kharon reads it ([`Cluster`]), the facts that matter, and the name rules
//! the routing suffixes derived from them follow. The inventory module's doc says what this owns.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::cmp::Reverse;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::trust::{self, Refused, Tier};

/// The names of the facts kharon reads, so that no caller spells them by hand.
pub mod fact {
    /// Static: the ssh_config Host alias in front of the cluster; no fact → direct. Checked by
    /// [`super::check_jumphost`]: it reaches ssh_config `%h`/`%n` tokens and a `ProxyCommand`.
    pub const JUMPHOST: &str = "jumphost";
    /// Static: extra suffixes routed through the jumphost, comma-separated.
    pub const JUMPHOST_DOMAINS: &str = "jumphostDomains";
    /// Static: comma-separated suffixes that this cluster must never route.
    pub const JUMPHOST_SKIP_DOMAINS: &str = "jumphostSkipDomains";
    /// Static: present with any value → the cluster is dropped.
    pub const KHARON_IGNORE: &str = "kharonIgnore";
    /// Static: `openshift4`, `oke`, `talos`, …
    pub const DISTRIBUTION: &str = "distribution";

    pub const OPENSHIFT_BASE_DOMAIN: &str = "openshiftBaseDomain";
    pub const OPENSHIFT_APPS_DOMAIN: &str = "openshiftAppsDomain";
    pub const OPENSHIFT_API_URL: &str = "openshiftApiURL";
    pub const OPENSHIFT_CONSOLE_URL: &str = "openshiftConsoleURL";
    /// Dynamic (written by Steward): the host name of the OAuth route, e.g.
    /// `oauth-openshift.apps.<base>`.
    pub const OPENSHIFT_OAUTH_ROUTE: &str = "openshiftOAuthRoute";
    pub const TALOS_BASE_DOMAIN: &str = "talosBaseDomain";
    pub const TALOS_APPS_DOMAIN: &str = "talosAppsDomain";
    pub const TALOS_API_URL: &str = "talosApiURL";
    pub const TALOS_CONSOLE_URL: &str = "talosConsoleURL";
    pub const TALOS_CA_DATA: &str = "talosAPICertificateAuthorityData";
    pub const OIDC_ISSUER: &str = "oidcIssuer";
    pub const OIDC_CLIENT_ID: &str = "oidcClientId";
}

/// Dynamic facts naming the cluster's own base domain: a dynamic name at or below one of them is
/// [`Tier::Anchored`].
const BASE_FACTS: [&str; 2] = [fact::OPENSHIFT_BASE_DOMAIN, fact::TALOS_BASE_DOMAIN];

/// Dynamic facts whose string value is itself a domain suffix.
const DOMAIN_FACTS: [&str; 4] = [
    fact::OPENSHIFT_BASE_DOMAIN,
    fact::OPENSHIFT_APPS_DOMAIN,
    fact::TALOS_BASE_DOMAIN,
    fact::TALOS_APPS_DOMAIN,
];

/// Dynamic facts holding a URL whose host name is routed.
const URL_FACTS: [&str; 4] =
    [fact::OPENSHIFT_API_URL, fact::OPENSHIFT_CONSOLE_URL, fact::TALOS_API_URL, fact::TALOS_CONSOLE_URL];

/// The longest DNS name in presentation form without the trailing dot (RFC 1035 §2.3.4 via RFC 2181).
pub const MAX_NAME_LEN: usize = 253;
/// The longest DNS label (RFC 1035 §2.3.4).
pub const MAX_LABEL_LEN: usize = 63;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    pub id: String,
    #[serde(default)]
    pub tenant: String,
    #[serde(rename = "displayName", default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    #[serde(default)]
    pub facts: Map<String, Value>,
    #[serde(rename = "dynamicFacts", default)]
    pub dynamic_facts: Map<String, Value>,
    /// The CRD annotations; Lieutenant omits them when empty.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub annotations: Map<String, Value>,
}

/// The Kubernetes distribution a cluster runs, from the static `distribution` fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// `openshift4`, and `oke`, which newer Go kharon treats the same way.
    OpenShift,
    Talos,
    /// Any other value, or no fact at all; read the raw value with `fact_str("distribution")`.
    Other,
}

impl Distribution {
    pub fn as_str(&self) -> &'static str {
        match self {
            Distribution::OpenShift => "openshift",
            Distribution::Talos => "talos",
            Distribution::Other => "other",
        }
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The suffixes one cluster asks to route through its jumphost, and those it wants left direct.
///
/// Both lists are normalised (lowercase, no trailing dot), deduplicated, and sorted by descending
/// length then alphabetically, so the most specific suffix comes first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingFacts {
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// Fact values that were not usable suffixes. They are dropped, not fatal: one bad fact must not
    /// take the other clusters' routes down with it.
    pub invalid: Vec<InvalidSuffix>,
    /// Valid names the trust model refuses by the name alone ([`trust::judge_name`]): a public
    /// suffix; from a dynamic fact also a registrable or top-level domain. Dropped, like `invalid`.
    pub refused: Vec<Refused>,
    /// The includes that only dynamic facts claim (a name a static fact claims too is VSHN's), in
    /// `include`'s order: `table` judges them against the other clusters' names and the hosts
    /// kharon itself talks to.
    pub dynamic: Vec<DynamicName>,
}

impl RoutingFacts {
    /// The includes a static fact claims (`jumphostDomains`), in `include`'s order.
    pub fn statics(&self) -> Vec<&str> {
        let dynamic = |suffix: &str| self.dynamic.iter().any(|d| d.suffix == suffix);
        self.include.iter().map(String::as_str).filter(|s| !dynamic(s)).collect()
    }
}

/// An include that only dynamic facts claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicName {
    pub suffix: String,
    /// The first fact that claimed it (`Cluster::refused_fact` says its value).
    pub fact: &'static str,
    /// [`Tier::Anchored`] at or below one of the cluster's dynamic base domains, else [`Tier::Loose`].
    pub tier: Tier,
}

/// One fact value that could not be turned into a domain suffix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{fact} value {value:?} is not a valid domain suffix: {reason}")]
pub struct InvalidSuffix {
    /// The fact that held the value, e.g. `jumphostDomains`.
    pub fact: &'static str,
    /// The offending value (for a comma-separated list: the one entry), or the JSON of a non-string.
    pub value: String,
    pub reason: SuffixError,
}

/// Why a string is not a usable domain suffix or host name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuffixError {
    #[error("it is empty")]
    Empty,
    #[error("it has an empty label")]
    EmptyLabel,
    #[error("a label is longer than {MAX_LABEL_LEN} characters")]
    LabelTooLong,
    #[error("it is {0} characters long, more than {MAX_NAME_LEN}")]
    TooLong(usize),
    #[error("character {0:?} is not allowed (only letters, digits, '-', '_' and '.')")]
    BadChar(char),
    #[error("it is an IP address; IP literals are never routed")]
    IpLiteral,
    #[error("it is not a URL with a host name")]
    NoHost,
    #[error("it is not a string")]
    NotAString,
    #[error("it starts with '-', which ssh would read as an option")]
    LeadingDash,
}

/// A `jumphost` fact that kharon refuses to use as an ssh_config Host alias. The cluster then
/// routes nothing: its value would reach ssh_config tokens (`%h`, `%n`) and so a `ProxyCommand`
/// run by `sh -c`, and inventory data must never become a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} value {value:?} is not a valid ssh_config Host alias: {reason}", fact::JUMPHOST)]
pub struct InvalidJumphost {
    /// The fact's string, or the JSON of a non-string (`42`).
    pub value: String,
    pub reason: SuffixError,
}

impl Cluster {
    /// A static fact as a trimmed, non-empty string; `None` for a missing fact or a non-string.
    pub fn fact_str(&self, key: &str) -> Option<&str> {
        non_empty_str(self.facts.get(key))
    }

    /// A dynamic fact as a trimmed, non-empty string. Dynamic facts are often objects or numbers
    /// (Lieutenant JSON-decodes them when it can); those are `None` here.
    pub fn dynamic_fact_str(&self, key: &str) -> Option<&str> {
        non_empty_str(self.dynamic_facts.get(key))
    }

    /// The ssh_config Host alias in front of the cluster, if it has a valid one: an invalid
    /// `jumphost` fact counts as none, so no caller can route through it by mistake.
    /// [`Cluster::jumphost_fact`] says why a fact was refused.
    pub fn jumphost(&self) -> Option<&str> {
        self.jumphost_fact().ok().flatten()
    }

    /// The `jumphost` fact: `Ok(None)` when missing, `null` or blank (the cluster is direct),
    /// an error when it is not a string or not a valid alias ([`check_jumphost`]).
    pub fn jumphost_fact(&self) -> Result<Option<&str>, InvalidJumphost> {
        let value = match self.facts.get(fact::JUMPHOST) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) => s.trim(),
            Some(other) => {
                return Err(InvalidJumphost { value: other.to_string(), reason: SuffixError::NotAString });
            }
        };
        if value.is_empty() {
            return Ok(None);
        }
        check_jumphost(value).map_err(|reason| InvalidJumphost { value: value.to_owned(), reason })?;
        Ok(Some(value))
    }

    /// `kharonIgnore` present with any value, even `""` or `false`: newer Go kharon drops the
    /// cluster on presence alone, and we must not route what it would not.
    pub fn is_ignored(&self) -> bool {
        self.facts.contains_key(fact::KHARON_IGNORE)
    }

    pub fn distribution(&self) -> Distribution {
        match self.fact_str(fact::DISTRIBUTION) {
            Some(d) if d.eq_ignore_ascii_case("openshift4") || d.eq_ignore_ascii_case("oke") => {
                Distribution::OpenShift
            }
            Some(d) if d.eq_ignore_ascii_case("talos") => Distribution::Talos,
            _ => Distribution::Other,
        }
    }

    /// The Kubernetes API URL: `openshiftApiURL` or `talosApiURL`, the distribution's own first.
    pub fn api_url(&self) -> Option<&str> {
        self.by_distribution(fact::OPENSHIFT_API_URL, fact::TALOS_API_URL)
    }

    /// The web console URL: `openshiftConsoleURL` or `talosConsoleURL`, the distribution's own first.
    pub fn console_url(&self) -> Option<&str> {
        self.by_distribution(fact::OPENSHIFT_CONSOLE_URL, fact::TALOS_CONSOLE_URL)
    }

    fn by_distribution(&self, openshift: &str, talos: &str) -> Option<&str> {
        let (first, second) = match self.distribution() {
            Distribution::Talos => (talos, openshift),
            _ => (openshift, talos),
        };
        self.dynamic_fact_str(first).or_else(|| self.dynamic_fact_str(second))
    }

    /// The suffixes this cluster routes through its jumphost and those it keeps direct.
    ///
    /// Empty when the cluster has no `jumphost` or is ignored: such a cluster routes nothing, and its
    /// skip list only ever scopes its own routes. Every include source is taken as is, even when it
    /// lies below the base domain (unlike Go kharon), so that `table` can tell a specific include
    /// from the skip domain above it. Names the trust model refuses by themselves are left out and
    /// listed in [`RoutingFacts::refused`].
    pub fn routing_facts(&self) -> RoutingFacts {
        let mut out = RoutingFacts::default();
        if self.is_ignored() || self.jumphost().is_none() {
            return out;
        }
        let mut include = Vec::new();
        let mut exclude = Vec::new();
        self.list_fact(fact::JUMPHOST_DOMAINS, &mut include, &mut out);
        let mut dynamic: Vec<(&'static str, &str, String)> = Vec::new();
        for key in DOMAIN_FACTS {
            if let Some(value) = self.dynamic_value(key, &mut out.invalid) {
                self.dynamic_name(key, value, normalize_suffix(value), &mut dynamic, &mut out);
            }
        }
        for key in URL_FACTS {
            if let Some(value) = self.dynamic_value(key, &mut out.invalid) {
                self.dynamic_name(key, value, url_host(value), &mut dynamic, &mut out);
            }
        }
        let anchored = |suffix: &str| {
            dynamic
                .iter()
                .any(|(key, _, anchor)| BASE_FACTS.contains(key) && trust::at_or_below(suffix, anchor))
        };
        let tiers: Vec<Tier> =
            dynamic.iter().map(|(_, _, s)| if anchored(s) { Tier::Anchored } else { Tier::Loose }).collect();
        let mut names: Vec<DynamicName> = Vec::new();
        for ((key, _, suffix), tier) in dynamic.into_iter().zip(tiers) {
            if include.contains(&suffix) || names.iter().any(|n| n.suffix == suffix) {
                continue;
            }
            names.push(DynamicName { suffix, fact: key, tier });
        }
        include.extend(names.iter().map(|n| n.suffix.clone()));
        self.list_fact(fact::JUMPHOST_SKIP_DOMAINS, &mut exclude, &mut out);
        out.include = sort_suffixes(include);
        out.exclude = sort_suffixes(exclude);
        names.sort_by(|a, b| (Reverse(a.suffix.len()), &a.suffix).cmp(&(Reverse(b.suffix.len()), &b.suffix)));
        out.dynamic = names;
        out
    }

    /// A dynamic fact's name, when it is valid and the trust model allows it by itself.
    fn dynamic_name<'v>(
        &self,
        key: &'static str,
        value: &'v str,
        parsed: Result<String, SuffixError>,
        into: &mut Vec<(&'static str, &'v str, String)>,
        out: &mut RoutingFacts,
    ) {
        match parsed {
            Err(reason) => out.invalid.push(InvalidSuffix { fact: key, value: value.to_owned(), reason }),
            Ok(suffix) => match trust::judge_name(&suffix, true) {
                Ok(()) => into.push((key, value, suffix)),
                Err(reason) => out.refused.push(self.refused(key, value, reason)),
            },
        }
    }

    fn refused(&self, fact: &'static str, value: &str, reason: trust::Refusal) -> Refused {
        Refused { cluster: self.id.clone(), fact, value: value.to_owned(), reason }
    }

    /// The refusal of a name one of this cluster's dynamic facts (`fact`, as [`DynamicName::fact`]
    /// names it) claimed, with the fact's value as the cluster reported it.
    pub(crate) fn refused_fact(&self, fact: &'static str, reason: trust::Refusal) -> Refused {
        self.refused(fact, self.dynamic_fact_str(fact).unwrap_or_default(), reason)
    }

    /// A dynamic fact as a string; a non-string (number, object, …) of a fact that should name a
    /// domain becomes a warning, because the operator expected it to route something.
    fn dynamic_value(&self, key: &'static str, invalid: &mut Vec<InvalidSuffix>) -> Option<&str> {
        match self.dynamic_facts.get(key)? {
            Value::Null => None,
            Value::String(s) => Some(s.trim()).filter(|s| !s.is_empty()),
            other => {
                invalid.push(InvalidSuffix {
                    fact: key,
                    value: other.to_string(),
                    reason: SuffixError::NotAString,
                });
                None
            }
        }
    }

    /// A static comma-separated list of suffixes; whitespace around entries and empty entries
    /// (`"a.example, ,b.example,"`) are tolerated because people edit these by hand. A public
    /// suffix to route is refused ([`trust::judge_name`]); one to skip is not (skipping only ever
    /// keeps this cluster's own routes direct, and refusing it would route more).
    fn list_fact(&self, key: &'static str, into: &mut Vec<String>, out: &mut RoutingFacts) {
        let routes = key == fact::JUMPHOST_DOMAINS;
        match self.facts.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::String(list)) => {
                for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                    match normalize_suffix(entry) {
                        Err(reason) => {
                            out.invalid.push(InvalidSuffix { fact: key, value: entry.to_owned(), reason })
                        }
                        Ok(suffix) if !routes => into.push(suffix),
                        Ok(suffix) => match trust::judge_name(&suffix, false) {
                            Ok(()) => into.push(suffix),
                            Err(reason) => out.refused.push(self.refused(key, entry, reason)),
                        },
                    }
                }
            }
            Some(other) => out.invalid.push(InvalidSuffix {
                fact: key,
                value: other.to_string(),
                reason: SuffixError::NotAString,
            }),
        }
    }
}

fn non_empty_str(value: Option<&Value>) -> Option<&str> {
    value?.as_str().map(str::trim).filter(|s| !s.is_empty())
}

/// Deduplicates and orders suffixes most specific first: descending length, then alphabetically.
fn sort_suffixes(mut suffixes: Vec<String>) -> Vec<String> {
    suffixes.sort_by(|a, b| (Reverse(a.len()), a).cmp(&(Reverse(b.len()), b)));
    suffixes.dedup();
    suffixes
}

/// The host name of a URL fact. A value without `://` is taken as a bare host (optionally with a
/// port), because `Url::parse("api.example:6443")` would read `api.example` as a scheme.
fn url_host(value: &str) -> Result<String, SuffixError> {
    let parsed = if value.contains("://") {
        url::Url::parse(value)
    } else {
        url::Url::parse(&format!("https://{value}"))
    };
    match parsed.as_ref().ok().and_then(url::Url::host) {
        Some(url::Host::Domain(host)) => normalize_suffix(host),
        Some(url::Host::Ipv4(_) | url::Host::Ipv6(_)) => Err(SuffixError::IpLiteral),
        None => Err(SuffixError::NoHost),
    }
}

/// Whether `alias` may name a cluster's jump host (an ssh_config Host alias).
///
/// OpenSSH's `valid_hostname` (ssh.c) refuses a leading `-` and a list of shell metacharacters,
/// whitespace and control characters. This is stricter, an allow-list: ASCII letters, digits,
/// `-`, `_` and `.`, not starting with `-`, at most [`MAX_NAME_LEN`] characters. Every alias in
/// the example inventory, the test fixtures and real Lieutenant data (`acme-rma1-bastion`,
/// `management4.rma1.bettersmarter.vshnmanaged.net`) fits; anything else (`%`, `/`, `:`, `@`,
/// `$`, non-ASCII) has no business in a Host alias and, if it did reach a `ProxyCommand`, would
/// be one more character to reason about. A deny-list has to be right about every character a
/// shell treats specially; an allow-list only about the ones it lets through.
pub fn check_jumphost(alias: &str) -> Result<(), SuffixError> {
    if alias.is_empty() {
        return Err(SuffixError::Empty);
    }
    if alias.len() > MAX_NAME_LEN {
        return Err(SuffixError::TooLong(alias.len()));
    }
    if alias.starts_with('-') {
        return Err(SuffixError::LeadingDash);
    }
    match alias.chars().find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))) {
        Some(bad) => Err(SuffixError::BadChar(bad)),
        None => Ok(()),
    }
}

/// Turns a fact value into a domain suffix: trimmed, lowercase, one trailing dot removed.
///
/// Rejected: empty names or labels, characters other than ASCII letters, digits, `-`, `_`
/// (underscores appear in real host names, e.g. SRV-style and some internal zones), names longer
/// than 253 or labels longer than 63 characters, and IP literals.
pub fn normalize_suffix(value: &str) -> Result<String, SuffixError> {
    let value = value.trim();
    if is_ip_literal(value) {
        return Err(SuffixError::IpLiteral);
    }
    let mut buf = [0u8; MAX_NAME_LEN];
    let name = lower_name(value, &mut buf)?;
    if ends_in_ipv4(name) {
        return Err(SuffixError::IpLiteral);
    }
    Ok(name.to_owned())
}

/// IPv4, IPv6 and bracketed IPv6, with an optional trailing dot after an IPv4 address.
pub(crate) fn is_ip_literal(value: &str) -> bool {
    if let Some(inner) = value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
        return inner.parse::<Ipv6Addr>().is_ok();
    }
    let value = value.strip_suffix('.').unwrap_or(value);
    value.parse::<IpAddr>().is_ok()
}

/// Whether an already validated name is a dotted-quad IPv4 address. The digit check first keeps
/// the common case (a name ending in letters) free of a parse.
pub(crate) fn ends_in_ipv4(name: &str) -> bool {
    name.as_bytes().last().is_some_and(u8::is_ascii_digit) && name.parse::<Ipv4Addr>().is_ok()
}

/// Validates a DNS name and returns it lowercase without one trailing dot, borrowing `name` when it
/// is lowercase already (the common case for hosts from SOCKS clients) and `buf` otherwise.
///
/// This is the one definition of a valid name for both suffixes and hosts, and `table` calls it
/// on every connection: so it makes one pass over the bytes and never allocates.
pub(crate) fn lower_name<'b>(name: &'b str, buf: &'b mut [u8; MAX_NAME_LEN]) -> Result<&'b str, SuffixError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(SuffixError::Empty);
    }
    if name.len() > MAX_NAME_LEN {
        return Err(SuffixError::TooLong(name.len()));
    }
    let mut label_len = 0usize;
    let mut upper = false;
    for (i, &b) in name.as_bytes().iter().enumerate() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => label_len += 1,
            b'A'..=b'Z' => {
                upper = true;
                label_len += 1;
            }
            b'.' if label_len == 0 => return Err(SuffixError::EmptyLabel),
            b'.' => label_len = 0,
            _ => return Err(SuffixError::BadChar(name[i..].chars().next().unwrap_or('\u{fffd}'))),
        }
        if label_len > MAX_LABEL_LEN {
            return Err(SuffixError::LabelTooLong);
        }
    }
    if label_len == 0 {
        // "a.." loses one dot above and still ends in one.
        return Err(SuffixError::EmptyLabel);
    }
    if !upper {
        return Ok(name);
    }
    let out = &mut buf[..name.len()];
    out.copy_from_slice(name.as_bytes());
    out.make_ascii_lowercase();
    // Every byte was checked to be ASCII above, so this cannot fail; no unwrap on a library path.
    std::str::from_utf8(out).map_err(|_| SuffixError::BadChar('\u{fffd}'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::{load_file, parse_clusters};
    use serde_json::json;

    fn cluster(value: Value) -> Cluster {
        serde_json::from_value(value).expect("test cluster parses")
    }

    /// The design document's example.
    fn bettersmarter() -> Cluster {
        cluster(json!({
            "id": "c-bettersmarter-prod01",
            "tenant": "t-bettersmarter",
            "facts": {
                "distribution": "openshift4",
                "jumphost": "management4.rma1.bettersmarter.vshnmanaged.net",
                "jumphostDomains": "vcenter.bettersmarter.ch,storage.bettersmarter.ch",
                "jumphostSkipDomains": "apps.c-bettersmarter-prod01.vshnmanaged.net"
            },
            "dynamicFacts": {
                "openshiftBaseDomain": "c-bettersmarter-prod01.vshnmanaged.net",
                "openshiftAppsDomain": "apps.c-bettersmarter-prod01.vshnmanaged.net",
                "openshiftApiURL": "https://api.c-bettersmarter-prod01.vshnmanaged.net:6443",
                "openshiftConsoleURL": "https://console.apps.c-bettersmarter-prod01.vshnmanaged.net",
                "kubernetesVersion": {"major": "1", "minor": "30", "gitVersion": "v1.30.4"},
                "openshiftVersion": {"Major": "4", "Minor": "17", "Patch": "12"}
            }
        }))
    }

    #[test]
    fn design_example_routing_facts_are_ordered_most_specific_first() {
        let facts = bettersmarter().routing_facts();
        assert_eq!(facts.exclude, ["apps.c-bettersmarter-prod01.vshnmanaged.net"]);
        assert_eq!(
            facts.include,
            [
                "console.apps.c-bettersmarter-prod01.vshnmanaged.net",
                "apps.c-bettersmarter-prod01.vshnmanaged.net",
                "api.c-bettersmarter-prod01.vshnmanaged.net",
                "c-bettersmarter-prod01.vshnmanaged.net",
                "storage.bettersmarter.ch",
                "vcenter.bettersmarter.ch",
            ]
        );
        assert!(facts.invalid.is_empty(), "{:?}", facts.invalid);
    }

    #[test]
    fn accessors_read_trimmed_strings_only() {
        let c = cluster(json!({
            "id": "c-1",
            "facts": {"jumphost": "  jump-1  ", "empty": "   ", "number": 3, "distribution": "OKE"},
            "dynamicFacts": {"openshiftApiURL": "https://api.x.example:6443", "obj": {"a": 1}}
        }));
        assert_eq!(c.jumphost(), Some("jump-1"));
        assert_eq!(c.fact_str("empty"), None);
        assert_eq!(c.fact_str("number"), None);
        assert_eq!(c.fact_str("missing"), None);
        assert_eq!(c.dynamic_fact_str("obj"), None);
        assert_eq!(c.distribution(), Distribution::OpenShift);
        assert_eq!(c.api_url(), Some("https://api.x.example:6443"));
        assert_eq!(c.console_url(), None);
        assert!(!c.is_ignored());
    }

    #[test]
    fn distribution_values() {
        for (value, want) in [
            (json!("openshift4"), Distribution::OpenShift),
            (json!("oke"), Distribution::OpenShift),
            (json!("talos"), Distribution::Talos),
            (json!("rancher"), Distribution::Other),
            (json!(null), Distribution::Other),
        ] {
            let c = cluster(json!({"id": "c", "facts": {"distribution": value}}));
            assert_eq!(c.distribution(), want, "{value}");
        }
    }

    #[test]
    fn talos_cluster_prefers_talos_urls() {
        let c = cluster(json!({
            "id": "c-t",
            "facts": {"distribution": "talos", "jumphost": "jump-t"},
            "dynamicFacts": {
                "talosApiURL": "https://api.t.example:6443",
                "openshiftApiURL": "https://api.wrong.example:6443",
                "talosBaseDomain": "t.example",
                "talosAppsDomain": "apps.t.example",
                "talosConsoleURL": "console.apps.t.example"
            }
        }));
        assert_eq!(c.api_url(), Some("https://api.t.example:6443"));
        assert_eq!(c.console_url(), Some("console.apps.t.example"));
        let facts = c.routing_facts();
        assert_eq!(
            facts.include,
            ["console.apps.t.example", "api.wrong.example", "apps.t.example", "api.t.example", "t.example"]
        );
    }

    #[test]
    fn jumphost_is_a_plain_alias_or_refused() {
        for ok in
            ["bastion", "jump-1", "acme_rma1.bastion", "management4.rma1.bettersmarter.vshnmanaged.net", "J1"]
        {
            assert_eq!(check_jumphost(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("$(touch /tmp/x).jump.test", SuffixError::BadChar('$')),
            ("a;b", SuffixError::BadChar(';')),
            ("a b", SuffixError::BadChar(' ')),
            ("a\tb", SuffixError::BadChar('\t')),
            ("a\u{0}b", SuffixError::BadChar('\u{0}')),
            ("user@host", SuffixError::BadChar('@')),
            ("host:22", SuffixError::BadChar(':')),
            ("%d", SuffixError::BadChar('%')),
            ("jümp", SuffixError::BadChar('ü')),
            ("-oProxyCommand=x", SuffixError::LeadingDash),
            ("", SuffixError::Empty),
        ] {
            assert_eq!(check_jumphost(bad), Err(why), "{bad:?}");
        }
        assert_eq!(check_jumphost(&"a".repeat(254)), Err(SuffixError::TooLong(254)));
        assert_eq!(check_jumphost(&"a".repeat(253)), Ok(()));
    }

    #[test]
    fn an_invalid_jumphost_fact_counts_as_none_and_says_why() {
        let c = cluster(json!({"id": "c", "facts": {"jumphost": " a|b ", "jumphostDomains": "x.example"}}));
        assert_eq!(c.jumphost(), None);
        assert_eq!(
            c.jumphost_fact(),
            Err(InvalidJumphost { value: "a|b".into(), reason: SuffixError::BadChar('|') })
        );
        assert_eq!(c.routing_facts(), RoutingFacts::default());
        let c = cluster(json!({"id": "c", "facts": {"jumphost": 42}}));
        assert_eq!(
            c.jumphost_fact(),
            Err(InvalidJumphost { value: "42".into(), reason: SuffixError::NotAString })
        );
        assert_eq!(
            c.jumphost_fact().unwrap_err().to_string(),
            r#"jumphost value "42" is not a valid ssh_config Host alias: it is not a string"#
        );
        for direct in [json!(null), json!("  ")] {
            let c = cluster(json!({"id": "c", "facts": {"jumphost": direct}}));
            assert_eq!(c.jumphost_fact(), Ok(None), "{direct}");
        }
    }

    #[test]
    fn kharon_ignore_is_presence_only() {
        for value in [json!("true"), json!(""), json!(false), json!(null)] {
            let c = cluster(json!({"id": "c", "facts": {"kharonIgnore": value, "jumphost": "j",
                "jumphostDomains": "x.example"}}));
            assert!(c.is_ignored(), "{value}");
            assert_eq!(c.routing_facts(), RoutingFacts::default());
        }
    }

    #[test]
    fn no_jumphost_routes_nothing() {
        let c = cluster(json!({"id": "c", "facts": {"jumphost": " ", "jumphostDomains": "x.example"}}));
        assert_eq!(c.routing_facts(), RoutingFacts::default());
    }

    #[test]
    fn list_entries_are_trimmed_deduplicated_and_normalised() {
        let c = cluster(json!({"id": "c", "facts": {
            "jumphost": "j",
            "jumphostDomains": " B.Example. , ,b.example,a.example,,a_b.example ",
            "jumphostSkipDomains": "Skip.B.example"
        }}));
        let facts = c.routing_facts();
        assert_eq!(facts.include, ["a_b.example", "a.example", "b.example"]);
        assert_eq!(facts.exclude, ["skip.b.example"]);
    }

    #[test]
    fn invalid_values_become_warnings_not_errors() {
        let long_label = "a".repeat(64);
        let long_name = ["abcdefghi"; 26].join(".");
        let c = cluster(json!({"id": "c", "facts": {
            "jumphost": "j",
            "jumphostDomains": format!("ok.example,a..b,x y.example,10.0.0.1,{long_label}.example,{long_name},.lead"),
            "jumphostSkipDomains": 42
        }, "dynamicFacts": {
            "openshiftBaseDomain": {"not": "a string"},
            "openshiftAppsDomain": 7,
            "openshiftApiURL": "https://10.1.2.3:6443",
            "openshiftConsoleURL": "https://[2001:db8::1]/",
            "talosApiURL": "mailto:someone",
            "kubernetesVersion": {"major": "1"}
        }}));
        let facts = c.routing_facts();
        assert_eq!(facts.include, ["ok.example"]);
        assert!(facts.exclude.is_empty());
        let got: Vec<(&str, String, SuffixError)> =
            facts.invalid.iter().map(|i| (i.fact, i.value.clone(), i.reason.clone())).collect();
        let want = vec![
            ("jumphostDomains", "a..b".to_owned(), SuffixError::EmptyLabel),
            ("jumphostDomains", "x y.example".to_owned(), SuffixError::BadChar(' ')),
            ("jumphostDomains", "10.0.0.1".to_owned(), SuffixError::IpLiteral),
            ("jumphostDomains", format!("{long_label}.example"), SuffixError::LabelTooLong),
            ("jumphostDomains", long_name.clone(), SuffixError::TooLong(259)),
            ("jumphostDomains", ".lead".to_owned(), SuffixError::EmptyLabel),
            ("openshiftBaseDomain", r#"{"not":"a string"}"#.to_owned(), SuffixError::NotAString),
            ("openshiftAppsDomain", "7".to_owned(), SuffixError::NotAString),
            ("openshiftApiURL", "https://10.1.2.3:6443".to_owned(), SuffixError::IpLiteral),
            ("openshiftConsoleURL", "https://[2001:db8::1]/".to_owned(), SuffixError::IpLiteral),
            ("talosApiURL", "mailto:someone".to_owned(), SuffixError::NoHost),
            ("jumphostSkipDomains", "42".to_owned(), SuffixError::NotAString),
        ];
        assert_eq!(got, want);
        assert_eq!(
            facts.invalid[1].to_string(),
            r#"jumphostDomains value "x y.example" is not a valid domain suffix: character ' ' is not allowed (only letters, digits, '-', '_' and '.')"#
        );
    }

    #[test]
    fn dynamic_names_are_told_from_static_ones_and_judged_by_themselves() {
        let c = cluster(json!({"id": "c-x", "facts": {
            "jumphost": "j", "jumphostDomains": "shared.example, co.uk", "jumphostSkipDomains": "ch"
        }, "dynamicFacts": {
            "openshiftBaseDomain": "c-x.example.net",
            "openshiftApiURL": "https://api.c-x.example.net:6443",
            "openshiftConsoleURL": "https://console.apps.elsewhere.example",
            "openshiftAppsDomain": "shared.example",
            "talosBaseDomain": "vshnmanaged.net",
            "talosAppsDomain": "internal"
        }}));
        let facts = c.routing_facts();
        assert_eq!(
            facts.include,
            ["console.apps.elsewhere.example", "api.c-x.example.net", "c-x.example.net", "shared.example"]
        );
        assert_eq!(facts.exclude, ["ch"], "skipping a public suffix routes nothing, so it stays");
        let dynamic: Vec<(&str, &str, Tier)> =
            facts.dynamic.iter().map(|d| (d.suffix.as_str(), d.fact, d.tier)).collect();
        assert_eq!(
            dynamic,
            [
                ("console.apps.elsewhere.example", "openshiftConsoleURL", Tier::Loose),
                ("api.c-x.example.net", "openshiftApiURL", Tier::Anchored),
                ("c-x.example.net", "openshiftBaseDomain", Tier::Anchored),
            ],
            "shared.example is claimed by a static fact too: VSHN's"
        );
        let refused: Vec<(&str, &str)> = facts.refused.iter().map(|r| (r.fact, r.value.as_str())).collect();
        assert_eq!(
            refused,
            [
                ("jumphostDomains", "co.uk"),
                ("talosBaseDomain", "vshnmanaged.net"),
                ("talosAppsDomain", "internal")
            ]
        );
        assert!(facts.refused.iter().all(|r| r.cluster == "c-x"));
        assert!(facts.invalid.is_empty(), "{:?}", facts.invalid);
    }

    #[test]
    fn url_facts_accept_bare_hosts() {
        for (value, want) in [
            ("https://API.x.example:6443", Ok("api.x.example".to_owned())),
            ("api.x.example", Ok("api.x.example".to_owned())),
            ("api.x.example:6443", Ok("api.x.example".to_owned())),
            ("console.x.example.", Ok("console.x.example".to_owned())),
            ("https://", Err(SuffixError::NoHost)),
        ] {
            assert_eq!(url_host(value), want, "{value}");
        }
    }

    #[test]
    fn name_rules() {
        let mut buf = [0u8; MAX_NAME_LEN];
        assert_eq!(lower_name("a.example", &mut buf), Ok("a.example"));
        assert_eq!(lower_name("A.Example.", &mut buf), Ok("a.example"));
        assert_eq!(lower_name("", &mut buf), Err(SuffixError::Empty));
        assert_eq!(lower_name(".", &mut buf), Err(SuffixError::Empty));
        assert_eq!(lower_name("a..", &mut buf), Err(SuffixError::EmptyLabel));
        assert_eq!(lower_name("bücher.example", &mut buf), Err(SuffixError::BadChar('ü')));
        let max = format!("{}.{}.{}.{}", "a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(61));
        assert_eq!(max.len(), MAX_NAME_LEN);
        assert_eq!(lower_name(&max, &mut buf), Ok(max.as_str()));
        assert_eq!(lower_name(&format!("{max}x"), &mut buf), Err(SuffixError::TooLong(254)));
        assert!(is_ip_literal("[::1]") && is_ip_literal("::1") && is_ip_literal("1.2.3.4."));
        assert!(!is_ip_literal("[1.2.3.4]") && !is_ip_literal("a.example"));
        assert_eq!(normalize_suffix(" 1.2.3.4 "), Err(SuffixError::IpLiteral));
    }

    #[test]
    fn example_inventory_parses() {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/examples/inventory.json");
        let clusters = load_file(&path).expect("contrib/examples/inventory.json parses");
        assert!(clusters.len() >= 5);
        for c in &clusters {
            assert!(c.routing_facts().invalid.is_empty(), "{}: {:?}", c.id, c.routing_facts().invalid);
            assert!(c.jumphost_fact().is_ok(), "{}: {:?}", c.id, c.jumphost_fact());
        }
    }

    mod properties {
        use super::*;
        use crate::table::RoutingTable;
        use proptest::prelude::*;

        /// Fact values an operator (or a broken Lieutenant) could write: names, lists with blanks
        /// and empty entries, URLs, IP literals, odd characters, very long labels.
        fn fact_value() -> impl Strategy<Value = Value> {
            prop_oneof![
                "[a-zA-Z0-9._-]{0,30}".prop_map(Value::from),
                "[a-z0-9.]{1,12}(, ?[a-z0-9.]{0,12}){0,4},?".prop_map(Value::from),
                "(https?://)?[a-z0-9.\\[\\]:@-]{0,40}(:[0-9]{1,6})?(/[a-z]{0,5})?".prop_map(Value::from),
                "\\PC{0,20}".prop_map(Value::from),
                "[a-z]{60,70}\\.example".prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                Just(Value::Null),
                Just(json!({"a": ["b"]})),
            ]
        }

        fn cluster_json() -> impl Strategy<Value = Value> {
            (
                "[a-z0-9-]{1,12}",
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("jumphost"),
                        Just("jumphostDomains"),
                        Just("jumphostSkipDomains"),
                        Just("distribution")
                    ],
                    fact_value(),
                    0..4,
                ),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("openshiftBaseDomain"),
                        Just("openshiftAppsDomain"),
                        Just("openshiftApiURL"),
                        Just("openshiftConsoleURL")
                    ],
                    fact_value(),
                    0..4,
                ),
            )
                .prop_map(|(id, facts, dynamic)| json!({"id": id, "facts": facts, "dynamicFacts": dynamic}))
        }

        fn is_normalised(suffix: &str) -> bool {
            !suffix.is_empty()
                && suffix.len() <= MAX_NAME_LEN
                && !suffix.ends_with('.')
                && suffix.split('.').all(|l| !l.is_empty() && l.len() <= MAX_LABEL_LEN)
                && suffix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_.".contains(&b))
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            /// Any bytes, and any cut of a valid inventory: an error or clusters, never a panic.
            #[test]
            fn arbitrary_or_truncated_input_never_panics(
                bytes in proptest::collection::vec(any::<u8>(), 0..400),
                clusters in proptest::collection::vec(cluster_json(), 0..4),
                cut in any::<prop::sample::Index>(),
            ) {
                let _ = parse_clusters(&bytes);
                let text = serde_json::to_vec(&clusters).unwrap();
                prop_assert!(parse_clusters(&text).is_ok());
                let cut = cut.index(text.len().max(1));
                if cut < text.len() {
                    prop_assert!(parse_clusters(&text[..cut]).is_err());
                }
            }

            /// Adversarial fact values: every entry becomes a normalised suffix or a reported
            /// invalid one, and the routing table built from them answers every lookup.
            #[test]
            fn adversarial_facts_give_normalised_suffixes_or_named_errors(
                clusters in proptest::collection::vec(cluster_json(), 1..6),
            ) {
                let clusters: Vec<Cluster> =
                    serde_json::from_value(Value::Array(clusters)).expect("generated clusters parse");
                for c in &clusters {
                    let facts = c.routing_facts();
                    for suffix in facts.include.iter().chain(&facts.exclude) {
                        prop_assert!(is_normalised(suffix), "{:?} from {:?}", suffix, c);
                    }
                    for invalid in &facts.invalid {
                        prop_assert!(!invalid.to_string().is_empty());
                    }
                }
                let table = RoutingTable::compile(&clusters);
                for c in &clusters {
                    for suffix in c.routing_facts().include {
                        let _ = table.lookup(&suffix);
                        let _ = table.explain(&format!("x.{suffix}"));
                    }
                }
            }
        }
    }
}
