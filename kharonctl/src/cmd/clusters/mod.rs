//! `kharonctl clusters [FILTER] [--tenant T] [-o table|wide|json|yaml]` lists clusters, and
//! `kharonctl clusters NAME <action>` acts on one (or, for `shell --each`, several):
//!
//! - [`kubeconfig`]: print or write that cluster's kubeconfig;
//! - [`shell`]: `$SHELL` (or `--command`) with a per-cluster `KUBECONFIG`;
//! - [`tool`]: `kubectl …` / `oc …` with that kubeconfig, exit code passed through;
//! - [`console`]: open the web console;
//! - [`token`]: the exec credential plugin the OpenShift kubeconfig entries run;
//! - [`login`]: store a token for an OpenShift cluster (the web login is [`crate::kube::openshift_login`]);
//! - [`emergency_credentials`]: the cluster's emergency credentials from Passbolt and object storage;
//!
//! and without an action, [`list`] prints the clusters. This file only parses and dispatches.
//! What only these actions share is here too: [`run::Run`] (the cluster, catalog and context an
//! action works with) and [`child`] (the environment and exit status of the programs they run).
//! What other commands share lives outside `cmd/` ([`crate::catalog`], [`crate::kube`]), so no
//! command imports another.

mod child;
pub mod console;
pub mod emergency_credentials;
pub mod kubeconfig;
pub mod list;
pub mod login;
mod run;
pub mod shell;
pub mod token;
pub mod tool;

use std::path::PathBuf;
use std::process::ExitCode;

use crate::catalog::picker;
use crate::catalog::{self, Catalog};
use crate::cmd::clusters::run::Run;
use crate::context::Context;
use crate::kube;
use list::ListFormat;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  kharonctl clusters\n  kharonctl clusters 'c-*' --tenant t-example -o wide\n  \
    kharonctl clusters c-example-1 shell\n  kharonctl clusters c-example-1 kubectl get nodes\n  \
    kharonctl clusters 'c-*' shell --each --command 'kubectl get --raw /version'\n  \
    kharonctl clusters example kubectl get nodes     # a part of an id\n\n\
    Exit codes: an action's own (shell, kubectl, oc pass theirs through); 1 failed, or no cluster has \
    that id or matches the filter (the closest ids are suggested); 2 the part of an id matches several \
    clusters and output is not a terminal (they are listed)."
)]
pub struct Args {
    /// A cluster id or any part of one that only one cluster has (several: pick on the terminal);
    /// default for actions: the current kube context. For the listing (and `shell --each`) a
    /// filter: glob (`c-*`) or substring
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(crate::completion::cluster_candidates))]
    pub name: Option<String>,
    /// Only clusters of this tenant
    #[arg(long, value_name = "TENANT", global = true)]
    pub tenant: Option<String>,
    /// Output format of the listing
    #[arg(short, long, value_enum, default_value_t = ListFormat::Table)]
    pub output: ListFormat,
    /// Read clusters from this Lieutenant /clusters JSON instead of the inventory cache
    /// [env: KHARON_INVENTORY]
    #[arg(long, value_name = "FILE", global = true)]
    pub inventory: Option<PathBuf>,
    #[command(subcommand)]
    pub action: Option<Action>,
}

#[derive(clap::Subcommand, Debug)]
pub enum Action {
    /// Print (or write with -o) this cluster's kubeconfig
    Kubeconfig(kubeconfig::Args),
    /// Run $SHELL (or --command) with KUBECONFIG set to this cluster's own kubeconfig
    Shell(shell::Args),
    /// Run kubectl with this cluster's kubeconfig
    Kubectl(tool::Args),
    /// Run oc with this cluster's kubeconfig
    Oc(tool::Args),
    /// Open the cluster's web console in the browser
    Console,
    /// Print this cluster's bearer token (the exec credential plugin of its kubeconfig entry)
    Token(token::Args),
    /// Log in to an OpenShift cluster and store its token
    Login(login::Args),
    /// Fetch the cluster's emergency credentials (Passbolt + object storage) into a kubeconfig
    #[command(long_about = emergency_credentials::LONG_ABOUT, after_help = emergency_credentials::EXAMPLES)]
    EmergencyCredentials(emergency_credentials::Args),
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let catalog = Catalog::load(args.inventory.as_deref(), &ctx.config).await?;
    // kubectl runs `token` on every call: its stderr is no place for where the list came from.
    if !matches!(args.action, Some(Action::Token(_))) {
        catalog.print_source();
    }
    let Some(action) = args.action else {
        return list::run(catalog.clusters(), args.name.as_deref(), args.tenant.as_deref(), args.output);
    };
    // No name: the current kube context, so `kharonctl clusters login` inside `clusters NAME shell`
    // (whose KUBECONFIG is that cluster's own file) or after `switch` acts on that cluster.
    let current;
    let name = match args.name.as_deref() {
        Some(name) => name,
        None => {
            let path = kube::destination::default_path()?;
            current = kube::Kubeconfig::load(&path)?.current_context().map(str::to_owned);
            current.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "name a cluster (kharonctl clusters NAME <action>); {} has no current context",
                    path.display()
                )
            })?
        }
    };
    // Which cluster, before anything else is said on the terminal (the picker may need it); the
    // actions then find it by its whole id. `shell --each` takes every match instead.
    let picked;
    let name = match &action {
        Action::Shell(shell) if shell.each => name,
        // The current context is a whole id or no cluster at all, never a part of one.
        _ if args.name.is_none() => {
            picked = catalog::find(catalog.clusters(), name)?.id.clone();
            picked.as_str()
        }
        _ => {
            let marks = picker::Marks::of_default_kubeconfig();
            let tenant = args.tenant.as_deref();
            picked =
                picker::one(catalog.clusters(), name, tenant, |_| true, &marks, "Which cluster?")?.id.clone();
            picked.as_str()
        }
    };
    // Only the actions that write a kubeconfig ask kharond where it listens; `token` is the exec
    // plugin kubectl runs on every call and asks only when it has to log in (`web_login`).
    let proxy = match action {
        Action::Kubeconfig(_) | Action::Shell(_) | Action::Kubectl(_) | Action::Oc(_) => ctx.proxy().await,
        // emergency-credentials asks kharond itself: it needs the daemon for the download anyway.
        Action::Console | Action::Token(_) | Action::Login(_) | Action::EmergencyCredentials(_) => {
            crate::context::Proxy {
                addr: ctx.config.listen.value,
                auth: ctx.config.socks_auth.as_ref().map(|s| s.value.clone()),
            }
        }
    };
    let run = Run { ctx, catalog: &catalog, name, tenant: args.tenant.as_deref(), proxy };
    match action {
        Action::Kubeconfig(a) => kubeconfig::run(a, &run),
        Action::Shell(a) => shell::run(a, &run),
        Action::Kubectl(a) => tool::run(tool::Tool::Kubectl, a, &run),
        Action::Oc(a) => tool::run(tool::Tool::Oc, a, &run),
        Action::Console => console::run(&run).await,
        Action::Token(a) => token::run(a, &run).await,
        Action::Login(a) => login::run(a, &run).await,
        Action::EmergencyCredentials(a) => emergency_credentials::run(a, &run).await,
    }
}
