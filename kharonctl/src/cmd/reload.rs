//! `kharonctl reload`: kharond re-reads its inventory and ssh config; established connections and
//! healthy sessions are kept. A bad inventory, or a reload past its deadline, installs nothing
//! and the error is shown; a bad ssh config or jump hosts it refuses make a partial reload: the
//! table is in, those jump hosts are named with their file:line, and the exit code is
//! [`PARTIAL`](crate::exit::PARTIAL).

use std::process::ExitCode;

use kharon_common::text::Escaped;

use crate::context::Context;
use crate::output;

#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes: 0 reloaded; 4 partial: the routing table was reloaded, but the new \
    ssh config could not be read (the old one stays) or it refuses some jump hosts (named, with \
    file:line); 1 nothing was reloaded (the old table and ssh config stay); 3 kharond is not running.\n\n\
    Warnings (exit code 0: everything is in force) name what will fail all the same: a jump host \
    no Host block names whose name does not resolve (with the closest Host name), and no \
    ssh-agent with no key file usable without one.")]
pub struct Args {}

pub async fn run(_args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let reply = ctx.daemon().await?.reload().await?;
    let inv = reply.inventory.clone().unwrap_or_default();
    println!(
        "reloaded {} ({}, {} routed, {})",
        Escaped(&inv.source_path),
        output::count(inv.clusters_total, "cluster"),
        inv.clusters_routed,
        output::count(inv.include_suffixes, "suffix")
    );
    // Per cluster, so that a cluster that starts claiming names shows up under its own id.
    for change in &reply.changes {
        for line in crate::daemon::reload_outcome::change_lines(change) {
            println!("  {line}");
        }
    }
    if reply.changes.is_empty() {
        println!("  routes unchanged");
    }
    for c in &inv.conflicts {
        eprintln!("warning: {}", crate::daemon::reload_outcome::conflict(c));
    }
    crate::daemon::reload_outcome::warnings(&reply);
    for r in &inv.refused_claims {
        eprintln!("warning: {}", crate::daemon::reload_outcome::refused_claim(r));
    }
    Ok(crate::daemon::reload_outcome::partial(&reply)
        .map_or(ExitCode::SUCCESS, |()| ExitCode::from(crate::exit::PARTIAL)))
}
