//! `kharonctl update`: fetch the inventory from Lieutenant (logging in if needed), derive the
//! routing table, write the cache atomically, say what changed, and tell a running kharond to
//! reload (or say that it routes by another file, e.g. `--inventory`, and did not pick this up).
//!
//! - [`lock`]: one update at a time per cache directory; a second one waits (`--wait`).
//! - [`shrink`]: an answer that would wipe most of the routes is refused unless `--allow-shrink`.
//! - [`report`]: what changed against the cache it replaced.
//!
//! A failed fetch or a refused answer leaves the old cache untouched: kharond keeps serving it
//! (there is no TTL), and the error says how old that cache is.

mod lock;
mod report;
mod shrink;

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use kharon_common::text::Escaped;
use kharon_routing::cache::{self, Envelope, RouteEntry};
use kharon_routing::inventory::Cluster;
use kharon_routing::table::RoutingTable;

use crate::context::Context;
use crate::daemon::{self, Daemon};
use crate::lieutenant::oidc::{self, Auth};
use crate::lieutenant::{self, Lieutenant};
use crate::output;

#[derive(Debug, clap::Args)]
#[command(after_help = concat!(
    "Examples:\n  kharonctl update\n  kharonctl update --tenant t-example-1234 --allow-shrink\n  \
    kharonctl update --wait 0          # fail at once if another update runs\n\n\
    An update that would lose most of the cache is refused (exit code 1), and the cache and kharond \
    stay as they are: ",
    shrink::rule!(),
    ". The refusal says what Lieutenant answered, for which tenant and account, against what the cache \
    holds; --allow-shrink writes it all the same.\n\n\
    One update runs at a time per cache directory (update.lock there); another one waits for it, \
    saying so, up to --wait, then fails naming the pid that holds the lock."
))]
pub struct Args {
    /// Only this tenant's clusters (e.g. t-example-1234); against a cache of every tenant this
    /// loses the others' clusters, so it needs --allow-shrink then
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
    /// Write the answer even if it has no clusters, or would stop routing more than half of the
    /// clusters the cache routes (refused without this flag)
    #[arg(long)]
    pub allow_shrink: bool,
    /// How long to wait for another `kharonctl update` of the same cache to finish (0: fail at once)
    #[arg(long, value_name = "DURATION", default_value = lock::DEFAULT_WAIT, value_parser = crate::duration::parse)]
    pub wait: Duration,
}

/// What Lieutenant answered, and who asked.
struct Fetched {
    clusters: Vec<Cluster>,
    /// The issuer of the token that fetched them, when it names one.
    issuer: Option<String>,
    answer: shrink::Answer,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let api_url = ctx.lieutenant_url().to_owned();
    let cache_path = cache::path(&ctx.config.cache_dir.value);
    // Held until kharond has reloaded what this update wrote (or the update failed).
    let _lock = lock::acquire(&ctx.config.cache_dir.value, args.wait).await?;
    let previous = match cache::load(&cache_path) {
        Ok(envelope) => Some(envelope),
        Err(cache::Error::Missing { .. }) => None,
        Err(e) => {
            eprintln!("warning: {}; it will be replaced", kharon_common::errors::shown(&e));
            None
        }
    };

    let fetched = match fetch(&args, ctx, &api_url).await {
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
    let mut envelope = Envelope::new(api_url.clone(), fetched.clusters, Vec::new());
    envelope.oidc_issuer = fetched.issuer;
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
    // The old cache's clusters judged as today's: what they route, and the names they refused
    // (only a newly refused name is news).
    let old_table = previous.as_ref().map(|old| RoutingTable::compile_with(&old.clusters, &own, &anchors));
    if let (Some(old), Some(old_table)) = (&previous, &old_table)
        && !args.allow_shrink
    {
        let loss =
            shrink::judge(old.clusters.len(), &routed(old_table), envelope.clusters.len(), &routed(&table));
        if let Some(shrink) = loss {
            let cache_age = output::age(old.age().as_secs());
            return Err(
                shrink::Refused { shrink, answer: fetched.answer, cache: cache_path, cache_age }.into()
            );
        }
    }
    if envelope.clusters.is_empty() {
        eprintln!("warning: {}", Escaped(&empty_answer(&fetched.answer)));
    }
    cache::store(&cache_path, &envelope)?;
    let old_refused = old_table.map(|t| t.report().refused.clone()).unwrap_or_default();
    report::report(&envelope, previous.as_ref(), &old_refused, &table);
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

/// The clusters `table` routes at least one name of.
fn routed(table: &RoutingTable) -> BTreeSet<String> {
    table.routes().into_iter().map(|(_, _, cluster)| cluster).collect()
}

/// An empty first answer is written (there is nothing to lose), but not without a word.
fn empty_answer(answer: &shrink::Answer) -> String {
    let account = answer.account.as_ref().map(|a| format!(" as {a}")).unwrap_or_default();
    format!(
        "Lieutenant answered {} with no clusters (token{account} from {}); kharond will route nothing \
         until an update brings some. Check the account (`kharonctl logout`, then `kharonctl update` \
         logs in again){}",
        answer.url,
        answer.token,
        if answer.tenant.is_some() { " and the tenant (--tenant)" } else { "" }
    )
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
/// the issuer of the token that fetched them, and where the answer came from.
async fn fetch(args: &Args, ctx: &Context, api_url: &str) -> anyhow::Result<Fetched> {
    let http = lieutenant::http_client()?;
    let lieutenant = Lieutenant::new(api_url, http.clone())?;
    let options = oidc::LoginOptions { device: args.device, timeout: args.login_timeout };
    let mut auth = Auth::new(api_url, &lieutenant, http, ctx.oidc_overrides(), ctx.oidc_places(), options);
    let tenant = args.tenant.as_deref();
    let url = lieutenant.clusters_url(tenant)?.to_string();

    let mut bearer = auth.bearer().await?;
    loop {
        let spinner = spinner(&format!("fetching clusters from {api_url}"));
        let result = lieutenant.clusters(&bearer, tenant).await;
        spinner.finish_and_clear();
        match result {
            Ok(clusters) => {
                let answer = shrink::Answer {
                    url,
                    tenant: args.tenant.clone(),
                    account: auth.account(),
                    token: auth.origin(),
                };
                return Ok(Fetched { clusters, issuer: auth.issuer(), answer });
            }
            Err(e @ lieutenant::Error::Unauthorized { .. }) if auth.is_static() => {
                return Err(anyhow::Error::new(e).context(format!(
                    "the token from {} was refused; like commodore, kharonctl does not log in instead: fix \
                     the token, or unset COMMODORE_API_TOKEN to use the login",
                    auth.origin()
                )));
            }
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
