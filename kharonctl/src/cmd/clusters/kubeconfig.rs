//! `kharonctl clusters NAME kubeconfig [-o FILE] [--merge]`: one cluster's kubeconfig, printed, written
//! or merged into a file (the same rules as `kharonctl kubeconfig`, for one cluster).

use std::process::ExitCode;

use super::Run;
use crate::cmd::kubeconfig::Destination;
use crate::kube;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub destination: Destination,
}

pub fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let entry = kube::entry(cluster, &super::settings(run.source, run.proxy)?)?;
    for w in &entry.warnings {
        eprintln!("kharonctl: warning: {w}");
    }
    crate::cmd::kubeconfig::emit(&[entry], args.destination)?;
    Ok(ExitCode::SUCCESS)
}
