//! Where a request goes, and the dial along that way.
//!
//! - [`target`]: what a client asked to reach, checked as untrusted input, and why it could not be
//!   reached ([`target::Unreachable`]): the type every proxy protocol hands over and answers with.
//! - [`dial`]: the one step from a target to an upstream: its route by the generation in force
//!   and the dial along it through the same generation's chains ([`dial::Routed`]), shared by
//!   client connections, `Test` and `FetchObject`: TCP from here, or a channel from a jump host
//!   chain's last hop (the SSH engine, `kharon_ssh`).
//! - [`in_force`]: the routing in force, one [`Generation`](in_force::Generation) (the inventory
//!   and the SSH chains read with it, swapped as one value), its reloads and their history.
//! - [`loaded`]: where the inventory is read from, and the inventory as loaded: the table
//!   compiled from it with what hangs off it: [`endpoints`] (the cluster URLs `Test` checks) and
//!   [`catalog`] (the clusters the `Clusters` RPC answers with).
//! - [`reload`]: how a reload runs: off the async threads, one at a time, within a deadline,
//!   everything or nothing.
//!
//! The routing rules themselves (suffixes, longest first, exclusions) and the
//! [`Route`](kharon_routing::table::Route) a lookup answers are the routing model's
//! (`kharon_routing::table`), so kharonctl's `route` answers as kharond routes.
//!
//! Owns: the table in force and the way to an upstream. Must not know: the proxy protocols (a
//! failure is an [`std::io::ErrorKind`] or an [`Unreachable`](target::Unreachable) the caller
//! answers with) and the control API.

pub mod catalog;
pub mod dial;
pub mod endpoints;
pub mod in_force;
pub mod loaded;
pub mod reload;
pub mod target;
