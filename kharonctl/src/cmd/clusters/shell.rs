//! `kharonctl clusters NAME shell [--command CMD] [--each] [-- SHELL-ARGS…]`: runs `$SHELL` (or one
//! command through it) with `KUBECONFIG` pointing at the cluster's own file in our cache dir and
//! `KHARON_CLUSTER=ID` for the user's start-up scripts.
//!
//! Each cluster has its own kubeconfig file (never one shared file), so two shells for two clusters
//! never change each other's current context. `--each` runs the command for every cluster NAME
//! matches, one after the other, prefixes every output line with `[ID] ` and ends with a summary
//! of exit codes on stderr.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context as _;
use kharon_routing::inventory::Cluster;

use crate::cmd::clusters::child;
use crate::cmd::clusters::run::Run;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run this command (through $SHELL -c, or /bin/sh -c without SHELL) instead of an interactive shell
    #[arg(long, short = 'c', value_name = "CMD")]
    pub command: Option<String>,
    /// Run --command for every cluster NAME matches (a glob or substring)
    #[arg(long, requires = "command")]
    pub each: bool,
    /// Extra arguments for the interactive shell
    #[arg(last = true, value_name = "SHELL-ARGS")]
    pub shell_args: Vec<String>,
}

fn shell_var() -> Option<String> {
    std::env::var("SHELL").ok().filter(|s| !s.trim().is_empty())
}

/// The command line for one cluster: `$SHELL ARGS…`, or `$SHELL -c CMD`.
fn command(args: &Args) -> anyhow::Result<Command> {
    match &args.command {
        Some(cmd) => {
            let mut c = Command::new(shell_var().unwrap_or_else(|| "/bin/sh".to_owned()));
            c.arg("-c").arg(cmd);
            Ok(c)
        }
        None => {
            let Some(shell) = shell_var() else {
                anyhow::bail!(
                    "SHELL is not set, so there is no shell to start; set it (e.g. SHELL=/bin/bash) \
                     or pass --command CMD"
                );
            };
            let mut c = Command::new(shell);
            c.args(&args.shell_args);
            Ok(c)
        }
    }
}

pub fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    if args.each {
        let clusters = run.all()?;
        return each(&args, run, &clusters);
    }
    let cluster = run.one()?;
    let kubeconfig = run.cluster_kubeconfig(cluster)?;
    let mut cmd = command(&args)?;
    let program = cmd.get_program().to_string_lossy().into_owned();
    let status = child::for_cluster(&mut cmd, &kubeconfig, cluster)
        .status()
        .with_context(|| format!("cannot run {program}"))?;
    Ok(child::exit_code(status))
}

fn each(args: &Args, run: &Run<'_>, clusters: &[&Cluster]) -> anyhow::Result<ExitCode> {
    let mut results = Vec::with_capacity(clusters.len());
    for cluster in clusters {
        let code = match one_prefixed(args, run, cluster) {
            Ok(code) => code.to_string(),
            Err(e) => {
                let id = kharon_common::text::Escaped(&cluster.id);
                eprintln!("[{id}] kharonctl: {}", kharon_common::errors::shown(e.as_ref()));
                "error".to_owned()
            }
        };
        results.push((cluster.id.as_str(), code));
    }
    let width = results.iter().map(|(id, _)| id.len()).max().unwrap_or(0);
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "--- exit codes");
    for (id, code) in &results {
        let _ = writeln!(err, "{id:width$}  {code}");
    }
    let all_ok = results.iter().all(|(_, code)| code == "0");
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Runs the command for one cluster, copying its stdout and stderr line by line with the prefix.
fn one_prefixed(args: &Args, run: &Run<'_>, cluster: &Cluster) -> anyhow::Result<i32> {
    let kubeconfig = run.cluster_kubeconfig(cluster)?;
    let mut cmd = command(args)?;
    let mut running = child::for_cluster(&mut cmd, &kubeconfig, cluster)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start the command")?;
    let prefix = format!("[{}] ", cluster.id);
    let stderr = running.stderr.take();
    let err_prefix = prefix.clone();
    let err_thread = std::thread::spawn(move || {
        if let Some(stderr) = stderr {
            copy_prefixed(stderr, &err_prefix, &mut std::io::stderr());
        }
    });
    if let Some(stdout) = running.stdout.take() {
        copy_prefixed(stdout, &prefix, &mut std::io::stdout());
    }
    let _ = err_thread.join();
    let status = running.wait().context("waiting for the command")?;
    Ok(child::shell_code(status))
}

fn copy_prefixed(from: impl std::io::Read, prefix: &str, to: &mut dyn Write) {
    let mut reader = BufReader::new(from);
    let mut line = Vec::new();
    // Bytes, not `lines()`: a command's output need not be UTF-8.
    while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
        let _ = to.write_all(prefix.as_bytes());
        let _ = to.write_all(&line);
        if !line.ends_with(b"\n") {
            let _ = to.write_all(b"\n");
        }
        let _ = to.flush();
        line.clear();
    }
}
