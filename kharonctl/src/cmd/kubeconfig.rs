//! `kharonctl kubeconfig [FILTER] [-o FILE] [--merge]`: one context per cluster (named by cluster id),
//! printed on stdout, written to a file, or merged into a kubeconfig keeping every other entry.
//! Also [`emit`], which `clusters NAME kubeconfig` uses for its single entry.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::context::Context;
use crate::kube::{self, Entry, EntryError, Kubeconfig};

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

/// Where a kubeconfig goes: the options every command that writes one shares.
#[derive(clap::Args, Debug)]
pub struct Destination {
    /// Write to FILE (atomically, mode 0600) instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Merge into FILE (default: the first KUBECONFIG entry, else ~/.kube/config), keeping its other entries
    #[arg(long)]
    pub merge: bool,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let source = crate::cmd::clusters::source(args.inventory.as_deref(), ctx);
    let all = source.load()?;
    let settings = crate::cmd::clusters::settings(&source, ctx.proxy_address().await)?;
    let mut entries = Vec::new();
    for cluster in crate::clusters::filter(&all, args.filter.as_deref(), args.tenant.as_deref()) {
        match kube::entry(cluster, &settings) {
            Ok(entry) => {
                for w in &entry.warnings {
                    eprintln!("kharonctl: warning: {w}");
                }
                entries.push(entry);
            }
            // Clusters without an API URL have nothing to connect to; not worth a line each.
            Err(EntryError::NoApiUrl { .. }) => {}
            Err(e) => eprintln!("kharonctl: warning: skipped {e}"),
        }
    }
    if entries.is_empty() {
        anyhow::bail!("no cluster with an API URL matches");
    }
    emit(&entries, args.destination)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints `entries` as a new kubeconfig, writes one to `output`, or merges them into `output` (or
/// the default kubeconfig). A new kubeconfig's current context is the first entry; a merge keeps
/// the file's current context unless it has none.
pub fn emit(entries: &[Entry], destination: Destination) -> anyhow::Result<()> {
    let Destination { output, merge } = destination;
    let first = entries.first().map(|e| e.name.as_str());
    if !merge {
        let k = Kubeconfig::from_entries(entries, first);
        match output {
            None => print!("{}", k.to_yaml()?),
            Some(path) => {
                k.write(&path)?;
                eprintln!("Wrote {} context(s) to {}", entries.len(), path.display());
            }
        }
        return Ok(());
    }
    let path = match output {
        Some(p) => p,
        None => default_path()?,
    };
    let mut k = Kubeconfig::load(&path)?;
    for e in entries {
        k.upsert(e);
    }
    if k.current_context().is_none()
        && let Some(first) = first
    {
        k.switch_to(first);
    }
    k.write(&path)?;
    eprintln!("Merged {} context(s) into {}", entries.len(), path.display());
    Ok(())
}

/// kubectl's default kubeconfig in this environment.
pub fn default_path() -> Result<PathBuf, kube::Error> {
    let var = std::env::var("KUBECONFIG").ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    kube::default_path(var.as_deref(), home.as_deref().map(Path::new))
}
