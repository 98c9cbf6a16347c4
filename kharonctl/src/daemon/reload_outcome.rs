//! What a reload left out, and what will fail although it went in, told the same way by `reload`
//! and `update` (and `status`, for the names the table refuses).

use kharon_common::text::Escaped;
use kharon_proto::v1 as pb;

/// Says on stderr what a partial reload left out; `Some` if it was partial.
pub(crate) fn partial(reply: &pb::ReloadResponse) -> Option<()> {
    if !reply.ssh_config_error.is_empty() {
        eprintln!(
            "partial reload: the ssh config was not reloaded, the one read before stays in force: {}",
            Escaped(&reply.ssh_config_error)
        );
    }
    for r in &reply.refused {
        let at = if r.origin.is_empty() { String::new() } else { format!(" ({})", Escaped(&r.origin)) };
        eprintln!(
            "partial reload: jump host {}{at} is refused by the ssh config; connections through it fail: {}",
            Escaped(&r.jumphost),
            Escaped(&r.reason)
        );
    }
    (!reply.ssh_config_error.is_empty() || !reply.refused.is_empty()).then_some(())
}

/// Says on stderr what kharond's check after the reload found will fail: jump hosts no Host block
/// names that do not resolve, and no credentials any jump host would take. Not a partial reload
/// (everything is in force), so it changes no exit code.
pub(crate) fn warnings(reply: &pb::ReloadResponse) {
    for line in reply.preflight.iter().flat_map(preflight_lines) {
        eprintln!("warning: {line}");
    }
}

/// What kharond's check found, a line each, escaped: as `reload`, `update` and `status` say it.
pub(crate) fn preflight_lines(found: &pb::Preflight) -> Vec<String> {
    let mut lines: Vec<String> = found
        .unresolved
        .iter()
        .map(|u| format!("jump host {}: {}", Escaped(&u.jumphost), Escaped(&u.reason)))
        .collect();
    if !found.credentials.is_empty() {
        lines.push(Escaped(&found.credentials).to_string());
    }
    lines
}

/// A name the routing table refuses, in the words of `update` and kharond's log
/// ([`kharon_routing::trust::refusal_text`]); escaped, since all of it is data.
pub(crate) fn refused_claim(r: &pb::RefusedClaim) -> String {
    Escaped(&kharon_routing::trust::refusal_text(&r.cluster, &r.fact, &r.value, &r.reason)).to_string()
}

/// A suffix several jump hosts claim and which one wins, as `reload` and `status` say it.
pub(crate) fn conflict(c: &pb::Conflict) -> String {
    let winner = c.winner.clone().unwrap_or_default();
    format!(
        "{} is claimed by several jump hosts; {} ({}) wins",
        Escaped(&c.suffix),
        Escaped(&winner.cluster),
        Escaped(&winner.jumphost)
    )
}

/// One cluster's changes as `update` and `reload` say them, a line each, escaped (all of it is
/// inventory data): `+ route`, `- route`, `! refused`.
pub(crate) fn change_lines(change: &pb::ClusterChange) -> Vec<String> {
    let cluster = Escaped(&change.cluster);
    let route =
        |r: &pb::RouteChange| format!("{} via {} ({cluster})", Escaped(&r.suffix), Escaped(&r.jumphost));
    let mut lines = Vec::new();
    lines.extend(change.added.iter().map(|r| format!("+ route {}", route(r))));
    lines.extend(change.removed.iter().map(|r| format!("- route {}", route(r))));
    lines.extend(change.refused.iter().map(|r| format!("! refused {}", refused_claim(r))));
    lines
}
