//! The control API: gRPC over the Unix socket, the only way `kharonctl` talks to kharond.
//!
//! - [`caller`]: who may call: the one check, wrapped around every RPC, failing closed.
//! - [`service`]: the RPCs (`Status`, `Reload`, `Route`, `Test`, `FetchObject`, `Connections`,
//!   `Trace`, `Clusters`, `JumpLogin`, `JumpAnswer`) and the conversions between proto messages and daemon types.
//! - [`live`]: what `Connections` and `Trace` answer, from [`observe`](crate::observe).
//! - [`reachability`]: `Test`'s checks, along the route a client's connection would take.
//! - [`jump_login`]: `JumpLogin` and `JumpAnswer`, a person answering what a jump host asks
//!   beyond a key (a one-time password, a password).
//! - [`object_fetch`]: `FetchObject`'s S3 `GetObject` of emergency credentials, made by the daemon
//!   so that it takes the daemon's routing.
//!
//! Owns: the wire format of `proto/` on the daemon's side. Must not know: the proxy protocols; it
//! reaches upstreams only through [`routing`](crate::routing), as a client would.

pub mod caller;
pub mod jump_login;
pub mod live;
pub mod object_fetch;
pub mod reachability;
pub mod service;
