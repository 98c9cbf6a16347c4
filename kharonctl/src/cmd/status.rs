//! `kharonctl status`: the daemon, its listener, the inventory and its age, connection counters
//! (with totals per route: direct and each jump host) and the health of every jump host chain:
//! its state, the last error and how long ago it happened (gone once the chain is up again), and
//! the last channel its jump host refused (target, reason, when); and what kharond's last check
//! found will fail before a connection does (a jump host no Host block names that does not
//! resolve, no credentials), with its age.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use kharon_shared::proto::v1 as pb;
use kharon_shared::text::Escaped;
use serde_json::json;

use crate::context::Context;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format
    #[arg(short, long, value_enum, default_value_t)]
    pub output: Format,
}

/// What a daemon whose cache does not exist yet lacks, and the one thing to do about it.
const NO_INVENTORY_YET: &str = "no inventory yet: run `kharonctl update`";

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

fn chain_state(c: &pb::ChainStatus) -> &'static str {
    if c.config_error.is_empty() { state_name(c.state()) } else { "refused" }
}

fn state_name(state: pb::ChainState) -> &'static str {
    match state {
        pb::ChainState::Idle => "idle",
        pb::ChainState::Connecting => "connecting",
        pb::ChainState::Connected => "connected",
        pb::ChainState::Failed => "failed",
        pb::ChainState::Unspecified => "unknown",
    }
}

fn reload_result(r: &pb::ReloadRecord) -> &'static str {
    match r.result() {
        pb::ReloadResult::Ok => "ok",
        pb::ReloadResult::Partial => "partial",
        pb::ReloadResult::Failed => "failed",
        pb::ReloadResult::Unspecified => "unknown",
    }
}

fn reload_json(r: Option<&pb::ReloadRecord>) -> serde_json::Value {
    let Some(r) = r else { return serde_json::Value::Null };
    let refused: Vec<_> = r
        .refused
        .iter()
        .map(|x| json!({"jumphost": x.jumphost, "reason": x.reason, "origin": x.origin}))
        .collect();
    json!({"at_ms": r.at_ms, "trigger": r.trigger, "result": reload_result(r), "error": r.error,
           "refused": refused})
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
    let mut text = format!("{} ago ({}): {}", age_of(r.at_ms), Escaped(&r.trigger), reload_result(r));
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
    let inv = s.inventory.clone().unwrap_or_default();
    let conn = s.connections.unwrap_or_default();
    if args.output == Format::Json {
        let routes: Vec<_> = s
            .routes
            .iter()
            .map(|r| {
                json!({"route": r.route, "open": r.open, "total": r.total, "failed": r.failed,
                       "bytes_up": r.bytes_up, "bytes_down": r.bytes_down})
            })
            .collect();
        let chains: Vec<_> = s
            .chains
            .iter()
            .map(|c| {
                let (round_trip_ms, probe_failed) = match &c.probe {
                    Some(pb::chain_status::Probe::RoundTripUs(us)) => (Some(*us as f64 / 1000.0), None),
                    Some(pb::chain_status::Probe::ProbeFailed(why)) => (None, Some(why)),
                    None => (None, None),
                };
                let details: Vec<_> = c
                    .hop_details
                    .iter()
                    .map(|h| {
                        json!({
                            "alias": h.alias, "user": h.user, "host": h.host, "port": h.port,
                            "identity_files": h.identity_files, "proxy_command": h.proxy_command,
                            "origin": h.origin,
                        })
                    })
                    .collect();
                json!({
                    "jumphost": c.jumphost, "hops": c.hops, "hop_details": details, "state": chain_state(c),
                    "config_error": c.config_error, "config_origin": c.config_origin,
                    "since_ms": c.since_ms, "last_error": c.last_error, "last_error_ms": c.last_error_ms,
                    "last_refusal": c.last_refusal.as_ref().map(|r| json!({
                        "target": r.target, "reason": r.reason, "description": r.description, "at_ms": r.at_ms,
                    })),
                    "open_channels": c.open_channels,
                    "bytes_up": c.bytes_up, "bytes_down": c.bytes_down, "next_retry_ms": c.next_retry_ms,
                    "round_trip_ms": round_trip_ms, "probe_failed": probe_failed,
                })
            })
            .collect();
        let conflicts: Vec<_> = inv
            .conflicts
            .iter()
            .map(|c| {
                let w = c.winner.clone().unwrap_or_default();
                json!({"suffix": c.suffix, "winner": {"cluster": w.cluster, "jumphost": w.jumphost},
                       "shadowed": c.shadowed.iter().map(|x| json!({"cluster": x.cluster, "jumphost": x.jumphost})).collect::<Vec<_>>()})
            })
            .collect();
        return output::json(&json!({
            "version": s.version, "pid": s.pid, "uptime_seconds": s.uptime_seconds,
            "listen_address": s.listen_address, "control_socket": s.control_socket,
            "socks_auth_required": s.socks_auth_required,
            "inventory": {
                "source": inv.source_kind, "path": inv.source_path, "loaded_at_ms": inv.loaded_at_ms,
                "modified_at_ms": inv.modified_at_ms, "clusters_total": inv.clusters_total,
                "clusters_ignored": inv.clusters_ignored, "clusters_routed": inv.clusters_routed,
                "include_suffixes": inv.include_suffixes, "exclude_suffixes": inv.exclude_suffixes,
                "jumphosts": inv.jumphosts, "conflicts": conflicts, "warnings": inv.warnings,
                "missing": inv.missing,
                "refused": inv.refused_claims.iter().map(|r| json!({
                    "cluster": r.cluster, "fact": r.fact, "value": r.value, "reason": r.reason,
                })).collect::<Vec<_>>(),
            },
            "connections": {
                "open_direct": conn.open_direct, "open_jumphost": conn.open_jumphost,
                "total_direct": conn.total_direct, "total_jumphost": conn.total_jumphost,
                "failed": conn.failed, "bytes_up": conn.bytes_up, "bytes_down": conn.bytes_down,
            },
            "routes": routes,
            "chains": chains,
            "last_reload": reload_json(s.last_reload.as_ref()),
            "last_failed_reload": reload_json(s.last_failed_reload.as_ref()),
            "memory": s.memory.map(|m| json!({
                "resident_bytes": m.resident_bytes, "heap_in_use_bytes": m.heap_in_use_bytes,
                "heap_bytes": m.heap_bytes,
            })),
            "preflight": s.preflight.as_ref().map(|p| json!({
                "checked_at_ms": p.checked_at_ms,
                "unresolved": p.unresolved.iter().map(|u| json!({"jumphost": u.jumphost, "reason": u.reason})).collect::<Vec<_>>(),
                "credentials": p.credentials,
            })),
        }))
        .map(|()| ExitCode::SUCCESS);
    }

    println!("kharond {} (pid {}), up {}", Escaped(&s.version), s.pid, output::age(s.uptime_seconds));
    let auth = if s.socks_auth_required { " (username/password required)" } else { "" };
    println!("listening on socks5h://{}{auth}", Escaped(&s.listen_address));
    println!("control socket {}", Escaped(&s.control_socket));
    if let Some(m) = &s.memory {
        println!("{}", memory_text(m));
    }
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
    for c in &inv.conflicts {
        println!("conflict: {}", crate::daemon::reload_outcome::conflict(c));
    }
    for w in &inv.warnings {
        println!("warning: {}", Escaped(w));
    }
    for r in &inv.refused_claims {
        println!("refused: {}", crate::daemon::reload_outcome::refused_claim(r));
    }
    if let Some(last) = &s.last_reload {
        println!("last reload: {}", reload_text(last));
    }
    if let Some(failed) = s.last_failed_reload.as_ref().filter(|f| Some(*f) != s.last_reload.as_ref()) {
        println!("last failed reload: {}", reload_text(failed));
    }
    if s.chains.is_empty() {
        println!("jump host chains: none used yet (sessions open on first use)");
    } else {
        let rows = s.chains.iter().map(|c| {
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
        // Nine columns cannot fold into 80 without breaking "connected" and user@host:port in
        // two: this one is not folded when piped (a terminal still folds it to its width), and
        // its state never is.
        let mut table = output::wide_table(
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
        for c in s.chains.iter().filter(|c| !c.config_error.is_empty()) {
            println!("jump host {} is not used: {}", Escaped(&c.jumphost), Escaped(&c.config_error));
        }
    }
    if let Some(p) = &s.preflight {
        let checked = format!("checked {} ago", age_of(p.checked_at_ms));
        for line in crate::daemon::reload_outcome::preflight_lines(p) {
            println!("warning: {line} ({checked})");
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

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
