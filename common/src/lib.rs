//! What every kharon crate uses, and nothing of kharon's own trade: no inventory, routing,
//! sockets, SSH or HTTP.
//!
//! # Layout
//! - [`errors`]: the one error convention (a message never repeats its cause, `source()` has it)
//!   and an error with its causes as one line ([`errors::Chain`]), which both binaries print.
//! - [`text`]: data made safe to show: control characters escaped visibly, table cells capped.
//! - [`files`]: reading user-named files without blocking on a FIFO; naming file types; atomic,
//!   durable writes that clean up after a killed writer.
//! - [`paths`]: every on-disk location (config, cache, control socket); the only user of `directories`.
//! - [`secret`]: [`Secret`], a string that `Debug` never shows, for every credential held in memory.
//! - [`time`]: Unix times as RFC 3339 (certificate validity in messages, token expiry).
//! - [`wildcard`]: the one `*`/`?` matcher (ssh config and known_hosts patterns, cluster id filters).
//! - [`parallel`]: one pure function over a large slice, split across the cores (compiling).
//! - [`man_pages`]: the man page of either binary, written from its clap definition.
//! - [`VERSION`]: the version both binaries report.

pub mod errors;
pub mod files;
pub mod man_pages;
pub mod parallel;
pub mod paths;
pub mod secret;
pub mod text;
pub mod time;
pub mod wildcard;

pub use secret::Secret;

/// The version both binaries report (`--version`, the Status RPC): the package version and the git
/// commit of the build, e.g. `0.1.0 (3f2c1a9b7d4e-dirty)`; set by `build.rs`.
pub const VERSION: &str = env!("KHARON_VERSION");

// The build script's commit lookup, unit-tested here against real repositories.
#[cfg(test)]
#[path = "../build/version.rs"]
mod build_version;
