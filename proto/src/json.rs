//! How the control API's messages read as JSON (and YAML): `kharonctl status`, `connections`,
//! `route` and `route --trace` with `-o json` print the messages themselves. serde is derived on
//! them by `build.rs`, so every field is its proto name and value, and a field added to the proto
//! appears in the JSON as it is. The functions here are for what the proto's encoding cannot say:
//! an enum value is its word, not its number; "nothing" (proto3's empty string or zero) is
//! `null`; a oneof is its two keys. `build.rs` names, per field, the function it is shown with.

use serde::Serialize;
use serde::ser::{SerializeMap as _, Serializer};

use super::v1::{ChainState, ConnectionState, ReloadResult, Via, chain_status};

/// An empty string as `null`: a connection's `"program"`, `"destination"`, `"route"` and
/// `"cluster"`, and a route's `"jumphost"`, `"cluster"` and `"suffix"`, are `null` where kharond
/// has nothing to say (proto3 cannot tell an empty string from an unset one).
pub fn empty_as_null<S: Serializer>(value: &str, serializer: S) -> Result<S::Ok, S::Error> {
    if value.is_empty() { serializer.serialize_none() } else { serializer.serialize_some(value) }
}

/// 0 as `null`: a connection's `"pid"` is `null` when kharond cannot see the process (no pid is
/// 0), a trace step's `"took_us"` for a step that took no time of its own.
pub fn zero_as_null<T, S>(value: &T, serializer: S) -> Result<S::Ok, S::Error>
where
    T: Serialize + Default + PartialEq,
    S: Serializer,
{
    if *value == T::default() { serializer.serialize_none() } else { serializer.serialize_some(value) }
}

/// A chain's state as its word ([`ChainState::word`]): `"state": "connected"`. (`status` shows a
/// chain the ssh config refuses as `"refused"`; that comes from two fields, so kharonctl sets it.)
pub fn chain_state<S: Serializer>(value: &i32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(ChainState::try_from(*value).unwrap_or_default().word())
}

/// A reload's result as its word ([`ReloadResult::word`]): `"result": "partial"`.
pub fn reload_result<S: Serializer>(value: &i32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(ReloadResult::try_from(*value).unwrap_or_default().word())
}

/// A connection's state as its word ([`ConnectionState::word`]): `"state": "half-closed"`.
pub fn connection_state<S: Serializer>(value: &i32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(ConnectionState::try_from(*value).unwrap_or_default().word())
}

/// A route's via as its word ([`Via::word`]): `"via": "jumphost"` or `"via": "direct"`.
pub fn via<S: Serializer>(value: &i32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(Via::try_from(*value).unwrap_or_default().word())
}

/// The `probe` oneof of a chain as its two keys in the chain (the field is flattened), both always
/// there: `"round_trip_us": 412` and `"probe_failed": "no answer within 1s"`, the one that does
/// not apply `null`; both `null` for a chain that is not connected.
pub fn probe<S: Serializer>(value: &Option<chain_status::Probe>, serializer: S) -> Result<S::Ok, S::Error> {
    let (round_trip_us, probe_failed) = match value {
        Some(chain_status::Probe::RoundTripUs(us)) => (Some(*us), None),
        Some(chain_status::Probe::ProbeFailed(why)) => (None, Some(why.as_str())),
        None => (None, None),
    };
    let mut map = serializer.serialize_map(Some(2))?;
    map.serialize_entry("round_trip_us", &round_trip_us)?;
    map.serialize_entry("probe_failed", &probe_failed)?;
    map.end()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::v1 as pb;

    fn json_of<T: serde::Serialize>(value: &T) -> serde_json::Value {
        serde_json::to_value(value).unwrap_or_else(|e| panic!("serializing: {e}"))
    }

    /// The whole status, so a field that moved or vanished shows here: proto names, unset
    /// messages `null`.
    #[test]
    fn a_status_is_its_proto_fields_by_their_names() {
        assert_eq!(
            json_of(&pb::StatusResponse::default()),
            json!({
                "version": "", "pid": 0, "started_at_ms": 0, "uptime_seconds": 0,
                "listen_address": "", "control_socket": "", "socks_auth_required": false,
                "inventory": null, "connections": null,
                "chains": [], "routes": [],
                "last_reload": null, "last_failed_reload": null, "memory": null, "preflight": null,
            })
        );
        let inventory = pb::InventoryInfo {
            source_kind: "file".into(),
            source_path: "/i.json".into(),
            refused_claims: vec![pb::RefusedClaim {
                cluster: "c-1".into(),
                fact: "openshiftApiURL".into(),
                value: "example.com".into(),
                reason: "a registrable domain".into(),
            }],
            conflicts: vec![pb::Conflict { suffix: "a.example".into(), winner: None, shadowed: vec![] }],
            ..Default::default()
        };
        assert_eq!(
            json_of(&inventory),
            json!({
                "source_kind": "file", "source_path": "/i.json", "loaded_at_ms": 0, "modified_at_ms": 0,
                "clusters_total": 0, "clusters_ignored": 0, "clusters_routed": 0,
                "include_suffixes": 0, "exclude_suffixes": 0,
                "conflicts": [{"suffix": "a.example", "winner": null, "shadowed": []}], "warnings": [],
                "jumphosts": 0, "missing": false,
                "refused_claims": [{"cluster": "c-1", "fact": "openshiftApiURL", "value": "example.com",
                                    "reason": "a registrable domain"}],
            })
        );
    }

    fn chain(state: pb::ChainState, probe: Option<pb::chain_status::Probe>) -> pb::ChainStatus {
        pb::ChainStatus {
            jumphost: "j".into(),
            hops: vec!["u@j:22".into()],
            state: state.into(),
            since_ms: 1_000,
            probe,
            hop_details: vec![pb::HopDetail {
                alias: "j".into(),
                user: "u".into(),
                host: "j".into(),
                port: 22,
                identity_files: vec!["/k".into()],
                proxy_command: String::new(),
                origin: "/c:1".into(),
            }],
            last_refusal: Some(pb::ChannelRefusal {
                target: "t:443".into(),
                reason: "connect failed".into(),
                description: "refused".into(),
                at_ms: 5,
            }),
            ..Default::default()
        }
    }

    /// A chain: its state's word, the probe as `round_trip_us` or `probe_failed`.
    #[test]
    fn chain_state_and_probe_keep_the_chain_shape() {
        let up = chain(pb::ChainState::Connected, Some(pb::chain_status::Probe::RoundTripUs(412)));
        assert_eq!(
            json_of(&up),
            json!({
                "jumphost": "j", "hops": ["u@j:22"], "state": "connected", "since_ms": 1000,
                "last_error": "", "open_channels": 0, "bytes_up": 0, "bytes_down": 0,
                "next_retry_ms": 0, "round_trip_us": 412, "probe_failed": null,
                "hop_details": [{"alias": "j", "user": "u", "host": "j", "port": 22,
                                 "identity_files": ["/k"], "proxy_command": "", "origin": "/c:1"}],
                "config_error": "", "config_origin": "", "last_error_ms": 0,
                "last_refusal": {"target": "t:443", "reason": "connect failed",
                                 "description": "refused", "at_ms": 5},
                "question": null,
            })
        );
        let frozen = json_of(&chain(
            pb::ChainState::Connected,
            Some(pb::chain_status::Probe::ProbeFailed("no answer within 1s".into())),
        ));
        assert_eq!(
            (&frozen["round_trip_us"], &frozen["probe_failed"]),
            (&json!(null), &json!("no answer within 1s"))
        );
        let idle = json_of(&pb::ChainStatus { last_refusal: None, ..chain(pb::ChainState::Idle, None) });
        assert_eq!(
            (&idle["state"], &idle["round_trip_us"], &idle["probe_failed"], &idle["last_refusal"]),
            (&json!("idle"), &json!(null), &json!(null), &json!(null))
        );
        let newer = json_of(&pb::ChainStatus { state: 99, ..Default::default() });
        assert_eq!(newer["state"], "unknown");
        let asking = json_of(&chain(pb::ChainState::Asking, None));
        assert_eq!(asking["state"], "asking");
        let waiting = json_of(&chain(pb::ChainState::LoginRequired, None));
        assert_eq!(waiting["state"], "login-required");
    }

    /// A reload: its result's word.
    #[test]
    fn reload_result_is_its_word() {
        let record = pb::ReloadRecord {
            at_ms: 7,
            trigger: "rpc".into(),
            result: pb::ReloadResult::Partial.into(),
            error: String::new(),
            refused: vec![pb::RefusedJumphost {
                jumphost: "j".into(),
                reason: "Match".into(),
                origin: "/c:3".into(),
            }],
        };
        assert_eq!(
            json_of(&record),
            json!({"at_ms": 7, "trigger": "rpc", "result": "partial", "error": "",
                   "refused": [{"jumphost": "j", "reason": "Match", "origin": "/c:3"}]})
        );
    }

    /// A connection, as text: `connections -o json` prints it as it serializes, keys in this order.
    #[test]
    fn a_connection_says_nothing_as_null_and_its_state_in_a_word() {
        let mut connection = pb::Connection {
            id: 7,
            client: "127.0.0.1:50000".into(),
            pid: 0,
            program: String::new(),
            protocol: "SOCKS".into(),
            destination: "api.c1.example:443".into(),
            route: "hop2".into(),
            cluster: String::new(),
            state: pb::ConnectionState::HalfClosed.into(),
            bytes_up: 10,
            bytes_down: 2048,
            age_ms: 65_250,
        };
        assert_eq!(
            serde_json::to_string(&connection).ok(),
            Some(
                r#"{"id":7,"client":"127.0.0.1:50000","pid":null,"program":null,"protocol":"SOCKS","destination":"api.c1.example:443","route":"hop2","cluster":null,"state":"half-closed","bytes_up":10,"bytes_down":2048,"age_ms":65250}"#
                    .to_owned()
            )
        );
        (connection.pid, connection.program, connection.age_ms) = (42, "curl".into(), 1_000);
        let shown = json_of(&connection);
        assert_eq!(
            (&shown["pid"], &shown["program"], &shown["age_ms"]),
            (&json!(42), &json!("curl"), &json!(1_000))
        );
    }

    /// A route answer: via's word, and `null` for the jump host, cluster and suffix of a direct one.
    #[test]
    fn a_route_says_via_in_a_word_and_null_for_what_is_not_there() {
        let direct = pb::RouteResponse {
            host: "www.example.com".into(),
            via: pb::Via::Direct.into(),
            rule: "no-match".into(),
            reason: "no cluster claims this host".into(),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_string(&direct).ok(),
            Some(
                r#"{"host":"www.example.com","via":"direct","jumphost":null,"cluster":null,"suffix":null,"reason":"no cluster claims this host","rule":"no-match","inventory_missing":false}"#
                    .to_owned()
            )
        );
        let routed = pb::RouteResponse {
            via: pb::Via::Jumphost.into(),
            jumphost: "j".into(),
            cluster: "c-1".into(),
            suffix: "c1.example".into(),
            ..direct
        };
        let shown = json_of(&routed);
        assert_eq!(
            (&shown["via"], &shown["jumphost"], &shown["cluster"], &shown["suffix"]),
            (&json!("jumphost"), &json!("j"), &json!("c-1"), &json!("c1.example"))
        );
    }

    /// A trace step, as text (`route --trace -o json` prints one a line): times in microseconds,
    /// `null` for a step that took no time of its own.
    #[test]
    fn a_trace_step_is_in_microseconds_and_a_moment_took_null() {
        let step = pb::TraceEvent {
            step: "connect".into(),
            at_us: 3_202,
            took_us: 2_032,
            detail: "connected".into(),
        };
        assert_eq!(
            serde_json::to_string(&step).ok(),
            Some(r#"{"step":"connect","at_us":3202,"took_us":2032,"detail":"connected"}"#.to_owned())
        );
        let moment = pb::TraceEvent { step: "route".into(), at_us: 1_168, took_us: 0, detail: String::new() };
        assert_eq!(
            serde_json::to_string(&moment).ok(),
            Some(r#"{"step":"route","at_us":1168,"took_us":null,"detail":""}"#.to_owned())
        );
    }
}
