//! The control API (`proto/kharon/v1/control.proto`), generated at build time by protox +
//! tonic-prost-build. Conversions to and from shared types live next to those types.

#![allow(clippy::all, missing_docs)]

/// `kharon.v1`: the `Control` service, its client and server, and its messages.
pub mod v1 {
    tonic::include_proto!("kharon.v1");
}
