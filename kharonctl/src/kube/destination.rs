//! Where a kubeconfig goes. Every command that produces one (`kubeconfig`, `clusters NAME
//! kubeconfig`, `clusters NAME emergency-credentials`) takes the same [`Destination`] options and
//! hands its entries to [`emit`]: printed on stdout, written to `-o FILE`, or merged into a file
//! (by default the one kubectl edits, [`default_path`]) keeping its other entries. `shell`,
//! `kubectl` and `oc` get each cluster's own file in the cache dir instead ([`write_cluster_file`]).
//!
//! Every file is written atomically with mode 0600 ([`super::Kubeconfig::write`]), a user's (`-o`,
//! `--merge`) under kubectl's lock on it ([`super::lock`]): when kharond
//! requires a SOCKS password, the `proxy-url` holds it. What is printed on stdout never does
//! ([`Destination::settings`]).

use std::path::{Path, PathBuf};

use kharon_routing::inventory::Cluster;

use super::{Entry, Error, Kubeconfig, Settings};

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

impl Destination {
    /// Whether the kubeconfig goes to stdout (no `-o`, no `--merge`).
    pub fn is_stdout(&self) -> bool {
        self.output.is_none() && !self.merge
    }

    /// `settings` for entries going to this destination. A kubeconfig printed on stdout ends up on
    /// terminals, in scrollback and CI logs: the SOCKS password is left out of its `proxy-url`, and
    /// a line on stderr says so and how to get a file that holds it (written 0600).
    pub fn settings(&self, mut settings: Settings) -> Settings {
        if self.is_stdout() && settings.proxy.auth.is_some() {
            settings.proxy = settings.proxy.without_auth();
            eprintln!(
                "kharonctl: warning: kharond requires a SOCKS password, which a kubeconfig printed on \
                 stdout leaves out of its proxy-url (kubectl will be refused by the proxy); write it \
                 with -o FILE or --merge instead (mode 0600)"
            );
        }
        settings
    }
}

/// Prints `entries` as a new kubeconfig, writes one to `output`, or merges them into `output` (or
/// the default kubeconfig). A new kubeconfig's current context is the first entry; a merge keeps
/// the file's current context unless it has none.
pub fn emit(entries: &[Entry], destination: Destination) -> Result<(), Error> {
    let Destination { output, merge } = destination;
    let first = entries.first().map(|e| e.name.as_str());
    if !merge {
        let k = Kubeconfig::from_entries(entries, first);
        match output {
            None => print!("{}", k.to_yaml()?),
            Some(path) => {
                k.write_locked(&path)?;
                eprintln!(
                    "Wrote {} to {}",
                    crate::output::count(entries.len() as u64, "context"),
                    path.display()
                );
            }
        }
        return Ok(());
    }
    let path = match output {
        Some(p) => p,
        None => default_path()?,
    };
    super::edit(&path, |k| {
        for e in entries {
            k.upsert(e);
        }
        if k.current_context().is_none()
            && let Some(first) = first
        {
            k.switch_to(first);
        }
        Ok::<_, Error>(())
    })?;
    eprintln!("Merged {} into {}", crate::output::count(entries.len() as u64, "context"), path.display());
    Ok(())
}

/// kubectl's default kubeconfig in this environment ([`super::default_path`] of `KUBECONFIG` and `HOME`).
pub fn default_path() -> Result<PathBuf, Error> {
    let var = std::env::var("KUBECONFIG").ok();
    let home = std::env::var_os("HOME").map(PathBuf::from);
    super::default_path(var.as_deref(), home.as_deref().map(Path::new))
}

/// Writes (replaces) `cluster`'s own kubeconfig in `cache_dir` ([`super::cluster_file`]), its
/// warnings on stderr, and returns its path.
pub fn write_cluster_file(
    cache_dir: &Path,
    cluster: &Cluster,
    settings: &Settings,
) -> anyhow::Result<PathBuf> {
    let entry = super::entry(cluster, settings)?;
    entry.print_warnings();
    let path = super::cluster_file(cache_dir, &cluster.id);
    Kubeconfig::from_entries([&entry], Some(&cluster.id)).write(&path)?;
    Ok(path)
}
