//! One customer's cluster cannot switch off another's, nor draw the provider's own hosts into its
//! network. Two clusters of two tenants behind jump hosts in `vshnmanaged.net`, as VSHN's are: a
//! name that carries a cluster's id inside its anchor is that cluster's, and in a provider's domain
//! (one that anchors the clusters of more than one tenant) a cluster's dynamic names route only
//! under its id or its static names. `update`, `reload` and `status` name each refusal. Real sshd
//! jump hosts, real curl through socks5h, the fake Lieutenant for `update`.

use kharon_e2e::{kharonctl, oidc};
use serde_json::json;

use crate::cluster_trust::{assert_unclaimed, curl, route, second_jump_host};
use crate::jumphost::{Lab, LabOptions};
use crate::login::World;

const VICTIM_JUMP: &str = "jump.victim.vshnmanaged.net";
const MALLORY_JUMP: &str = "jump.mallory.vshnmanaged.net";

/// c-mallory reports c-victim's id as its base domain, a name of the provider's that no cluster
/// claims as its API, a name under c-victim's domain as its console, and its own apps domain.
fn inventory() -> serde_json::Value {
    json!([
        {"id": "c-victim", "tenant": "t-victim", "facts": {"distribution": "openshift4", "jumphost": VICTIM_JUMP},
         "dynamicFacts": {"openshiftBaseDomain": "c-victim.vshnmanaged.net",
                          "openshiftApiURL": "https://api.c-victim.vshnmanaged.net:6443"}},
        {"id": "c-mallory", "tenant": "t-mallory", "facts": {"distribution": "openshift4", "jumphost": MALLORY_JUMP},
         "dynamicFacts": {"openshiftBaseDomain": "c-victim.vshnmanaged.net",
                          "openshiftApiURL": "https://vault.vshnmanaged.net:6443",
                          "openshiftConsoleURL": "https://console.apps.c-victim.vshnmanaged.net",
                          "openshiftAppsDomain": "apps.c-mallory.vshnmanaged.net"}}
    ])
}

/// c-mallory's three refusals, as `update`, `reload` and `status` name them (the start of each).
const REFUSED: [&str; 3] = [
    "cluster c-mallory: openshiftBaseDomain \"c-victim.vshnmanaged.net\" refused: c-victim.vshnmanaged.net \
     carries the id of cluster c-victim inside its anchor vshnmanaged.net: the names of \
     c-victim.vshnmanaged.net are c-victim's",
    "cluster c-mallory: openshiftApiURL \"https://vault.vshnmanaged.net:6443\" refused: vault.vshnmanaged.net \
     lies in vshnmanaged.net, a provider's domain (it anchors clusters of 2 tenants: t-mallory, t-victim): \
     there a cluster's dynamic facts route only names that carry its id (c-mallory) as a label, or lie at or \
     below its jumphost or jumphostDomains; to route it, add it to this cluster's jumphostDomains in \
     Lieutenant, or to dynamic_domains in your config file",
    "cluster c-mallory: openshiftConsoleURL \"https://console.apps.c-victim.vshnmanaged.net\" refused: \
     console.apps.c-victim.vshnmanaged.net carries the id of cluster c-victim",
];

#[test]
fn a_customers_cluster_cannot_switch_off_another_nor_route_the_providers_hosts() {
    let mut lab = Lab::new(LabOptions::default());
    // Each jump host resolves only its own cluster's names: a name routed through the wrong one
    // fails.
    let _victim = second_jump_host(&lab, VICTIM_JUMP, &["api.c-victim.vshnmanaged.net"]);
    let _mallory = second_jump_host(&lab, MALLORY_JUMP, &["www.apps.c-mallory.vshnmanaged.net"]);
    let inv = lab.env.write("inventory.json", &inventory().to_string());
    lab.start_daemon_on(&inv, &[]);
    let daemon = lab.daemon();
    let port = lab.target.port();

    // c-victim's API goes through its own jump host, while c-mallory reports its domain.
    let api = route(&lab.env, "api.c-victim.vshnmanaged.net");
    assert_eq!(
        (api["jumphost"].as_str(), api["cluster"].as_str()),
        (Some(VICTIM_JUMP), Some("c-victim")),
        "{api}"
    );
    assert_eq!(curl(daemon, "api.c-victim.vshnmanaged.net", port).as_deref(), Ok("hello from target"));
    assert_eq!(route(&lab.env, "console.apps.c-victim.vshnmanaged.net")["cluster"], "c-victim");
    // c-mallory's own name, under its id, goes through its own jump host.
    let own = route(&lab.env, "www.apps.c-mallory.vshnmanaged.net");
    assert_eq!(own["jumphost"], MALLORY_JUMP, "{own}");
    assert_eq!(curl(daemon, "www.apps.c-mallory.vshnmanaged.net", port).as_deref(), Ok("hello from target"));
    // The provider's own host goes direct (route only: a direct connection would leave the machine).
    assert_unclaimed(&lab.env, "vault.vshnmanaged.net");

    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let refused = status["inventory"]["refused_claims"].as_array().unwrap();
    let mut facts: Vec<(&str, &str)> =
        refused.iter().filter_map(|r| Some((r["cluster"].as_str()?, r["fact"].as_str()?))).collect();
    facts.sort_unstable();
    assert_eq!(
        facts,
        [
            ("c-mallory", "openshiftApiURL"),
            ("c-mallory", "openshiftBaseDomain"),
            ("c-mallory", "openshiftConsoleURL")
        ],
        "{status}"
    );
    let reload = kharonctl::run(&lab.env, &["reload"]);
    assert!(reload.success(), "{}\n{}", reload.stdout, reload.stderr);
    for line in REFUSED {
        assert!(
            reload.stderr.contains(&format!("warning: {line}")),
            "reload lacks {line}:\n{}",
            reload.stderr
        );
    }
    assert!(!reload.stderr.contains("nothing is routed through it"), "{}", reload.stderr);

    // `update` judges the same inventory from Lieutenant alike, and `config` shows the domain.
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    world.lieutenant.set_clusters(&world.env.write("clusters.json", &inventory().to_string()));
    let update = world.ctl(&["update"]);
    assert!(update.success(), "{}\n{}", update.stdout, update.stderr);
    for line in REFUSED {
        assert!(
            update.stderr.contains(&format!("warning: {line}")),
            "update lacks {line}:\n{}",
            update.stderr
        );
    }
    for line in [
        format!("+ route c-victim.vshnmanaged.net via {VICTIM_JUMP} (c-victim)"),
        format!("+ route apps.c-mallory.vshnmanaged.net via {MALLORY_JUMP} (c-mallory)"),
    ] {
        assert!(update.stdout.contains(&line), "update lacks {line}:\n{}", update.stdout);
    }
    assert!(!update.stdout.contains("vault.vshnmanaged.net via"), "{}", update.stdout);
    let config = world.ctl(&["config", "-o", "json"]).json();
    let row = config.as_array().unwrap().iter().find(|r| r["setting"] == "provider_domains").cloned();
    assert_eq!(row.map(|r| r["value"].clone()), Some(json!("vshnmanaged.net (2 tenants)")), "{config}");
}
