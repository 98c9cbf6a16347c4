//! `kharonctl config`: the effective settings and where each came from (default, config file,
//! environment variable, commodore's `.env` file or flag), as `kharon_config` merged them, and where the cluster commands
//! read their clusters from (inventory file, cache, or kharond's table), with the provider's
//! domains those clusters show (`kharon_routing::provider`). The SOCKS password and commodore's static
//! token are never shown, only whether one is set.

use std::process::ExitCode;

use kharon_config::{Config, Setting, Source, SshWindow};
use kharon_routing::cache;
use kharon_routing::provider::ProviderDomains;
use kharon_routing::trust::ProviderWhy;
use serde::Serialize;

use crate::catalog::Catalog;
use crate::context::Context;
use crate::lieutenant::oidc::store;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
}

#[derive(Serialize)]
struct Row {
    setting: &'static str,
    /// `None` when unset.
    value: Option<String>,
    source: String,
}

fn row<T>(setting: &'static str, s: &Setting<T>, show: impl Fn(&T) -> String) -> Row {
    Row { setting, value: Some(show(&s.value)), source: s.source.to_string() }
}

fn opt_row<T>(setting: &'static str, s: &Option<Setting<T>>, show: impl Fn(&T) -> String) -> Row {
    match s {
        Some(s) => row(setting, s, show),
        None => Row { setting, value: None, source: Source::Default.to_string() },
    }
}

/// Where the cluster commands read their clusters from right now ([`Catalog::load`]), or why they
/// cannot: in the table, only that they cannot (a cell is no place for a paragraph); the whole
/// reason and what to do follow below it. JSON has the whole reason in `source`.
fn clusters_row(catalog: &Result<Catalog, crate::catalog::Error>) -> (Row, Option<String>) {
    match catalog {
        Ok(catalog) => (
            Row {
                setting: "clusters",
                value: Some(output::count(catalog.clusters().len() as u64, "cluster")),
                source: catalog.source().to_string(),
            },
            None,
        ),
        Err(e) => {
            let why = kharon_common::errors::chain(e);
            (Row { setting: "clusters", value: None, source: why.clone() }, Some(why))
        }
    }
}

/// The provider's domains: those the config file names, and those the clusters show (a domain
/// that anchors clusters of more than one tenant), as the routing table is compiled from them
/// here. kharond also counts the domains of its jump hosts' ssh_config `HostName`s.
fn providers_row(config: &Config, catalog: Option<&Catalog>) -> Row {
    let anchors = config.anchors();
    let found = match catalog {
        Some(catalog) => ProviderDomains::of_inventory(catalog.clusters(), &anchors),
        None => ProviderDomains::derive(std::iter::empty(), &anchors),
    };
    let shown: Vec<String> = found
        .iter()
        .map(|p| match &p.why {
            ProviderWhy::Tenants { count, .. } => format!("{} ({count} tenants)", p.domain),
            ProviderWhy::Configured => p.domain.clone(),
        })
        .collect();
    let mut sources = Vec::new();
    if !config.provider_domains.value.is_empty() {
        sources.push(config.provider_domains.source.to_string());
    }
    sources.push(match catalog {
        Some(_) => {
            "derived from the clusters' tenants (kharond also counts its jump hosts' HostNames)".to_owned()
        }
        None => "none derived: no clusters".to_owned(),
    });
    Row {
        setting: "provider_domains",
        value: (!shown.is_empty()).then(|| shown.join(", ")),
        source: sources.join("; "),
    }
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let c = &ctx.config;
    let path = |p: &std::path::PathBuf| p.display().to_string();
    let cache_dir = &c.cache_dir.value;
    let derived = |setting: &'static str, value: String| Row {
        setting,
        value: Some(value),
        source: format!("from cache_dir ({})", c.cache_dir.source),
    };
    let catalog = Catalog::load(None, &ctx.config).await;
    let (clusters, clusters_error) = clusters_row(&catalog);
    let providers = providers_row(c, catalog.as_ref().ok());
    let rows = vec![
        Row {
            setting: "config_file",
            value: c.file.as_ref().map(path),
            source: if c.file.is_some() { "read".into() } else { "none found".into() },
        },
        Row {
            setting: "dotenv_file",
            value: c.dotenv_file.as_ref().map(path),
            source: if c.dotenv_file.is_some() {
                "read (commodore's; only for COMMODORE_* variables the environment lacks)".into()
            } else {
                "none found (here or in a parent directory)".into()
            },
        },
        row("lieutenant_url", &c.lieutenant_url, String::clone),
        opt_row("oidc_client", &c.oidc_client, String::clone),
        opt_row("oidc_discovery_url", &c.oidc_discovery_url, String::clone),
        opt_row("api_token", &c.api_token, |_| "(set, not shown)".into()),
        row("passbolt_url", &c.passbolt_url, String::clone),
        row("listen", &c.listen, ToString::to_string),
        opt_row("socks.username", &c.socks_auth, |a| a.username.clone()),
        opt_row("socks.password", &c.socks_auth, |_| "(set, not shown)".into()),
        opt_row("inventory", &c.inventory, path),
        row("ssh_config", &c.ssh_config, path),
        row("control_socket", &c.control_socket, path),
        row("cache_dir", &c.cache_dir, path),
        derived("inventory_cache", path(&cache::path(cache_dir))),
        derived("token_cache", path(&store::path(cache_dir))),
        row("handshake_timeout", &c.handshake_timeout, |d| format!("{}s", d.as_secs())),
        row("connect_timeout", &c.connect_timeout, |d| format!("{}s", d.as_secs())),
        opt_row("max_connections", &c.max_connections, ToString::to_string),
        row("allow_other_users", &c.allow_other_users, ToString::to_string),
        row("ssh_window", &c.ssh_window, |w| match w {
            SshWindow::Adaptive => "adaptive".to_owned(),
            SshWindow::Fixed(bytes) => format!("{} KiB", bytes / 1024),
        }),
        row("answer_wait", &c.answer_wait, |d| format!("{}s", d.as_secs())),
        row("reload_deadline", &c.reload_deadline, |d| format!("{}s", d.as_secs())),
        row("desktop_notifications", &c.desktop_notifications, ToString::to_string),
        Row {
            setting: "dynamic_domains",
            value: (!c.dynamic_domains.value.is_empty()).then(|| c.dynamic_domains.value.join(", ")),
            source: c.dynamic_domains.source.to_string(),
        },
        providers,
        clusters,
    ];
    match args.output {
        Format::Json => output::json(&rows)?,
        Format::Table => {
            let table = output::table(
                &["SETTING", "VALUE", "SOURCE"],
                rows.iter().map(|r| {
                    let source = match (r.setting, &clusters_error) {
                        ("clusters", Some(_)) => "none found (below)".to_owned(),
                        _ => r.source.clone(),
                    };
                    vec![r.setting.to_owned(), r.value.clone().unwrap_or_else(|| "(not set)".into()), source]
                }),
            );
            println!("{table}");
            if let Some(why) = &clusters_error {
                println!("clusters: {}", kharon_common::text::Escaped(why));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
