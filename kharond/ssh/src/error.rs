//! Every way the SSH engine fails, and what each means for the client.
//!
//! # Error mapping (what the client sees, via `target::Unreachable::from`)
//! - the target refused by the last hop (`ConnectFailed` with "Connection refused") →
//!   `ConnectionRefused`; any other `ConnectFailed` (no such name, no route) → `HostUnreachable`;
//! - `AdministrativelyProhibited` (sshd `PermitOpen`, `AllowTcpForwarding no`) → `PermissionDenied`;
//! - any hop failing (unreachable, refused host key, authentication, session died, ssh_config
//!   that cannot be used) → `NetworkUnreachable`: the *path* is broken, not the target;
//! - anything that ran out of time → `TimedOut`;
//! - a jump host waiting for a person (a question open, or a login nobody finished) →
//!   `NetworkUnreachable`, as any hop that cannot be passed.

use std::io::ErrorKind;
use std::sync::Arc;
use std::time::Duration;

use russh::ChannelOpenFailure;

use crate::login::desk::Question;
use crate::sessions::chain;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] kharon_ssh_config::Error),
    /// The ssh config gives this jump host no chain (resolved at start or reload, see `Refusal`).
    #[error("jump host {jumphost} cannot be used: {reason}")]
    Refused { jumphost: String, reason: String },
    #[error("cannot reach jump host {jumphost}")]
    Dial { jumphost: String, source: Box<chain::Error> },
    /// `last_error` names the jump host already (every dial error does).
    #[error("{last_error} (failed recently; next attempt in {retry_in:.1?})")]
    Backoff { jumphost: String, last_error: String, kind: ErrorKind, retry_in: Duration },
    #[error("{}", target_failure(jumphost, host, *port, reason, description.as_deref()))]
    Target {
        jumphost: String,
        host: String,
        port: u16,
        reason: ChannelOpenFailure,
        description: Option<String>,
    },
    #[error("session to jump host {jumphost} failed while opening {host}:{port}")]
    Session { jumphost: String, host: String, port: u16, source: Box<russh::Error> },
    #[error("jump host {jumphost}: {what} took longer than {after:?}")]
    Timeout { jumphost: String, what: &'static str, after: Duration },
    /// A hop asked a person, and the login failed for want of an answer: `why` is that failure
    /// (it says what to do). No dial is made until someone logs in.
    #[error(
        "jump host {jumphost} waits for a person to log in, and connections through it fail until then: {why}"
    )]
    LoginRequired { jumphost: String, why: String },
    /// A hop asks a person now, and this caller does not wait for the answer
    /// ([`Patience::Report`](super::Patience::Report)).
    #[error(
        "jump host {jumphost} waits for a person: {question}; answer with `kharonctl login-jump {jumphost}`"
    )]
    Asking { jumphost: String, question: Arc<Question> },
}

/// What a refused channel at the last hop means, and for a refusal of forwarding, where sshd
/// decides it: the user cannot fix this on their side, the jump host's admin can.
fn target_failure(
    jumphost: &str,
    host: &str,
    port: u16,
    reason: &ChannelOpenFailure,
    description: Option<&str>,
) -> String {
    let said = description.filter(|d| !d.is_empty()).map(|d| format!(": {d}")).unwrap_or_default();
    match reason {
        ChannelOpenFailure::AdministrativelyProhibited => format!(
            "jump host {jumphost} refuses to forward to {host}:{port} (administratively prohibited{said}): its \
             sshd allows no TCP forwarding there (AllowTcpForwarding no, a PermitOpen list without this target, \
             or a restrict/permitopen option on your key); `ssh -W {host}:{port} {jumphost}` is refused the \
             same way"
        ),
        ChannelOpenFailure::ConnectFailed => {
            format!("jump host {jumphost} cannot connect to {host}:{port} (connect failed{said})")
        }
        other => format!(
            "jump host {jumphost} cannot open a channel to {host}:{port} ({}{said})",
            chain::reason_words(other)
        ),
    }
}

impl Error {
    /// How the failure looks from the SOCKS client's side (see the module doc).
    pub fn io_kind(&self) -> ErrorKind {
        match self {
            Error::Config(_)
            | Error::Refused { .. }
            | Error::Session { .. }
            | Error::LoginRequired { .. }
            | Error::Asking { .. } => ErrorKind::NetworkUnreachable,
            Error::Dial { source, .. } if source.kind.is_timeout() => ErrorKind::TimedOut,
            Error::Dial { .. } => ErrorKind::NetworkUnreachable,
            Error::Backoff { kind, .. } => *kind,
            Error::Target { reason: ChannelOpenFailure::AdministrativelyProhibited, .. } => {
                ErrorKind::PermissionDenied
            }
            Error::Target { reason: ChannelOpenFailure::ConnectFailed, description, .. }
                if description.as_deref().is_some_and(|d| d.to_ascii_lowercase().contains("refused")) =>
            {
                ErrorKind::ConnectionRefused
            }
            Error::Target { .. } => ErrorKind::HostUnreachable,
            Error::Timeout { .. } => ErrorKind::TimedOut,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(reason: ChannelOpenFailure, description: &str) -> Error {
        Error::Target {
            jumphost: "j".into(),
            host: "h".into(),
            port: 1,
            reason,
            description: Some(description.into()),
        }
    }

    #[test]
    fn target_failures_map_to_socks_meaningful_kinds() {
        assert_eq!(
            target(ChannelOpenFailure::ConnectFailed, "Connection refused").io_kind(),
            ErrorKind::ConnectionRefused
        );
        assert_eq!(
            target(ChannelOpenFailure::ConnectFailed, "Name or service not known").io_kind(),
            ErrorKind::HostUnreachable
        );
        assert_eq!(
            target(ChannelOpenFailure::AdministrativelyProhibited, "open failed").io_kind(),
            ErrorKind::PermissionDenied
        );
        let t = Error::Timeout { jumphost: "j".into(), what: "x", after: Duration::from_secs(1) };
        assert_eq!(t.io_kind(), ErrorKind::TimedOut);
    }
}
