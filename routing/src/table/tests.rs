//! Table-driven tests of the routing rules, plus a property test against a naive model of them.

use super::*;
use serde_json::{Value, json};

fn cluster(value: Value) -> Cluster {
    serde_json::from_value(value).expect("test cluster parses")
}

/// A cluster routed through `jumphost` for `domains`, skipping `skip` (both comma-separated).
fn routed(id: &str, jumphost: &str, domains: &str, skip: &str) -> Cluster {
    let mut facts = serde_json::Map::new();
    facts.insert("jumphost".into(), json!(jumphost));
    if !domains.is_empty() {
        facts.insert("jumphostDomains".into(), json!(domains));
    }
    if !skip.is_empty() {
        facts.insert("jumphostSkipDomains".into(), json!(skip));
    }
    cluster(json!({"id": id, "tenant": "t-test", "facts": facts}))
}

const BASE: &str = "c-bettersmarter-prod01.vshnmanaged.net";
const JUMP: &str = "management4.rma1.bettersmarter.vshnmanaged.net";
const ID: &str = "c-bettersmarter-prod01";

/// The design document's example.
fn bettersmarter() -> Cluster {
    cluster(json!({
        "id": ID,
        "tenant": "t-bettersmarter",
        "displayName": "BetterSmarter Production",
        "facts": {
            "distribution": "openshift4",
            "jumphost": JUMP,
            "jumphostDomains": "vcenter.bettersmarter.ch,storage.bettersmarter.ch",
            "jumphostSkipDomains": format!("apps.{BASE}")
        },
        "dynamicFacts": {
            "openshiftBaseDomain": BASE,
            "openshiftAppsDomain": format!("apps.{BASE}"),
            "openshiftApiURL": format!("https://api.{BASE}:6443"),
            "openshiftConsoleURL": format!("https://console.apps.{BASE}"),
            "kubernetesVersion": {"major": "1", "minor": "30", "gitVersion": "v1.30.4+k3s1", "platform": "linux/amd64"},
            "openshiftVersion": {"Major": "4", "Minor": "17", "Patch": "12"}
        }
    }))
}

/// What a lookup should return: `None` for direct, else (jumphost, cluster, suffix).
type Want<'a> = Option<(&'a str, &'a str, &'a str)>;

/// Who routes `host`: `None` when it goes direct, else the jump host of the lookup with the
/// cluster and suffix that decided, as `explain` (the same walk) names them.
pub(super) fn routed_by(table: &RoutingTable, host: &str) -> Option<(String, String, String)> {
    let explanation = table.explain(host);
    match table.lookup(host) {
        Route::Direct => None,
        Route::Jumphost(jumphost) => {
            assert_eq!(
                explanation.jumphost.as_deref(),
                Some(&*jumphost),
                "explain({host:?}) agrees with lookup"
            );
            Some((jumphost.to_string(), explanation.cluster?, explanation.suffix?))
        }
    }
}

fn check(table: &RoutingTable, cases: &[(&str, Want<'_>, Rule)]) {
    for &(host, want, rule) in cases {
        let got = routed_by(table, host);
        let got = got.as_ref().map(|(j, c, s)| (j.as_str(), c.as_str(), s.as_str()));
        assert_eq!(got, want, "lookup({host:?})");
        let explanation = table.explain(host);
        assert_eq!(explanation.rule, rule, "explain({host:?}): {explanation:?}");
        assert_eq!(explanation.via, table.lookup(host).via(), "explain({host:?}) via");
        if let Some((jumphost, cluster, suffix)) = want {
            assert_eq!(explanation.jumphost.as_deref(), Some(jumphost), "explain({host:?})");
            assert_eq!(explanation.cluster.as_deref(), Some(cluster), "explain({host:?})");
            assert_eq!(explanation.suffix.as_deref(), Some(suffix), "explain({host:?})");
        } else {
            assert_eq!(explanation.jumphost, None, "explain({host:?})");
        }
    }
}

#[test]
fn design_example_routes_as_documented() {
    let table = RoutingTable::compile(&[bettersmarter()]);
    let api = format!("api.{BASE}");
    let myapp = format!("myapp.apps.{BASE}");
    let console = format!("console.apps.{BASE}");
    check(
        &table,
        &[
            (&api, Some((JUMP, ID, &api)), Rule::Include),
            (BASE, Some((JUMP, ID, BASE)), Rule::Include),
            (&format!("etcd-0.{BASE}"), Some((JUMP, ID, BASE)), Rule::Include),
            (&myapp, None, Rule::Exclude),
            (&console, None, Rule::Exclude),
            (&format!("apps.{BASE}"), None, Rule::Exclude),
            ("a.storage.bettersmarter.ch", Some((JUMP, ID, "storage.bettersmarter.ch")), Rule::Include),
            ("vcenter.bettersmarter.ch", Some((JUMP, ID, "vcenter.bettersmarter.ch")), Rule::Include),
            ("bettersmarter.ch", None, Rule::NoMatch),
            ("vshnmanaged.net", None, Rule::NoMatch),
        ],
    );
    let report = table.report();
    assert_eq!(
        (report.clusters_total, report.clusters_ignored, report.clusters_routed),
        (1, 0, 1),
        "{report:?}"
    );
    // console.apps and apps are removed by the cluster's own skip domain: 4 live includes remain.
    assert_eq!((report.include_suffixes, report.exclude_suffixes), (4, 1));
    assert!(report.conflicts.is_empty() && report.warnings.is_empty(), "{report:?}");
}

#[test]
fn design_example_explanations() {
    let table = RoutingTable::compile(&[bettersmarter()]);
    let e = table.explain(&format!("API.{BASE}."));
    assert_eq!(
        e,
        Explanation {
            host: format!("api.{BASE}"),
            via: Via::Jumphost,
            jumphost: Some(JUMP.into()),
            cluster: Some(ID.into()),
            suffix: Some(format!("api.{BASE}")),
            rule: Rule::Include,
            reason: format!("api.{BASE} matches include suffix api.{BASE} of cluster {ID} (jumphost {JUMP})"),
        }
    );
    let e = table.explain(&format!("myapp.apps.{BASE}"));
    assert_eq!(
        e,
        Explanation {
            host: format!("myapp.apps.{BASE}"),
            via: Via::Direct,
            jumphost: None,
            cluster: Some(ID.into()),
            suffix: Some(format!("apps.{BASE}")),
            rule: Rule::Exclude,
            reason: format!("excluded by jumphostSkipDomains apps.{BASE} of cluster {ID}"),
        }
    );
    let e = table.explain("www.example.com");
    assert_eq!((e.rule, e.reason.as_str(), e.cluster), (Rule::NoMatch, "no cluster claims this host", None));
    let e = table.explain("[2001:DB8::1]");
    assert_eq!(
        (e.rule, e.host.as_str(), e.reason.as_str()),
        (Rule::IpLiteral, "2001:db8::1", "IP literals are never routed")
    );
    let e = table.explain("a..b");
    assert_eq!(
        (e.rule, e.host.as_str(), e.reason.as_str()),
        (Rule::Invalid, "a..b", "not a valid host name: it has an empty label")
    );
}

#[test]
fn design_example_accessors() {
    let table = RoutingTable::compile(&[bettersmarter()]);
    let route = |suffix: &str| (suffix.to_owned(), JUMP.to_owned(), ID.to_owned());
    assert_eq!(
        table.routes(),
        [
            route(&format!("api.{BASE}")),
            route(BASE),
            route("storage.bettersmarter.ch"),
            route("vcenter.bettersmarter.ch")
        ]
    );
    assert_eq!(table.excludes(), [(format!("apps.{BASE}"), ID.to_owned())]);
    assert_eq!(table.jumphosts(), [JUMP]);
    assert_eq!(table.clusters(), [Claim { cluster: ID.into(), jumphost: JUMP.into() }]);
}

#[test]
fn matches_whole_labels_only() {
    let table = RoutingTable::compile(&[routed("c-1", "j1", "storage.example.ch", "")]);
    let hit = Some(("j1", "c-1", "storage.example.ch"));
    check(
        &table,
        &[
            ("storage.example.ch", hit, Rule::Include),
            ("a.storage.example.ch", hit, Rule::Include),
            ("a.b.c.storage.example.ch", hit, Rule::Include),
            ("xstorage.example.ch", None, Rule::NoMatch),
            ("storage.example.chx", None, Rule::NoMatch),
            ("example.ch", None, Rule::NoMatch),
            ("storage-example.ch", None, Rule::NoMatch),
        ],
    );
}

#[test]
fn case_and_trailing_dot_are_ignored() {
    let table =
        RoutingTable::compile(&[routed("c-1", "j1", "Storage.Example.CH.", "SKIP.storage.example.ch")]);
    let hit = Some(("j1", "c-1", "storage.example.ch"));
    check(
        &table,
        &[
            ("STORAGE.EXAMPLE.CH", hit, Rule::Include),
            ("Api.Storage.Example.Ch.", hit, Rule::Include),
            ("storage.example.ch.", hit, Rule::Include),
            ("x.Skip.Storage.example.ch.", None, Rule::Exclude),
        ],
    );
    assert_eq!(table.explain("Api.Storage.Example.Ch.").host, "api.storage.example.ch");
}

#[test]
fn ip_literals_and_invalid_names_go_direct() {
    // A suffix that looks like the reverse zone of an address must not catch IP literals.
    let table = RoutingTable::compile(&[routed("c-1", "j1", "4,3.4,example", "")]);
    check(
        &table,
        &[
            ("10.0.0.1", None, Rule::IpLiteral),
            ("1.2.3.4", None, Rule::IpLiteral),
            ("1.2.3.4.", None, Rule::IpLiteral),
            ("::1", None, Rule::IpLiteral),
            ("2001:db8::1", None, Rule::IpLiteral),
            ("[2001:db8::1]", None, Rule::IpLiteral),
            ("[::ffff:10.0.0.1]", None, Rule::IpLiteral),
            ("", None, Rule::Invalid),
            (".", None, Rule::Invalid),
            ("..", None, Rule::Invalid),
            ("a..example", None, Rule::Invalid),
            (".example", None, Rule::Invalid),
            ("bad host.example", None, Rule::Invalid),
            ("bücher.example", None, Rule::Invalid),
            ("[::1", None, Rule::Invalid),
            ("[1.2.3.4]", None, Rule::Invalid),
            ("host:80", None, Rule::Invalid),
            ("fe80::1%eth0", None, Rule::Invalid),
            (&format!("{}.example", "a".repeat(64)), None, Rule::Invalid),
            (&["abcdefghi"; 26].join("."), None, Rule::Invalid),
            // Not a valid IPv4 address, so a name: it may route.
            ("1.2.3.4.5.3.4", Some(("j1", "c-1", "3.4")), Rule::Include),
            ("a.example", Some(("j1", "c-1", "example")), Rule::Include),
        ],
    );
    assert_eq!(
        table.explain("a..example").reason,
        "not a valid host name: it has an empty label",
        "the message names the problem"
    );
}

#[test]
fn longest_include_wins_across_clusters() {
    let table = RoutingTable::compile(&[
        routed("c-1", "j1", "example.com", ""),
        routed("c-2", "j2", "api.example.com", ""),
        routed("c-0", "j0", "deep.api.example.com", ""),
    ]);
    check(
        &table,
        &[
            ("www.example.com", Some(("j1", "c-1", "example.com")), Rule::Include),
            ("api.example.com", Some(("j2", "c-2", "api.example.com")), Rule::Include),
            ("x.api.example.com", Some(("j2", "c-2", "api.example.com")), Rule::Include),
            ("x.deep.api.example.com", Some(("j0", "c-0", "deep.api.example.com")), Rule::Include),
        ],
    );
}

#[test]
fn exclusion_beats_a_more_specific_include_of_the_same_cluster() {
    // The skip domain is shorter than the include: console.apps.x is dropped, not routed.
    let table =
        RoutingTable::compile(&[routed("c-1", "j1", "console.apps.x.example,x.example", "apps.x.example")]);
    check(
        &table,
        &[
            ("console.apps.x.example", None, Rule::Exclude),
            ("a.console.apps.x.example", None, Rule::Exclude),
            ("api.x.example", Some(("j1", "c-1", "x.example")), Rule::Include),
        ],
    );
    assert!(table.report().warnings.is_empty(), "{:?}", table.report().warnings);
}

#[test]
fn exclusion_of_another_cluster_does_not_block() {
    let table = RoutingTable::compile(&[
        // c-1 routes x.example but not its apps; c-2 routes those apps through its own jumphost.
        routed("c-1", "j1", "x.example", "apps.x.example"),
        routed("c-2", "j2", "apps.x.example", ""),
        // c-3 excludes something only c-4 routes: no effect on c-4 (and a warning for c-3).
        routed("c-3", "j3", "z.example", "y.example"),
        routed("c-4", "j4", "y.example", ""),
    ]);
    check(
        &table,
        &[
            ("app.apps.x.example", Some(("j2", "c-2", "apps.x.example")), Rule::Include),
            ("api.x.example", Some(("j1", "c-1", "x.example")), Rule::Include),
            ("a.y.example", Some(("j4", "c-4", "y.example")), Rule::Include),
        ],
    );
    assert_eq!(
        table.report().warnings,
        [
            "cluster c-3: jumphostSkipDomains y.example is not below any domain the cluster routes; it has no effect"
        ]
    );
}

#[test]
fn excluded_winner_falls_back_to_the_next_claim() {
    let table = RoutingTable::compile(&[
        // Same suffix: c-1 wins the conflict but excludes apps, so c-2 takes apps hosts.
        routed("c-1", "j1", "x.example", "apps.x.example"),
        routed("c-2", "j2", "x.example", ""),
        // Shorter suffix from another cluster: takes what c-5 excludes.
        routed("c-5", "j5", "w.example", "apps.w.example"),
        routed("c-6", "j6", "example", ""),
    ]);
    check(
        &table,
        &[
            ("api.x.example", Some(("j1", "c-1", "x.example")), Rule::Include),
            ("a.apps.x.example", Some(("j2", "c-2", "x.example")), Rule::Include),
            ("api.w.example", Some(("j5", "c-5", "w.example")), Rule::Include),
            ("a.apps.w.example", Some(("j6", "c-6", "example")), Rule::Include),
        ],
    );
    assert_eq!(
        table.explain("a.apps.x.example").reason,
        "a.apps.x.example matches include suffix x.example of cluster c-2 (jumphost j2); \
         cluster c-1 also claims it but excludes it by jumphostSkipDomains apps.x.example"
    );
}

#[test]
fn conflicts_are_reported_and_lowest_cluster_id_wins() {
    let clusters = [
        routed("c-3", "j3", "shared.example", ""),
        routed("c-1", "j1", "shared.example,one.example", ""),
        routed("c-2", "j1", "shared.example", ""),
        routed("c-4", "j4", "four.example,one.example", ""),
    ];
    let table = RoutingTable::compile(&clusters);
    check(
        &table,
        &[
            ("a.shared.example", Some(("j1", "c-1", "shared.example")), Rule::Include),
            ("a.one.example", Some(("j1", "c-1", "one.example")), Rule::Include),
        ],
    );
    let claim = |cluster: &str, jumphost: &str| Claim { cluster: cluster.into(), jumphost: jumphost.into() };
    assert_eq!(
        table.report().conflicts,
        [
            Conflict {
                suffix: "one.example".into(),
                winner: claim("c-1", "j1"),
                shadowed: vec![claim("c-4", "j4")]
            },
            // c-2 uses the winner's jumphost, so it is no conflict.
            Conflict {
                suffix: "shared.example".into(),
                winner: claim("c-1", "j1"),
                shadowed: vec![claim("c-3", "j3")]
            },
        ]
    );
    assert_eq!(table.jumphosts(), ["j1", "j3", "j4"]);

    // Every order of the same inventory compiles to the same table.
    let hosts = ["a.shared.example", "a.one.example", "four.example", "nothing.example"];
    let mut permuted = clusters.to_vec();
    for rotation in 0..clusters.len() {
        permuted.rotate_left(1);
        for reversed in [false, true] {
            if reversed {
                permuted.reverse();
            }
            let other = RoutingTable::compile(&permuted);
            assert_eq!(other.report(), table.report(), "rotation {rotation}, reversed {reversed}");
            assert_eq!(other.routes(), table.routes());
            for host in hosts {
                assert_eq!(other.explain(host), table.explain(host), "{host}");
            }
        }
    }
}

#[test]
fn same_suffix_same_jumphost_is_no_conflict() {
    let table = RoutingTable::compile(&[
        routed("c-2", "j1", "shared.example", ""),
        routed("c-1", "j1", "shared.example", ""),
    ]);
    assert!(table.report().conflicts.is_empty());
    assert_eq!(table.routes(), [("shared.example".to_owned(), "j1".to_owned(), "c-1".to_owned())]);
}

#[test]
fn ignored_and_direct_clusters_route_nothing() {
    let mut ignored = routed("c-1", "j1", "ignored.example", "");
    ignored.facts.insert("kharonIgnore".into(), json!(""));
    let direct = cluster(json!({"id": "c-2", "facts": {"jumphostDomains": "direct.example"},
        "dynamicFacts": {"openshiftBaseDomain": "c-2.example"}}));
    let table = RoutingTable::compile(&[ignored, direct, routed("c-3", "j3", "kept.example", "")]);
    check(
        &table,
        &[
            ("a.ignored.example", None, Rule::NoMatch),
            ("a.direct.example", None, Rule::NoMatch),
            ("api.c-2.example", None, Rule::NoMatch),
            ("a.kept.example", Some(("j3", "c-3", "kept.example")), Rule::Include),
        ],
    );
    let report = table.report();
    assert_eq!(
        (report.clusters_total, report.clusters_ignored, report.clusters_routed, report.include_suffixes),
        (3, 1, 1, 1)
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
}

#[test]
fn warnings_name_the_cluster_and_the_fact() {
    let table = RoutingTable::compile(&[
        routed("c-1", "jump-1", "", ""),
        routed("c-2", "jump-2", "a.example", "example"),
        routed("c-3", "jump-3", "ok.example,bad..example", ""),
        cluster(json!({"id": "c-4", "facts": {"jumphost": "jump-4", "jumphostDomains": "ipmi.c-4.example"},
            "dynamicFacts": {"openshiftBaseDomain": 12, "openshiftApiURL": "https://api.c-4.example:6443"}})),
    ]);
    assert_eq!(
        table.report().warnings,
        [
            "cluster c-1 has jumphost jump-1 but no domains; nothing is routed through it",
            "cluster c-2 has jumphost jump-2 but jumphostSkipDomains cover all its domains; nothing is routed through it",
            r#"cluster c-3: jumphostDomains value "bad..example" is not a valid domain suffix: it has an empty label; it is ignored"#,
            r#"cluster c-4: openshiftBaseDomain value "12" is not a valid domain suffix: it is not a string; it is ignored"#,
        ]
    );
    assert_eq!(table.report().clusters_routed, 2);
    check(
        &table,
        &[
            ("x.ok.example", Some(("jump-3", "c-3", "ok.example")), Rule::Include),
            ("api.c-4.example", Some(("jump-4", "c-4", "api.c-4.example")), Rule::Include),
        ],
    );
}

/// A `jumphost` fact reaches ssh_config `%h`/`%n` and so a `ProxyCommand` run by
/// `sh -c`; a value that is not a plain alias must never get that far.
#[test]
fn a_hostile_or_non_string_jumphost_is_refused_and_reported() {
    let table = RoutingTable::compile(&[
        routed("c-evil", "$(touch /tmp/x).jump.test", "evil.example", ""),
        routed("c-good", "jump-good", "good.example", ""),
        routed("c-opt", "-oProxyCommand=id", "opt.example", ""),
        cluster(json!({"id": "c-num", "facts": {"jumphost": 42, "jumphostDomains": "num.example"}})),
        cluster(json!({"id": "c-obj", "facts": {"jumphost": {"a": 1}, "jumphostDomains": "obj.example"}})),
        routed("c-tick", "a`id`", "tick.example", ""),
        routed("c-nl", "jump\nx", "nl.example", ""),
    ]);
    assert_eq!(
        table.report().warnings,
        [
            r#"cluster c-evil: jumphost value "$(touch /tmp/x).jump.test" is not a valid ssh_config Host alias: character '$' is not allowed (only letters, digits, '-', '_' and '.'); the cluster routes nothing"#,
            r#"cluster c-nl: jumphost value "jump\nx" is not a valid ssh_config Host alias: character '\n' is not allowed (only letters, digits, '-', '_' and '.'); the cluster routes nothing"#,
            r#"cluster c-num: jumphost value "42" is not a valid ssh_config Host alias: it is not a string; the cluster routes nothing"#,
            r#"cluster c-obj: jumphost value "{\"a\":1}" is not a valid ssh_config Host alias: it is not a string; the cluster routes nothing"#,
            r#"cluster c-opt: jumphost value "-oProxyCommand=id" is not a valid ssh_config Host alias: it starts with '-', which ssh would read as an option; the cluster routes nothing"#,
            r#"cluster c-tick: jumphost value "a`id`" is not a valid ssh_config Host alias: character '`' is not allowed (only letters, digits, '-', '_' and '.'); the cluster routes nothing"#,
        ]
    );
    assert_eq!(table.jumphosts(), ["jump-good"]);
    assert_eq!(table.report().clusters_routed, 1);
    check(
        &table,
        &[
            ("api.evil.example", None, Rule::NoMatch),
            ("api.num.example", None, Rule::NoMatch),
            ("api.good.example", Some(("jump-good", "c-good", "good.example")), Rule::Include),
        ],
    );
}

#[test]
fn non_string_dynamic_facts_are_ignored_gracefully() {
    let c = cluster(json!({"id": "c-1", "facts": {"jumphost": "j1", "distribution": "openshift4",
        "jumphostDomains": "ipmi.c-1.example"},
    "dynamicFacts": {
        "kubernetesVersion": {"major": "1", "minor": "29"},
        "openshiftVersion": {"Major": "4", "Minor": "16", "Patch": "3"},
        "openshiftAppsDomain": ["apps.c-1.example"],
        "openshiftConsoleURL": null,
        "openshiftBaseDomain": "c-1.example",
        "someCounter": 3.5
    }}));
    let table = RoutingTable::compile(&[c]);
    check(&table, &[("api.c-1.example", Some(("j1", "c-1", "c-1.example")), Rule::Include)]);
    assert_eq!(table.report().warnings.len(), 1, "only the domain fact warns: {:?}", table.report().warnings);
}

#[test]
fn duplicate_cluster_ids_are_reported() {
    let table =
        RoutingTable::compile(&[routed("c-1", "j2", "a.example", ""), routed("c-1", "j1", "a.example", "")]);
    assert_eq!(
        table.report().warnings,
        ["cluster c-1 appears more than once in the inventory; every copy is used, lowest jumphost first"]
    );
    assert_eq!(table.lookup("a.example").jumphost(), Some("j1"));
    assert_eq!(table.report().conflicts.len(), 1);
}

#[test]
fn empty_table_sends_everything_direct() {
    let table = RoutingTable::empty();
    check(&table, &[("a.example", None, Rule::NoMatch), ("10.0.0.1", None, Rule::IpLiteral)]);
    assert!(table.routes().is_empty() && table.jumphosts().is_empty() && table.excludes().is_empty());
    assert_eq!(table.report(), &CompileReport::default());
}

#[test]
fn table_is_shareable_across_threads() {
    fn assert_traits<T: Send + Sync + std::fmt::Debug>() {}
    assert_traits::<RoutingTable>();
    assert_eq!(Rule::Exclude.as_str(), "exclude");
    assert_eq!(Via::Jumphost.to_string(), "jumphost");
    assert_eq!(Route::Direct.via(), Via::Direct);
}

#[test]
fn example_inventory_compiles_cleanly() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/examples/inventory.json");
    let clusters = inventory::load_file(&path).expect("contrib/examples/inventory.json parses");
    let table = RoutingTable::compile(&clusters);
    let report = table.report();
    assert!(report.conflicts.is_empty() && report.warnings.is_empty(), "{report:?}");
    assert!(report.refused.is_empty(), "{report:?}");
    assert_eq!(report.clusters_ignored, 1);
    check(
        &table,
        &[
            (&format!("api.{BASE}"), Some((JUMP, ID, &format!("api.{BASE}"))), Rule::Include),
            (&format!("myapp.apps.{BASE}"), None, Rule::Exclude),
        ],
    );
}

/// What a cluster reports about itself may route its own names, never another cluster's,
/// a whole domain, a public suffix or a host kharon itself talks to.
#[test]
fn dynamic_claims_beyond_the_clusters_own_names_are_refused_and_named() {
    let victim = cluster(json!({"id": "c-victim", "facts": {"jumphost": "jump-v"}, "dynamicFacts": {
        "openshiftBaseDomain": "c-victim.example.net",
        "openshiftApiURL": "https://api.c-victim.example.net:6443"
    }}));
    let attacker =
        cluster(json!({"id": "c-x", "facts": {"jumphost": "jump-x", "jumphostDomains": "vpn.customer.ch"},
            "dynamicFacts": {
                "openshiftBaseDomain": "c-x.example.net",
                "openshiftApiURL": "https://api.c-victim.example.net:6443",
                "openshiftConsoleURL": "https://console.apps.c-x.example.net",
                "openshiftAppsDomain": "co.uk",
                "talosBaseDomain": "vshnmanaged.net",
                "talosAppsDomain": "syn.vshn.net"
        }}));
    let typo = routed("c-typo", "jump-t", "ch,storage.typo.ch", "");
    let mut own = OwnHosts::default();
    own.add_url("Lieutenant", "https://api.syn.vshn.net");
    // Both jump hosts are aliases, which anchor nothing: the engineer's zone anchors their names,
    // so that the rules between clusters decide.
    let zone = Anchors::new(&["example.net".to_owned()]);
    let table = RoutingTable::compile_with(&[attacker, victim, typo], &own, &zone);
    check(
        &table,
        &[
            // The victim keeps its API; the attacker keeps its own names and its static ones.
            (
                "api.c-victim.example.net",
                Some(("jump-v", "c-victim", "api.c-victim.example.net")),
                Rule::Include,
            ),
            (
                "etcd.c-victim.example.net",
                Some(("jump-v", "c-victim", "c-victim.example.net")),
                Rule::Include,
            ),
            ("api.c-x.example.net", Some(("jump-x", "c-x", "c-x.example.net")), Rule::Include),
            (
                "console.apps.c-x.example.net",
                Some(("jump-x", "c-x", "console.apps.c-x.example.net")),
                Rule::Include,
            ),
            ("a.vpn.customer.ch", Some(("jump-x", "c-x", "vpn.customer.ch")), Rule::Include),
            ("www.example.co.uk", None, Rule::NoMatch),
            ("www.vshnmanaged.net", None, Rule::NoMatch),
            ("api.syn.vshn.net", None, Rule::NoMatch),
            ("www.admin.ch", None, Rule::NoMatch),
            ("x.storage.typo.ch", Some(("jump-t", "c-typo", "storage.typo.ch")), Rule::Include),
        ],
    );
    let refused: Vec<String> = table.report().refused.iter().map(ToString::to_string).collect();
    assert_eq!(
        refused,
        [
            r#"cluster c-typo: jumphostDomains "ch" refused: ch is a public suffix (Public Suffix List): it would route every domain under it"#,
            r#"cluster c-x: openshiftAppsDomain "co.uk" refused: co.uk is a public suffix (Public Suffix List): it would route every domain under it"#,
            r#"cluster c-x: talosBaseDomain "vshnmanaged.net" refused: vshnmanaged.net is a registrable domain (Public Suffix List): a cluster's dynamic facts may claim names inside a domain, never a whole one"#,
            r#"cluster c-x: talosAppsDomain "syn.vshn.net" refused: syn.vshn.net covers api.syn.vshn.net, which kharon itself talks to (Lieutenant)"#,
            r#"cluster c-x: openshiftApiURL "https://api.c-victim.example.net:6443" refused: api.c-victim.example.net carries the id of cluster c-victim inside its anchor example.net: the names of c-victim.example.net are c-victim's (Lieutenant's cluster ids are VSHN's word, not a cluster's report); if this cluster is meant to route it, add it to this cluster's jumphostDomains in Lieutenant"#,
        ]
    );
    assert!(table.report().warnings.is_empty(), "{:?}", table.report().warnings);
    // Without the host to protect, the same name routes.
    let table = RoutingTable::compile_with(
        &[cluster(json!({"id": "c-x", "facts": {"jumphost": "jump-x"},
            "dynamicFacts": {"talosAppsDomain": "syn.vshn.net"}}))],
        &OwnHosts::default(),
        &Anchors::new(&["vshn.net".to_owned()]),
    );
    assert_eq!(table.lookup("api.syn.vshn.net").jumphost(), Some("jump-x"));
}

#[test]
fn a_cluster_whose_every_name_is_refused_routes_nothing_and_says_so() {
    let zone = Anchors::new(&["example".to_owned()]);
    let table = RoutingTable::compile_with(
        &[
            cluster(
                json!({"id": "c-1", "facts": {"jumphost": "j1"}, "dynamicFacts": {"openshiftBaseDomain": "co.uk"}}),
            ),
            cluster(json!({"id": "c-2", "facts": {"jumphost": "j2", "jumphostSkipDomains": "b.example"},
            "dynamicFacts": {"openshiftBaseDomain": "a.example", "openshiftAppsDomain": "b.example"}})),
            cluster(
                json!({"id": "c-3", "facts": {"jumphost": "j3"}, "dynamicFacts": {"openshiftBaseDomain": "a.example"}}),
            ),
        ],
        &OwnHosts::default(),
        &zone,
    );
    assert_eq!(
        table.report().warnings,
        [
            "cluster c-1 has jumphost j1 but every domain it claims is refused (see the refusals); nothing is routed through it",
            "cluster c-2 has jumphost j2 but its domains are refused or covered by its jumphostSkipDomains; nothing is routed through it",
            "cluster c-3 has jumphost j3 but every domain it claims is refused (see the refusals); nothing is routed through it",
        ]
    );
    assert_eq!(table.report().refused.len(), 3, "{:?}", table.report().refused);
    assert_eq!(table.report().clusters_routed, 0);
}

/// An inventory with a cluster that reports the whole internet, and another cluster's loose
/// apps domain as its base domain, routes none of it; its own anchored names still route.
#[test]
fn dynamic_names_outside_the_clusters_anchors_are_refused_and_say_what_to_do() {
    let good = cluster(
        json!({"id": "c-good", "facts": {"jumphost": "jump-g", "jumphostDomains": "vpn.good-customer.ch"},
        "dynamicFacts": {"openshiftBaseDomain": "c-good.good-customer.ch",
                         "openshiftAppsDomain": "apps.good-customer.ch"}}),
    );
    let mallory = cluster(json!({"id": "c-mallory", "facts": {"jumphost": "jump-m.example.net",
    "jumphostDomains": "c-mallory.example.org"},
    "dynamicFacts": {
        "openshiftApiURL": "https://api.github.com",
        "openshiftConsoleURL": "https://login.microsoftonline.com/common",
        "openshiftAppsDomain": "www.google.com",
        "openshiftBaseDomain": "apps.good-customer.ch",
        "talosBaseDomain": "c-mallory.example.net",
        "talosApiURL": "https://api.c-mallory2.example.org:6443"
    }}));
    let table = RoutingTable::compile(&[good, mallory]);
    check(
        &table,
        &[
            ("api.github.com", None, Rule::NoMatch),
            ("login.microsoftonline.com", None, Rule::NoMatch),
            ("www.google.com", None, Rule::NoMatch),
            ("foo.apps.good-customer.ch", Some(("jump-g", "c-good", "apps.good-customer.ch")), Rule::Include),
            (
                "api.c-good.good-customer.ch",
                Some(("jump-g", "c-good", "c-good.good-customer.ch")),
                Rule::Include,
            ),
            // Anchored by its jump host's name (example.net) and by its static name (example.org).
            (
                "api.c-mallory.example.net",
                Some(("jump-m.example.net", "c-mallory", "c-mallory.example.net")),
                Rule::Include,
            ),
            (
                "api.c-mallory2.example.org",
                Some(("jump-m.example.net", "c-mallory", "api.c-mallory2.example.org")),
                Rule::Include,
            ),
        ],
    );
    let refused: Vec<String> = table.report().refused.iter().map(ToString::to_string).collect();
    let why = |name: &str| {
        format!(
            "{name} lies outside every domain tied to the cluster by something other than its own report (it \
             has: example.net, example.org); to route it, add its domain to the cluster's jumphostDomains in \
             Lieutenant, or to dynamic_domains in your config file; kharonctl reads no ssh_config: kharond \
             also counts the domain of the jump host's HostName there"
        )
    };
    assert_eq!(
        refused,
        [
            format!(
                r#"cluster c-mallory: openshiftConsoleURL "https://login.microsoftonline.com/common" refused: {}"#,
                why("login.microsoftonline.com")
            ),
            format!(
                r#"cluster c-mallory: openshiftBaseDomain "apps.good-customer.ch" refused: {}"#,
                why("apps.good-customer.ch")
            ),
            format!(
                r#"cluster c-mallory: openshiftApiURL "https://api.github.com" refused: {}"#,
                why("api.github.com")
            ),
            format!(
                r#"cluster c-mallory: openshiftAppsDomain "www.google.com" refused: {}"#,
                why("www.google.com")
            ),
        ]
    );
}

/// The anchors a cluster cannot set itself: the config file's zones and the HostName the
/// engineer's ssh_config gives its jump host.
#[test]
fn config_zones_and_the_jump_hosts_host_name_anchor_dynamic_names() {
    let c = |id: &str, jumphost: &str, base: &str| {
        cluster(
            json!({"id": id, "facts": {"jumphost": jumphost}, "dynamicFacts": {"openshiftBaseDomain": base}}),
        )
    };
    let clusters = [
        c("c-cloud", "jump-cloud", "cloudscale-lpg-2.appuio.cloud"),
        c("c-ssh", "bastion", "c-ssh.customer.ch"),
        c("c-none", "bastion", "c-none.elsewhere.ch"),
    ];
    let mut anchors = Anchors::new(&["appuio.cloud".to_owned()]);
    anchors.add_host_name("bastion", "jump.rma1.customer.ch");
    let table = RoutingTable::compile_with(&clusters, &OwnHosts::default(), &anchors);
    check(
        &table,
        &[
            (
                "api.cloudscale-lpg-2.appuio.cloud",
                Some(("jump-cloud", "c-cloud", "cloudscale-lpg-2.appuio.cloud")),
                Rule::Include,
            ),
            ("api.c-ssh.customer.ch", Some(("bastion", "c-ssh", "c-ssh.customer.ch")), Rule::Include),
            ("api.c-none.elsewhere.ch", None, Rule::NoMatch),
        ],
    );
    let refused = &table.report().refused;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].to_string().ends_with("(it has: customer.ch, appuio.cloud); to route it, add its domain to the cluster's jumphostDomains in Lieutenant, or to dynamic_domains in your config file"),
        "{}",
        refused[0]
    );
    // Without them, none of it routes.
    assert_eq!(RoutingTable::compile(&clusters).report().refused.len(), 3);
}

/// Nesting: a name is refused only for equalling or lying inside another
/// cluster's claim at least as strong, never for containing one; the longest suffix decides.
#[test]
fn an_outer_clusters_dynamic_domain_routes_around_an_inner_clusters_static_one() {
    let outer = cluster(
        json!({"id": "c-outer", "facts": {"jumphost": "jump-o", "jumphostDomains": "vcenter.outer-dc.example.net"},
        "dynamicFacts": {"openshiftBaseDomain": "c-outer.example.net"}}),
    );
    let inner = routed("c-inner", "jump-i", "inner.c-outer.example.net", "");
    let table = RoutingTable::compile(&[outer, inner]);
    check(
        &table,
        &[
            ("y.c-outer.example.net", Some(("jump-o", "c-outer", "c-outer.example.net")), Rule::Include),
            (
                "x.inner.c-outer.example.net",
                Some(("jump-i", "c-inner", "inner.c-outer.example.net")),
                Rule::Include,
            ),
            (
                "inner.c-outer.example.net",
                Some(("jump-i", "c-inner", "inner.c-outer.example.net")),
                Rule::Include,
            ),
        ],
    );
    assert!(table.report().refused.is_empty(), "{:?}", table.report().refused);
}

mod model {
    //! The rules stated naively, straight from the inventory, with none of the compile-time
    //! pruning: `lookup` must agree with this for any inventory and host.

    use super::*;
    use proptest::prelude::*;

    fn at_or_below(host: &str, suffix: &str) -> bool {
        host == suffix || host.ends_with(&format!(".{suffix}"))
    }

    fn naive(clusters: &[Cluster], host: &str) -> Option<(String, String, String)> {
        let mut best: Option<(std::cmp::Reverse<usize>, String, String, String)> = None;
        for c in clusters {
            let Some(jumphost) = c.jumphost() else { continue };
            let facts = c.routing_facts();
            if facts.exclude.iter().any(|e| at_or_below(host, e)) {
                continue;
            }
            for s in facts.include.iter().filter(|s| at_or_below(host, s)) {
                let key = (std::cmp::Reverse(s.len()), c.id.clone(), jumphost.to_owned(), s.clone());
                if best.as_ref().is_none_or(|b| key < *b) {
                    best = Some(key);
                }
            }
        }
        best.map(|(_, id, jumphost, suffix)| (jumphost, id, suffix))
    }

    /// Names over a tiny alphabet so that suffixes, hosts and exclusions overlap often.
    fn name(max_labels: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "x", "api", "apps"]), 1..=max_labels)
            .prop_map(|labels| labels.join("."))
    }

    fn inventory() -> impl Strategy<Value = Vec<Cluster>> {
        prop::collection::vec(
            (
                prop::sample::select(vec!["j1", "j2", "j3"]),
                prop::collection::vec(name(3), 0..4),
                prop::collection::vec(name(4), 0..3),
                any::<bool>(),
            ),
            1..6,
        )
        .prop_map(|specs| {
            specs
                .into_iter()
                .enumerate()
                .map(|(i, (jumphost, include, exclude, ignored))| {
                    let mut c = routed(&format!("c-{i}"), jumphost, &include.join(","), &exclude.join(","));
                    if ignored && i % 3 == 0 {
                        c.facts.insert("kharonIgnore".into(), json!("yes"));
                    }
                    c
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn lookup_agrees_with_the_naive_rules(clusters in inventory(), hosts in prop::collection::vec(name(5), 1..20)) {
            let table = RoutingTable::compile(&clusters);
            let mut reversed = clusters.clone();
            reversed.reverse();
            let other = RoutingTable::compile(&reversed);
            for host in &hosts {
                prop_assert_eq!(&routed_by(&table, host), &naive(&clusters, host), "host {}", host);
                prop_assert_eq!(table.explain(host), other.explain(host));
            }
        }
    }
}

#[test]
fn a_route_says_its_way_in_a_word_and_in_a_sentence() {
    let table = RoutingTable::compile(&[cluster(
        json!({"id": "c-a", "facts": {"jumphost": "jump-a", "jumphostDomains": "a.example"}}),
    )]);
    let routed = table.lookup("api.a.example");
    assert_eq!(routed, Route::Jumphost("jump-a".into()));
    assert_eq!((routed.via(), routed.jumphost(), routed.label()), (Via::Jumphost, Some("jump-a"), "jump-a"));
    assert_eq!(routed.to_string(), "via jump host jump-a");
    let direct = table.lookup("example.org");
    assert_eq!((direct.via(), direct.jumphost(), direct.label()), (Via::Direct, None, "direct"));
    assert_eq!(direct.to_string(), "directly");
    // Two clusters behind one jump host share its name: a route is that name, not a copy.
    let two = RoutingTable::compile(&[
        cluster(json!({"id": "c-a", "facts": {"jumphost": "jump-a", "jumphostDomains": "a.example"}})),
        cluster(json!({"id": "c-b", "facts": {"jumphost": "jump-a", "jumphostDomains": "b.example"}})),
    ]);
    let (Route::Jumphost(a), Route::Jumphost(b)) = (two.lookup("x.a.example"), two.lookup("x.b.example"))
    else {
        panic!("both routed");
    };
    assert!(Arc::ptr_eq(&a, &b));
}

#[test]
fn distinct_sorted_keeps_each_name_once_in_order() {
    let names = ["j3", "j1", "j3", "j2", "j1", "j3"];
    assert_eq!(distinct_sorted(names.iter().copied().cycle().take(6_000)), ["j1", "j2", "j3"]);
    assert!(distinct_sorted(std::iter::empty()).is_empty());
}
