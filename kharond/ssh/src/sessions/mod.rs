//! The shared sessions: one dialled chain of SSH sessions per jump host, opened on first use,
//! shared by every connection through it, kept alive, doubted after a sleep, and re-dialled when
//! it dies; and each connection's channel as a byte stream.
//!
//! Owns: the pool and its generations (`pool`), one jump host's slot (`slot`: its chain, its
//! session, its state), dialling a chain hop by hop and the russh client handler (`chain`),
//! keepalive and the sleep detector (`keepalive`), what `Status` shows (`health`, `report`), the
//! checks before a first connection (`preflight`), a channel as a stream (`tunnel`), and what the
//! channels send, served in turn (`uplink`).
//! Leaves logging in to `login`, making each hop's transport to `transport`, and how large a
//! window a path's sessions get to `flow`.

pub(crate) mod chain;
pub(crate) mod health;
pub(crate) mod keepalive;
pub(crate) mod pool;
pub(crate) mod preflight;
pub(crate) mod report;
pub(crate) mod slot;
pub(crate) mod tunnel;
pub(crate) mod uplink;
