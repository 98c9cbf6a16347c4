//! `kharonctl clusters [FILTER] [--tenant T] [-o table|wide|json|yaml]`: the clusters of the
//! catalog, filtered by id glob or substring and tenant.

use std::process::ExitCode;

use kharon_shared::inventory::Cluster;
use serde::Serialize;

use crate::catalog;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    Table,
    /// The table plus console URL and routed state
    Wide,
    Json,
    Yaml,
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

pub fn run(
    all: &[Cluster],
    filter: Option<&str>,
    tenant: Option<&str>,
    format: ListFormat,
) -> anyhow::Result<ExitCode> {
    let rows: Vec<Row> = catalog::filter(all, filter, tenant)
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
    if rows.is_empty() && (filter.is_some() || tenant.is_some()) {
        // An empty table alone reads like a broken listing; say what matched nothing.
        let what: Vec<String> = filter
            .map(|f| format!("the filter {f:?}"))
            .into_iter()
            .chain(tenant.map(|t| format!("tenant {t:?}")))
            .collect();
        let what = what.join(" and ");
        match all.len() {
            0 => eprintln!("kharonctl: there are no clusters to match {what}"),
            1 => eprintln!("kharonctl: the one cluster does not match {what}"),
            n => eprintln!("kharonctl: none of the {n} clusters matches {what}"),
        }
    }
    let dash = |v: Option<&str>| v.unwrap_or("-").to_owned();
    match format {
        ListFormat::Json => crate::output::json(&rows)?,
        ListFormat::Yaml => crate::output::yaml(&rows)?,
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
