//! `kharonctl status`: the daemon, its listener, the inventory and its age, connection counters
//! (with totals per route: direct and each jump host) and the health of every jump host chain.

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
                    "since_ms": c.since_ms, "last_error": c.last_error, "open_channels": c.open_channels,
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
            "inventory: {} {} — {} clusters ({} routed, {} ignored), {} suffixes, {} jump hosts, data age {}",
            Escaped(&inv.source_kind),
            Escaped(&inv.source_path),
            inv.clusters_total,
            inv.clusters_routed,
            inv.clusters_ignored,
            inv.include_suffixes,
            inv.jumphosts,
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
        let w = c.winner.clone().unwrap_or_default();
        println!(
            "conflict: {} claimed by several jump hosts; {} ({}) wins",
            Escaped(&c.suffix),
            Escaped(&w.cluster),
            Escaped(&w.jumphost)
        );
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
            let last_error = match (c.config_error.is_empty(), c.config_origin.is_empty()) {
                (true, _) => c.last_error.clone(),
                (false, false) => format!("ssh config {} (below)", c.config_origin),
                (false, true) => "ssh config (below)".to_owned(),
            };
            vec![
                c.jumphost.clone(),
                hops_text(c),
                chain_state(c).to_owned(),
                age_of(c.since_ms),
                probe_text(c.probe.as_ref()),
                c.open_channels.to_string(),
                format!("{} / {}", c.bytes_up, c.bytes_down),
                last_error,
            ]
        });
        println!(
            "{}",
            output::table(
                &[
                    "jump host",
                    "hops",
                    "state",
                    "since",
                    "round trip",
                    "channels",
                    "bytes up/down",
                    "last error"
                ],
                rows
            )
        );
        for c in s.chains.iter().filter(|c| !c.config_error.is_empty()) {
            println!("jump host {} is not used: {}", Escaped(&c.jumphost), Escaped(&c.config_error));
        }
    }
    Ok(ExitCode::SUCCESS)
}
