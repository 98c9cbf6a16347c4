//! `kharonctl test [CLUSTER…]`: checks every cluster's API, console and OAuth endpoints the way a
//! client reaches them.
//!
//! The daemon checks the path through its real tunnels (SSH login per hop, then TCP to the
//! endpoint), reports URLs it cannot use (by cluster and fact) and whether its own ssh-agent
//! answers, and streams one event per check; for each endpoint that answered, this command then
//! does a TLS handshake and a `GET` through the SOCKS proxy (`/version` for the API), verifying
//! the certificate exactly as `clusters ID login` does (same roots, same verifier: kube/trust.rs),
//! so a server `test` passes is one `login` accepts. Also the inventory's warnings. Exit code 1
//! when anything failed.
//!
//! The ssh-agent that matters is kharond's, not this shell's: the daemon does every SSH login.
//!
//! Each error is said once: the table has one row per check and a mark, and the errors follow it
//! in full, numbered; the live lines while checks run say only which check failed.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kharon_proto::v1 as pb;
use serde::Serialize;

use crate::catalog::picker::{self, Marks};
use crate::catalog::{self, Catalog};
use kharon_common::text::Escaped;

use crate::context::{Context, Proxy};
use crate::daemon::Daemon;
use crate::kube::trust;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cluster ids to check, or parts of ids (default: every cluster with an API, console or OAuth URL)
    #[arg(add = clap_complete::engine::ArgValueCandidates::new(crate::completion::cluster_candidates))]
    pub clusters: Vec<String>,
    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
}

/// One row of the result table; also the JSON shape of `-o json`.
#[derive(Debug, Serialize)]
struct Row {
    cluster: String,
    /// "api", "console", "oauth"; for the local rows "ssh-agent" or "inventory".
    endpoint: String,
    /// The fact the URL came from.
    fact: String,
    url: String,
    path: String,
    hops: Vec<String>,
    /// "url" (malformed), "connect", "https", or for the local rows "agent" and "inventory".
    check: String,
    ok: bool,
    latency_ms: f64,
    error: String,
    /// What a passing check wants the reader to know.
    note: String,
}

/// How long the HTTPS check through the proxy may take.
const HTTPS_TIMEOUT: Duration = Duration::from_secs(10);

/// The client for one cluster's HTTPS checks, through the daemon's SOCKS listener, trusting what
/// `clusters ID login` trusts for that cluster ([`trust`]).
fn https_client(proxy: &Proxy, ca_pem: Option<&[u8]>) -> anyhow::Result<reqwest::Client> {
    Ok(trust::builder(ca_pem)?
        .no_proxy()
        .proxy(reqwest::Proxy::all(proxy.url("socks5h"))?)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(HTTPS_TIMEOUT)
        .build()?)
}

/// One HTTPS client per CA a cluster brings (most bring none and share one), made on first use:
/// each client loads the system's roots.
struct Clients<'a> {
    proxy: Proxy,
    catalog: Option<&'a Catalog>,
    made: HashMap<Option<Vec<u8>>, Result<reqwest::Client, String>>,
}

impl Clients<'_> {
    /// The client for `cluster`'s checks and whether it trusts a CA of the cluster's own; or why
    /// none can be made (the cluster's CA is no certificate): that cluster's rows fail, the rest go on.
    fn of(&mut self, cluster: &str) -> (Result<reqwest::Client, String>, bool) {
        let ca =
            self.catalog.and_then(|c| catalog::find(c.clusters(), cluster).ok()).and_then(trust::cluster_ca);
        let own_ca = ca.is_some();
        let proxy = &self.proxy;
        let made = self.made.entry(ca).or_insert_with_key(|ca| {
            https_client(proxy, ca.as_deref()).map_err(|e| {
                let whose = if ca.is_some() { " with the cluster's own CA from the inventory" } else { "" };
                format!("cannot make an HTTPS client{whose}: {}", kharon_common::errors::chain(e.as_ref()))
            })
        });
        (made.clone(), own_ca)
    }
}

/// What to `GET` for an endpoint that answered: the API's `/version` over TLS (as kubectl), the
/// console's and OAuth route's URL as given (as a browser).
fn https_url(event: &pb::TestEvent) -> String {
    if event.kind == "api" { format!("https://{}/version", event.endpoint) } else { event.url.clone() }
}

/// Any HTTP answer counts: a 401 or 403 still proves the server is reachable and speaks TLS. A
/// certificate refusal is said in words first, then as the TLS library put it.
async fn https_check(
    client: &reqwest::Client,
    url: &str,
    cluster: &str,
    own_ca: bool,
) -> Result<Duration, String> {
    let started = Instant::now();
    client.get(url).send().await.map_err(|e| {
        let chain = kharon_common::errors::chain(&e);
        let host = e.url().and_then(|u| u.host_str()).unwrap_or_default().to_owned();
        match trust::explain(&chain, &host, own_ca) {
            Some(words) => format!("{words}; `kharonctl clusters {cluster} login` refuses it too ({chain})"),
            None => chain,
        }
    })?;
    Ok(started.elapsed())
}

fn local_row(endpoint: &str, path: String, check: &str, ok: bool, error: String, note: String) -> Row {
    Row {
        cluster: "(local)".into(),
        endpoint: endpoint.into(),
        fact: String::new(),
        url: String::new(),
        path,
        hops: vec![],
        check: check.into(),
        ok,
        latency_ms: 0.0,
        error,
        note,
    }
}

fn inventory_row(status: &pb::StatusResponse) -> Row {
    let inventory = status.inventory.clone().unwrap_or_default();
    // No inventory yet leaves nothing to check, which is not a pass.
    let (ok, error) = if inventory.missing {
        (false, kharon_routing::cache::NO_INVENTORY_YET.to_owned())
    } else {
        (inventory.warnings.is_empty(), inventory.warnings.join("; "))
    };
    local_row("inventory", inventory.source_path, "inventory", ok, error, String::new())
}

/// The daemon's "agent" event: the agent kharond authenticates with, whatever this shell has.
fn agent_row(event: &pb::TestEvent) -> Row {
    let note = if event.endpoint.is_empty() {
        "kharond has no SSH_AUTH_SOCK: jump hosts can use only key files and their own IdentityAgent"
            .to_owned()
    } else {
        String::new()
    };
    let path = if event.endpoint.is_empty() { "kharond: none".to_owned() } else { event.endpoint.clone() };
    local_row("ssh-agent", path, "agent", event.ok, event.error.clone(), note)
}

fn endpoint_row(event: &pb::TestEvent, check: &str) -> Row {
    Row {
        cluster: event.cluster.clone(),
        endpoint: event.kind.clone(),
        fact: event.fact.clone(),
        url: event.url.clone(),
        path: event.path.clone(),
        hops: event.hops.clone(),
        check: check.into(),
        ok: event.ok,
        latency_ms: event.latency_us as f64 / 1000.0,
        error: event.error.clone(),
        note: String::new(),
    }
}

/// The ids kharond is asked about: each part of an id that names one cluster of the catalog becomes
/// its id (several: the picker, or exit code 2). A name the catalog does not know, or no catalog at
/// all, goes as given: kharond may route by another inventory, and names what it does not know.
async fn full_ids(names: Vec<String>, catalog: Option<&Catalog>) -> anyhow::Result<Vec<String>> {
    if names.is_empty() {
        return Ok(names);
    }
    let Some(catalog) = catalog else {
        return Ok(names);
    };
    // kharond's own table: a name it does not know is unknown to kharond too, said as everywhere.
    let same_as_kharond = matches!(catalog.source(), catalog::Source::Daemon { .. });
    let marks = Marks::default();
    let mut ids = Vec::with_capacity(names.len());
    for name in names {
        match picker::one(catalog.clusters(), &name, None, |_| true, &marks, "Which cluster to test?") {
            Ok(cluster) => ids.push(cluster.id.clone()),
            Err(e)
                if !same_as_kharond
                    && matches!(
                        e.downcast_ref(),
                        Some(catalog::Error::Unknown { .. } | catalog::Error::NoMatch { .. })
                    ) =>
            {
                ids.push(name)
            }
            Err(e) => return Err(e),
        }
    }
    Ok(ids)
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    // The clusters' CAs for the HTTPS checks, and the ids a part of one stands for. Without a
    // catalog, kharond's names go as given and the checks trust the system's roots only.
    let catalog = Catalog::load(None, &ctx.config).await.ok();
    // Before the progress spinner: the picker may need the terminal.
    let clusters = full_ids(args.clusters, catalog.as_ref()).await?;
    let mut daemon = ctx.daemon().await?;
    let status = daemon.status().await?;
    let mut rows = vec![inventory_row(&status)];

    let progress = if std::io::stderr().is_terminal() && args.output == Format::Table {
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}").unwrap_or(ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(100));
        Some(bar)
    } else {
        None
    };
    let proxy = ctx.proxy_of(&status).map_err(anyhow::Error::msg)?;
    let mut clients = Clients { proxy, catalog: catalog.as_ref(), made: HashMap::new() };
    let mut stream = daemon.test(clusters).await?;
    while let Some(event) = Daemon::next_event(&mut stream).await? {
        if event.step == "agent" {
            rows.push(agent_row(&event));
            continue;
        }
        // Which check, not why: the reason is in the table's notes, once.
        let line = format!(
            "{} {} {} via {}{}",
            if event.ok { "ok  " } else { "FAIL" },
            Escaped(&event.cluster),
            Escaped(&event.kind),
            Escaped(&event.path),
            if event.ok { format!(": {}", output::millis(event.latency_us)) } else { String::new() }
        );
        match &progress {
            Some(bar) => bar.println(line),
            None if args.output == Format::Table => eprintln!("{line}"),
            None => {}
        }
        let check = if event.step == "url" { "url" } else { "connect" };
        rows.push(endpoint_row(&event, check));
        if event.ok {
            if let Some(bar) = &progress {
                bar.set_message(format!("{} {}: TLS and GET", Escaped(&event.cluster), Escaped(&event.kind)));
            }
            let url = https_url(&event);
            let mut row = endpoint_row(&event, "https");
            let checked = match clients.of(&event.cluster) {
                (Ok(client), own_ca) => https_check(&client, &url, &event.cluster, own_ca).await,
                (Err(why), _) => Err(why),
            };
            match checked {
                Ok(took) => row.latency_ms = took.as_secs_f64() * 1000.0,
                Err(e) => (row.ok, row.latency_ms, row.error) = (false, 0.0, e),
            }
            row.url = url;
            rows.push(row);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    // Checks finish in any order; the table reads cluster by cluster, api, console, oauth.
    let rank = |r: &Row| {
        let kind = ["api", "console", "oauth"].iter().position(|k| *k == r.endpoint).unwrap_or(0);
        (r.cluster != "(local)", r.cluster.clone(), kind)
    };
    rows.sort_by_key(rank);

    let failed = rows.iter().filter(|r| !r.ok).count();
    match args.output {
        Format::Json => output::json(&rows)?,
        Format::Table => {
            let (table, notes) = render(&rows);
            println!("{table}");
            for note in notes {
                println!("{note}");
            }
            if failed > 0 {
                println!("{} failed", output::count(failed as u64, "check"));
            }
        }
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The table (one row per check: which cluster and endpoint, through which jump host, the result
/// and how long it took) and the notes under it: each error in full, and what a passing check
/// wants known, numbered as the rows that have them are marked.
fn render(rows: &[Row]) -> (comfy_table::Table, Vec<String>) {
    let mut notes = Vec::new();
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut result = if r.ok { "ok".to_owned() } else { "FAILED".to_owned() };
            if r.latency_ms > 0.0 {
                result.push_str(&format!(" {:.1} ms", r.latency_ms));
            }
            let said = if r.error.is_empty() { &r.note } else { &r.error };
            if !said.is_empty() {
                notes.push(note(notes.len() + 1, r, said));
                result.push_str(&format!(" [{}]", notes.len()));
            }
            // "api connect", "console https"; the local rows' check is their endpoint's name.
            let check = if r.check == r.endpoint || r.cluster == "(local)" {
                r.endpoint.clone()
            } else {
                format!("{} {}", r.endpoint, r.check)
            };
            vec![r.cluster.clone(), check, r.path.clone(), result]
        })
        .collect();
    let mut table = output::table(&["cluster", "check", "via", "result"], cells);
    // Ids, the check and its result stay whole; the path folds.
    output::keep_whole(&mut table, &[0, 1, 3]);
    (table, notes)
}

/// `[n] cluster endpoint URL: text`: what a row's mark stands for (an error names its hop itself).
/// All of it but the number is data (ids, URLs from facts, servers' error texts): escaped.
fn note(n: usize, r: &Row, text: &str) -> String {
    let mut about = format!("{} {}", r.cluster, r.endpoint);
    if !r.url.is_empty() {
        about.push_str(&format!(" {}", r.url));
    }
    format!("[{n}] {}: {}", Escaped(&about), Escaped(text))
}
