//! What `kharonctl update` says about the cache it wrote: the counts, then what changed against
//! the cache it replaced (clusters added and removed, per cluster the names it routes now and did
//! not, no longer routes, and has refused since), then conflicts, warnings and refusals on stderr.

use std::collections::BTreeSet;

use kharon_common::text::Escaped;
use kharon_routing::cache::Envelope;
use kharon_routing::changes;
use kharon_routing::table::RoutingTable;
use kharon_routing::trust::Refused;

use crate::output;

/// What changed against the previous cache: clusters added/removed, then per cluster the names it
/// routes now and did not, no longer routes, and has refused since; then conflicts, warnings
/// (clusters with a jumphost but no domains among them) and every refusal on stderr.
pub fn report(new: &Envelope, old: Option<&Envelope>, old_refused: &[Refused], table: &RoutingTable) {
    let r = table.report();
    println!(
        "fetched {} from {} ({} routed through {}, {} ignored)",
        output::count(r.clusters_total as u64, "cluster"),
        Escaped(&new.api_url),
        r.clusters_routed,
        output::count(table.jumphosts().len() as u64, "jump host"),
        r.clusters_ignored
    );
    let ids = |e: &Envelope| e.clusters.iter().map(|c| c.id.clone()).collect::<BTreeSet<_>>();
    let routes = |e: &Envelope| -> Vec<(String, String, String)> {
        e.routes.iter().map(|r| (r.suffix.clone(), r.jumphost.clone(), r.cluster.clone())).collect()
    };
    let (old_ids, old_routes) = match old {
        Some(old) => (ids(old), routes(old)),
        None => (BTreeSet::new(), Vec::new()),
    };
    let (new_ids, new_routes) = (ids(new), routes(new));
    let mut changed = false;
    for id in new_ids.difference(&old_ids) {
        println!("  + cluster {}", Escaped(id));
        changed = true;
    }
    for id in old_ids.difference(&new_ids) {
        println!("  - cluster {}", Escaped(id));
        changed = true;
    }
    let old = changes::Snapshot { routes: &old_routes, refused: old_refused };
    let now = changes::Snapshot { routes: &new_routes, refused: &r.refused };
    for change in changes::between(&old, &now) {
        for line in crate::daemon::reload_outcome::change_lines(&(&change).into()) {
            println!("  {line}");
        }
        changed = true;
    }
    if !changed {
        println!("  no changes since the last update");
    }
    for c in &r.conflicts {
        let others: Vec<String> = c
            .shadowed
            .iter()
            .map(|s| format!("{} ({})", Escaped(&s.cluster), Escaped(&s.jumphost)))
            .collect();
        eprintln!(
            "warning: {} is claimed by several jump hosts; {} ({}) wins over {}",
            Escaped(&c.suffix),
            Escaped(&c.winner.cluster),
            Escaped(&c.winner.jumphost),
            others.join(", ")
        );
    }
    for w in &r.warnings {
        eprintln!("warning: {}", Escaped(w));
    }
    for refused in &r.refused {
        eprintln!("warning: {}", Escaped(&refused.to_string()));
    }
}
