//! The byte streams SSH sessions run over: the first hop's TCP connection (made as `ssh` makes
//! it: `AddressFamily`, `BindAddress`, `BindInterface`) or `ProxyCommand` child, and each later
//! hop's channel of the hop before it.
//!
//! Owns: the first hop's connect (`tcp`) or child process (`proxy_command`), acknowledging at once
//! on our own socket (`quickack`), large reads and gathered writes as russh sees its transport
//! (`gather`), and a nested hop's channel as a transport that never waits on the outer
//! session's loop (`carrier`), and what each of them holds that has not reached the link yet
//! (`backlog`).
//! Knows nothing of the SSH protocol beyond where its packets begin.

pub(crate) mod backlog;
pub(crate) mod carrier;
pub(crate) mod gather;
pub(crate) mod proxy_command;
pub(crate) mod quickack;
pub(crate) mod tcp;
