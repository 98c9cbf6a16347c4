//! Dynamic shell completion (clap_complete's `unstable-dynamic` engine; docs/dependencies.md,
//! "clap_complete").
//!
//! The shell runs `kharonctl` on every TAB with `COMPLETE=<shell>` set; `main` hands that run to
//! `clap_complete::CompleteEnv` before anything else. Everything here must therefore be fast,
//! local and silent: no network, nothing on stdout or stderr, and kharond asked only when there is
//! no inventory here, bounded by [`DAEMON_WAIT`].
//!
//! - [`cluster_candidates`]: cluster ids of the catalog every command reads ([`Catalog::load`]);
//!   attach it to an argument with `#[arg(add = ArgValueCandidates::new(crate::completion::cluster_candidates))]`.
//! - [`completer`]: the program the registration script calls back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use kharon_config::{Config, Overrides};

use crate::catalog::Catalog;

/// The environment variable that switches kharonctl into completion mode.
pub const VAR: &str = "COMPLETE";
/// The command name the scripts register completions for.
pub const BIN: &str = "kharonctl";
/// How long a TAB waits for kharond's cluster list (a local socket: milliseconds when it is up).
const DAEMON_WAIT: Duration = Duration::from_millis(500);

/// Cluster ids of the catalog the commands read (inventory file, cache, else kharond's table),
/// each with its display name as help; clusters marked `kharonIgnore` are left out, as everywhere
/// else. No catalog (or an unreadable one) means no candidates, silently: a TAB must never print
/// an error.
pub fn cluster_candidates() -> Vec<CompletionCandidate> {
    let Ok(config) = Config::load(&Overrides::default()) else { return Vec::new() };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    // The timeout inside the runtime: its timer needs the runtime's clock from the start.
    let loaded =
        runtime.block_on(async { tokio::time::timeout(DAEMON_WAIT, Catalog::load(None, &config)).await });
    let Ok(Ok(catalog)) = loaded else { return Vec::new() };
    let mut clusters: Vec<_> = catalog.clusters().iter().filter(|c| !c.id.is_empty()).collect();
    clusters.dedup_by(|a, b| a.id == b.id);
    clusters
        .into_iter()
        .map(|c| {
            let help = c.display_name.as_deref().filter(|n| !n.is_empty()).map(|n| n.to_owned().into());
            CompletionCandidate::new(c.id.clone()).help(help)
        })
        .collect()
}

/// What the registration script runs on TAB: plain `kharonctl` when that name on PATH is this very
/// binary (the script then survives upgrades and reinstalls), else this binary's absolute path (a
/// script generated from `target/debug/kharonctl` keeps calling that build).
pub fn completer() -> String {
    let Ok(exe) = std::env::current_exe() else { return BIN.to_owned() };
    let on_path = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(BIN)).find(|p| p.is_file()));
    match on_path {
        Some(found) if same_file(&found, &exe) => BIN.to_owned(),
        _ => exe.to_string_lossy().into_owned(),
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| -> Option<PathBuf> { std::fs::canonicalize(p).ok() };
    matches!((canonical(a), canonical(b)), (Some(a), Some(b)) if a == b)
}
