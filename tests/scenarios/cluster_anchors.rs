//! A cluster's dynamic facts route names only inside its anchors, the domains something
//! other than the cluster ties to it (VSHN's static facts, the engineer's ssh_config and config
//! file); names of one cluster may nest inside another's, the longest suffix deciding; and
//! `update` and `reload` say per cluster what a new inventory routes and refuses that the last
//! did not. Real sshd jump hosts, real curl through socks5h.

use kharon_e2e::kharonctl;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, oidc};
use serde_json::json;

use crate::cluster_trust::{assert_unclaimed, curl, route, second_jump_host};
use crate::jumphost::{Lab, LabOptions};
use crate::login::World;

/// Names only the lab's own jump host (`hop1`) resolves.
const VIA_HOP1: [&str; 3] = ["foo.apps.good.example", "api.c-good.good.example", "y.c-outer.example.net"];
/// Names only the second jump host (`jump-m`) resolves.
const VIA_JUMP_M: [&str; 3] =
    ["api.c-mallory.mallory.example", "x.inner.c-outer.example.net", "api.c-zone.zone.example"];

/// c-good sits behind hop1 with an apps domain outside its base domain (a loose name); c-mallory
/// behind jump-m claims the whole internet and c-good's apps domain as its own; c-zone has no
/// static name at all, only the engineer's config zone; c-outer's dynamic base domain holds
/// c-inner's static one.
fn inventory(lab: &Lab) -> serde_json::Value {
    let hop1 = lab.jumphost();
    json!([
        {"id": "c-good", "tenant": "t-g", "facts": {"distribution": "openshift4", "jumphost": hop1,
            "jumphostDomains": "ipmi.good.example"},
         "dynamicFacts": {"openshiftBaseDomain": "c-good.good.example",
                          "openshiftAppsDomain": "apps.good.example"}},
        {"id": "c-mallory", "tenant": "t-m", "facts": {"distribution": "openshift4", "jumphost": "jump-m",
            "jumphostDomains": "vpn.mallory.example"},
         "dynamicFacts": {
            "openshiftBaseDomain": "c-mallory.mallory.example",
            "openshiftApiURL": "https://api.github.com",
            "openshiftConsoleURL": "https://login.microsoftonline.com/common",
            "openshiftAppsDomain": "www.google.com",
            "talosBaseDomain": "apps.good.example"
         }},
        {"id": "c-zone", "tenant": "t-z", "facts": {"distribution": "openshift4", "jumphost": "jump-m"},
         "dynamicFacts": {"openshiftBaseDomain": "c-zone.zone.example"}},
        {"id": "c-outer", "tenant": "t-o", "facts": {"distribution": "openshift4", "jumphost": hop1,
            "jumphostDomains": "vcenter.outer-dc.example.net"},
         "dynamicFacts": {"openshiftBaseDomain": "c-outer.example.net"}},
        {"id": "c-inner", "tenant": "t-i", "facts": {"distribution": "openshift4", "jumphost": "jump-m",
            "jumphostDomains": "inner.c-outer.example.net"}}
    ])
}

#[test]
fn dynamic_names_route_only_inside_their_anchors_and_nested_names_by_the_longest_suffix() {
    let mut lab = Lab::new(LabOptions {
        last_hop_hosts: VIA_HOP1.iter().map(|n| ((*n).to_owned(), "127.0.0.1".to_owned())).collect(),
        ..LabOptions::default()
    });
    let _jump_m = second_jump_host(&lab, "jump-m", &VIA_JUMP_M);
    let inv = lab.env.write("inventory.json", &inventory(&lab).to_string());
    let config = lab.env.write("config.toml", "dynamic_domains = [\"zone.example\"]\n");
    lab.start_daemon_on(&inv, &["--config", config.to_str().unwrap()]);
    let daemon = lab.daemon();
    let port = lab.target.port();
    let through = |host: &str, jumphost: &str, cluster: &str| {
        let r = route(&lab.env, host);
        assert_eq!(
            (r["jumphost"].as_str(), r["cluster"].as_str()),
            (Some(jumphost), Some(cluster)),
            "{host}: {r}"
        );
        assert_eq!(curl(daemon, host, port).as_deref(), Ok("hello from target"), "{host}");
    };

    // A name inside another cluster's loose apps domain stays that cluster's: c-mallory's claim on
    // it is refused, so it goes through c-good's jump host (the only one that resolves it).
    through("foo.apps.good.example", "hop1", "c-good");
    // Anchored dynamic names route through their own cluster.
    through("api.c-good.good.example", "hop1", "c-good");
    through("api.c-mallory.mallory.example", "jump-m", "c-mallory");
    // A cluster with no static name routes inside the engineer's config zone.
    through("api.c-zone.zone.example", "jump-m", "c-zone");
    // Nesting: the outer cluster's dynamic base domain routes around the inner one's static name.
    through("y.c-outer.example.net", "hop1", "c-outer");
    through("x.inner.c-outer.example.net", "jump-m", "c-inner");

    // Public hosts a cluster named in its dynamic facts go direct, claimed by no cluster (route
    // only: a direct connection would leave the machine).
    for host in ["api.github.com", "login.microsoftonline.com", "www.google.com", "a.www.google.com"] {
        assert_unclaimed(&lab.env, host);
    }
    // Every connection went through the jump host of the name's own cluster, none elsewhere.
    let status = kharonctl::run(&lab.env, &["status", "-o", "json"]).json();
    let totals = |jumphost: &str| {
        let routes = status["routes"].as_array().unwrap_or_else(|| panic!("no routes: {status}"));
        routes.iter().find(|r| r["route"] == jumphost).map_or(0, |r| r["total"].as_u64().unwrap_or(0))
    };
    assert_eq!((totals("hop1"), totals("jump-m")), (3, 3), "{status}");

    // Each refusal is named with the cluster, the fact, the value, why and what to do.
    let refused = status["inventory"]["refused_claims"].as_array().unwrap();
    let mut facts: Vec<(&str, &str)> =
        refused.iter().filter_map(|r| Some((r["cluster"].as_str()?, r["fact"].as_str()?))).collect();
    facts.sort_unstable();
    assert_eq!(
        facts,
        [
            ("c-mallory", "openshiftApiURL"),
            ("c-mallory", "openshiftAppsDomain"),
            ("c-mallory", "openshiftConsoleURL"),
            ("c-mallory", "talosBaseDomain"),
        ],
        "{status}"
    );
    let text = kharonctl::run(&lab.env, &["status"]);
    assert!(
        text.stdout.contains(
            "refused: cluster c-mallory: openshiftApiURL \"https://api.github.com\" refused: api.github.com \
             lies outside every domain tied to the cluster by something other than its own report (it has: \
             mallory.example, zone.example); to route it, add its domain to the cluster's jumphostDomains \
             in Lieutenant, or to dynamic_domains in your config file"
        ),
        "{}",
        text.stdout
    );
    let config = kharonctl::run(&lab.env, &["config", "--config", config.to_str().unwrap(), "-o", "json"]);
    let rows = config.json();
    let zones = rows.as_array().unwrap().iter().find(|r| r["setting"] == "dynamic_domains").cloned();
    assert_eq!(zones.map(|r| r["value"].clone()), Some(json!("zone.example")), "{}", config.stdout);
}

/// A config file naming the zone every test cluster's names are in: the fake Lieutenant's
/// clusters have aliases of 127.0.0.1 as jump hosts, which anchor nothing.
fn zone_config(env: &Env) -> String {
    env.write("anchors.toml", "dynamic_domains = [\"example\"]\n").display().to_string()
}

#[test]
fn update_and_reload_say_per_cluster_what_a_new_inventory_routes_and_refuses() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let config = zone_config(&world.env);
    let update = |args: &[&str]| {
        let out = world.ctl_with(args, &[("KHARON_CONFIG", config.as_str())]);
        assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
        out
    };
    let first = json!([
        inventory::routed("c-a", "jump-a", "a.example"),
        {"id": "c-x", "tenant": "t", "facts": {"jumphost": "jump-x"},
         "dynamicFacts": {"openshiftBaseDomain": "c-x.example",
                          "openshiftConsoleURL": "https://console.apps.c-x.example"}}
    ]);
    world.lieutenant.set_clusters(&world.env.write("first.json", &first.to_string()));
    update(&["update"]);

    // c-x starts claiming a public host and drops its console; c-a is unchanged.
    let second = json!([
        inventory::routed("c-a", "jump-a", "a.example"),
        {"id": "c-x", "tenant": "t", "facts": {"jumphost": "jump-x"},
         "dynamicFacts": {"openshiftBaseDomain": "c-x.example",
                          "openshiftApiURL": "https://api.c-x.example:6443",
                          "openshiftAppsDomain": "mail.google.com"}}
    ]);
    world.lieutenant.set_clusters(&world.env.write("second.json", &second.to_string()));
    let daemon = Kharond::start_with(&world.env, &[], &[("KHARON_CONFIG", config.as_str())]);
    let out = update(&["update", "--no-reload"]);
    let refusal = "cluster c-x: openshiftAppsDomain \"mail.google.com\" refused: mail.google.com lies outside \
                   every domain tied to the cluster by something other than its own report (it has: example)";
    let lines: Vec<&str> =
        out.stdout.lines().filter(|l| l.starts_with("  ") && !l.contains("cluster c-")).collect();
    assert_eq!(
        lines[..2],
        ["  + route api.c-x.example via jump-x (c-x)", "  - route console.apps.c-x.example via jump-x (c-x)"],
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!("  ! refused {refusal}")), "{}", out.stdout);
    assert!(!out.stdout.contains("(c-a)"), "c-a did not change:\n{}", out.stdout);

    // kharond still routes by the cache it read at start: its reload says the same of its table.
    let reload = kharonctl::run(&world.env, &["reload"]);
    assert!(reload.success(), "{}\n{}", reload.stdout, reload.stderr);
    for line in [
        "  + route api.c-x.example via jump-x (c-x)".to_owned(),
        "  - route console.apps.c-x.example via jump-x (c-x)".to_owned(),
        format!("  ! refused {refusal}"),
    ] {
        assert!(reload.stdout.contains(&line), "reload lacks {line}:\n{}", reload.stdout);
    }
    assert!(!reload.stdout.contains("(c-a)"), "{}", reload.stdout);
    assert_eq!(route(&world.env, "mail.google.com")["via"], "direct");
    assert_eq!(route(&world.env, "api.c-x.example")["jumphost"], "jump-x");

    // Nothing new: nothing is said of any cluster.
    let again = update(&["update", "--no-reload"]);
    assert!(again.stdout.contains("no changes since the last update"), "{}", again.stdout);
    assert!(!again.stdout.contains("! refused"), "{}", again.stdout);
    let reload = kharonctl::run(&world.env, &["reload"]);
    assert!(
        reload.stdout.contains("routes unchanged") && !reload.stdout.contains("! refused"),
        "{}",
        reload.stdout
    );
    drop(daemon);
}
