//! `kharonctl switch [NAME | -]`: makes a cluster the current context of the user's kubeconfig
//! (writing its entry first), lists the choices without a name, and goes back to the previous
//! context with `-` (remembered in a preferences extension, as Go kharon does).

use std::path::PathBuf;
use std::process::ExitCode;

use crate::catalog::{self, Catalog};
use crate::context::Context;
use crate::kube::{self, Kubeconfig};

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  kharonctl switch\n  kharonctl switch c-example-1\n  kharonctl switch -")]
pub struct Args {
    /// Cluster id, or `-` for the previous context
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
    let mut k = Kubeconfig::load(&path)?;
    match args.name.as_deref() {
        Some("-") => {
            let Some(last) = k.last_context().map(str::to_owned) else {
                anyhow::bail!("no previous context recorded in {}", path.display());
            };
            k.switch_to(&last);
            k.write(&path)?;
            println!("Switched to context {last}");
        }
        Some(name) => {
            let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config)?;
            let cluster = catalog::find(catalog.clusters(), name)?;
            let settings = kube::Settings::new(ctx.proxy_address().await, catalog.inventory_file())?;
            let entry = kube::entry(cluster, &settings)?;
            entry.print_warnings();
            k.upsert(&entry);
            k.switch_to(&entry.name);
            k.write(&path)?;
            println!("Switched to context {}", entry.name);
        }
        None => {
            let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config)?;
            let current = k.current_context();
            for c in catalog.clusters().iter().filter(|c| c.api_url().is_some()) {
                let mark = if current == Some(c.id.as_str()) { "*" } else { " " };
                let name = c.display_name.as_deref().map(|d| format!("  ({d})")).unwrap_or_default();
                println!("{mark} {}{name}", c.id);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
