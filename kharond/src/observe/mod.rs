//! What the connections are doing, recorded as they go, for whoever asks.
//!
//! - [`registry`]: the connections open now (destination, route, state, bytes each way) and
//!   per-route totals since start, in bounded memory.
//! - [`events`]: one connection's events, said once by the spine, heard by the registry, the log
//!   and a trace alike (the one sink they all implement).
//! - [`failures`]: the one log of failed connections: why, once, at INFO, limited per client.
//! - [`trace`]: per-request traces on demand (`kharonctl route HOST --trace`), free until armed.
//! - [`peer`]: which local process holds a client's socket, looked up only when asked.
//!
//! The proxy writes here; the control API reads ([`control`](crate::control)). Owns: those records
//! and their bounds. Must not know: how a connection is served, or who is asking.

pub mod events;
pub mod failures;
pub mod peer;
pub mod registry;
pub mod trace;
