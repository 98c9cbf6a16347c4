//! `kharonctl connections`: every connection kharond holds now, like `ss -p` for the proxy: the
//! local client (pid and program), protocol, destination, route (direct, or cluster and jump
//! host), state, bytes each way (live) and age. `--watch` redraws until interrupted.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use kharon_shared::proto::v1 as pb;
use serde::Serialize;

use crate::context::Context;
use crate::output::{self, Listing};

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  kharonctl connections\n  kharonctl connections --watch\n  \
    kharonctl connections -o wide\n  \
    kharonctl connections -o json | jq '.connections[] | select(.program == \"kubectl\")'\n\n\
    The client's pid and program come from the socket's peer (on Linux, /proc); they show as \
    \"-\" when kharond cannot see the process (another user's, or not on this machine).\n\
    States: handshake (reading the client's request), dialing (connecting to the destination, \
    directly or through the jump host chain), open, half-closed (one side has finished sending).")]
pub struct Args {
    /// Output format: a table, the wide table (every column, exact byte counts), JSON or YAML
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Listing,
    /// Show the list again every --interval until interrupted (JSON and YAML: one document each time)
    #[arg(short, long)]
    pub watch: bool,
    /// Time between two lists with --watch: seconds, or with a unit (500ms, 5s, 1m)
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = interval)]
    pub interval: Duration,
}

/// `--interval`: at least 100 ms (a redraw costs a little), at most an hour.
fn interval(text: &str) -> Result<Duration, String> {
    crate::duration::within(text, Duration::from_millis(100), Duration::from_secs(3600))
}

/// One connection; also the JSON and YAML shape (a stable interface for scripts).
#[derive(Debug, Serialize)]
struct Row {
    id: u64,
    /// The client's address as kharond sees it.
    client: String,
    /// `null` when the process cannot be seen.
    pid: Option<u32>,
    program: Option<String>,
    /// "SOCKS", "CONNECT", "HTTP" (a PAC request) or "unknown" (handshake not done).
    protocol: String,
    /// host:port; `null` during the handshake.
    destination: Option<String>,
    /// "direct" or the jump host alias; `null` until routed.
    route: Option<String>,
    /// The cluster that routes the destination; `null` when direct.
    cluster: Option<String>,
    /// "handshake", "dialing", "open" or "half-closed".
    state: &'static str,
    bytes_up: u64,
    bytes_down: u64,
    age_seconds: f64,
}

#[derive(Debug, Serialize)]
struct Listed {
    connections: Vec<Row>,
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

fn state_name(state: pb::ConnectionState) -> &'static str {
    match state {
        pb::ConnectionState::Handshake => "handshake",
        pb::ConnectionState::Dialing => "dialing",
        pb::ConnectionState::Open => "open",
        pb::ConnectionState::HalfClosed => "half-closed",
        pb::ConnectionState::Unspecified => "unknown",
    }
}

fn row(c: pb::Connection) -> Row {
    let state = state_name(c.state());
    Row {
        id: c.id,
        client: c.client,
        pid: (c.pid != 0).then_some(c.pid),
        program: non_empty(c.program),
        protocol: c.protocol,
        destination: non_empty(c.destination),
        route: non_empty(c.route),
        cluster: non_empty(c.cluster),
        state,
        bytes_up: c.bytes_up,
        bytes_down: c.bytes_down,
        age_seconds: c.age_ms as f64 / 1000.0,
    }
}

/// The route as one column: "direct", "CLUSTER via JUMPHOST", "-" while not yet routed.
fn route_text(r: &Row) -> String {
    match (&r.route, &r.cluster) {
        (None, _) => "-".to_owned(),
        (Some(route), _) if route == "direct" => route.clone(),
        (Some(jumphost), Some(cluster)) => format!("{cluster} via {jumphost}"),
        (Some(jumphost), None) => format!("via {jumphost}"),
    }
}

fn text(value: Option<&String>) -> String {
    value.cloned().unwrap_or_else(|| "-".to_owned())
}

fn render(rows: &[Row], wide: bool) -> String {
    if rows.is_empty() {
        return "no connections open".to_owned();
    }
    let pid = |r: &Row| r.pid.map_or_else(|| "-".to_owned(), |p| p.to_string());
    let age = |r: &Row| output::age(r.age_seconds as u64);
    if wide {
        let lines = rows.iter().map(|r| {
            vec![
                r.id.to_string(),
                r.client.clone(),
                pid(r),
                text(r.program.as_ref()),
                r.protocol.clone(),
                text(r.destination.as_ref()),
                text(r.cluster.as_ref()),
                text(r.route.as_ref()),
                r.state.to_owned(),
                r.bytes_up.to_string(),
                r.bytes_down.to_string(),
                age(r),
            ]
        });
        let headers = [
            "id",
            "client",
            "pid",
            "program",
            "proto",
            "destination",
            "cluster",
            "route",
            "state",
            "bytes up",
            "bytes down",
            "age",
        ];
        output::wide_table(&headers, lines).to_string()
    } else {
        // The client as "pid program": one column, so the table fits 80 columns.
        let client = |r: &Row| match (r.pid, &r.program) {
            (Some(pid), Some(program)) => format!("{pid} {program}"),
            (Some(pid), None) => pid.to_string(),
            (None, Some(program)) => program.clone(),
            (None, None) => "-".to_owned(),
        };
        let lines = rows.iter().map(|r| {
            vec![
                client(r),
                r.protocol.clone(),
                text(r.destination.as_ref()),
                route_text(r),
                r.state.to_owned(),
                output::bytes(r.bytes_up),
                output::bytes(r.bytes_down),
                age(r),
            ]
        });
        let headers = ["client", "proto", "destination", "route", "state", "up", "down", "age"];
        let mut table = output::table(&headers, lines);
        // Short words, the route and numbers stay whole; the client and destination fold.
        output::keep_whole(&mut table, &[1, 3, 4, 5, 6, 7]);
        table.to_string()
    }
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let mut daemon = ctx.daemon().await?;
    let redraw = args.watch
        && std::io::stdout().is_terminal()
        && matches!(args.output, Listing::Table | Listing::Wide);
    loop {
        let listed = daemon.connections().await?;
        let rows: Vec<Row> = listed.connections.into_iter().map(row).collect();
        match args.output {
            // Watched, one compact document per line, so a script can read them as they come.
            Listing::Json if args.watch => {
                println!("{}", serde_json::to_string(&Listed { connections: rows })?)
            }
            Listing::Json => output::json(&Listed { connections: rows })?,
            Listing::Yaml => {
                if args.watch {
                    println!("---");
                }
                output::yaml(&Listed { connections: rows })?;
            }
            Listing::Table | Listing::Wide => {
                if redraw {
                    // Clear the screen and start at the top, as watch(1) does.
                    print!("\x1b[H\x1b[2J");
                    println!(
                        "every {}: kharonctl connections (Ctrl-C to stop)\n",
                        crate::duration::show(args.interval)
                    );
                } else if args.watch {
                    println!();
                }
                println!("{}", render(&rows, args.output == Listing::Wide));
            }
        }
        if !args.watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(args.interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection(route: &str, cluster: &str) -> pb::Connection {
        pb::Connection {
            id: 7,
            client: "127.0.0.1:50000".into(),
            pid: 0,
            program: String::new(),
            protocol: "SOCKS".into(),
            destination: "api.c1.example:443".into(),
            route: route.into(),
            cluster: cluster.into(),
            state: pb::ConnectionState::HalfClosed.into(),
            bytes_up: 10,
            bytes_down: 2048,
            age_ms: 65_000,
        }
    }

    #[test]
    fn a_row_says_what_is_unknown_and_names_the_route() {
        let r = row(connection("hop2", "c1"));
        assert_eq!((r.pid, r.program.as_deref(), r.state), (None, None, "half-closed"));
        assert_eq!(route_text(&r), "c1 via hop2");
        assert_eq!(route_text(&row(connection("direct", ""))), "direct");
        assert_eq!(route_text(&row(connection("", ""))), "-");
        let table = render(&[r], false);
        assert!(
            table.contains("2.0 KiB") && table.contains("1m 5s") && table.contains("c1 via hop2"),
            "{table}"
        );
        let wide = render(&[row(connection("hop2", "c1"))], true);
        assert!(wide.contains("2048") && wide.contains("127.0.0.1:50000"), "{wide}");
        assert_eq!(render(&[], true), "no connections open");
    }
}
