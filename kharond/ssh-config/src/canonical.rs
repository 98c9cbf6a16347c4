//! The host name ssh connects to, after `HostName`: lowercased, and canonicalized as OpenSSH 9.2
//! does (ssh.c `main` and `resolve_canonicalize`, ssh_config(5) `CanonicalizeHostname`).
//!
//! - A numeric address is always put in canonical form (`127.1` → `127.0.0.1`) and never
//!   lowercased or looked up.
//! - `CanonicalizeHostname yes` applies only to a host reached directly (no ProxyJump, no
//!   ProxyCommand other than `none`; note that `ProxyJump none` counts as a proxy here, as in
//!   OpenSSH 9.2), `always` to every host.
//! - A name ending in `.` is looked up as it is; otherwise, with at most `CanonicalizeMaxDots`
//!   dots (default 1), `NAME.DOMAIN.` is looked up for each `CanonicalDomains` entry in order
//!   (up to `none`), and the first that resolves wins. If none does,
//!   `CanonicalizeFallbackLocal no` makes it an error, `yes` (the default) keeps the name.
//! - A resolver's canonical name (CNAME target) replaces the name only when a
//!   `CanonicalizePermittedCNAMEs` rule allows it; with such rules, a name that was not
//!   canonicalized by a suffix is looked up as it is for the same purpose.
//!
//! The caller re-reads the config for the result (`options`'s second pass).

use super::hop::AddressFamily;
use super::machine::{self, Machine};
use super::pattern;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Mode {
    #[default]
    No,
    Yes,
    Always,
}

/// The canonicalization options that apply to a host (first obtained values, with defaults).
#[derive(Debug)]
pub(super) struct Rules<'a> {
    pub mode: Mode,
    pub domains: &'a [String],
    pub max_dots: u32,
    pub fallback_local: bool,
    /// (source patterns, target patterns), lowercased.
    pub permitted_cnames: &'a [(String, String)],
    /// Reached without ProxyJump or ProxyCommand.
    pub direct: bool,
    /// `AddressFamily`: lookups accept addresses of this family only, as ssh's do.
    pub family: AddressFamily,
}

/// `host` (HostName with `%h` expanded, or the name as given) → the name ssh connects to. An
/// error only for `CanonicalizeFallbackLocal no` when nothing resolved.
pub(super) fn host_name(host: &str, rules: &Rules<'_>, machine: &dyn Machine) -> Result<String, String> {
    let numeric = machine::numeric(host, rules.family);
    let was_addr = machine::looks_numeric(host) || numeric.is_some();
    let mut host = if was_addr { host.to_owned() } else { host.to_ascii_lowercase() };
    let mut resolved = false;
    if rules.mode != Mode::No || was_addr {
        if let Some(numeric) = numeric {
            // `strcasecmp` in OpenSSH: only a different address text replaces the name.
            if !numeric.eq_ignore_ascii_case(&host) {
                host = numeric;
            }
            return Ok(host);
        }
        if let Some(name) = by_suffix(&host, rules, machine)? {
            host = name;
            resolved = true;
        }
    }
    let follows = rules.mode == Mode::Always || (rules.mode == Mode::Yes && rules.direct);
    if !resolved && !rules.permitted_cnames.is_empty() && follows {
        // OpenSSH also looks a direct host up here when canonicalization is off, only to give
        // up if it does not resolve; kharon skips that (the name cannot change), and keeps the
        // name when a lookup fails, so a resolver that is down at reload pins no refusal: the
        // dial fails instead.
        if let Some(found) = machine.lookup(&host, rules.family) {
            follow_cname(&mut host, found.canonical.as_deref(), rules);
        }
    }
    Ok(host)
}

/// `resolve_canonicalize` after its numeric step: `Some(name)` if a lookup succeeded.
fn by_suffix(host: &str, rules: &Rules<'_>, machine: &dyn Machine) -> Result<Option<String>, String> {
    if machine::looks_numeric(host) || rules.mode == Mode::No || host.is_empty() {
        return Ok(None);
    }
    if !rules.direct && rules.mode != Mode::Always {
        return Ok(None);
    }
    let mut tried = Vec::new();
    if host.ends_with('.') {
        tried.push(host.to_owned());
        if let Some(found) = machine.lookup(host, rules.family) {
            let mut name = host.trim_end_matches('.').to_owned();
            follow_cname(&mut name, found.canonical.as_deref(), rules);
            return Ok(Some(name));
        }
    } else {
        let dots = host.matches('.').count();
        if dots > rules.max_dots as usize {
            return Ok(None);
        }
        for domain in rules.domains {
            if domain.eq_ignore_ascii_case("none") {
                break;
            }
            let full = format!("{host}.{domain}.");
            let found = machine.lookup(&full, rules.family);
            tried.push(full);
            if let Some(found) = found {
                let mut name = format!("{host}.{domain}");
                follow_cname(&mut name, found.canonical.as_deref(), rules);
                tracing::debug!(from = host, to = %name, "canonicalized host name");
                return Ok(Some(name));
            }
        }
    }
    if rules.fallback_local {
        tracing::debug!(host, ?tried, "host name not canonicalized: no suffix resolves");
        return Ok(None);
    }
    Err(if tried.is_empty() {
        format!(
            "cannot canonicalize {host:?}: CanonicalDomains names no domain, and CanonicalizeFallbackLocal is no"
        )
    } else {
        format!(
            "cannot canonicalize {host:?}: none of {} resolves, and CanonicalizeFallbackLocal is no",
            tried.join(", ")
        )
    })
}

/// ssh.c `check_follow_cname`.
fn follow_cname(name: &mut String, cname: Option<&str>, rules: &Rules<'_>) {
    let Some(cname) = cname.map(|c| c.trim_end_matches('.')).filter(|c| !c.is_empty() && *c != name) else {
        return;
    };
    if rules.mode == Mode::No || (!rules.direct && rules.mode != Mode::Always) {
        return;
    }
    let allowed = rules.permitted_cnames.iter().any(|(source, target)| {
        pattern::list_match(name, source, true) && pattern::list_match(cname, target, true)
    });
    if allowed {
        tracing::debug!(from = %name, to = cname, "following a permitted CNAME");
        *name = cname.to_owned();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Found;
    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::Mutex;
    use std::time::Duration;

    /// Names that resolve only here (with IPv4 and IPv6 addresses, unless listed in `v6_only`),
    /// and every lookup made.
    #[derive(Debug, Default)]
    struct Dns {
        names: HashMap<String, Option<String>>,
        v6_only: Vec<String>,
        asked: Mutex<Vec<String>>,
    }

    impl Dns {
        fn with(names: &[(&str, Option<&str>)]) -> Self {
            Dns {
                names: names.iter().map(|(n, c)| (n.to_string(), c.map(str::to_owned))).collect(),
                v6_only: Vec::new(),
                asked: Mutex::default(),
            }
        }
        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }
    }

    impl Machine for Dns {
        fn lookup(&self, name: &str, family: AddressFamily) -> Option<Found> {
            self.asked.lock().unwrap().push(name.to_owned());
            if family == AddressFamily::Inet && self.v6_only.iter().any(|n| n == name) {
                return None;
            }
            self.names.get(name).map(|c| Found { canonical: c.clone() })
        }
        fn exec(&self, _: &Path, _: &str, _: Duration) -> Result<bool, String> {
            unreachable!()
        }
    }

    fn rules<'a>(mode: Mode, domains: &'a [String], cnames: &'a [(String, String)]) -> Rules<'a> {
        Rules {
            mode,
            domains,
            max_dots: 1,
            fallback_local: true,
            permitted_cnames: cnames,
            direct: true,
            family: AddressFamily::Any,
        }
    }

    #[test]
    fn address_family_limits_what_a_lookup_accepts() {
        let mut dns = Dns::with(&[("jump.a.example.", None), ("jump.b.example.", None)]);
        dns.v6_only.push("jump.a.example.".to_owned());
        let domains = strings(&["a.example", "b.example"]);
        let mut r = rules(Mode::Yes, &domains, &[]);
        assert_eq!(host_name("jump", &r, &dns), Ok("jump.a.example".into()));
        r.family = AddressFamily::Inet;
        assert_eq!(host_name("jump", &r, &dns), Ok("jump.b.example".into()), "no IPv4 address in a.example");
        // An address of the other family is not put in canonical form: ssh then fails to dial it.
        assert_eq!(host_name("0:0::1", &r, &dns), Ok("0:0::1".into()));
    }

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn first_domain_that_resolves_wins() {
        let dns = Dns::with(&[("jump.b.example.", None), ("jump.c.example.", None)]);
        let domains = strings(&["a.example", "b.example", "c.example"]);
        assert_eq!(host_name("Jump", &rules(Mode::Yes, &domains, &[]), &dns), Ok("jump.b.example".into()));
        assert_eq!(dns.asked(), ["jump.a.example.", "jump.b.example."]);
    }

    #[test]
    fn no_lookup_without_canonicalization_or_past_max_dots() {
        let dns = Dns::with(&[("a.b.c.corp.", None)]);
        let domains = strings(&["corp"]);
        assert_eq!(host_name("A.B", &rules(Mode::No, &domains, &[]), &dns), Ok("a.b".into()));
        assert_eq!(
            host_name("a.b.c", &rules(Mode::Yes, &domains, &[]), &dns),
            Ok("a.b.c".into()),
            "2 dots > 1"
        );
        let mut deep = rules(Mode::Yes, &domains, &[]);
        deep.max_dots = 2;
        assert_eq!(host_name("a.b.c", &deep, &dns), Ok("a.b.c.corp".into()));
        assert_eq!(dns.asked(), ["a.b.c.corp."]);
    }

    #[test]
    fn yes_skips_proxied_hosts_and_always_does_not() {
        let dns = Dns::with(&[("jump.corp.", None)]);
        let domains = strings(&["corp"]);
        let mut proxied = rules(Mode::Yes, &domains, &[]);
        proxied.direct = false;
        assert_eq!(host_name("jump", &proxied, &dns), Ok("jump".into()));
        proxied.mode = Mode::Always;
        assert_eq!(host_name("jump", &proxied, &dns), Ok("jump.corp".into()));
    }

    #[test]
    fn fallback_local_no_makes_an_unresolved_name_an_error() {
        let dns = Dns::default();
        let domains = strings(&["a.example", "none", "never.example"]);
        let mut strict = rules(Mode::Yes, &domains, &[]);
        assert_eq!(host_name("jump", &strict, &dns), Ok("jump".into()));
        strict.fallback_local = false;
        assert_eq!(
            host_name("jump", &strict, &dns),
            Err("cannot canonicalize \"jump\": none of jump.a.example. resolves, and CanonicalizeFallbackLocal is no"
                .into())
        );
        assert_eq!(dns.asked(), ["jump.a.example.", "jump.a.example."], "none ends the list");
    }

    #[test]
    fn anchored_names_and_addresses() {
        let dns = Dns::with(&[("jump.corp.", None)]);
        let r = rules(Mode::Yes, &[], &[]);
        assert_eq!(host_name("Jump.Corp.", &r, &dns), Ok("jump.corp".into()));
        assert_eq!(host_name("127.1", &rules(Mode::No, &[], &[]), &dns), Ok("127.0.0.1".into()));
        assert_eq!(host_name("FE80:0::1", &rules(Mode::No, &[], &[]), &dns), Ok("fe80::1".into()));
        assert_eq!(
            host_name("FE80::1", &rules(Mode::No, &[], &[]), &dns),
            Ok("FE80::1".into()),
            "same address text"
        );
        assert_eq!(host_name("10.0.0.300", &r, &dns), Ok("10.0.0.300".into()), "not an address, not a name");
        assert_eq!(dns.asked(), ["jump.corp."]);
    }

    #[test]
    fn cnames_are_followed_only_when_permitted() {
        let dns = Dns::with(&[("jump.corp.", Some("bastion-7.dc1.corp")), ("web", Some("web.other"))]);
        let domains = strings(&["corp"]);
        let none: Vec<(String, String)> = Vec::new();
        assert_eq!(host_name("jump", &rules(Mode::Yes, &domains, &none), &dns), Ok("jump.corp".into()));
        let permitted = vec![("*.corp".to_owned(), "*.dc1.corp".to_owned())];
        assert_eq!(
            host_name("jump", &rules(Mode::Yes, &domains, &permitted), &dns),
            Ok("bastion-7.dc1.corp".into())
        );
        // Not canonicalized by a suffix: the bare name is looked up for its CNAME.
        let any = vec![("*".to_owned(), "*".to_owned())];
        assert_eq!(host_name("web", &rules(Mode::Yes, &[], &any), &dns), Ok("web.other".into()));
        assert_eq!(host_name("web", &rules(Mode::No, &[], &any), &dns), Ok("web".into()));
    }
}
