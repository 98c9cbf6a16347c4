//! Systems without a lookup of who owns a client's socket yet: nothing is checked, and
//! [`super::OwnerOnly::new`] says so at start. A system's own mechanism replaces this file for it
//! (on macOS, e.g., the `net.inet.tcp.pcblist_n` sysctl and the socket's owning process), with
//! the same two items as Linux's `sock_diag.rs`.

use std::net::SocketAddr;

/// Whether this system can tell who owns a client's socket: not yet.
pub const CHECKS: bool = false;

/// Nothing to ask.
pub struct Kernel;

impl Kernel {
    pub fn open() -> Result<Self, String> {
        Ok(Kernel)
    }

    pub fn client_uid(&mut self, _client: SocketAddr, _server: SocketAddr) -> Result<Option<u32>, String> {
        Ok(None)
    }
}
