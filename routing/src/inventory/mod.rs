//! The Lieutenant inventory: the JSON array `GET /clusters` returns, as [`Cluster`] values, and the
//! facts kharon reads from each cluster (docs/lieutenant-and-oidc.md, "The Cluster object").
//!
//! This module owns:
//! - parsing ([`parse_kept`]: unknown fields are ignored, fact values may be any JSON; a lean parse
//!   keeps only the facts routing reads);
//! - typed accessors for the facts that matter (`jumphost`, `kharonIgnore`, `distribution`, API and
//!   console URLs);
//! - the per-cluster derivation of routing suffixes, [`Cluster::routing_facts`], including what a
//!   valid domain suffix is ([`normalize_suffix`]). `table` uses the same name rules for the host
//!   names it looks up, so a suffix and a host can never disagree about case, trailing dots or labels;
//! - which of those names come from static facts (VSHN's) and which from dynamic ones (the
//!   cluster's), and the bounds [`trust`](crate::trust) puts on a name by itself (a public suffix,
//!   a registrable domain): the trust model is written down there.
//!
//! It knows nothing of HTTP, OIDC or where the bytes came from (kharonctl's `lieutenant.rs` fetches
//! them), and nothing of how suffixes of several clusters combine: that is `table`'s job.

mod cluster;
mod parse;

pub use cluster::{
    Cluster, Distribution, DynamicName, InvalidJumphost, InvalidSuffix, MAX_LABEL_LEN, MAX_NAME_LEN,
    RoutingFacts, SuffixError, check_jumphost, fact, normalize_suffix,
};
pub(crate) use cluster::{ends_in_ipv4, lower_name};
pub use parse::{
    Error, Keep, ROUTING_DYNAMIC_FACTS, ROUTING_FACTS, load_file, parse_clusters, parse_file, parse_kept,
    read_file,
};
