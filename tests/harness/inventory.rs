//! Lieutenant `/clusters` JSON for scenarios, in the shape the API returns
//! (docs/lieutenant-and-oidc.md, "The Cluster object").

use serde_json::{Value, json};

/// An OpenShift cluster routed through `jumphost` whose base domain is `base`. VSHN lists the
/// base domain in `jumphostDomains` too: the lab's jump hosts are aliases of 127.0.0.1, which
/// anchor nothing, and a dynamic name needs an anchor to route.
pub fn routed(id: &str, jumphost: &str, base: &str) -> Value {
    json!({
        "id": id,
        "tenant": "t-test",
        "displayName": format!("Test cluster {id}"),
        "facts": { "distribution": "openshift4", "jumphost": jumphost, "jumphostDomains": base },
        "dynamicFacts": {
            "openshiftBaseDomain": base,
            "openshiftApiURL": format!("https://api.{base}:6443"),
            "kubernetesVersion": { "major": "1", "minor": "30" }
        },
        "gitRepo": {}
    })
}

/// A cluster without a jump host (everything direct).
pub fn direct(id: &str, base: &str) -> Value {
    json!({
        "id": id,
        "tenant": "t-test",
        "facts": { "distribution": "openshift4" },
        "dynamicFacts": { "openshiftBaseDomain": base }
    })
}

/// The array as a pretty JSON string.
pub fn to_json(clusters: &[Value]) -> String {
    serde_json::to_string_pretty(&Value::Array(clusters.to_vec())).unwrap_or_default()
}
