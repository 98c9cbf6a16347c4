//! `kharonctl route HOST`: how kharond would route a host right now, and which rule decided.

use std::process::ExitCode;

use kharon_shared::proto::v1 as pb;
use serde::Serialize;

use crate::context::Context;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Host name (or IP) as a client would send it, e.g. api.c-example.vshnmanaged.net
    pub host: String,
    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
}

/// The JSON shape of `route -o json`; field names are a stable interface for scripts.
#[derive(Debug, Serialize)]
struct Answer {
    host: String,
    via: &'static str,
    jumphost: Option<String>,
    cluster: Option<String>,
    suffix: Option<String>,
    rule: String,
    reason: String,
    /// kharond has no inventory yet (`kharonctl update` never ran): everything goes direct.
    inventory_missing: bool,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let reply = ctx.daemon().await?.route(&args.host).await?;
    let via = match reply.via() {
        pb::Via::Jumphost => "jumphost",
        _ => "direct",
    };
    let answer = Answer {
        host: reply.host,
        via,
        jumphost: non_empty(reply.jumphost),
        cluster: non_empty(reply.cluster),
        suffix: non_empty(reply.suffix),
        rule: reply.rule,
        reason: reply.reason,
        inventory_missing: reply.inventory_missing,
    };
    match args.output {
        Format::Json => output::json(&answer)?,
        Format::Table => match &answer.jumphost {
            Some(jumphost) => println!(
                "{} → jump host {jumphost} (cluster {})\n  {}",
                answer.host,
                answer.cluster.as_deref().unwrap_or("?"),
                answer.reason
            ),
            None => println!("{} → direct\n  {}", answer.host, answer.reason),
        },
    }
    Ok(ExitCode::SUCCESS)
}
