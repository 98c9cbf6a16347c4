//! `kharonctl route HOST`: how kharond would route a host right now, and which rule decided.
//! With `--trace`: waits for the next connection to HOST and shows it step by step, with times
//! (route decision, each hop's connect and auth or the reused session, channel, reply, first byte).

use std::process::ExitCode;
use std::time::Duration;

use kharon_shared::proto::v1 as pb;
use kharon_shared::text::{Escaped, cell};
use serde::Serialize;

use crate::context::Context;
use crate::daemon::Daemon;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  kharonctl route api.c-example.vshnmanaged.net\n  \
    kharonctl route api.c-example.vshnmanaged.net -o json\n  \
    kharonctl route api.c-example.vshnmanaged.net --trace      # then run kubectl in another terminal\n  \
    kharonctl route api.c-example.vshnmanaged.net --trace --port 6443 --timeout 120\n\n\
    --trace answers \"why is kubectl slow on this cluster\": it shows the next connection to HOST \
    with the time of each step since kharond accepted it, and how long the step took: the route \
    decision, the SSH session (reused, and for how long it has been up; or each hop's TCP connect, \
    SSH handshake and authentication when it is dialled for this connection), the channel at the \
    last hop (or the direct connect), the reply to the client, and the first byte from the server.")]
pub struct Args {
    /// Host name (or IP) as a client would send it, e.g. api.c-example.vshnmanaged.net
    pub host: String,
    /// Output format (with --trace, JSON is one object per step, one a line)
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
    /// Wait for the next connection to HOST and show its steps with times
    #[arg(long)]
    pub trace: bool,
    /// With --trace: only a connection to this port
    #[arg(long, value_name = "PORT", requires = "trace", value_parser = clap::value_parser!(u16).range(1..))]
    pub port: Option<u16>,
    /// With --trace: how long to wait for the connection, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 30, requires = "trace",
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout: u64,
}

/// One step of a trace; also the JSON shape of `route --trace -o json` (one object a line).
#[derive(Debug, Serialize)]
struct Step {
    step: String,
    /// Since kharond accepted the connection.
    at_ms: f64,
    /// How long the step took; `null` for a moment.
    took_ms: Option<f64>,
    detail: String,
}

async fn trace(args: &Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let timeout = Duration::from_secs(args.timeout);
    let mut daemon = ctx.daemon().await?;
    let mut events = daemon.trace(&args.host, args.port.unwrap_or(0), timeout).await?;
    while let Some(event) = Daemon::next_trace_event(&mut events).await? {
        let step = Step {
            at_ms: event.at_us as f64 / 1000.0,
            took_ms: (event.took_us > 0).then(|| event.took_us as f64 / 1000.0),
            step: event.step,
            detail: event.detail,
        };
        match args.output {
            Format::Json => println!("{}", serde_json::to_string(&step)?),
            // Waiting is said on stderr: stdout holds only the connection's steps.
            Format::Table if step.step == "armed" => eprintln!("{} (Ctrl-C to stop)", Escaped(&step.detail)),
            Format::Table => {
                let took = step.took_ms.map(|ms| format!("({ms:.1} ms)")).unwrap_or_default();
                let (name, detail) = (cell(&step.step), Escaped(&step.detail));
                println!("{:>10.1} ms  {name:<10} {took:<12} {detail}", step.at_ms);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
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
    if args.trace {
        return trace(&args, ctx).await;
    }
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
                "{} → jump host {} (cluster {})\n  {}",
                Escaped(&answer.host),
                Escaped(jumphost),
                Escaped(answer.cluster.as_deref().unwrap_or("?")),
                Escaped(&answer.reason)
            ),
            None => println!("{} → direct\n  {}", Escaped(&answer.host), Escaped(&answer.reason)),
        },
    }
    Ok(ExitCode::SUCCESS)
}
