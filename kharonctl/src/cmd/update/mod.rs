//! `kharonctl update`: fetch the inventory from Lieutenant (logging in if needed), derive the
//! routing table, write the cache atomically, say what changed, and tell a running kharond to
//! reload (or say that it routes by another file, e.g. `--inventory`, and did not pick this up).
//!
//! A failed fetch leaves the old cache untouched: kharond keeps serving it (there is no TTL), and
//! the error says how old that cache is.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kharon_shared::cache::{self, Envelope, RouteEntry};
use kharon_shared::changes;
use kharon_shared::inventory::Cluster;
use kharon_shared::routing::RoutingTable;
use kharon_shared::text::Escaped;
use kharon_shared::trust::Refused;

use crate::context::Context;
use crate::daemon::{self, Daemon};
use crate::lieutenant::oidc::{self, Auth};
use crate::lieutenant::{self, Lieutenant};
use crate::output;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this tenant's clusters (e.g. t-example-1234)
    #[arg(long, value_name = "TENANT")]
    pub tenant: Option<String>,
    /// If a login is needed, use the device code flow instead of the browser
    #[arg(long)]
    pub device: bool,
    /// How long a login (if one is needed) may take: seconds, or with a unit (90s, 3m)
    #[arg(long, value_name = "DURATION", default_value = oidc::DEFAULT_LOGIN_TIMEOUT, value_parser = crate::duration::parse)]
    pub login_timeout: Duration,
    /// Write the cache but do not ask kharond to reload
    #[arg(long)]
    pub no_reload: bool,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let api_url = ctx.lieutenant_url().to_owned();
    let cache_path = cache::path(&ctx.config.cache_dir.value);
    let previous = match cache::load(&cache_path) {
        Ok(envelope) => Some(envelope),
        Err(cache::Error::Missing { .. }) => None,
        Err(e) => {
            eprintln!("warning: {}; it will be replaced", kharon_shared::errors::shown(&e));
            None
        }
    };

    let (clusters, issuer) = match fetch(&args, ctx, &api_url).await {
        Ok(fetched) => fetched,
        Err(e) => {
            let kept = match &previous {
                Some(old) => format!(
                    "the inventory cache {} from {} ago is unchanged and kharond keeps using it",
                    cache_path.display(),
                    output::age(old.age().as_secs())
                ),
                None => format!("there is no inventory cache yet ({})", cache_path.display()),
            };
            return Err(ctx.with_lieutenant_hint(e.context(format!("update failed; {kept}"))));
        }
    };

    // kharond judges the clusters against the same hosts: its settings, and what the cache says.
    let mut envelope = Envelope::new(api_url.clone(), clusters, Vec::new());
    envelope.oidc_issuer = issuer;
    // kharonctl has no ssh_config engine: the jump hosts' HostNames anchor nothing here, and a
    // refusal says kharond may still route the name (`anchor`).
    let mut own = ctx.config.own_hosts();
    envelope.own_hosts(&mut own);
    let anchors = ctx.config.anchors();
    let table = RoutingTable::compile_with(&envelope.clusters, &own, &anchors);
    envelope.routes = table
        .routes()
        .into_iter()
        .map(|(suffix, jumphost, cluster)| RouteEntry { suffix, jumphost, cluster })
        .collect();
    cache::store(&cache_path, &envelope)?;

    // The names the old cache's clusters had refused, judged as today's: only a newly refused name
    // is news.
    let old_refused = previous
        .as_ref()
        .map(|old| RoutingTable::compile_with(&old.clusters, &own, &anchors).report().refused.clone())
        .unwrap_or_default();
    report(&envelope, previous.as_ref(), &old_refused, &table);
    println!("wrote {}", cache_path.display());

    if args.no_reload {
        return Ok(ExitCode::SUCCESS);
    }
    match ctx.daemon().await {
        Ok(mut daemon) => {
            if reload(&mut daemon, &cache_path).await? {
                return Ok(ExitCode::from(crate::exit::PARTIAL));
            }
        }
        Err(daemon::Error::NotRunning { .. }) => {
            println!("kharond is not running; it will use the new cache when it starts");
        }
        Err(e) => {
            return Err(anyhow::Error::new(e).context("the cache was written, but kharond could not be told"));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Reloads a running kharond, unless it routes by another file than the cache just written (an
/// `--inventory` file, or the cache of another cache dir): a reload would not pick this update
/// up, so the user is told which file kharond reads instead of "reloaded". Returns whether the
/// reload was partial (said on stderr).
async fn reload(daemon: &mut Daemon, cache_path: &Path) -> anyhow::Result<bool> {
    let status = daemon
        .status()
        .await
        .context("the cache was written, but kharond could not be asked what it reads")?;
    let source = status.inventory.unwrap_or_default();
    if !same_file(Path::new(&source.source_path), cache_path) {
        let advice = if source.source_kind == "file" {
            format!(
                "the inventory file {} (--inventory), not the cache: it did not pick up this update. To \
                 route by the cache, restart kharond without --inventory (and without KHARON_INVENTORY \
                 or `inventory` in its config file)",
                source.source_path
            )
        } else {
            format!(
                "the cache {}, not {}: it did not pick up this update. Give kharond and kharonctl the \
                 same KHARON_CACHE_DIR (or cache_dir in the config file)",
                source.source_path,
                cache_path.display()
            )
        };
        println!("kharond (pid {}) routes by {}", status.pid, Escaped(&advice));
        return Ok(false);
    }
    let reply = daemon.reload().await.context("the cache was written, but kharond could not reload it")?;
    let inv = reply.inventory.clone().unwrap_or_default();
    println!(
        "kharond reloaded: {}, {} routed",
        output::count(inv.clusters_total, "cluster"),
        inv.clusters_routed
    );
    crate::daemon::reload_outcome::warnings(&reply);
    Ok(crate::daemon::reload_outcome::partial(&reply).is_some())
}

/// Whether two paths name the same file; a path that cannot be resolved is compared as written.
fn same_file(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
    resolve(a) == resolve(b)
}

/// Logs in if needed and fetches `/clusters`; a 401 gets one refresh, then one fresh login. Also
/// the issuer of the token that fetched them, when it names one.
async fn fetch(args: &Args, ctx: &Context, api_url: &str) -> anyhow::Result<(Vec<Cluster>, Option<String>)> {
    let http = lieutenant::http_client()?;
    let lieutenant = Lieutenant::new(api_url, http.clone())?;
    let options = oidc::LoginOptions { device: args.device, timeout: args.login_timeout };
    let mut auth = Auth::new(api_url, &lieutenant, http, ctx.oidc_overrides(), ctx.oidc_places(), options);

    let mut bearer = auth.bearer().await?;
    loop {
        let spinner = spinner(&format!("fetching clusters from {api_url}"));
        let result = lieutenant.clusters(&bearer, args.tenant.as_deref()).await;
        spinner.finish_and_clear();
        match result {
            Ok(clusters) => return Ok((clusters, auth.issuer())),
            Err(e @ lieutenant::Error::Unauthorized { .. }) => match auth.after_rejection().await? {
                Some(better) => bearer = better,
                None => return Err(e.into()),
            },
            Err(e) => return Err(e.into()),
        }
    }
}

/// A spinner on stderr, drawn only on a terminal.
fn spinner(message: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(message.to_owned());
    bar.enable_steady_tick(Duration::from_millis(100));
    bar
}

/// What changed against the previous cache: clusters added/removed, then per cluster the names it
/// routes now and did not, no longer routes, and has refused since; then conflicts, warnings
/// (clusters with a jumphost but no domains among them) and every refusal on stderr.
fn report(new: &Envelope, old: Option<&Envelope>, old_refused: &[Refused], table: &RoutingTable) {
    let r = table.report();
    println!(
        "fetched {} from {} ({} routed through {}, {} ignored)",
        output::count(r.clusters_total as u64, "cluster"),
        Escaped(&new.api_url),
        r.clusters_routed,
        output::count(table.jumphosts().len() as u64, "jump host"),
        r.clusters_ignored
    );
    let ids = |e: &Envelope| e.clusters.iter().map(|c| c.id.clone()).collect::<BTreeSet<_>>();
    let routes = |e: &Envelope| -> Vec<(String, String, String)> {
        e.routes.iter().map(|r| (r.suffix.clone(), r.jumphost.clone(), r.cluster.clone())).collect()
    };
    let (old_ids, old_routes) = match old {
        Some(old) => (ids(old), routes(old)),
        None => (BTreeSet::new(), Vec::new()),
    };
    let (new_ids, new_routes) = (ids(new), routes(new));
    let mut changed = false;
    for id in new_ids.difference(&old_ids) {
        println!("  + cluster {}", Escaped(id));
        changed = true;
    }
    for id in old_ids.difference(&new_ids) {
        println!("  - cluster {}", Escaped(id));
        changed = true;
    }
    let old = changes::Snapshot { routes: &old_routes, refused: old_refused };
    let now = changes::Snapshot { routes: &new_routes, refused: &r.refused };
    for change in changes::between(&old, &now) {
        for line in crate::daemon::reload_outcome::change_lines(&(&change).into()) {
            println!("  {line}");
        }
        changed = true;
    }
    if !changed {
        println!("  no changes since the last update");
    }
    for c in &r.conflicts {
        let others: Vec<String> = c
            .shadowed
            .iter()
            .map(|s| format!("{} ({})", Escaped(&s.cluster), Escaped(&s.jumphost)))
            .collect();
        eprintln!(
            "warning: {} is claimed by several jump hosts; {} ({}) wins over {}",
            Escaped(&c.suffix),
            Escaped(&c.winner.cluster),
            Escaped(&c.winner.jumphost),
            others.join(", ")
        );
    }
    for w in &r.warnings {
        eprintln!("warning: {}", Escaped(w));
    }
    for refused in &r.refused {
        eprintln!("warning: {}", Escaped(&refused.to_string()));
    }
}
