//! Where a request goes, and the dial along that way.
//!
//! - [`target`]: what a client asked to reach, checked as untrusted input, and why it could not be
//!   reached ([`target::Unreachable`]): the type every proxy protocol hands over and answers with.
//! - [`route`]: the one lookup of a target in a table (direct, or which jump host), owned, and the
//!   words every message uses for it.
//! - [`dial`]: the dial along a route, shared by client connections, `Test` and `FetchObject`: TCP
//!   from here, or a channel from a jump host chain's last hop (the SSH engine, `kharon_ssh`).
//! - [`in_force`]: the routing in force, one [`Generation`](in_force::Generation) (the table and
//!   the SSH chains read with it, swapped as one value), its reloads and their history.
//! - [`table`]: which inventory the table is read from, and the table compiled from it with what
//!   hangs off it: [`endpoints`] (the cluster URLs `Test` checks) and [`catalog`] (the clusters
//!   the `Clusters` RPC answers with).
//! - [`reload`]: how a reload runs: off the async threads, one at a time, within a deadline,
//!   everything or nothing.
//!
//! The routing rules themselves (suffixes, longest first, exclusions) are the shared library's
//! (`kharon_routing::table`), so kharonctl's `route` answers as kharond routes.
//!
//! Owns: the table in force and the way to an upstream. Must not know: the proxy protocols (a
//! failure is an [`std::io::ErrorKind`] or an [`Unreachable`](target::Unreachable) the caller
//! answers with) and the control API.

pub mod catalog;
pub mod dial;
pub mod endpoints;
pub mod in_force;
pub mod reload;
pub mod route;
pub mod table;
pub mod target;
