//! Dynamic shell completion (clap_complete's `unstable-dynamic` engine, crates.md §7).
//!
//! The shell runs `kharonctl` on every TAB with `COMPLETE=<shell>` set; `main` hands that run to
//! `clap_complete::CompleteEnv` before anything else. Everything here must therefore be fast,
//! offline and silent: no daemon RPC, no network, nothing on stdout or stderr.
//!
//! - [`cluster_candidates`]: cluster ids from the local inventory cache; attach it to an argument
//!   with `#[arg(add = ArgValueCandidates::new(crate::completion::cluster_candidates))]`.
//! - [`completer`]: the program the registration script calls back.

use std::path::{Path, PathBuf};

use clap_complete::engine::CompletionCandidate;
use kharon_shared::config::{Config, Overrides};

/// The environment variable that switches kharonctl into completion mode.
pub const VAR: &str = "COMPLETE";
/// The command name the scripts register completions for.
pub const BIN: &str = "kharonctl";

/// Cluster ids from the inventory cache, each with its display name as help; clusters marked
/// `kharonIgnore` are left out, as everywhere else. No cache yet (or an unreadable one) means no
/// candidates, silently: a TAB must never print an error.
pub fn cluster_candidates() -> Vec<CompletionCandidate> {
    let cache_dir = match Config::load(&Overrides::default()) {
        Ok(config) => config.cache_dir.value,
        Err(_) => match kharon_shared::paths::cache_dir() {
            Ok(dir) => dir,
            Err(_) => return Vec::new(),
        },
    };
    let Ok(envelope) = kharon_shared::cache::load(&kharon_shared::cache::path(&cache_dir)) else {
        return Vec::new();
    };
    let mut clusters: Vec<_> =
        envelope.clusters.iter().filter(|c| !c.id.is_empty() && !c.is_ignored()).collect();
    clusters.sort_by(|a, b| a.id.cmp(&b.id));
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
