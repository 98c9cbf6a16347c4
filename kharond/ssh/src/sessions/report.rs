//! What a dial was like, as a trace tells it (`kharonctl route HOST --trace`): when the chain's
//! sessions were up and how long each hop took to come up. Plain data, copied out of the chain, so
//! that a caller learns how its channel came to be without holding or naming the sessions.

use std::time::{Duration, Instant};

/// How the chain under a [`Tunnel`](crate::Tunnel) came up.
#[derive(Debug, Clone)]
pub struct DialReport {
    /// When the whole chain was up. Before the request that opened the channel: the session was
    /// reused; after it: the chain was dialled for it.
    pub established: Instant,
    /// Each hop's set-up times, first to last.
    pub hops: Vec<HopTiming>,
}

/// How long one hop took to come up when the chain was dialled.
#[derive(Debug, Clone)]
pub struct HopTiming {
    /// "user@host:port".
    pub hop: String,
    /// TCP connect, a channel through the previous hop, or a ProxyCommand's start.
    pub transport: Duration,
    /// Key exchange and host key check.
    pub handshake: Duration,
    pub auth: Duration,
}
