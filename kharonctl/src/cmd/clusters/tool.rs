//! `kharonctl clusters NAME kubectl ARGS…` and `… oc ARGS…`: run the user's own binary with the
//! cluster's per-cluster kubeconfig; its exit code is ours. A missing binary says what to install.

use std::process::ExitCode;

use anyhow::Context as _;

use crate::cmd::clusters::child;
use crate::cmd::clusters::run::Run;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Arguments for the tool, passed as given
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
pub enum Tool {
    Kubectl,
    Oc,
}

impl Tool {
    fn binary(self) -> &'static str {
        match self {
            Tool::Kubectl => "kubectl",
            Tool::Oc => "oc",
        }
    }

    fn install_hint(self) -> &'static str {
        match self {
            Tool::Kubectl => "install kubectl: https://kubernetes.io/docs/tasks/tools/",
            Tool::Oc => {
                "install the OpenShift CLI `oc`: \
                 https://mirror.openshift.com/pub/openshift-v4/clients/ocp/stable/"
            }
        }
    }
}

pub fn run(tool: Tool, args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let kubeconfig = run.cluster_kubeconfig(cluster)?;
    let mut cmd = std::process::Command::new(tool.binary());
    let status = child::for_cluster(&mut cmd, &kubeconfig, cluster).args(&args.args).status();
    match status {
        Ok(status) => Ok(child::exit_code(status)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("`{}` is not in PATH; {}", tool.binary(), tool.install_hint())
        }
        Err(e) => Err(e).with_context(|| format!("cannot run {}", tool.binary())),
    }
}
