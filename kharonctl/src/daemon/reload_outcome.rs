//! What a reload left out, and what will fail although it went in, told the same way by `reload`
//! and `update` (and `status`, for the names the table refuses).

use kharon_shared::proto::v1 as pb;
use kharon_shared::text::Escaped;

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
/// (everything is in force), so it changes no exit code. Returns how many lines it said.
pub(crate) fn warnings(reply: &pb::ReloadResponse) -> usize {
    let Some(found) = &reply.preflight else { return 0 };
    for u in &found.unresolved {
        eprintln!("warning: jump host {}: {}", Escaped(&u.jumphost), Escaped(&u.reason));
    }
    if !found.credentials.is_empty() {
        eprintln!("warning: {}", Escaped(&found.credentials));
    }
    found.unresolved.len() + usize::from(!found.credentials.is_empty())
}

/// A name the routing table refuses, as `status` and `reload` say it, in the words of `update` and
/// kharond's log (`trust::Refused`): cluster, fact, value, why; escaped, since all of it is data.
pub(crate) fn refused_claim(r: &pb::RefusedClaim) -> String {
    let value = kharon_shared::text::cap(&r.value, kharon_shared::text::MAX_CELL);
    let line = format!("cluster {}: {} {value:?} refused: {}", r.cluster, r.fact, r.reason);
    Escaped(&line).to_string()
}
