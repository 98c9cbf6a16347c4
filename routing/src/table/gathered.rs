//! One cluster while the routing table is compiled: its names and exclusions after what it says
//! on its own, before and while they are judged against every other cluster's. Shared by the
//! compile (`table`) and its judging step (`judge`).

use crate::inventory::Cluster;
use crate::trust::{self, Tier};

/// A routed name, how strongly its cluster holds it, and the dynamic fact that claimed it (none
/// for a static name), to name in a refusal.
pub(super) type Tiered = (String, Tier, Option<&'static str>);

/// One cluster with a jump host, before the names of all clusters are judged together. Holds
/// only the names: a refusal asks `cluster` for the fact's value.
pub(super) struct Gathered<'c> {
    pub(super) cluster: &'c Cluster,
    pub(super) jumphost: &'c str,
    /// Its includes the cluster's own facts allow; once judged against every cluster (`judge`),
    /// those no own exclusion kills, and the killed ones in `dead` ([`Gathered::split`]).
    pub(super) live: Vec<Tiered>,
    pub(super) dead: Vec<String>,
    pub(super) exclude: Vec<String>,
}

impl Gathered<'_> {
    /// Moves the includes that one of the cluster's own exclusions kills to `dead`.
    pub(super) fn split(&mut self) {
        let (live, dead): (Vec<Tiered>, Vec<Tiered>) = std::mem::take(&mut self.live)
            .into_iter()
            .partition(|(inc, _, _)| !self.exclude.iter().any(|exc| trust::at_or_below(inc, exc)));
        self.live = live;
        self.dead = dead.into_iter().map(|(suffix, _, _)| suffix).collect();
    }
}
