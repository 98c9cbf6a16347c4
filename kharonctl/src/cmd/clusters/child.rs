//! Programs kharonctl runs for a cluster (`$SHELL`, `kubectl`, `oc`): the environment that points
//! them at the cluster, and their exit status as ours.

use std::path::Path;
use std::process::{Command, ExitCode, ExitStatus};

use kharon_routing::inventory::Cluster;

/// Points `cmd` at `cluster`: `KUBECONFIG` is the cluster's own file, and `KHARON_CLUSTER` its id
/// for the user's start-up scripts and prompts.
pub fn for_cluster<'a>(cmd: &'a mut Command, kubeconfig: &Path, cluster: &Cluster) -> &'a mut Command {
    cmd.env("KUBECONFIG", kubeconfig).env("KHARON_CLUSTER", &cluster.id)
}

/// A child's exit status as a shell reports it: its code, or 128 + the signal that ended it.
pub fn shell_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|sig| 128 + sig)).unwrap_or(1)
}

/// A child's exit status as ours ([`shell_code`]).
pub fn exit_code(status: ExitStatus) -> ExitCode {
    ExitCode::from(u8::try_from(shell_code(status) & 0xff).unwrap_or(u8::MAX))
}
