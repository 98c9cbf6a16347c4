//! `kharonctl switch [NAME | -]`: makes a cluster the current context of the user's kubeconfig
//! (writing its entry first), lists the choices without a name, and goes back to the previous
//! context with `-` (remembered in a preferences extension, as Go kharon does).

use std::path::PathBuf;
use std::process::ExitCode;

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
        None => crate::cmd::kubeconfig::default_path()?,
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
            let source = crate::cmd::clusters::source(args.inventory.as_deref(), ctx);
            let all = source.load()?;
            let cluster = crate::clusters::find(&all, name)?;
            let entry =
                kube::entry(cluster, &crate::cmd::clusters::settings(&source, ctx.proxy_address().await)?)?;
            for w in &entry.warnings {
                eprintln!("kharonctl: warning: {w}");
            }
            k.upsert(&entry);
            k.switch_to(&entry.name);
            k.write(&path)?;
            println!("Switched to context {}", entry.name);
        }
        None => {
            let source = crate::cmd::clusters::source(args.inventory.as_deref(), ctx);
            let all = source.load()?;
            let current = k.current_context();
            for c in all.iter().filter(|c| c.api_url().is_some()) {
                let mark = if current == Some(c.id.as_str()) { "*" } else { " " };
                let name = c.display_name.as_deref().map(|d| format!("  ({d})")).unwrap_or_default();
                println!("{mark} {}{name}", c.id);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
