//! The cluster URLs the `Test` RPC checks, read from the inventory when a table is loaded: each
//! cluster's API, console and OAuth URL, and what each points at (checked as strictly as a SOCKS
//! client's target: it is inventory data), or why it is unusable.

use kharon_routing::inventory::{self, fact};

use crate::routing::target::Target;

/// One URL of a cluster that `Test` checks, from one fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub cluster: String,
    /// What it is: "api", "console" or "oauth".
    pub kind: &'static str,
    /// The fact it came from, e.g. `openshiftConsoleURL`.
    pub fact: &'static str,
    /// The URL as checked (for the OAuth route: `https://` and the fact's host name, as Go kharon
    /// checks it: `TestClusters` in its internal/pkg/conntest/conntest.go).
    pub url: String,
    /// What to connect to, checked as strictly as a SOCKS client's target (it is inventory data),
    /// or why the URL is unusable.
    pub target: Result<Target, String>,
}

/// Each cluster's API and console URL (the distribution's own fact first, as `Cluster::api_url`
/// reads them) and OAuth route. Go kharon's test checks the same three
/// (`TestClusters`, internal/pkg/conntest/conntest.go).
pub fn of(clusters: &[inventory::Cluster]) -> Vec<Endpoint> {
    let mut out = Vec::new();
    for c in clusters.iter().filter(|c| !c.is_ignored()) {
        let own_first = |openshift: &'static str, talos: &'static str| match c.distribution() {
            inventory::Distribution::Talos => [talos, openshift],
            _ => [openshift, talos],
        };
        let first = |facts: [&'static str; 2]| {
            facts.into_iter().find_map(|f| c.dynamic_fact_str(f).map(|v| (f, v.to_owned())))
        };
        let urls = [
            ("api", first(own_first(fact::OPENSHIFT_API_URL, fact::TALOS_API_URL))),
            ("console", first(own_first(fact::OPENSHIFT_CONSOLE_URL, fact::TALOS_CONSOLE_URL))),
            (
                "oauth",
                c.dynamic_fact_str(fact::OPENSHIFT_OAUTH_ROUTE)
                    .map(|host| (fact::OPENSHIFT_OAUTH_ROUTE, format!("https://{host}"))),
            ),
        ];
        for (kind, found) in urls {
            if let Some((fact, url)) = found {
                out.push(Endpoint { cluster: c.id.clone(), kind, fact, target: target(&url), url });
            }
        }
    }
    // Stable, so a cluster's endpoints stay in api, console, oauth order.
    out.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out
}

/// What an http(s) URL points at, or what is wrong with it.
fn target(url: &str) -> Result<Target, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{url:?} is not a URL ({e})"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("{url:?} is not an http(s) URL"));
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_owned(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        None => return Err(format!("{url:?} has no host")),
    };
    let port = parsed.port_or_known_default().unwrap_or(443);
    Target::from_host(host.as_bytes(), port).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(json: &str) -> inventory::Cluster {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn endpoints_are_api_console_and_oauth_and_malformed_urls_say_why() {
        let clusters = [
            cluster(
                r#"{"id": "c-b", "facts": {"distribution": "openshift4"}, "dynamicFacts": {
                    "openshiftApiURL": "https://api.b.example:6443",
                    "openshiftConsoleURL": "https://console.apps.b.example",
                    "openshiftOAuthRoute": "oauth-openshift.apps.b.example"}}"#,
            ),
            cluster(
                r#"{"id": "c-a", "facts": {"distribution": "talos"}, "dynamicFacts": {
                    "talosApiURL": "https://[::1]:6443", "openshiftConsoleURL": "https://:99/"}}"#,
            ),
            cluster(
                r#"{"id": "c-gone", "facts": {"kharonIgnore": ""}, "dynamicFacts": {"openshiftApiURL": "https://x"}}"#,
            ),
            cluster(r#"{"id": "c-none", "dynamicFacts": {"openshiftApiURL": "api.none.example:6443"}}"#),
        ];
        let got = of(&clusters);
        let row = |i: usize| (got[i].cluster.as_str(), got[i].kind, got[i].fact, got[i].url.as_str());
        let target = |i: usize| got[i].target.clone();
        let ok = |h: &str, p: u16| Target::from_host(h.as_bytes(), p).map_err(|e| e.to_string());
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(row(0), ("c-a", "api", fact::TALOS_API_URL, "https://[::1]:6443"));
        assert_eq!(target(0), ok("::1", 6443));
        assert_eq!(row(1), ("c-a", "console", fact::OPENSHIFT_CONSOLE_URL, "https://:99/"));
        assert!(target(1).unwrap_err().contains("\"https://:99/\" is not a URL"), "{got:?}");
        assert_eq!(row(2), ("c-b", "api", fact::OPENSHIFT_API_URL, "https://api.b.example:6443"));
        assert_eq!(target(2), ok("api.b.example", 6443));
        assert_eq!(target(3), ok("console.apps.b.example", 443));
        // The OAuth route is a host name; Go kharon checks https:// it.
        assert_eq!(
            row(4),
            ("c-b", "oauth", fact::OPENSHIFT_OAUTH_ROUTE, "https://oauth-openshift.apps.b.example")
        );
        assert_eq!(target(4), ok("oauth-openshift.apps.b.example", 443));
        // Ignored clusters are not checked; a URL without a scheme is malformed, not skipped.
        assert_eq!(row(5), ("c-none", "api", fact::OPENSHIFT_API_URL, "api.none.example:6443"));
        assert!(target(5).unwrap_err().contains("is not an http(s) URL"), "{got:?}");
    }
}
