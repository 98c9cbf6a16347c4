//! `kharonctl kubeconfig [FILTER] [-o FILE] [--merge]`: one context per cluster (named by cluster id),
//! printed on stdout, written to a file, or merged into a kubeconfig keeping every other entry
//! ([`crate::kube::destination`]).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::catalog::{self, Catalog};
use crate::context::Context;
use crate::kube::destination::{self, Destination};
use crate::kube::{self, EntryError};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  kharonctl kubeconfig > clusters.yaml\n  \
    kharonctl kubeconfig -o ~/.kube/kharon\n  \
    kharonctl kubeconfig --merge\n  kharonctl kubeconfig 'c-*' --tenant t-example -o FILE --merge")]
pub struct Args {
    /// Only clusters whose id matches: glob (`c-*`) or substring
    pub filter: Option<String>,
    /// Only clusters of this tenant
    #[arg(long, value_name = "TENANT")]
    pub tenant: Option<String>,
    #[command(flatten)]
    pub destination: Destination,
    /// Read clusters from this Lieutenant /clusters JSON instead of the inventory cache
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config).await?;
    catalog.print_source();
    // Which clusters first: an id no cluster has is said alone, as by `switch` and `clusters`.
    let selected = catalog::select(catalog.clusters(), args.filter.as_deref(), args.tenant.as_deref())?;
    let settings =
        args.destination.settings(kube::Settings::new(ctx.proxy().await, catalog.inventory_file())?);
    let mut entries = Vec::new();
    let matched = selected.len();
    let mut without_api_url = 0;
    for cluster in selected {
        match kube::entry(cluster, &settings) {
            Ok(entry) => {
                entry.print_warnings();
                entries.push(entry);
            }
            // Clusters without an API URL have nothing to connect to; not worth a line each.
            Err(EntryError::NoApiUrl { .. }) => without_api_url += 1,
            Err(e) => {
                eprintln!("kharonctl: warning: skipped {}", kharon_common::text::Escaped(&e.to_string()))
            }
        }
    }
    if entries.is_empty() && without_api_url < matched {
        anyhow::bail!(
            "{} {} but none could be written (the warnings above say why)",
            crate::output::count(matched as u64, "cluster"),
            if matched == 1 { "matches" } else { "match" }
        );
    }
    if entries.is_empty() {
        anyhow::bail!(
            "{} {} but none has an API URL (fact openshiftApiURL or talosApiURL), so \
             there is nothing to connect to",
            crate::output::count(matched as u64, "cluster"),
            if matched == 1 { "matches" } else { "match" }
        );
    }
    destination::emit(&entries, args.destination)?;
    Ok(ExitCode::SUCCESS)
}
