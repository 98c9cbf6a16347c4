//! `kharonctl clusters [FILTER] [--tenant T] [-o table|wide|json|yaml]` lists clusters, and
//! `kharonctl clusters NAME <action>` acts on one (or, for `shell --each`, several):
//!
//! - [`kubeconfig`]: print or write that cluster's kubeconfig;
//! - [`shell`]: `$SHELL` (or `--command`) with a per-cluster `KUBECONFIG`;
//! - [`tool`]: `kubectl …` / `oc …` with that kubeconfig, exit code passed through;
//! - [`console`]: open the web console;
//! - [`token`]: the exec credential plugin the OpenShift kubeconfig entries run;
//! - [`login`]: store a token for an OpenShift cluster (the web login is `openshift_login.rs`);
//! - [`emergency`]: the cluster's emergency credentials from Passbolt and object storage.
//!
//! This file also holds the steps those actions, `kubeconfig` and `switch` share: where clusters
//! come from, the kubeconfig settings, writing the per-cluster kubeconfig, and child exit codes.

pub mod console;
pub mod emergency;
pub mod kubeconfig;
pub mod login;
pub mod shell;
pub mod token;
pub mod tool;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use kharon_shared::inventory::Cluster;
use serde::Serialize;

use crate::clusters::{self, Source};
use crate::context::Context;
use crate::kube;

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  kharonctl clusters\n  kharonctl clusters 'c-*' --tenant t-example -o wide\n  \
    kharonctl clusters c-example-1 shell\n  kharonctl clusters c-example-1 kubectl get nodes\n  \
    kharonctl clusters 'c-*' shell --each --command 'kubectl get --raw /version'"
)]
pub struct Args {
    /// A cluster id (default for actions: the current kube context); for the listing (and
    /// `shell --each`) a filter: glob (`c-*`) or substring
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    /// The table plus console URL and routed state
    Wide,
    Json,
    Yaml,
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
    #[command(long_about = emergency::LONG_ABOUT, after_help = emergency::EXAMPLES)]
    EmergencyCredentials(emergency::Args),
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let source = source(args.inventory.as_deref(), ctx);
    let all = source.load()?;
    let Some(action) = args.action else {
        return list(&all, args.name.as_deref(), args.tenant.as_deref(), args.output);
    };
    // No name: the current kube context, so `kharonctl clusters login` inside `clusters NAME shell`
    // (whose KUBECONFIG is that cluster's own file) or after `switch` acts on that cluster.
    let current;
    let name = match args.name.as_deref() {
        Some(name) => name,
        None => {
            let path = crate::cmd::kubeconfig::default_path()?;
            current = kube::Kubeconfig::load(&path)?.current_context().map(str::to_owned);
            current.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "name a cluster (kharonctl clusters NAME <action>); {} has no current context",
                    path.display()
                )
            })?
        }
    };
    // Only the actions that write a kubeconfig ask kharond where it listens; `token` is the exec
    // plugin kubectl runs on every call and asks only when it has to log in (`web_login`).
    let proxy = match action {
        Action::Kubeconfig(_) | Action::Shell(_) | Action::Kubectl(_) | Action::Oc(_) => {
            ctx.proxy_address().await
        }
        // emergency-credentials asks kharond itself: it needs the daemon for the download anyway.
        Action::Console | Action::Token(_) | Action::Login(_) | Action::EmergencyCredentials(_) => {
            ctx.config.listen.value
        }
    };
    let run = Run { ctx, source: &source, all: &all, name, tenant: args.tenant.as_deref(), proxy };
    match action {
        Action::Kubeconfig(a) => kubeconfig::run(a, &run),
        Action::Shell(a) => shell::run(a, &run),
        Action::Kubectl(a) => tool::run(tool::Tool::Kubectl, a, &run),
        Action::Oc(a) => tool::run(tool::Tool::Oc, a, &run),
        Action::Console => console::run(&run).await,
        Action::Token(a) => token::run(a, &run).await,
        Action::Login(a) => login::run(a, &run).await,
        Action::EmergencyCredentials(a) => emergency::run(a, &run).await,
    }
}

/// What an action gets: the context, the loaded clusters and the name it was given.
pub struct Run<'a> {
    pub ctx: &'a Context,
    pub source: &'a Source,
    pub all: &'a [Cluster],
    pub name: &'a str,
    pub tenant: Option<&'a str>,
    /// kharond's SOCKS address for the kubeconfigs an action writes ([`Context::proxy_address`]);
    /// the configured one for actions that write none.
    pub proxy: SocketAddr,
}

impl Run<'_> {
    /// The one cluster `name` names (a glob must match exactly one).
    pub fn one(&self) -> anyhow::Result<&Cluster> {
        let found = clusters::select(self.all, self.name, self.tenant)?;
        match found.as_slice() {
            [one] => Ok(one),
            many => anyhow::bail!(
                "{:?} matches {} clusters ({}); name one",
                self.name,
                many.len(),
                many.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// Writes `cluster`'s own kubeconfig into the cache dir and returns its path.
    pub fn cluster_kubeconfig(&self, cluster: &Cluster) -> anyhow::Result<PathBuf> {
        cluster_kubeconfig(self.ctx, self.source, self.proxy, cluster)
    }
}

/// `--inventory`, else the configured inventory (`KHARON_INVENTORY`, config file), else the cache.
pub fn source(flag: Option<&Path>, ctx: &Context) -> Source {
    let configured = ctx.config.inventory.as_ref().map(|s| s.value.as_path());
    let file = flag.map(absolute).or_else(|| configured.map(absolute));
    Source::new(file.as_deref(), &ctx.config.cache_dir.value)
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

/// The kubeconfig settings: kharond's SOCKS address ([`Context::proxy_address`]), our own path, the
/// inventory file.
pub fn settings(source: &Source, proxy: SocketAddr) -> anyhow::Result<kube::Settings> {
    let exe = std::env::current_exe().context("cannot find the path of kharonctl itself")?;
    Ok(kube::Settings { proxy, exe, inventory: source.file().map(Path::to_owned) })
}

/// Writes (replaces) the per-cluster kubeconfig and returns its path.
pub fn cluster_kubeconfig(
    ctx: &Context,
    source: &Source,
    proxy: SocketAddr,
    cluster: &Cluster,
) -> anyhow::Result<PathBuf> {
    let entry = kube::entry(cluster, &settings(source, proxy)?)?;
    for w in &entry.warnings {
        eprintln!("kharonctl: warning: {w}");
    }
    let path = kube::cluster_file(&ctx.config.cache_dir.value, &cluster.id);
    kube::Kubeconfig::from_entries([&entry], Some(&cluster.id)).write(&path)?;
    Ok(path)
}

/// How to run the OpenShift web login for `cluster`: through kharond when it is routed, trusting
/// the CA fact when there is one, with the user's browser command.
pub async fn web_login(
    ctx: &Context,
    cluster: &Cluster,
    idp: Option<String>,
) -> anyhow::Result<crate::openshift_login::WebLogin> {
    use base64::Engine as _;
    let Some(api_url) = cluster.api_url() else {
        anyhow::bail!("{} has no API URL fact, so there is nothing to log in to", cluster.id);
    };
    let ca_pem = cluster.dynamic_fact_str(kharon_shared::inventory::fact::TALOS_CA_DATA).and_then(|ca| {
        base64::engine::general_purpose::STANDARD.decode(ca.split_whitespace().collect::<String>()).ok()
    });
    let places = ctx.oidc_places();
    Ok(crate::openshift_login::WebLogin {
        api_url: api_url.to_owned(),
        // socks5h here (reqwest resolves nothing itself then); kubeconfigs need socks5 instead.
        proxy: match cluster.jumphost() {
            Some(_) => Some(format!("socks5h://{}", ctx.proxy_address().await)),
            None => None,
        },
        ca_pem,
        idp,
        browser: places.kharon_browser.or(places.browser),
        timeout: std::time::Duration::from_secs(180),
    })
}

/// A child's exit status as ours: its code, or 128 + signal like a shell.
pub fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => ExitCode::from((code & 0xff) as u8),
        (None, Some(sig)) => ExitCode::from((128 + sig).clamp(0, 255) as u8),
        (None, None) => ExitCode::FAILURE,
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Row<'a> {
    id: &'a str,
    display_name: Option<&'a str>,
    tenant: &'a str,
    distribution: Option<&'a str>,
    jumphost: Option<&'a str>,
    api_url: Option<&'a str>,
    console_url: Option<&'a str>,
}

fn list(
    all: &[Cluster],
    filter: Option<&str>,
    tenant: Option<&str>,
    format: ListFormat,
) -> anyhow::Result<ExitCode> {
    let rows: Vec<Row> = clusters::filter(all, filter, tenant)
        .into_iter()
        .map(|c| Row {
            id: &c.id,
            display_name: c.display_name.as_deref(),
            tenant: &c.tenant,
            distribution: c.fact_str(kharon_shared::inventory::fact::DISTRIBUTION),
            jumphost: c.jumphost(),
            api_url: c.api_url(),
            console_url: c.console_url(),
        })
        .collect();
    let dash = |v: Option<&str>| v.unwrap_or("-").to_owned();
    match format {
        ListFormat::Json => crate::output::json(&rows)?,
        // output.rs has no YAML yet; the listing is the only YAML on stdout.
        ListFormat::Yaml => print!("{}", serde_norway::to_string(&rows)?),
        ListFormat::Table | ListFormat::Wide => {
            let wide = format == ListFormat::Wide;
            let mut headers = vec!["ID", "DISPLAY NAME", "TENANT", "DISTRIBUTION", "JUMPHOST", "API URL"];
            if wide {
                headers.push("CONSOLE URL");
            }
            let table = crate::output::table(
                &headers,
                rows.iter().map(|r| {
                    let mut row = vec![
                        r.id.to_owned(),
                        dash(r.display_name),
                        r.tenant.to_owned(),
                        dash(r.distribution),
                        r.jumphost.unwrap_or("direct").to_owned(),
                        dash(r.api_url),
                    ];
                    if wide {
                        row.push(dash(r.console_url));
                    }
                    row
                }),
            );
            println!("{table}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
