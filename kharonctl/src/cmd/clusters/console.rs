//! `kharonctl clusters NAME console`: opens the cluster's web console (`openshiftConsoleURL` or
//! `talosConsoleURL`) with `KHARON_BROWSER`, `BROWSER` or the platform opener, and prints the URL.

use std::process::ExitCode;

use crate::cmd::clusters::run::Run;

pub async fn run(run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let Some(url) = cluster.console_url() else {
        anyhow::bail!("{} has no console URL fact (openshiftConsoleURL or talosConsoleURL)", cluster.id);
    };
    let places = run.ctx.oidc_places();
    eprintln!("Opening {}", kharon_common::text::Escaped(url));
    crate::browser::open(url, places.kharon_browser.or(places.browser).as_deref())
        .map_err(|e| anyhow::anyhow!("cannot open a browser ({e}); open {url:?} yourself"))?;
    Ok(ExitCode::SUCCESS)
}
