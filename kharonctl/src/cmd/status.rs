//! `kharonctl status`: the daemon, its listener, the inventory and its age, connection counters
//! (with totals per route: direct and each jump host) and the health of every jump host chain:
//! its state, the last error and how long ago it happened (gone once the chain is up again), and
//! the last channel its jump host refused (target, reason, when), and the question a hop asks a
//! person (with the command that answers it); and what kharond's last check
//! found will fail before a connection does (a jump host no Host block names that does not
//! resolve, no credentials), with its age.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use kharon_common::text::Escaped;
use kharon_proto::v1 as pb;
use kharon_routing::cache::NO_INVENTORY_YET;

use crate::context::Context;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn age_of(ms: i64) -> String {
    if ms <= 0 {
        return "unknown".into();
    }
    output::age(u64::try_from((now_ms() - ms) / 1000).unwrap_or(0))
}

/// The live probe of a connected chain: its round trip, or why there is none.
fn probe_text(probe: Option<&pb::chain_status::Probe>) -> String {
    match probe {
        Some(pb::chain_status::Probe::RoundTripUs(us)) => output::millis(*us),
        Some(pb::chain_status::Probe::ProbeFailed(why)) => why.clone(),
        None => String::new(),
    }
}

/// The chain as people read it: each hop "user@host:port", a ProxyCommand transport in front of
/// the hop it reaches.
fn hops_text(c: &pb::ChainStatus) -> String {
    if c.hop_details.is_empty() {
        return c.hops.join(" → ");
    }
    c.hop_details
        .iter()
        .map(|h| {
            let hop = format!("{}@{}:{}", h.user, h.host, h.port);
            if h.proxy_command.is_empty() {
                hop
            } else {
                format!("(ProxyCommand {}) → {hop}", h.proxy_command)
            }
        })
        .collect::<Vec<_>>()
        .join(" → ")
}

/// The last error with its age, "… (12s ago)"; a refused jump host points below the table.
fn last_error_text(c: &pb::ChainStatus) -> String {
    match (c.config_error.is_empty(), c.config_origin.is_empty()) {
        (false, false) => format!("ssh config {} (below)", c.config_origin),
        (false, true) => "ssh config (below)".to_owned(),
        (true, _) if c.last_error.is_empty() => String::new(),
        (true, _) if c.last_error_ms > 0 => format!("{} ({} ago)", c.last_error, age_of(c.last_error_ms)),
        (true, _) => c.last_error.clone(),
    }
}

/// The last refused channel as a cell: "api.example:443: administratively prohibited (open
/// failed), 3m 2s ago".
fn refusal_text(r: Option<&pb::ChannelRefusal>) -> String {
    let Some(r) = r else { return String::new() };
    let said = if r.description.is_empty() { String::new() } else { format!(" ({})", r.description) };
    format!("{}: {}{said}, {} ago", r.target, r.reason, age_of(r.at_ms))
}

/// A question a hop asks a person, and how to answer it: "jump host J asks: hop 1/1 J (…) wants
/// keyboard-interactive after publickey and asks "Code: " (open for 1m 20s more); answer with
/// `kharonctl login-jump J`".
fn question_text(jumphost: &str, q: &pb::JumpQuestion) -> String {
    let left = u64::try_from((q.expires_at_ms - now_ms()).max(0) / 1000).unwrap_or(0);
    format!(
        "jump host {} asks: {} (open for {} more); answer with `kharonctl login-jump {}`",
        Escaped(jumphost),
        Escaped(&q.summary),
        output::age(left),
        Escaped(jumphost)
    )
}

/// The state a person reads: "refused" for a jump host the ssh config gives no chain, whatever
/// the engine's state of it says; else the state's word.
fn chain_state(c: &pb::ChainStatus) -> &'static str {
    if c.config_error.is_empty() { c.state().word() } else { "refused" }
}

/// `status -o json`: the reply as it serializes (`kharon_proto::json`), with each chain's
/// state as the table shows it ([`chain_state`], which takes two fields). Through a
/// `serde_json::Value`, so its keys come out sorted, as they always have.
fn status_json(s: &pb::StatusResponse) -> serde_json::Result<serde_json::Value> {
    let mut value = serde_json::to_value(s)?;
    if let Some(chains) = value.get_mut("chains").and_then(serde_json::Value::as_array_mut) {
        for (shown, chain) in chains.iter_mut().zip(&s.chains) {
            if let Some(shown) = shown.as_object_mut() {
                shown.insert("state".to_owned(), chain_state(chain).into());
            }
        }
    }
    Ok(value)
}

/// "memory: 12.3 MiB resident; heap 3.1 MiB in use of 5.0 MiB", the heap part only where kharond's
/// C library counts it.
fn memory_text(m: &pb::Memory) -> String {
    let resident = format!("memory: {} resident", output::bytes(m.resident_bytes));
    if m.heap_bytes == 0 {
        return resident;
    }
    format!(
        "{resident}; heap {} in use of {}",
        output::bytes(m.heap_in_use_bytes),
        output::bytes(m.heap_bytes)
    )
}

/// One reload as a sentence: when, who asked, what came of it.
fn reload_text(r: &pb::ReloadRecord) -> String {
    let mut text = format!("{} ago ({}): {}", age_of(r.at_ms), Escaped(&r.trigger), r.result().word());
    if !r.error.is_empty() {
        text.push_str(&format!(": {}", Escaped(&r.error)));
    }
    for x in &r.refused {
        text.push_str(&format!("; jump host {} refused: {}", Escaped(&x.jumphost), Escaped(&x.reason)));
    }
    text
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let s = ctx.daemon().await?.status().await?;
    if args.output == Format::Json {
        return output::json(&status_json(&s)?).map(|()| ExitCode::SUCCESS);
    }
    let inv = s.inventory.clone().unwrap_or_default();
    print_daemon(&s);
    print_inventory(&inv);
    print_connections(&s);
    print_inventory_findings(&inv);
    print_reloads(&s);
    print_chains(&s.chains);
    print_preflight(&s);
    Ok(ExitCode::SUCCESS)
}

/// Prints the daemon's lines: version, pid and uptime, its listener, control socket and memory.
fn print_daemon(s: &pb::StatusResponse) {
    println!("kharond {} (pid {}), up {}", Escaped(&s.version), s.pid, output::age(s.uptime_seconds));
    let auth = if s.socks_auth_required { " (username/password required)" } else { "" };
    println!("listening on socks5h://{}{auth}", Escaped(&s.listen_address));
    println!("control socket {}", Escaped(&s.control_socket));
    if let Some(m) = &s.memory {
        println!("{}", memory_text(m));
    }
}

/// Prints the inventory line: where it comes from, what it holds and its age, or that it is missing.
fn print_inventory(inv: &pb::InventoryInfo) {
    if inv.missing {
        println!(
            "inventory: {NO_INVENTORY_YET} ({} {} does not exist; every host goes direct until then)",
            Escaped(&inv.source_kind),
            Escaped(&inv.source_path)
        );
    } else {
        println!(
            "inventory: {} {} — {} ({} routed, {} ignored), {}, {}, data age {}",
            Escaped(&inv.source_kind),
            Escaped(&inv.source_path),
            output::count(inv.clusters_total, "cluster"),
            inv.clusters_routed,
            inv.clusters_ignored,
            output::count(inv.include_suffixes, "suffix"),
            output::count(inv.jumphosts, "jump host"),
            age_of(inv.modified_at_ms)
        );
    }
}

/// Prints the connection counters, and a table of the routes that carried or failed a connection.
fn print_connections(s: &pb::StatusResponse) {
    let conn = s.connections.unwrap_or_default();
    println!(
        "connections: {} open direct, {} open via jump hosts; {} direct and {} routed so far, {} failed",
        conn.open_direct, conn.open_jumphost, conn.total_direct, conn.total_jumphost, conn.failed
    );
    // Only routes that saw something: an idle daemon's status stays short.
    let used: Vec<&pb::RouteTotals> = s.routes.iter().filter(|r| r.total > 0 || r.failed > 0).collect();
    if !used.is_empty() {
        let rows = used.iter().map(|r| {
            vec![
                r.route.clone(),
                r.open.to_string(),
                r.total.to_string(),
                r.failed.to_string(),
                format!("{} / {}", output::bytes(r.bytes_up), output::bytes(r.bytes_down)),
            ]
        });
        println!("{}", output::table(&["route", "open", "since start", "failed", "bytes up/down"], rows));
    }
}

/// Prints what the inventory's last load found: conflicts, warnings and refused claims.
fn print_inventory_findings(inv: &pb::InventoryInfo) {
    for c in &inv.conflicts {
        println!("conflict: {}", crate::daemon::reload_outcome::conflict(c));
    }
    for w in &inv.warnings {
        println!("warning: {}", Escaped(w));
    }
    for r in &inv.refused_claims {
        println!("refused: {}", crate::daemon::reload_outcome::refused_claim(r));
    }
}

/// Prints the last reload, and the last failed one when that is another.
fn print_reloads(s: &pb::StatusResponse) {
    if let Some(last) = &s.last_reload {
        println!("last reload: {}", reload_text(last));
    }
    if let Some(failed) = s.last_failed_reload.as_ref().filter(|f| Some(*f) != s.last_reload.as_ref()) {
        println!("last failed reload: {}", reload_text(failed));
    }
}

/// Prints the table of jump host chains, then why a chain is not used and what a hop asks a person.
fn print_chains(chains: &[pb::ChainStatus]) {
    if chains.is_empty() {
        println!("jump host chains: none used yet (sessions open on first use)");
        return;
    }
    let rows = chains.iter().map(|c| {
        vec![
            c.jumphost.clone(),
            hops_text(c),
            chain_state(c).to_owned(),
            age_of(c.since_ms),
            probe_text(c.probe.as_ref()),
            c.open_channels.to_string(),
            format!("{} / {}", output::bytes(c.bytes_up), output::bytes(c.bytes_down)),
            last_error_text(c),
            refusal_text(c.last_refusal.as_ref()),
        ]
    });
    // Nine columns: a terminal folds them to its width, but the state never.
    let mut table = output::table(
        &[
            "jump host",
            "hops",
            "state",
            "since",
            "round trip",
            "channels",
            "bytes up/down",
            "last error",
            "last refused channel",
        ],
        rows,
    );
    output::keep_whole(&mut table, &[2]);
    println!("{table}");
    for c in chains.iter().filter(|c| !c.config_error.is_empty()) {
        println!("jump host {} is not used: {}", Escaped(&c.jumphost), Escaped(&c.config_error));
    }
    for (c, q) in chains.iter().filter_map(|c| Some((c, c.question.as_ref()?))) {
        println!("{}", question_text(&c.jumphost, q));
    }
}

/// Prints what kharond's last preflight check found will fail, with the check's age.
fn print_preflight(s: &pb::StatusResponse) {
    if let Some(p) = &s.preflight {
        let checked = format!("checked {} ago", age_of(p.checked_at_ms));
        for line in crate::daemon::reload_outcome::preflight_lines(p) {
            println!("warning: {line} ({checked})");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-o json` says "refused" where the table does; the other chains keep their state's word.
    #[test]
    fn a_refused_chain_reads_refused_in_json_as_in_the_table() {
        let s = pb::StatusResponse {
            chains: vec![
                pb::ChainStatus {
                    jumphost: "a".into(),
                    state: pb::ChainState::Idle.into(),
                    config_error: "Match tagged".into(),
                    ..Default::default()
                },
                pb::ChainStatus {
                    jumphost: "b".into(),
                    state: pb::ChainState::Connected.into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        let shown = status_json(&s).unwrap_or_default();
        assert_eq!(shown["chains"][0]["state"], "refused", "{shown}");
        assert_eq!(shown["chains"][1]["state"], "connected", "{shown}");
        assert_eq!(shown["chains"][0]["config_error"], "Match tagged", "{shown}");
        assert!(shown["inventory"].is_null(), "an unset inventory is null: {shown}");
    }

    #[test]
    fn the_last_error_and_refusal_say_how_long_ago() {
        let mut chain = pb::ChainStatus {
            last_error: "hop 1/1 j: cannot connect".into(),
            last_error_ms: now_ms() - 5_000,
            ..Default::default()
        };
        assert_eq!(last_error_text(&chain), "hop 1/1 j: cannot connect (5s ago)");
        chain.last_error_ms = 0;
        assert_eq!(last_error_text(&chain), "hop 1/1 j: cannot connect");
        chain.last_error.clear();
        assert_eq!(last_error_text(&chain), "");
        chain.config_error = "Match tagged".into();
        chain.config_origin = "/home/u/.ssh/config:3".into();
        assert_eq!(last_error_text(&chain), "ssh config /home/u/.ssh/config:3 (below)");

        let refusal = pb::ChannelRefusal {
            target: "api.c1.example:6443".into(),
            reason: "administratively prohibited".into(),
            description: "open failed".into(),
            at_ms: now_ms() - 65_000,
        };
        assert_eq!(
            refusal_text(Some(&refusal)),
            "api.c1.example:6443: administratively prohibited (open failed), 1m 5s ago"
        );
        assert_eq!(refusal_text(None), "");
    }
}
