//! `kharonctl login`: log in to Lieutenant's identity provider and cache the tokens (0600), so that
//! `kharonctl update` can fetch the inventory. The browser flow by default (authorization code with
//! PKCE, redirect to `http://localhost:18000`); `--device` for machines without a browser.

use std::process::ExitCode;
use std::time::Duration;

use crate::context::Context;
use crate::lieutenant::oidc::{self, Auth};
use crate::lieutenant::{self, Lieutenant};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Log in with a device code shown here and entered on any other device
    #[arg(long)]
    pub device: bool,
    /// How long to wait for the login to complete: seconds, or with a unit (90s, 3m)
    #[arg(long, value_name = "DURATION", default_value = oidc::DEFAULT_LOGIN_TIMEOUT, value_parser = crate::duration::parse)]
    pub timeout: Duration,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let api_url = ctx.lieutenant_url();
    let http = lieutenant::http_client()?;
    let lieutenant = Lieutenant::new(api_url, http.clone())?;
    let options = oidc::LoginOptions { device: args.device, timeout: args.timeout };
    let mut auth = Auth::new(api_url, &lieutenant, http, ctx.oidc_overrides(), ctx.oidc_places(), options);
    auth.login().await.map_err(|e| ctx.with_lieutenant_hint(e.into()))?;
    println!("logged in; tokens cached in {}", ctx.oidc_places().token_file.display());
    if let Some(token) = &ctx.config.api_token {
        eprintln!(
            "note: COMMODORE_API_TOKEN is set ({}): `kharonctl update` sends that token, as commodore's \
             commands do, not this login's, while it is not expired; unset it to use the login",
            token.source
        );
    }
    Ok(ExitCode::SUCCESS)
}
