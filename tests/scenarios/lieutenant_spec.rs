//! The fake Lieutenant (`tests/oidc/lieutenant.mjs`) checked by a client we did not write: PyPI's
//! `openapi-core` (pinned in `.ci/run`) validates every request and answer against Lieutenant's
//! own OpenAPI spec (`tests/fixtures/lieutenant/openapi.yaml`, upstream's `openapi.yaml`), with a
//! real id_token from `kharonctl login` against the npm oidc-provider. There is no Lieutenant
//! client to borrow (commodore only lists through kapitan's inventory); a validator built from the
//! spec is the independent judge of the answers' shape and status codes.

use std::path::{Path, PathBuf};
use std::process::Command;

use kharon_e2e::oidc;
use serde_json::Value;

use crate::login::World;

/// Lieutenant's OpenAPI spec, kept in the repository (`tests/fixtures/lieutenant/openapi.yaml`,
/// byte for byte upstream's `openapi.yaml` as published with the reference material), so a clean
/// clone in CI has it without anything beside the checkout.
fn spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lieutenant/openapi.yaml")
}

#[test]
fn every_answer_of_the_fake_lieutenant_follows_its_openapi_spec() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let token = world.tokens()["id_token"].as_str().expect("an id_token after login").to_owned();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lieutenant/check_openapi.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(spec())
        .arg(world.lieutenant.url())
        .arg(&token)
        .args(["c-green-meadow-1234", "t-other-0815"])
        .output()
        .expect("run python3 (pip install openapi-core, see .ci/run)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).expect("JSON results");
    let case = |name: &str| {
        results.iter().find(|r| r["case"] == name).unwrap_or_else(|| panic!("no case {name}: {results:?}"))
    };
    // Every answer, good or bad, has the status and shape the spec gives it.
    for r in &results {
        assert_eq!(r["response_errors"], serde_json::json!([]), "{}: {}", r["case"], r["response_errors"]);
    }
    for (name, status) in [
        ("discovery", 200),
        ("healthz", 200),
        ("clusters", 200),
        ("clusters by tenant", 200),
        ("clusters sorted by displayName", 200),
        ("clusters, trailing slash", 200),
        ("one cluster", 200),
        ("unknown cluster", 404),
        ("no token", 400),
        ("bad token", 401),
        ("bad sort_by", 400),
    ] {
        assert_eq!(case(name)["status"], status, "{name}: {}", case(name)["body"]);
    }
    // Requests the spec allows are answered; the ones it does not allow (no bearer token, a
    // sort_by outside its enum) are the ones the fake refuses.
    for name in ["discovery", "healthz", "clusters", "clusters by tenant", "one cluster", "unknown cluster"] {
        assert_eq!(case(name)["request_errors"], serde_json::json!([]), "{name}");
    }
    for name in ["no token", "bad sort_by"] {
        assert_ne!(case(name)["request_errors"], serde_json::json!([]), "{name}");
    }
    // Upstream's words (kubernetes_auth.go, customHTTPErrorHandler, kin-openapi).
    assert_eq!(case("no token")["body"]["reason"], "missing or malformed jwt");
    assert_eq!(case("bad token")["body"]["reason"], "Unauthorized");
    assert_eq!(case("unknown cluster")["body"]["reason"], "clusters.syn.tools 'c-does-not-exist' not found");
    assert_eq!(
        case("bad sort_by")["body"]["reason"],
        r#"parameter "sort_by" in query has an error: value is not one of the allowed values ["id","tenant","displayName"]"#
    );
    let ids = |name: &str| -> Vec<String> {
        case(name)["body"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(ids("clusters by tenant"), ["c-direct-cloud-0003", "c-lonely-jump-0002"]);
    let all = ids("clusters");
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted, "not in Go's byte order by id");
    assert_eq!(ids("clusters, trailing slash"), all);
    assert_eq!(case("discovery")["body"]["oidc"]["clientId"], oidc::CLIENT_ID);
}
