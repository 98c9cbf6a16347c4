//! The library both kharon binaries use. It knows nothing of sockets, SSH or HTTP.
//!
//! # Layout
//! - [`inventory`]: Lieutenant `/clusters` JSON → [`inventory::Cluster`] and the routing facts of each.
//! - [`routing`]: compiles clusters once into a [`routing::RoutingTable`]; `lookup` is the hot path.
//! - [`cache`]: the versioned local inventory cache `kharonctl update` writes and kharond reads.
//! - [`errors`]: the one error convention (a message never repeats its cause, `source()` has it)
//!   and an error with its causes as one line ([`errors::Chain`]), which both binaries print.
//! - [`config`]: the TOML schema and defaults, merged with env and flags into one validated `Config`.
//! - [`files`]: reading user-named files without blocking on a FIFO; naming file types; atomic,
//!   durable writes that clean up after a killed writer.
//! - [`parallel`]: one pure function over a large slice, split across the cores (compiling).
//! - [`paths`]: every on-disk location (config, cache, control socket); the only user of `directories`.
//! - [`man_pages`]: the man page of either binary, written from its clap definition.
//! - [`proto`]: the gRPC control API generated from `proto/kharon/v1/control.proto`.
//! - [`secret`]: [`Secret`], a string that `Debug` never shows, for every credential held in memory.
//! - [`time`]: Unix times as RFC 3339 (certificate validity in messages, token expiry).
//! - [`text`]: data made safe to show: control characters escaped visibly, table cells capped.
//! - [`anchor`]: the domains a cluster's dynamic facts may route in, tied to it by something other
//!   than the cluster (its static facts, the engineer's ssh_config and config file).
//! - [`owner`]: whose a name is by the cluster id it carries (Lieutenant's word, like a static fact).
//! - [`provider`]: the provider's domains, which many tenants' clusters share and none owns.
//! - [`changes`]: what a new routing table routes and refuses that the one it replaces did not,
//!   per cluster (`kharonctl update`, kharond's reload).
//! - [`trust`]: the trust model of the inventory: static facts (VSHN's) against dynamic ones (the
//!   cluster's), and the bounds on what a cluster may route.
//! - [`wildcard`]: the one `*`/`?` matcher (ssh config and known_hosts patterns, cluster id filters).

pub mod anchor;
pub mod cache;
pub mod changes;
pub mod config;
pub mod errors;
pub mod files;
pub mod inventory;
pub mod man_pages;
pub mod owner;
pub mod parallel;
pub mod paths;
pub mod proto;
pub mod provider;
pub mod routing;
pub mod secret;
pub mod text;
pub mod time;
pub mod trust;
pub mod wildcard;

pub use secret::Secret;

/// The version both binaries report (`--version`, the Status RPC): the package version and the git
/// commit of the build, e.g. `0.1.0 (3f2c1a9b7d4e-dirty)`; set by `build.rs`.
pub const VERSION: &str = env!("KHARON_VERSION");

// The build script's commit lookup, unit-tested here against real repositories.
#[cfg(test)]
#[path = "../build/version.rs"]
mod build_version;
