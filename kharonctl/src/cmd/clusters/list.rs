//! `kharonctl clusters [FILTER] [--tenant T] [-o table|wide|json|yaml]`: the clusters of the
//! catalog, filtered by id glob or substring and tenant.

use std::process::ExitCode;

use kharon_routing::inventory::Cluster;
use serde::Serialize;

use crate::catalog;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// Id, tenant, jump host and display name: what fits a narrow terminal
    Table,
    /// Every column: distribution, API and console URL too (not folded when piped)
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
    let rows: Vec<Row> = catalog::select(all, filter, tenant)?
        .into_iter()
        .map(|c| Row {
            id: &c.id,
            display_name: c.display_name.as_deref(),
            tenant: &c.tenant,
            distribution: c.fact_str(kharon_routing::inventory::fact::DISTRIBUTION),
            jumphost: c.jumphost(),
            api_url: c.api_url(),
            console_url: c.console_url(),
        })
        .collect();
    let dash = |v: Option<&str>| v.unwrap_or("-").to_owned();
    match format {
        ListFormat::Json => crate::output::json(&rows)?,
        ListFormat::Yaml => crate::output::yaml(&rows)?,
        ListFormat::Table | ListFormat::Wide => {
            let wide = format == ListFormat::Wide;
            // The narrow table is what fits a narrow terminal: URLs have no spaces to fold at, so
            // they are for -o wide (and JSON); the display name goes last, where it folds between
            // words.
            let headers = if wide {
                vec!["ID", "TENANT", "DISTRIBUTION", "JUMPHOST", "API URL", "CONSOLE URL", "DISPLAY NAME"]
            } else {
                vec!["ID", "TENANT", "JUMPHOST", "DISPLAY NAME"]
            };
            let mut table = crate::output::table(
                &headers,
                rows.iter().map(|r| {
                    let jumphost =
                        r.jumphost.unwrap_or(kharon_routing::table::Via::Direct.as_str()).to_owned();
                    if wide {
                        vec![
                            r.id.to_owned(),
                            r.tenant.to_owned(),
                            dash(r.distribution),
                            jumphost,
                            dash(r.api_url),
                            dash(r.console_url),
                            dash(r.display_name),
                        ]
                    } else {
                        vec![r.id.to_owned(), r.tenant.to_owned(), jumphost, dash(r.display_name)]
                    }
                }),
            );
            // Ids are what people copy into the next command: other columns fold, ids never do.
            crate::output::keep_whole(&mut table, &[0]);
            println!("{table}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
