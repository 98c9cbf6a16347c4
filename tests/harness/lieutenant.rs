//! A fake Lieutenant API (`tests/oidc/lieutenant.mjs`) for the endpoints kharon reads, written
//! from projectsyn/lieutenant-api's code (the script names the upstream file of each behaviour)
//! and checked against upstream's OpenAPI spec by openapi-core (`scenarios/lieutenant_spec.rs`):
//! `GET /` announces the test [`Provider`], `GET /clusters` needs a Bearer id_token the provider
//! signed for our client id, errors are `{"reason": …}`.
//!
//! Test controls: [`Lieutenant::set_clusters`] swaps the inventory, [`Lieutenant::reject_next`]
//! makes the next requests fail with 401 (a token revoked on the server side), and
//! [`Lieutenant::requests`] lists what the fake saw (path, status, token hash).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::oidc::{CLIENT_ID, NodeProcess, Provider};

/// A file under `tests/fixtures/lieutenant/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/lieutenant").join(name)
}

pub struct Lieutenant {
    node: NodeProcess,
}

impl Lieutenant {
    /// Serves `clusters` (a JSON file) and announces `provider` for logins.
    pub fn start(provider: &Provider, clusters: &Path) -> Self {
        let vars = [
            ("DISCOVERY_URL", provider.discovery_url()),
            ("CLIENT_ID", CLIENT_ID.to_owned()),
            ("CLUSTERS", clusters.display().to_string()),
        ];
        Self { node: NodeProcess::spawn("lieutenant.mjs", &vars) }
    }

    /// The API base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        self.node.url()
    }

    /// Replaces the inventory with the clusters in `path`.
    pub fn set_clusters(&self, path: &Path) {
        let body = std::fs::read_to_string(path).expect("read clusters fixture");
        let (status, reply) = self.call("PUT", "/_admin/clusters", &body);
        assert_eq!(status, 200, "{reply}");
    }

    /// The next `count` authenticated requests get 401.
    pub fn reject_next(&self, count: u32) {
        let (status, reply) = self.call("POST", &format!("/_admin/reject?count={count}"), "");
        assert_eq!(status, 200, "{reply}");
    }

    /// Every later `/clusters` answer is held for `ms` milliseconds (0: answered at once again).
    pub fn delay(&self, ms: u64) {
        let (status, reply) = self.call("POST", &format!("/_admin/delay?ms={ms}"), "");
        assert_eq!(status, 200, "{reply}");
    }

    /// How many `/clusters` requests the fake is answering right now (held by [`Lieutenant::delay`]).
    pub fn in_flight(&self) -> u64 {
        let (status, reply) = self.call("GET", "/_admin/stats", "");
        assert_eq!(status, 200, "{reply}");
        let v: serde_json::Value = serde_json::from_str(&reply).expect("stats JSON");
        v["inFlight"].as_u64().unwrap_or(0)
    }

    /// Every authenticated request so far: `{"path", "status", "token", "arrived", "answered"}`
    /// (token = a short hash; the times in ms since the epoch).
    pub fn requests(&self) -> Vec<serde_json::Value> {
        let (status, reply) = self.call("GET", "/_admin/stats", "");
        assert_eq!(status, 200, "{reply}");
        let v: serde_json::Value = serde_json::from_str(&reply).expect("stats JSON");
        v["requests"].as_array().cloned().unwrap_or_default()
    }

    /// Stops the fake: Lieutenant is down.
    pub fn stop(&mut self) {
        self.node.stop();
    }

    /// One HTTP/1.1 request with `Connection: close`; returns status and body.
    pub fn call(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let addr = self.url().trim_start_matches("http://").to_owned();
        let mut stream = TcpStream::connect(&addr).expect("connect to fake Lieutenant");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let request = format!(
            "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).expect("send");
        let mut reply = String::new();
        stream.read_to_string(&mut reply).expect("read reply");
        let status = reply.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let body = reply.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        (status, body)
    }
}
