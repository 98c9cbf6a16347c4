//! The inventory parser (kharon_routing::inventory, Lieutenant's /clusters JSON) and the routing
//! table compiled from what it accepts: neither panics, and every lookup of a name taken from
//! the input itself answers.
#![no_main]

use kharon_routing::inventory::parse_clusters;
use kharon_routing::table::RoutingTable;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Ok(clusters) = parse_clusters(input) else { return };
    let table = RoutingTable::compile(&clusters);
    let _ = table.report();
    for cluster in &clusters {
        for host in [cluster.jumphost().unwrap_or(""), cluster.api_url().unwrap_or("")] {
            let _ = table.lookup(host);
            let _ = table.explain(host);
        }
    }
    let _ = (table.routes(), table.excludes(), table.jumphosts(), table.clusters());
});
