//! `kharonctl reload`: kharond re-reads its inventory and ssh config; established connections and
//! healthy sessions are kept. A bad inventory, or a reload past its deadline, installs nothing
//! and the error is shown; a bad ssh config or jump hosts it refuses make a partial reload: the
//! table is in, those jump hosts are named with their file:line, and the exit code is
//! [`PARTIAL`](crate::exit::PARTIAL).

use std::process::ExitCode;

use kharon_shared::text::Escaped;

use crate::context::Context;

#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes: 0 reloaded; 4 partial: the routing table was reloaded, but the new \
    ssh config could not be read (the old one stays) or it refuses some jump hosts (named, with \
    file:line); 1 nothing was reloaded (the old table and ssh config stay); 3 kharond is not running.")]
pub struct Args {}

pub async fn run(_args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let reply = ctx.daemon().await?.reload().await?;
    let inv = reply.inventory.clone().unwrap_or_default();
    println!(
        "reloaded {} ({} clusters, {} routed, {} suffixes)",
        Escaped(&inv.source_path),
        inv.clusters_total,
        inv.clusters_routed,
        inv.include_suffixes
    );
    for route in &reply.routes_added {
        println!("  + {}", Escaped(route));
    }
    for route in &reply.routes_removed {
        println!("  - {}", Escaped(route));
    }
    if reply.routes_added.is_empty() && reply.routes_removed.is_empty() {
        println!("  routes unchanged");
    }
    for c in &inv.conflicts {
        let winner = c.winner.clone().unwrap_or_default();
        eprintln!(
            "warning: {} is claimed by several jump hosts; {} ({}) wins",
            Escaped(&c.suffix),
            Escaped(&winner.cluster),
            Escaped(&winner.jumphost)
        );
    }
    for r in &inv.refused_claims {
        eprintln!("warning: {}", crate::daemon::reload_outcome::refused_claim(r));
    }
    Ok(crate::daemon::reload_outcome::partial(&reply)
        .map_or(ExitCode::SUCCESS, |()| ExitCode::from(crate::exit::PARTIAL)))
}
