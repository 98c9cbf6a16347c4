//! Criterion benchmarks of `kharon_routing::table`: `lookup` is on every SOCKS connection's path,
//! `compile` runs on each (re)load. The inventory is synthetic but shaped like a large Lieutenant:
//! 10,000 clusters with 4–6 suffixes each, a third skipping their apps domain, a few sharing
//! `jumphostDomains`.
//!
//! Run: `cargo bench -p kharon-routing --bench routing -- --warm-up-time 1 --measurement-time 3`

use criterion::{Criterion, criterion_group, criterion_main};
use kharon_routing::inventory::Cluster;
use kharon_routing::table::{Route, RoutingTable};
use serde_json::{Map, json};
use std::hint::black_box;

const CLUSTERS: usize = 10_000;

fn synthetic_inventory() -> Vec<Cluster> {
    (0..CLUSTERS)
        .map(|i| {
            let base = format!("c-{i:05}.zone{}.vshnmanaged.net", i % 40);
            let mut facts = Map::new();
            facts.insert("distribution".into(), json!("openshift4"));
            // A host name, as VSHN's jump hosts are: it anchors the cluster's dynamic names.
            facts.insert("jumphost".into(), json!(format!("jump{}.zone{}.vshnmanaged.net", i % 7, i % 40)));
            if i % 2 == 0 {
                facts.insert(
                    "jumphostDomains".into(),
                    json!(format!("vcenter.t{i}.example.ch,storage.t{i}.example.ch")),
                );
            }
            if i % 3 == 0 {
                facts.insert("jumphostSkipDomains".into(), json!(format!("apps.{base}")));
            }
            let mut dynamic_facts = Map::new();
            dynamic_facts.insert("openshiftBaseDomain".into(), json!(base));
            dynamic_facts.insert("openshiftAppsDomain".into(), json!(format!("apps.{base}")));
            dynamic_facts.insert("openshiftApiURL".into(), json!(format!("https://api.{base}:6443")));
            dynamic_facts.insert("openshiftConsoleURL".into(), json!(format!("https://console.apps.{base}")));
            dynamic_facts.insert("kubernetesVersion".into(), json!({"major": "1", "minor": "30"}));
            Cluster {
                id: format!("c-{i:05}"),
                tenant: format!("t-{}", i % 500),
                display_name: None,
                facts,
                dynamic_facts,
                annotations: Map::new(),
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let clusters = synthetic_inventory();
    let table = RoutingTable::compile(&clusters);
    let report = table.report();
    assert!(report.conflicts.is_empty() && report.warnings.is_empty(), "synthetic inventory is clean");

    // (name, host, routed?) — each checked once so a broken table cannot produce fast nonsense.
    let hosts = [
        ("routed", "api.c-04242.zone2.vshnmanaged.net", true),
        ("routed_uppercase", "API.C-04242.Zone2.VSHNmanaged.NET.", true),
        ("routed_jumphost_domain", "esx01.vcenter.t4242.example.ch", true),
        ("excluded", "myapp.apps.c-04242.zone2.vshnmanaged.net", false),
        ("unrelated", "www.example.com", false),
        ("long_8_labels", "a.b.c.d.c-04243.zone3.vshnmanaged.net", true),
        ("ipv4_literal", "10.20.30.40", false),
        ("ipv6_literal", "[2001:db8::42]", false),
    ];
    let mut group = c.benchmark_group("lookup");
    for (name, host, routed) in hosts {
        assert_eq!(matches!(table.lookup(host), Route::Jumphost(_)), routed, "{host}");
        group.bench_function(name, |b| b.iter(|| table.lookup(black_box(host))));
    }
    group.finish();

    let mut group = c.benchmark_group("compile");
    group.sample_size(10);
    group.bench_function("10k_clusters", |b| b.iter(|| RoutingTable::compile(black_box(&clusters))));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
