//! Systems without a lookup of who owns a client's socket: nothing is checked, and
//! [`super::OwnerOnly::new`] says so at start (a WARN: set a `[socks]` password).
//!
//! macOS has no query by 4-tuple like Linux's sock_diag: `getsockopt(LOCAL_PEERCRED)` answers for
//! Unix sockets only, and the `net.inet.tcp.pcblist_n` sysctl that `netstat` reads returns records
//! Apple keeps out of the public SDK. What it has is `observe::peer::macos::holder`: a walk over
//! the processes kharond may inspect (its own user's) for the socket. Found proves "ours"; not
//! found cannot tell another user from a client that closed meanwhile, so a check built on it
//! would refuse both, at a cost of milliseconds per connection (a system call per process and per
//! socket), and it has never run on a Mac. Until it can be measured there, the password is the
//! defence on macOS, and `kharonctl connections` uses the walk only when someone asks.

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
