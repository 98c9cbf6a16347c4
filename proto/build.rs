//! Compiles `kharon/v1/*.proto` with protox (pure Rust), so building needs no `protoc` on the
//! machine (docs/dependencies.md, "protox").
//!
//! The messages kharonctl prints with `-o json` derive `serde::Serialize` here, so their JSON
//! is the proto's: each field under its proto name, and a new field shows up without anyone
//! retyping it. Where the proto's encoding cannot say what the field means (an enum's number, an
//! empty string for "nothing"), the field names a function of `src/json.rs`, which says how it
//! shows.

/// The messages kharonctl prints as JSON (or YAML), and every message inside them. Requests stay
/// out: FetchObjectRequest carries a secret key, which nothing should be able to print.
const PRINTED: &[&str] = &[
    // status
    "StatusResponse",
    "InventoryInfo",
    "Conflict",
    "Claim",
    "RefusedClaim",
    "ConnectionStats",
    "RouteTotals",
    "ChainStatus",
    "HopDetail",
    "ChannelRefusal",
    "JumpQuestion",
    "JumpPrompt",
    "ReloadRecord",
    "RefusedJumphost",
    "Memory",
    "Preflight",
    "JumphostWarning",
    // connections
    "ConnectionsResponse",
    "Connection",
    // route, route --trace
    "RouteResponse",
    "TraceEvent",
];

/// Where the JSON differs from the field: `Message.field` and its serde attribute.
const FIELDS: &[(&str, &str)] = &[
    ("ChainStatus.state", r#"serialize_with = "crate::json::chain_state""#),
    ("ChainStatus.probe", r#"flatten, serialize_with = "crate::json::probe""#),
    ("ReloadRecord.result", r#"serialize_with = "crate::json::reload_result""#),
    ("Connection.pid", r#"serialize_with = "crate::json::zero_as_null""#),
    ("Connection.program", r#"serialize_with = "crate::json::empty_as_null""#),
    ("Connection.destination", r#"serialize_with = "crate::json::empty_as_null""#),
    ("Connection.route", r#"serialize_with = "crate::json::empty_as_null""#),
    ("Connection.cluster", r#"serialize_with = "crate::json::empty_as_null""#),
    ("Connection.state", r#"serialize_with = "crate::json::connection_state""#),
    ("RouteResponse.via", r#"serialize_with = "crate::json::via""#),
    ("RouteResponse.jumphost", r#"serialize_with = "crate::json::empty_as_null""#),
    ("RouteResponse.cluster", r#"serialize_with = "crate::json::empty_as_null""#),
    ("RouteResponse.suffix", r#"serialize_with = "crate::json::empty_as_null""#),
    ("TraceEvent.took_us", r#"serialize_with = "crate::json::zero_as_null""#),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it was compiled: a build-script binary reused from a
    // target dir shared with another checkout would otherwise compile that checkout's protos.
    let proto_root = std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let file = proto_root.join("kharon/v1/control.proto");
    let fds = protox::compile([&file], [&proto_root])?;
    // An attribute on a path that names nothing is dropped without a word, and the JSON would
    // change with it: a renamed message or field stops the build instead.
    let messages: Vec<_> = fds.file.iter().flat_map(|f| &f.message_type).collect();
    let has_field = |path: &str| {
        let (message, field) = path.split_once('.').unwrap_or((path, ""));
        messages.iter().any(|m| {
            m.name() == message
                && (m.field.iter().any(|f| f.name() == field)
                    || m.oneof_decl.iter().any(|o| o.name() == field))
        })
    };
    for message in PRINTED {
        if !messages.iter().any(|m| m.name() == *message) {
            return Err(format!("build.rs PRINTED names {message}, which control.proto does not have").into());
        }
    }
    for (field, _) in FIELDS {
        if !has_field(field) {
            return Err(format!("build.rs FIELDS names {field}, which control.proto does not have").into());
        }
    }
    let mut builder = tonic_prost_build::configure().build_server(true).build_client(true);
    // Paths without the leading dot: prost matches ".kharon.v1.ChainStatus.probe" as a prefix too,
    // which puts the oneof field's attribute on the variants of its enum as well.
    for message in PRINTED {
        builder = builder.message_attribute(format!("kharon.v1.{message}"), "#[derive(serde::Serialize)]");
    }
    for (field, attribute) in FIELDS {
        builder = builder.field_attribute(format!("kharon.v1.{field}"), format!("#[serde({attribute})]"));
    }
    builder.compile_fds(fds)?;
    // compile_fds does not emit this for us
    println!("cargo:rerun-if-changed={}", proto_root.join("kharon").display());
    Ok(())
}
