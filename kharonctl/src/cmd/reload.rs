//! `kharonctl reload`: kharond re-reads its inventory and ssh config; established connections and
//! healthy sessions are kept. A bad file keeps the old table and the error is shown.

use std::process::ExitCode;

use crate::context::Context;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub async fn run(_args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let reply = ctx.daemon().await?.reload().await?;
    let inv = reply.inventory.unwrap_or_default();
    println!(
        "reloaded {} ({} clusters, {} routed, {} suffixes)",
        inv.source_path, inv.clusters_total, inv.clusters_routed, inv.include_suffixes
    );
    for route in &reply.routes_added {
        println!("  + {route}");
    }
    for route in &reply.routes_removed {
        println!("  - {route}");
    }
    if reply.routes_added.is_empty() && reply.routes_removed.is_empty() {
        println!("  routes unchanged");
    }
    for c in &inv.conflicts {
        let winner = c.winner.clone().unwrap_or_default();
        eprintln!(
            "warning: {} is claimed by several jump hosts; {} ({}) wins",
            c.suffix, winner.cluster, winner.jumphost
        );
    }
    Ok(ExitCode::SUCCESS)
}
