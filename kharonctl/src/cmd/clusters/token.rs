//! `kharonctl clusters NAME token [--exec-credential]`: the cluster's bearer token, raw or as the
//! `ExecCredential` JSON kubectl reads from the exec entry `kharonctl kubeconfig` writes for
//! OpenShift clusters. A missing or expired token runs the OpenShift web login first when a browser
//! can be opened, so a fresh kubeconfig just works on first use. Only the credential goes to stdout.

use std::process::ExitCode;
use std::time::SystemTime;

use kharon_routing::inventory::Distribution;

use crate::cmd::clusters::run::Run;
use crate::kube::openshift_login as ocp;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print a client.authentication.k8s.io ExecCredential (for kubeconfig exec entries)
    #[arg(long)]
    pub exec_credential: bool,
}

/// Whether a browser can plausibly be opened: a browser command, a graphical session, or macOS.
fn can_open_browser() -> bool {
    let set = |v: &str| std::env::var_os(v).is_some_and(|s| !s.is_empty());
    set("KHARON_BROWSER")
        || set("BROWSER")
        || set("DISPLAY")
        || set("WAYLAND_DISPLAY")
        || cfg!(target_os = "macos")
}

pub async fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let path = ocp::path(&run.ctx.config.cache_dir.value, &cluster.id);
    let token = match ocp::load(&path)? {
        Some(t) if t.is_fresh(SystemTime::now()) => t,
        stale if cluster.distribution() == Distribution::OpenShift && can_open_browser() => {
            if stale.is_some() {
                eprintln!(
                    "The token of {} has expired; logging in again.",
                    kharon_common::text::Escaped(&cluster.id)
                );
            }
            let token = ocp::web_login(&ocp::WebLogin::for_cluster(run.ctx, cluster, None).await?).await?;
            ocp::save(&path, &token)?;
            token
        }
        Some(_) => anyhow::bail!(
            "the token of {id} has expired; log in again with `kharonctl clusters {id} login`",
            id = cluster.id
        ),
        None => {
            anyhow::bail!("no token for {id}; log in with `kharonctl clusters {id} login`", id = cluster.id)
        }
    };
    if args.exec_credential {
        let info = std::env::var("KUBERNETES_EXEC_INFO").ok();
        let version = ocp::exec_api_version(info.as_deref());
        println!("{}", serde_json::to_string(&ocp::exec_credential(&token, &version))?);
    } else {
        println!("{}", token.token);
    }
    Ok(ExitCode::SUCCESS)
}
