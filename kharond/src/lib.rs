//! kharond as a library: the daemon a thin `main` runs, and that tests can start in-process.
//!
//! # Layout
//! The workspace's crates are the daemon's outer boundaries: the SSH engine is the crate
//! `kharon-ssh` (`kharond/ssh/`) and the byte relay `kharon-relay` (`kharond/relay/`); this crate
//! strings them together and cannot reach inside either (their modules are private). Its own
//! subsystems, in the order a client connection meets them:
//! - [`proxy`]: the client side. The accept loop and its connection slots, which protocol a client
//!   speaks (SOCKS5, HTTP CONNECT, or `GET /proxy.pac`), its handshake and credentials, who may use
//!   it without a password ([`proxy::owner`]), and the per-connection spine
//!   ([`proxy::connection`]) that strings the other subsystems together.
//! - [`routing`]: where a request goes. The routing table in force (and the inventory it is read
//!   from, and how a reload replaces it), the lookup of a target in it, and the dial along the route,
//!   directly or through the SSH engine.
//! - `kharon_relay`: moving bytes both ways until both directions are closed.
//! - [`observe`]: what connections are doing, recorded as they go: the open connections and
//!   per-route totals, traces on demand, which local process holds a client's socket.
//! - [`control`]: the gRPC control API `kharonctl` talks to, and the checks and fetches it runs
//!   through the daemon's own routing (`Test`, `FetchObject`).
//! - [`desktop`]: telling the person at the desktop that a jump host asks for a one-time
//!   password or a password, and how to answer it (a desktop notification).
//! - [`process`]: the process itself: its log, allocator, descriptor limit and memory, listeners
//!   handed over by systemd, the accept backoff, its man page.
//!
//! Around them: [`cli`], the flags; [`start`](mod@start), from settings to a serving daemon (and
//! the exit codes); [`state`], what every subsystem shares while the daemon runs; and [`daemon`],
//! the only module that knows them all and runs them until shutdown.
//!
//! Errors follow `kharon_common::errors`: a message never repeats its cause, so every log line,
//! gRPC status, `Status` string and HTTP answer made from an error prints its whole chain.

pub mod cli;
pub mod control;
pub mod daemon;
pub mod desktop;
pub mod observe;
pub mod process;
pub mod proxy;
pub mod routing;
pub mod start;
pub mod state;

pub use cli::Cli;
pub use start::{Error, start};
