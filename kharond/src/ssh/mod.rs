//! The SSH engine: from a cluster's `jumphost` alias to a direct-tcpip channel at the last hop.
//!
//! # Layout
//! - [`config`]: ssh_config (Include, Host patterns, ProxyJump, `ProxyCommand ssh -W`) → [`config::Chain`].
//! - [`pool`]: one shared session set per chain, opened on first use; the only entry point the
//!   daemon uses ([`Pool::connect`], [`Pool::status`], [`Pool::reload`]).
//!
//! The engine knows nothing of SOCKS: failures carry an [`std::io::ErrorKind`] so the caller can
//! pick a reply code.

pub mod config;
pub mod pool;

pub use pool::{ChainHealth, ChainState, Error, Pool, PoolSettings, Tunnel};
