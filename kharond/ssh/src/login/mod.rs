//! Logging in to one hop: whether the server is the jump host the user trusts, and proving the
//! user is who the jump host lets in.
//!
//! Owns: host key and host certificate checks against known_hosts (`known_hosts`), the key
//! exchange's algorithm lists ordered by what known_hosts holds and a mismatch in ssh's words
//! (`negotiation`), public-key authentication with the agent and key files (`auth`), and what a
//! person must answer besides (`prompt`: keyboard-interactive and password; `desk`: where a
//! question waits for its answer; `askpass`: the user's SSH_ASKPASS program).
//! Knows nothing of sessions being shared or of how the transport was made.

pub(crate) mod askpass;
pub(crate) mod auth;
pub(crate) mod desk;
pub(crate) mod known_hosts;
pub(crate) mod negotiation;
pub(crate) mod prompt;
