//! `kharonctl connections`: every connection kharond holds now, like `ss -p` for the proxy: the
//! local client (pid and program), protocol, destination, route (direct, or cluster and jump
//! host), state, bytes each way (live) and age. `--watch` redraws until interrupted.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use kharon_proto::v1 as pb;
use kharon_routing::table::Via;

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

/// A field kharond leaves empty (not known yet, or not to be seen) as "-".
fn text(value: &str) -> String {
    if value.is_empty() { "-".to_owned() } else { value.to_owned() }
}

/// The client's pid, "-" when kharond cannot see the process.
fn pid_text(c: &pb::Connection) -> String {
    if c.pid == 0 { "-".to_owned() } else { c.pid.to_string() }
}

/// The route as one column: "direct", "CLUSTER via JUMPHOST", "-" while not yet routed.
fn route_text(c: &pb::Connection) -> String {
    match (c.route.as_str(), c.cluster.as_str()) {
        ("", _) => "-".to_owned(),
        (direct, _) if direct == Via::Direct.as_str() => direct.to_owned(),
        (jumphost, "") => format!("via {jumphost}"),
        (jumphost, cluster) => format!("{cluster} via {jumphost}"),
    }
}

fn render(rows: &[pb::Connection], wide: bool) -> String {
    if rows.is_empty() {
        return "no connections open".to_owned();
    }
    let age = |r: &pb::Connection| output::age(r.age_ms / 1000);
    if wide {
        let lines = rows.iter().map(|r| {
            vec![
                r.id.to_string(),
                r.client.clone(),
                pid_text(r),
                text(&r.program),
                r.protocol.clone(),
                text(&r.destination),
                text(&r.cluster),
                text(&r.route),
                r.state().word().to_owned(),
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
        output::table(&headers, lines).to_string()
    } else {
        // The client as "pid program": one column, so the table fits a narrow terminal.
        let client = |r: &pb::Connection| match (r.pid, r.program.as_str()) {
            (0, "") => "-".to_owned(),
            (0, program) => program.to_owned(),
            (pid, "") => pid.to_string(),
            (pid, program) => format!("{pid} {program}"),
        };
        let lines = rows.iter().map(|r| {
            vec![
                client(r),
                r.protocol.clone(),
                text(&r.destination),
                route_text(r),
                r.state().word().to_owned(),
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
        // JSON and YAML are the reply as it serializes (kharon_proto::json): a stable
        // interface for scripts.
        let listed = daemon.connections().await?;
        match args.output {
            // Watched, one compact document per line, so a script can read them as they come.
            Listing::Json if args.watch => println!("{}", serde_json::to_string(&listed)?),
            Listing::Json => output::json(&listed)?,
            Listing::Yaml => {
                if args.watch {
                    println!("---");
                }
                output::yaml(&listed)?;
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
                println!("{}", render(&listed.connections, args.output == Listing::Wide));
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
        let r = connection("hop2", "c1");
        assert_eq!(
            (pid_text(&r), text(&r.program), r.state().word()),
            ("-".into(), "-".into(), "half-closed")
        );
        assert_eq!(route_text(&r), "c1 via hop2");
        assert_eq!(route_text(&connection("direct", "")), "direct");
        assert_eq!(route_text(&connection("", "")), "-");
        assert_eq!(route_text(&connection("hop2", "")), "via hop2");
        let table = render(std::slice::from_ref(&r), false);
        assert!(
            table.contains("2.0 KiB") && table.contains("1m 5s") && table.contains("c1 via hop2"),
            "{table}"
        );
        let wide = render(&[r], true);
        assert!(wide.contains("2048") && wide.contains("127.0.0.1:50000"), "{wide}");
        assert_eq!(render(&[], true), "no connections open");
    }
}
