//! The routing model's refusals and per-cluster changes as the control API reports them
//! (`Status`'s inventory, `Reload`'s and `update`'s changes). Here, not beside those types: the
//! routing model knows nothing of the control API.

use kharon_routing::{changes, trust};

use crate::v1 as pb;

/// A refusal as the control API reports it.
impl From<&trust::Refused> for pb::RefusedClaim {
    fn from(r: &trust::Refused) -> Self {
        pb::RefusedClaim {
            cluster: r.cluster.clone(),
            fact: r.fact.to_owned(),
            value: r.value.clone(),
            reason: r.reason.to_string(),
        }
    }
}

/// One cluster's changes as the control API reports them.
impl From<&changes::ClusterChange> for pb::ClusterChange {
    fn from(c: &changes::ClusterChange) -> Self {
        let route = |(suffix, jumphost): &(String, String)| pb::RouteChange {
            suffix: suffix.clone(),
            jumphost: jumphost.clone(),
        };
        pb::ClusterChange {
            cluster: c.cluster.clone(),
            added: c.added.iter().map(route).collect(),
            removed: c.removed.iter().map(route).collect(),
            refused: c.refused.iter().map(pb::RefusedClaim::from).collect(),
        }
    }
}
