//! What a reload left out, told the same way by `reload` and `update`.

/// Says on stderr what a partial reload left out; `Some` if it was partial.
pub(crate) fn partial(reply: &kharon_shared::proto::v1::ReloadResponse) -> Option<()> {
    if !reply.ssh_config_error.is_empty() {
        eprintln!(
            "partial reload: the ssh config was not reloaded, the one read before stays in force: {}",
            reply.ssh_config_error
        );
    }
    for r in &reply.refused {
        let at = if r.origin.is_empty() { String::new() } else { format!(" ({})", r.origin) };
        eprintln!(
            "partial reload: jump host {}{at} is refused by the ssh config; connections through it fail: {}",
            r.jumphost, r.reason
        );
    }
    (!reply.ssh_config_error.is_empty() || !reply.refused.is_empty()).then_some(())
}
