//! The cluster id and the provider's domains (`owner`, `provider`), through the compile: one
//! customer's cluster cannot switch off another's, nor draw the provider's own hosts into its
//! network, while clusters keep the names VSHN gave them.

use super::*;
use serde_json::{Value, json};

fn cluster(value: Value) -> Cluster {
    serde_json::from_value(value).expect("test cluster parses")
}

/// A cluster of `tenant` behind the jump host `jumphost`, with `dynamic` facts.
fn reporting(id: &str, tenant: &str, jumphost: &str, dynamic: Value) -> Cluster {
    cluster(json!({"id": id, "tenant": tenant, "facts": {"distribution": "openshift4", "jumphost": jumphost},
        "dynamicFacts": dynamic}))
}

/// Who routes `host`: (jumphost, cluster, suffix), or `None` when it goes direct.
fn route(table: &RoutingTable, host: &str) -> Option<(String, String, String)> {
    super::tests::routed_by(table, host)
}

fn via(jumphost: &str, cluster: &str, suffix: &str) -> Option<(String, String, String)> {
    Some((jumphost.to_owned(), cluster.to_owned(), suffix.to_owned()))
}

fn refused(table: &RoutingTable) -> Vec<String> {
    table.report().refused.iter().map(ToString::to_string).collect()
}

const VICTIM_JUMP: &str = "jump1.victim.vshnmanaged.net";
const MALLORY_JUMP: &str = "jump.mallory.vshnmanaged.net";
const OTHER_JUMP: &str = "jump.other.vshnmanaged.net";

/// The issue's three clusters, each of its own tenant, every jump host in `vshnmanaged.net`.
fn shared_provider() -> Vec<Cluster> {
    vec![
        reporting(
            "c-victim",
            "t-victim",
            VICTIM_JUMP,
            json!({
            "openshiftBaseDomain": "c-victim.vshnmanaged.net",
            "openshiftAppsDomain": "apps.c-victim.vshnmanaged.net",
            "openshiftApiURL": "https://api.c-victim.vshnmanaged.net:6443"}),
        ),
        reporting(
            "c-mallory",
            "t-mallory",
            MALLORY_JUMP,
            json!({
            // Row 1: another customer's cluster id as its base domain.
            "openshiftBaseDomain": "c-victim.vshnmanaged.net",
            // Row 2: a provider's name that no cluster claims.
            "openshiftApiURL": "https://vault.vshnmanaged.net:6443",
            // Row 3: under another cluster's base domain.
            "openshiftConsoleURL": "https://console.apps.c-other.vshnmanaged.net",
            // Its own name, by its id.
            "openshiftAppsDomain": "apps.c-mallory.vshnmanaged.net"}),
        ),
        reporting(
            "c-other",
            "t-other",
            OTHER_JUMP,
            json!({"openshiftBaseDomain": "c-other.vshnmanaged.net"}),
        ),
    ]
}

fn named_after(name: &str, owner: &str) -> String {
    format!(
        "{name} carries the id of cluster {owner} inside its anchor vshnmanaged.net: the names of \
         {owner}.vshnmanaged.net are {owner}'s (Lieutenant's cluster ids are VSHN's word, not a cluster's \
         report); if this cluster is meant to route it, add it to this cluster's jumphostDomains in Lieutenant"
    )
}

#[test]
fn one_customers_cluster_cannot_switch_off_another_nor_draw_in_the_providers_hosts() {
    let table = RoutingTable::compile(&shared_provider());
    // Row 1: c-victim keeps every name; c-mallory's claim on them is refused.
    for host in
        ["c-victim.vshnmanaged.net", "etcd.c-victim.vshnmanaged.net", "x.apps.c-victim.vshnmanaged.net"]
    {
        assert_eq!(route(&table, host).map(|r| r.1), Some("c-victim".to_owned()), "{host}");
    }
    assert_eq!(
        route(&table, "api.c-victim.vshnmanaged.net"),
        via(VICTIM_JUMP, "c-victim", "api.c-victim.vshnmanaged.net")
    );
    // Row 2: the provider's host goes direct, claimed by nobody.
    let vault = table.explain("vault.vshnmanaged.net");
    assert_eq!((vault.via, vault.rule), (Via::Direct, Rule::NoMatch), "{vault:?}");
    // Row 3: still refused; c-other keeps its console.
    assert_eq!(
        route(&table, "console.apps.c-other.vshnmanaged.net"),
        via(OTHER_JUMP, "c-other", "c-other.vshnmanaged.net")
    );
    // A name under a cluster's own id is its own, in a provider's domain too.
    assert_eq!(
        route(&table, "x.apps.c-mallory.vshnmanaged.net"),
        via(MALLORY_JUMP, "c-mallory", "apps.c-mallory.vshnmanaged.net")
    );
    assert_eq!(
        refused(&table),
        [
            format!(
                r#"cluster c-mallory: openshiftConsoleURL "https://console.apps.c-other.vshnmanaged.net" refused: {}"#,
                named_after("console.apps.c-other.vshnmanaged.net", "c-other")
            ),
            format!(
                r#"cluster c-mallory: openshiftBaseDomain "c-victim.vshnmanaged.net" refused: {}"#,
                named_after("c-victim.vshnmanaged.net", "c-victim")
            ),
            "cluster c-mallory: openshiftApiURL \"https://vault.vshnmanaged.net:6443\" refused: \
             vault.vshnmanaged.net lies in vshnmanaged.net, a provider's domain (it anchors clusters of 3 \
             tenants: t-mallory, t-other, t-victim): there a cluster's dynamic facts route only names that \
             carry its id (c-mallory) as a label, or lie at or below its jumphost or jumphostDomains; to \
             route it, add it to this cluster's jumphostDomains in Lieutenant, or to dynamic_domains in \
             your config file"
                .to_owned(),
        ]
    );
    // Nobody is switched off: no cluster is left without routes.
    assert!(table.report().warnings.is_empty(), "{:?}", table.report().warnings);
    let providers: Vec<&str> = table.report().providers.iter().map(|p| p.domain.as_str()).collect();
    assert_eq!(providers, ["vshnmanaged.net"]);
    // The verdict does not depend on the order of the inventory.
    let mut reversed = shared_provider();
    reversed.reverse();
    assert_eq!(refused(&RoutingTable::compile(&reversed)), refused(&table));
}

#[test]
fn a_name_under_the_clusters_own_id_is_kept_and_static_names_still_nest_inside_it() {
    // One tenant, one customer domain: c-outer's base domain holds c-inner's, which carries
    // c-inner's id (two equally strong dynamic names: without the id both would lose); c-third's
    // static entry inside c-inner's zone nests; c-fourth's dynamic claim there is refused.
    let jump = "jump.customer.ch";
    let clusters = [
        reporting("c-outer", "t-customer", jump, json!({"openshiftBaseDomain": "prod.customer.ch"})),
        reporting("c-inner", "t-customer", jump, json!({"openshiftBaseDomain": "c-inner.prod.customer.ch"})),
        cluster(json!({"id": "c-third", "tenant": "t-customer",
            "facts": {"jumphost": "jump-third", "jumphostDomains": "db.c-inner.prod.customer.ch"}})),
        reporting(
            "c-fourth",
            "t-customer",
            jump,
            json!({
            "openshiftBaseDomain": "c-fourth.customer.ch",
            "openshiftConsoleURL": "https://console.c-inner.prod.customer.ch"}),
        ),
    ];
    let table = RoutingTable::compile(&clusters);
    assert_eq!(route(&table, "api.prod.customer.ch"), via(jump, "c-outer", "prod.customer.ch"));
    assert_eq!(
        route(&table, "api.c-inner.prod.customer.ch"),
        via(jump, "c-inner", "c-inner.prod.customer.ch")
    );
    assert_eq!(
        route(&table, "x.db.c-inner.prod.customer.ch"),
        via("jump-third", "c-third", "db.c-inner.prod.customer.ch")
    );
    assert_eq!(route(&table, "console.c-inner.prod.customer.ch").map(|r| r.1), Some("c-inner".to_owned()));
    let refused = refused(&table);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with(
            "cluster c-fourth: openshiftConsoleURL \"https://console.c-inner.prod.customer.ch\" refused: \
             console.c-inner.prod.customer.ch carries the id of cluster c-inner inside its anchor customer.ch"
        ),
        "{}",
        refused[0]
    );
    assert!(table.report().providers.is_empty(), "one tenant: {:?}", table.report().providers);
}

#[test]
fn clusters_of_one_tenant_sharing_a_customer_domain_keep_their_names_beside_a_providers_domain() {
    // Neither cluster's id is in any of its names; shop.ch anchors only t-shop's clusters, while
    // vshnmanaged.net next door is a provider's domain.
    let mut clusters = shared_provider();
    clusters.push(cluster(json!({"id": "c-shop-prod", "tenant": "t-shop",
        "facts": {"jumphost": "jump.shop.ch", "jumphostDomains": "ipmi.shop.ch"},
        "dynamicFacts": {"openshiftBaseDomain": "prod.shop.ch", "openshiftAppsDomain": "apps.shop.ch",
                         "openshiftApiURL": "https://api.prod.shop.ch:6443"}})));
    clusters.push(reporting(
        "c-shop-test",
        "t-shop",
        "jump.shop.ch",
        json!({
        "openshiftBaseDomain": "test.shop.ch",
        "openshiftConsoleURL": "https://console.test-apps.shop.ch"}),
    ));
    let table = RoutingTable::compile(&clusters);
    for (host, cluster, suffix) in [
        ("api.prod.shop.ch", "c-shop-prod", "api.prod.shop.ch"),
        ("www.apps.shop.ch", "c-shop-prod", "apps.shop.ch"),
        ("api.test.shop.ch", "c-shop-test", "test.shop.ch"),
        ("console.test-apps.shop.ch", "c-shop-test", "console.test-apps.shop.ch"),
    ] {
        assert_eq!(route(&table, host), via("jump.shop.ch", cluster, suffix), "{host}");
    }
    let shop: Vec<&Refused> =
        table.report().refused.iter().filter(|r| r.cluster.starts_with("c-shop")).collect();
    assert!(shop.is_empty(), "{shop:?}");
    assert_eq!(table.report().refused.len(), 3, "only c-mallory's: {:?}", table.report().refused);
}

#[test]
fn a_configured_providers_domain_counts_and_static_names_and_zones_open_it() {
    // One tenant only (a cache of `update --tenant`): nothing shows vshnmanaged.net is shared.
    let clusters = [cluster(json!({"id": "c-one", "tenant": "t-one",
            "facts": {"jumphost": "jump.one.vshnmanaged.net", "jumphostDomains": "one-dc.vshnmanaged.net"},
            "dynamicFacts": {"openshiftBaseDomain": "c-one.vshnmanaged.net",
                             "openshiftApiURL": "https://vault.vshnmanaged.net:6443",
                             "openshiftConsoleURL": "https://console.one-dc.vshnmanaged.net",
                             "openshiftAppsDomain": "apps.shared.vshnmanaged.net",
                             "talosApiURL": "https://x.jump.one.vshnmanaged.net"}}))];
    let plain = RoutingTable::compile(&clusters);
    assert!(plain.report().refused.is_empty(), "{:?}", plain.report().refused);
    assert_eq!(route(&plain, "vault.vshnmanaged.net").map(|r| r.1), Some("c-one".to_owned()));

    let anchors =
        Anchors::new(&["shared.vshnmanaged.net".to_owned()]).with_providers(&["vshnmanaged.net".to_owned()]);
    let table = RoutingTable::compile_with(&clusters, &OwnHosts::default(), &anchors);
    assert_eq!(route(&table, "vault.vshnmanaged.net"), None);
    let refused = refused(&table);
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("vault.vshnmanaged.net lies in vshnmanaged.net, a provider's domain (named in provider_domains in your config file)"),
        "{}",
        refused[0]
    );
    // Its own id, its jumphostDomains entry, its jump host's name and the config zone still route.
    for (host, suffix) in [
        ("api.c-one.vshnmanaged.net", "c-one.vshnmanaged.net"),
        ("console.one-dc.vshnmanaged.net", "console.one-dc.vshnmanaged.net"),
        ("x.jump.one.vshnmanaged.net", "x.jump.one.vshnmanaged.net"),
        ("www.apps.shared.vshnmanaged.net", "apps.shared.vshnmanaged.net"),
    ] {
        assert_eq!(route(&table, host), via("jump.one.vshnmanaged.net", "c-one", suffix), "{host}");
    }
}
