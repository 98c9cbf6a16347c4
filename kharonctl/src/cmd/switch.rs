//! `kharonctl switch [ID | -]`: makes a cluster the current context of the user's kubeconfig
//! (writing its entry first), and goes back to the previous context with `-` (remembered in a
//! preferences extension, as Go kharon does). An id may be a part of one, as long as only one
//! cluster matches it; several open the picker on a terminal. Without an id: the picker on a
//! terminal, else the list of choices (kubectx's convention), the current one marked `*`.
//!
//! The kubeconfig is read again and changed under kubectl's lock ([`kube::edit`]) once the cluster
//! is chosen: a picker left open for a minute holds nothing, and a `kubectl config set-context`
//! meanwhile keeps its change.

use std::path::PathBuf;
use std::process::ExitCode;

use kharon_routing::inventory::Cluster;

use crate::catalog::Catalog;
use crate::catalog::picker::{self, Marks};
use kharon_common::text::{Escaped, cell};

use crate::context::Context;
use crate::kube::{self, Kubeconfig};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  kharonctl switch              # pick on the terminal\n  \
    kharonctl switch c-example-1\n  kharonctl switch example      # a part of an id\n  kharonctl switch -\n\n\
    Exit codes: 0 switched (or listed); 1 failed, or no cluster has that id (the closest ids are \
    suggested); 2 the part of an id matches several clusters and output is not a terminal (they are \
    listed).")]
pub struct Args {
    /// Cluster id, a part of one, or `-` for the previous context; none: pick on the terminal (or,
    /// when output is not a terminal, list the choices)
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(crate::completion::cluster_candidates))]
    pub name: Option<String>,
    /// Read clusters from this Lieutenant /clusters JSON instead of the inventory cache
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// The kubeconfig to edit (default: the first KUBECONFIG entry, else ~/.kube/config)
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let path = match args.kubeconfig {
        Some(p) => p,
        None => kube::destination::default_path()?,
    };
    // Only read, for the picker's marks and the list: the edit reads it again under the lock.
    let k = Kubeconfig::load(&path)?;
    match args.name.as_deref() {
        Some("-") => {
            let last = kube::edit(&path, |k| {
                let Some(last) = k.last_context().map(str::to_owned) else {
                    anyhow::bail!("no previous context recorded in {}", path.display());
                };
                k.switch_to(&last);
                Ok(last)
            })?;
            println!("Switched to context {}", Escaped(&last));
        }
        Some(name) => {
            let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config).await?;
            catalog.print_source();
            let cluster =
                picker::one(catalog.clusters(), name, None, switchable, &Marks::of(&k), "Switch to cluster")?;
            switch_to(&path, cluster, &catalog, ctx).await?;
        }
        None if picker::interactive() => {
            let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config).await?;
            catalog.print_source();
            let choices = catalog.clusters().iter().filter(|c| switchable(c)).collect();
            let cluster = picker::pick(choices, "", &Marks::of(&k), "Switch to cluster")?;
            switch_to(&path, cluster, &catalog, ctx).await?;
        }
        None => {
            let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config).await?;
            catalog.print_source();
            let current = k.current_context();
            for c in catalog.clusters().iter().filter(|c| switchable(c)) {
                let mark = if current == Some(c.id.as_str()) { "*" } else { " " };
                let name = c.display_name.as_deref().map(|d| format!("  ({})", cell(d))).unwrap_or_default();
                println!("{mark} {}{name}", cell(&c.id));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A cluster without an API URL has no kubeconfig entry to switch to.
fn switchable(cluster: &Cluster) -> bool {
    cluster.api_url().is_some()
}

/// Writes `cluster`'s entry into the kubeconfig at `path` and makes it current.
async fn switch_to(
    path: &std::path::Path,
    cluster: &Cluster,
    catalog: &Catalog,
    ctx: &Context,
) -> anyhow::Result<()> {
    let settings = kube::Settings::new(ctx.proxy().await, catalog.inventory_file())?;
    let entry = kube::entry(cluster, &settings)?;
    entry.print_warnings();
    kube::edit(path, |k| {
        k.upsert(&entry);
        k.switch_to(&entry.name);
        Ok::<_, kube::Error>(())
    })?;
    println!("Switched to context {}", Escaped(&entry.name));
    Ok(())
}
