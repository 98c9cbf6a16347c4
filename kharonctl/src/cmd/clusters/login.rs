//! `kharonctl clusters NAME login [--idp IDP] [--token-stdin]`: the OpenShift web login (what
//! `oc login --web` does, without `oc`; `openshift_login.rs`), or a token piped in (what
//! `oc login --token` does, without the token on a command line). The token lands where the
//! cluster's kubeconfig exec entry (`clusters NAME token --exec-credential`) reads it, so every
//! kubeconfig of that cluster sends it from then on.

use std::io::Read as _;
use std::process::ExitCode;

use anyhow::Context as _;

use crate::cmd::clusters::run::Run;
use crate::kube::openshift_login as ocp;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Read the token from stdin (e.g. from the OpenShift console's "Copy login command")
    #[arg(long)]
    pub token_stdin: bool,
    /// With --token-stdin: seconds the token stays valid
    #[arg(long, value_name = "SECONDS", requires = "token_stdin")]
    pub expires_in: Option<u64>,
    /// Identity provider to use, skipping the OAuth server's chooser
    #[arg(long, value_name = "NAME", conflicts_with = "token_stdin")]
    pub idp: Option<String>,
}

pub async fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let stored = if args.token_stdin {
        let mut token = String::new();
        std::io::stdin().read_to_string(&mut token).context("cannot read the token from stdin")?;
        let token = token.trim().to_owned();
        if token.is_empty() || token.contains(char::is_whitespace) {
            anyhow::bail!("stdin held no single token");
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        ocp::StoredToken { token, expires_at: args.expires_in.map(|s| now.saturating_add(s)) }
    } else {
        ocp::web_login(&ocp::WebLogin::for_cluster(run.ctx, cluster, args.idp).await?).await?
    };
    let path = ocp::path(&run.ctx.config.cache_dir.value, &cluster.id);
    ocp::save(&path, &stored)?;
    eprintln!(
        "Logged in to {}; the token is in {}",
        kharon_common::text::Escaped(&cluster.id),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}
