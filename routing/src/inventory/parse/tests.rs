use super::*;
use crate::table::RoutingTable;
use serde_json::json;

/// A large array (parsed across the cores) whose strings hold what would mislead a naive scan
/// (commas, brackets, braces, escaped quotes and backslashes), with facts routing reads and
/// facts it does not.
fn large_inventory() -> String {
    let clusters: Vec<Value> = (0..6_000)
        .map(|i| {
            json!({"id": format!("c-{i}"), "tenant": "t", "displayName": format!("a, \"b\" [c] {{d}} \\ {i}"),
                   "facts": {"jumphost": "jump", "note": ",]},[{\\\""},
                   "dynamicFacts": {"openshiftBaseDomain": format!("c-{i}.example.net"), "n": [i, {"m": []}]},
                   "annotations": {"a": format!("{i}")}})
        })
        .collect();
    serde_json::to_string_pretty(&clusters).unwrap()
}

/// `cluster` as the lean parse should keep it: the routing facts, id and tenant.
fn leaned(cluster: &Cluster) -> Cluster {
    let only = |facts: &Map<String, Value>, names: &[&str]| {
        facts
            .iter()
            .filter(|(k, _)| names.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    Cluster {
        id: cluster.id.clone(),
        tenant: cluster.tenant.clone(),
        display_name: None,
        facts: only(&cluster.facts, &ROUTING_FACTS),
        dynamic_facts: only(&cluster.dynamic_facts, &ROUTING_DYNAMIC_FACTS),
        annotations: Map::new(),
    }
}

#[test]
fn a_large_array_parses_across_the_cores_to_what_one_parse_gives() {
    let text = large_inventory();
    assert!(text.len() >= ACROSS_CORES_FROM, "{} bytes", text.len());
    let one: Vec<Cluster> = serde_json::from_slice(text.as_bytes()).unwrap();
    let all = parse_kept(text.as_bytes(), Keep::All).unwrap();
    assert_eq!(all.len(), 6_000);
    assert_eq!(all, one);
    let lean = parse_kept(text.as_bytes(), Keep::Routing).unwrap();
    assert_eq!(lean, one.iter().map(leaned).collect::<Vec<_>>());
    assert_eq!(lean, whole(text.as_bytes(), Keep::Routing).unwrap(), "across the cores and in one go");
    assert_eq!(lean[7].facts.keys().collect::<Vec<_>>(), ["jumphost"]);
    assert_eq!(lean[7].dynamic_facts.keys().collect::<Vec<_>>(), ["openshiftBaseDomain"]);
}

#[test]
fn a_broken_large_array_is_the_whole_documents_error() {
    let text = large_inventory();
    let middle = text.len() / 2 + text[text.len() / 2..].find("},").unwrap() + 1;
    let broken = [
        // a stray comma between two elements, and before the first
        format!("{},{}", &text[..middle], &text[middle..]),
        format!("[,{}", &text[1..]),
        // trailing garbage, a missing bracket, a broken element in the second half
        format!("{text} x"),
        text[..text.len() - 1].to_owned(),
        format!("{}{}", &text[..middle + 1], &text[middle + 1..].replacen('{', "{{", 1)),
        // well-formed, but an element of the wrong type: only an element's parse finds it
        format!("{}, 3{}", &text[..middle], &text[middle..]),
        format!("{}{}", &text[..middle + 1], &text[middle + 1..].replacen("\"id\"", "\"idx\"", 1)),
    ];
    for doc in broken {
        let one = serde_json::from_slice::<Vec<Cluster>>(doc.as_bytes()).unwrap_err().to_string();
        for keep in [Keep::All, Keep::Routing] {
            let ours = parse_kept(doc.as_bytes(), keep).unwrap_err().to_string();
            assert_eq!(ours, one, "{keep:?}");
        }
    }
}

#[test]
fn the_lean_parse_keeps_only_what_routing_reads() {
    let text = br#"[{"id": "c-1", "tenant": "t-1", "displayName": "Prod",
        "facts": {"jumphost": "j", "jumphostDomains": "a.example", "jumphostSkipDomains": "b.a.example",
                  "kharonIgnore": false, "distribution": "openshift4", "cloud": "cloudscale",
                  "region": "rma", "sales_order": "SO-1"},
        "dynamicFacts": {"openshiftBaseDomain": "c-1.example.net", "openshiftAppsDomain": "apps.c-1.example.net",
                         "openshiftApiURL": "https://api.c-1.example.net:6443",
                         "openshiftConsoleURL": "https://console.apps.c-1.example.net",
                         "talosBaseDomain": "t.example", "talosAppsDomain": "apps.t.example",
                         "talosApiURL": "https://api.t.example", "talosConsoleURL": "https://c.t.example",
                         "openshiftOAuthRoute": "oauth.apps.c-1.example.net",
                         "kubernetesVersion": {"major": "1", "minor": "30"}, "nodes": [1, 2, 3]},
        "annotations": {"syn.tools/protected": "true"}, "gitRepo": {"url": "ssh://x"}}]"#;
    let lean = parse_kept(text, Keep::Routing).unwrap();
    let mut facts: Vec<&str> = lean[0].facts.keys().map(String::as_str).collect();
    facts.sort_unstable();
    let mut expected = ROUTING_FACTS.to_vec();
    expected.sort_unstable();
    assert_eq!(facts, expected);
    let mut dynamic: Vec<&str> = lean[0].dynamic_facts.keys().map(String::as_str).collect();
    dynamic.sort_unstable();
    let mut expected = ROUTING_DYNAMIC_FACTS.to_vec();
    expected.sort_unstable();
    assert_eq!(dynamic, expected);
    assert_eq!((lean[0].id.as_str(), lean[0].tenant.as_str()), ("c-1", "t-1"));
    assert!(lean[0].display_name.is_none() && lean[0].annotations.is_empty());
    let all = parse_clusters(text).unwrap();
    assert_eq!(lean[0].routing_facts(), all[0].routing_facts());
    assert_eq!(all[0].annotations.len(), 1);
    assert_eq!(all[0].facts.len(), 8);
}

#[test]
fn the_lean_parse_refuses_what_the_whole_parse_refuses_with_its_error() {
    let docs: [&[u8]; 12] = [
        br#"[{"id": "c", "displayName": 3}]"#,
        br#"[{"id": "c", "displayName": {}}]"#,
        br#"[{"id": "c", "annotations": "x"}]"#,
        br#"[{"id": "c", "annotations": null}]"#,
        br#"[{"id": "c", "facts": null}]"#,
        br#"[{"id": "c", "facts": ["jumphost"]}]"#,
        br#"[{"id": "c", "dynamicFacts": "x"}]"#,
        br#"[{"id": "c", "facts": {"other": [1, }}]"#,
        br#"[{"id": "c", "facts": {3: 1}}]"#,
        br#"[{"tenant": "t"}]"#,
        br#"[{"id": "c", "id": "d"}]"#,
        br#"[{"id": "c", "facts": {}, "facts": {}}]"#,
    ];
    for doc in docs {
        let one = parse_clusters(doc).unwrap_err().to_string();
        let lean = parse_kept(doc, Keep::Routing).unwrap_err().to_string();
        assert_eq!(lean, one, "{}", String::from_utf8_lossy(doc));
    }
    // What both accept: a null display name, a key given twice (the last value counts).
    let doc = br#"[{"id": "c", "displayName": null, "facts": {"jumphost": "a", "jumphost": "b"}}]"#;
    let (one, lean) = (parse_clusters(doc).unwrap(), parse_kept(doc, Keep::Routing).unwrap());
    assert_eq!((one[0].jumphost(), lean[0].jumphost()), (Some("b"), Some("b")));
}

#[test]
fn unknown_fields_are_ignored_and_annotations_kept() {
    let clusters = parse_clusters(
        br#"[{"id":"c-1","tenant":"t-1","gitRepo":{},"compileMeta":{"lastCompile":"x"},
              "annotations":{"a":"b"},"installURL":"https://x"}]"#,
    )
    .expect("parses");
    assert_eq!(clusters[0].id, "c-1");
    assert_eq!(clusters[0].annotations.get("a"), Some(&json!("b")));
}

#[test]
fn load_file_names_the_file_on_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("inventory.json");
    // The message and its cause, as every display of an error shows it.
    let err = kharon_common::errors::chain(&load_file(&path).expect_err("missing file"));
    assert!(err.to_string().starts_with(&format!("cannot read inventory {}: ", path.display())), "{err}");
    std::fs::write(&path, b"{").expect("write");
    let err = kharon_common::errors::chain(&load_file(&path).expect_err("bad json"));
    assert!(err.to_string().starts_with(&format!("inventory {}: ", path.display())), "{err}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Any JSON value a fact, a display name or annotations could hold.
    fn any_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            "[a-z0-9.,: /-]{0,24}".prop_map(Value::from),
            "(https://)?[a-z0-9.-]{1,20}(:[0-9]{1,5})?".prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            Just(json!({"a": ["b", {"c": 1}]})),
            Just(json!([])),
        ]
    }

    fn fact_name() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            proptest::sample::select(ROUTING_FACTS.to_vec()),
            proptest::sample::select(ROUTING_DYNAMIC_FACTS.to_vec()),
            Just("openshiftOAuthRoute"),
            Just("kubernetesVersion"),
            Just("cloud"),
        ]
    }

    fn facts() -> impl Strategy<Value = Value> {
        prop_oneof![
            8 => proptest::collection::btree_map(fact_name(), any_value(), 0..8)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
            1 => any_value(),
        ]
    }

    /// A cluster object whose every field may be missing or of the wrong type.
    fn cluster_json() -> impl Strategy<Value = Value> {
        (
            prop_oneof![4 => "[a-z0-9-]{1,8}".prop_map(Value::from), 1 => any_value()],
            proptest::option::of(any_value()),
            proptest::option::of(facts()),
            proptest::option::of(facts()),
            proptest::option::of(facts()),
        )
            .prop_map(|(id, display, facts, dynamic, annotations)| {
                let mut c = Map::new();
                c.insert("id".into(), id);
                for (key, value) in [
                    ("displayName", display),
                    ("facts", facts),
                    ("dynamicFacts", dynamic),
                    ("annotations", annotations),
                ] {
                    if let Some(value) = value {
                        c.insert(key.into(), value);
                    }
                }
                Value::Object(c)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the document, the lean parse accepts it exactly when the whole one does, with
        /// the same error, and routes its clusters as the whole one does.
        #[test]
        fn the_lean_parse_agrees_with_the_whole_one(clusters in proptest::collection::vec(cluster_json(), 0..6)) {
            let text = serde_json::to_vec(&clusters).unwrap();
            match (parse_clusters(&text), parse_kept(&text, Keep::Routing)) {
                (Ok(all), Ok(lean)) => {
                    prop_assert_eq!(&lean, &all.iter().map(leaned).collect::<Vec<_>>());
                    for (a, l) in all.iter().zip(&lean) {
                        prop_assert_eq!(a.routing_facts(), l.routing_facts());
                        prop_assert_eq!(a.jumphost_fact(), l.jumphost_fact());
                        prop_assert_eq!(a.is_ignored(), l.is_ignored());
                        prop_assert_eq!(a.api_url(), l.api_url());
                    }
                    let (a, l) = (RoutingTable::compile(&all), RoutingTable::compile(&lean));
                    prop_assert_eq!(a.routes(), l.routes());
                    prop_assert_eq!(a.report(), l.report());
                }
                (Err(a), Err(l)) => prop_assert_eq!(a.to_string(), l.to_string()),
                (a, l) => prop_assert!(false, "whole {:?}, lean {:?}", a.map(|_| ()), l.map(|_| ())),
            }
        }
    }
}
