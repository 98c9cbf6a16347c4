//! The client side: everything between a client's socket and the upstream it asked for.
//!
//! Top to bottom, as a connection meets it:
//! - [`listener`]: the accept loop, the bound on concurrent connections, one task per client and
//!   the drain at shutdown; [`eviction`] picks the unfinished handshake that makes room when every
//!   slot is taken.
//! - [`connection`]: the spine of one client connection (handshake → route → dial → answer →
//!   relay), the one place that strings the other subsystems together.
//! - [`handshake`]: which [`protocol`] the client speaks, from its first byte, under one deadline:
//!   [`socks`] (SOCKS5) or [`http`] (HTTP CONNECT, and `GET /proxy.pac`, rendered by [`pac`]);
//!   [`socks4`] recognises SOCKS4 and 4A only to refuse them in their own protocol.
//!   [`credentials`] checks `[socks]`'s username and password for both (and keeps guessing slow);
//!   [`linger`] closes after an answer without losing it.
//! - [`owner`]: without a password, whether the client belongs to the user kharond runs as (asked
//!   of the kernel per connection); other users are answered "not allowed".
//!
//! Owns: the proxy protocols' bytes, their deadlines and their answers. Must not know: SSH (a
//! routed upstream is a stream [`routing`](crate::routing) dialled, like a direct one) and the
//! control API; what it records about a connection goes to [`observe`](crate::observe).

pub mod connection;
pub mod credentials;
pub mod eviction;
pub mod handshake;
pub mod http;
pub mod linger;
pub mod listener;
pub mod owner;
pub mod pac;
pub mod protocol;
pub mod socks;
pub mod socks4;
