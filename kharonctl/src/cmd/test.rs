//! `kharonctl test [CLUSTER…]`: checks every cluster's API endpoint the way a client reaches it.
//!
//! The daemon checks the path through its real tunnels (SSH login per hop, then TCP to the API)
//! and streams one event per cluster; for each endpoint that answered, this command then does a
//! TLS handshake and `GET /version` through the SOCKS proxy, as kubectl would. Also the local
//! side: an ssh-agent we can reach and the inventory's age. Exit code 1 when anything failed.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use kharon_shared::proto::v1 as pb;
use serde::Serialize;

use crate::context::Context;
use crate::daemon::Daemon;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Cluster ids to check (default: every cluster with an API URL)
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
    path: String,
    hops: Vec<String>,
    check: String,
    ok: bool,
    latency_ms: f64,
    error: String,
}

/// How long the HTTPS check through the proxy may take.
const HTTPS_TIMEOUT: Duration = Duration::from_secs(10);

/// The client for the HTTPS checks, through the daemon's SOCKS listener. Certificates are not
/// verified: cluster CAs are private and this checks reachability, not trust (kubectl does that).
fn https_client(ctx: &Context, listen: &str) -> anyhow::Result<reqwest::Client> {
    let proxy = match &ctx.config.socks_auth {
        Some(auth) => format!("socks5h://{}:{}@{listen}", auth.value.username, auth.value.password),
        None => format!("socks5h://{listen}"),
    };
    Ok(reqwest::Client::builder()
        .no_proxy()
        .proxy(reqwest::Proxy::all(&proxy)?)
        .danger_accept_invalid_certs(true)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(HTTPS_TIMEOUT)
        .build()?)
}

/// `GET https://endpoint/version`. Any HTTP answer counts: a 401 or 403 still proves the API
/// server is reachable and speaks TLS.
async fn https_check(client: &reqwest::Client, endpoint: &str) -> Result<Duration, String> {
    let started = Instant::now();
    client
        .get(format!("https://{endpoint}/version"))
        .send()
        .await
        .map_err(|e| crate::lieutenant::chain(&e))?;
    Ok(started.elapsed())
}

fn local_checks(rows: &mut Vec<Row>, status: &pb::StatusResponse) {
    let agent = std::env::var_os("SSH_AUTH_SOCK");
    let (ok, error) = match &agent {
        None => (false, "SSH_AUTH_SOCK is not set in this shell; kharond may still have an agent".to_owned()),
        Some(path) => match std::os::unix::net::UnixStream::connect(path) {
            Ok(_) => (true, String::new()),
            Err(e) => (false, format!("cannot connect to {}: {e}", path.to_string_lossy())),
        },
    };
    rows.push(Row {
        cluster: "(local)".into(),
        path: "ssh-agent".into(),
        hops: vec![],
        check: "agent".into(),
        ok,
        latency_ms: 0.0,
        error,
    });
    let inventory = status.inventory.clone().unwrap_or_default();
    rows.push(Row {
        cluster: "(local)".into(),
        path: inventory.source_path.clone(),
        hops: vec![],
        check: "inventory".into(),
        ok: inventory.warnings.is_empty(),
        latency_ms: 0.0,
        error: inventory.warnings.join("; "),
    });
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let mut daemon = ctx.daemon().await?;
    let status = daemon.status().await?;
    let mut rows = Vec::new();
    local_checks(&mut rows, &status);

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
    let client = https_client(ctx, &status.listen_address)?;
    let mut stream = daemon.test(args.clusters).await?;
    while let Some(event) = Daemon::next_event(&mut stream).await? {
        let line = format!(
            "{} {} via {}: {}",
            if event.ok { "ok  " } else { "FAIL" },
            event.cluster,
            event.path,
            if event.ok { output::millis(event.latency_us) } else { event.error.clone() }
        );
        match &progress {
            Some(bar) => bar.println(line),
            None if args.output == Format::Table => eprintln!("{line}"),
            None => {}
        }
        let connected = event.ok;
        rows.push(Row {
            cluster: event.cluster.clone(),
            path: event.path.clone(),
            hops: event.hops.clone(),
            check: "connect".into(),
            ok: event.ok,
            latency_ms: event.latency_us as f64 / 1000.0,
            error: event.error.clone(),
        });
        if connected {
            if let Some(bar) = &progress {
                bar.set_message(format!("{}: TLS and /version", event.cluster));
            }
            let (ok, latency_ms, error) = match https_check(&client, &event.endpoint).await {
                Ok(took) => (true, took.as_secs_f64() * 1000.0, String::new()),
                Err(e) => (false, 0.0, e),
            };
            rows.push(Row {
                cluster: event.cluster,
                path: event.path,
                hops: event.hops,
                check: "https /version".into(),
                ok,
                latency_ms,
                error,
            });
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }

    let failed = rows.iter().filter(|r| !r.ok).count();
    match args.output {
        Format::Json => output::json(&rows)?,
        Format::Table => {
            let table = output::table(
                &["cluster", "path", "check", "result", "latency", "error"],
                rows.iter().map(|r| {
                    let path = if r.hops.is_empty() {
                        r.path.clone()
                    } else {
                        format!("{} ({})", r.path, r.hops.join(" → "))
                    };
                    vec![
                        r.cluster.clone(),
                        path,
                        r.check.clone(),
                        if r.ok { "ok".into() } else { "FAILED".into() },
                        if r.latency_ms > 0.0 { format!("{:.1} ms", r.latency_ms) } else { String::new() },
                        r.error.clone(),
                    ]
                }),
            );
            println!("{table}");
            if failed > 0 {
                println!("{failed} check(s) failed");
            }
        }
    }
    Ok(if failed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
