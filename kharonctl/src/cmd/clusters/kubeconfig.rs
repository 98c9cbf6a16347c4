//! `kharonctl clusters NAME kubeconfig [-o FILE] [--merge]`: one cluster's kubeconfig, printed, written
//! or merged into a file (the same rules as `kharonctl kubeconfig`, for one cluster).

use std::process::ExitCode;

use crate::cmd::clusters::run::Run;
use crate::kube;
use crate::kube::destination::{self, Destination};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub destination: Destination,
}

pub fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let entry = kube::entry(cluster, &args.destination.settings(run.settings()?))?;
    entry.print_warnings();
    destination::emit(&[entry], args.destination)?;
    Ok(ExitCode::SUCCESS)
}
