//! The control API (`kharon/v1/control.proto`), generated at build time by protox +
//! tonic-prost-build, and the routing model's types converted into its messages ([`convert`]):
//! the routing model knows nothing of the control API, the control API speaks of its refusals,
//! changes and routes.
//!
//! The messages kharonctl prints derive `serde::Serialize` (see `build.rs`): their JSON is the
//! proto's, with the exceptions [`json`] spells out. Each enum has one word ([`words`]), which the
//! JSON and the tables both show.

/// `kharon.v1`: the `Control` service, its client and server, and its messages.
#[allow(clippy::all, missing_docs)]
pub mod v1 {
    tonic::include_proto!("kharon.v1");
}

pub mod convert;
pub mod json;
pub mod words;
