//! `kharonctl clusters NAME kubeconfig [-o FILE] [--merge]`: one cluster's kubeconfig, printed, written
//! or merged into a file (the same rules as `kharonctl kubeconfig`, for one cluster).

use std::path::PathBuf;
use std::process::ExitCode;

use super::Run;
use crate::kube;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write to FILE (atomically, mode 0600) instead of stdout
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Merge into FILE (default: the first KUBECONFIG entry, else ~/.kube/config), keeping its other entries
    #[arg(long)]
    pub merge: bool,
}

pub fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let entry = kube::entry(cluster, &super::settings(run.source, run.proxy)?)?;
    for w in &entry.warnings {
        eprintln!("kharonctl: warning: {w}");
    }
    crate::cmd::kubeconfig::emit(&[entry], args.output, args.merge)?;
    Ok(ExitCode::SUCCESS)
}
