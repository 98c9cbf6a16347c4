//! kharon's routing model: which names a cluster of the inventory routes through which jump host,
//! and which of its claims are refused. Pure and synchronous: it knows nothing of sockets, SSH,
//! HTTP or the control API, so kharond routes and `kharonctl route` answers by the same code.
//!
//! # Layout, in the order a name is routed
//! - [`inventory`]: Lieutenant `/clusters` JSON → [`inventory::Cluster`] and the routing facts of each.
//! - [`trust`]: the trust model of the inventory: static facts (VSHN's) against dynamic ones (the
//!   cluster's), and the bounds on what a cluster may route.
//! - [`anchor`]: the domains a cluster's dynamic facts may route in, tied to it by something other
//!   than the cluster (its static facts, the engineer's ssh_config and config file).
//! - [`owner`]: whose a name is by the cluster id it carries (Lieutenant's word, like a static fact).
//! - [`provider`]: the provider's domains, which many tenants' clusters share and none owns.
//! - [`table`]: compiles clusters once into a [`table::RoutingTable`]; `lookup` is the hot path.
//! - [`changes`]: what a new routing table routes and refuses that the one it replaces did not,
//!   per cluster (`kharonctl update`, kharond's reload).
//! - [`cache`]: the versioned local inventory cache `kharonctl update` writes and kharond reads.

pub mod anchor;
pub mod cache;
pub mod changes;
pub mod inventory;
pub mod owner;
pub mod provider;
pub mod table;
pub mod trust;
