//! The control API (`proto/kharon/v1/control.proto`), generated at build time by protox +
//! tonic-prost-build. Conversions to and from shared types live next to those types.
//!
//! The messages kharonctl prints derive `serde::Serialize` (see `build.rs`): their JSON is the
//! proto's, with the exceptions [`json`] spells out. Each enum has one word ([`words`]), which the
//! JSON and the tables both show.

/// `kharon.v1`: the `Control` service, its client and server, and its messages.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("kharon.v1");
}

pub mod json;
pub mod words;
