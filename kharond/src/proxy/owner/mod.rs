//! Who may use the proxy without a password: only the user kharond runs as.
//!
//! Without `[socks] username` and `password` the listener is loopback only, but every local user
//! reaches loopback: another user of the machine would use the engineer's SSH identity into every
//! customer network, and the jump hosts would log them as the engineer. So a password-less kharond
//! asks the kernel, for each client, which user owns the client's end of the exact connection
//! ([`OwnerOnly::admits`]), and answers any other user's request with SOCKS "not allowed" (0x02)
//! or HTTP 403, and one WARN per user and minute naming the uid. `allow_other_users = true` in the
//! config file turns the check off; with a password there is none (the password decides), but the
//! same lookup ([`Uids`]) gives the engineer's own clients a login gate of their own
//! (`credentials.rs`), so that no number of queued guessers can starve them.
//!
//! How the kernel is asked is per system, behind one type with one method (`Kernel::client_uid`)
//! and a constant saying whether it can tell at all (`CHECKS`):
//! - Linux: `sock_diag`, a NETLINK_SOCK_DIAG lookup of the connection's 4-tuple on one netlink
//!   socket opened at start: two system calls, about 3 µs, and only for password-less listeners.
//! - elsewhere: `elsewhere`, nothing is checked yet (said at start, once); that system's own
//!   mechanism goes there.
//!
//! Owns: the decision and its log lines. Must not know: the proxy protocols (the caller answers).

#[cfg(not(target_os = "linux"))]
mod elsewhere;
#[cfg(target_os = "linux")]
mod sock_diag;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing::{info, warn};

/// What the kernel says about a client's end of a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The uid that owns the client's socket.
    Uid(u32),
    /// No such socket: it closed meanwhile, or it is not on this machine's network namespace.
    NotFound,
    /// The lookup failed (why, for the log).
    Failed(String),
}

#[cfg(not(target_os = "linux"))]
use elsewhere as system;
#[cfg(target_os = "linux")]
use sock_diag as system;

/// At most one WARN per refused uid (and one about failed lookups) this often.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// Refused uids remembered for [`WARN_EVERY`]; beyond this many the memory is cleared (a flood of
/// uids is one more line each, never unbounded memory).
const REMEMBERED: usize = 1024;

/// Which uid owns a client's socket, asked of the kernel (per system, module doc).
pub struct Uids {
    me: u32,
    /// Where the kernel is asked; `None` after it could not be opened (tried again next time).
    /// A lookup holds the lock for its two system calls only.
    kernel: Mutex<Option<system::Kernel>>,
}

impl std::fmt::Debug for Uids {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uids").field("me", &self.me).finish_non_exhaustive()
    }
}

impl Uids {
    /// Lookups for a kharond running as `me`, and why the kernel cannot be asked yet (it is tried
    /// again at the next lookup); `None` where this system cannot tell at all.
    pub fn open(me: u32) -> Option<(Self, Option<String>)> {
        if !system::CHECKS {
            return None;
        }
        let (kernel, why) = match system::Kernel::open() {
            Ok(kernel) => (Some(kernel), None),
            Err(why) => (None, Some(why)),
        };
        Some((Uids { me, kernel: Mutex::new(kernel) }, why))
    }

    /// The uid owning the socket at `client` that is connected to our `server` address.
    pub fn client_uid(&self, client: SocketAddr, server: SocketAddr) -> Lookup {
        let mut kernel = self.kernel.lock().unwrap_or_else(PoisonError::into_inner);
        let asked = match &mut *kernel {
            Some(asked) => asked,
            None => match system::Kernel::open() {
                Ok(opened) => kernel.insert(opened),
                Err(why) => return Lookup::Failed(why),
            },
        };
        match asked.client_uid(client, server) {
            Ok(Some(uid)) => Lookup::Uid(uid),
            Ok(None) => Lookup::NotFound,
            Err(why) => {
                // A socket in a bad state is not reused: the next lookup opens a fresh one.
                *kernel = None;
                Lookup::Failed(why)
            }
        }
    }

    /// Whether the client at `client` is provably ours; anything else (another uid, a socket
    /// the kernel does not know, a failed lookup) is not.
    pub fn is_ours(&self, client: SocketAddr, server: SocketAddr) -> bool {
        self.client_uid(client, server) == Lookup::Uid(self.me)
    }
}

/// The check of a password-less kharond: only clients of our own user are served.
#[derive(Debug)]
pub struct OwnerOnly {
    uids: Uids,
    warned: Mutex<Warned>,
}

#[derive(Debug, Default)]
struct Warned {
    uids: HashMap<u32, Instant>,
    failed_lookup: Option<Instant>,
}

/// Why a client is not served, as the HTTP answer and the log say it.
#[derive(Debug, Clone, Copy)]
pub struct NotOurs {
    pub me: u32,
}

impl std::fmt::Display for NotOurs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "because without a [socks] password it serves only the user it runs as (uid {})", self.me)
    }
}

impl OwnerOnly {
    /// The check for a kharond running as `me`, and says at start what it checks; `None` where
    /// this system cannot tell who a client is (said at start too: every local user is served).
    pub fn new(me: u32) -> Option<Self> {
        let Some((uids, why)) = Uids::open(me) else {
            warn!(
                "no [socks] password, and on this system kharond cannot tell which local user a client \
                 is: every local user can use the proxy (and your SSH identity). Set [socks] username \
                 and password in the config file to keep them out"
            );
            return None;
        };
        if let Some(why) = why {
            warn!(
                "{why}: every client will be refused until it can be opened (set a [socks] password or allow_other_users = true)"
            );
        }
        info!(
            "no [socks] password: serving only clients of uid {me} (allow_other_users = true in the \
             config file serves every local user)"
        );
        Some(OwnerOnly { uids, warned: Mutex::new(Warned::default()) })
    }

    pub fn me(&self) -> u32 {
        self.uids.me
    }

    /// Whether the client at `peer`, connected to our `local` address, belongs to us; a refusal is
    /// logged (rate-limited). A lookup that fails refuses: serving a stranger is the worse error.
    pub fn admits(&self, peer: SocketAddr, local: SocketAddr) -> bool {
        match self.uids.client_uid(peer, local) {
            Lookup::Uid(uid) if uid == self.uids.me => true,
            Lookup::Uid(uid) => {
                self.refused_uid(uid);
                false
            }
            Lookup::NotFound => {
                self.failed_lookup("the kernel knows no such connection");
                false
            }
            Lookup::Failed(why) => {
                self.failed_lookup(&why);
                false
            }
        }
    }

    fn refused_uid(&self, uid: u32) {
        let now = Instant::now();
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.uids.get(&uid).is_some_and(|at| now.duration_since(*at) < WARN_EVERY) {
            return;
        }
        if warned.uids.len() >= REMEMBERED {
            warned.uids.clear();
        }
        warned.uids.insert(uid, now);
        drop(warned);
        // The connection's span names the client's address.
        warn!(
            client.uid = uid,
            "refused a client of uid {uid}: without a [socks] password kharond serves only its own user \
             (uid {}); set allow_other_users = true in the config file to serve other local users",
            self.uids.me
        );
    }

    fn failed_lookup(&self, why: &str) {
        let now = Instant::now();
        let mut warned = self.warned.lock().unwrap_or_else(PoisonError::into_inner);
        if warned.failed_lookup.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return;
        }
        warned.failed_lookup = Some(now);
        drop(warned);
        warn!(
            "refused a client whose user cannot be told ({why}): without a [socks] password kharond \
             serves only its own user (uid {})",
            self.uids.me
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn our_own_client_is_ours_and_a_connection_that_does_not_exist_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(server).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let me = kharon_common::paths::uid();
        let owner = OwnerOnly::new(me).expect("Linux can tell");
        assert_eq!(owner.uids.client_uid(peer, server), Lookup::Uid(me));
        assert!(owner.admits(peer, server));
        assert!(owner.uids.is_ours(peer, server));
        // Asked many times: the netlink socket is reused and answers stay right.
        for _ in 0..100 {
            assert_eq!(owner.uids.client_uid(peer, server), Lookup::Uid(me));
        }
        let nobody = SocketAddr::from(([127, 0, 0, 1], 1));
        assert_eq!(owner.uids.client_uid(nobody, server), Lookup::NotFound);
        assert!(!owner.admits(nobody, server));
        assert!(!owner.uids.is_ours(nobody, server));
        let other = OwnerOnly::new(me.wrapping_add(1)).expect("Linux can tell");
        assert!(!other.admits(peer, server), "another uid is refused");
        assert_eq!(
            NotOurs { me: 7 }.to_string(),
            "because without a [socks] password it serves only the user it runs as (uid 7)"
        );
    }

    #[test]
    fn ipv6_clients_are_looked_up_too() {
        let Ok(listener) = std::net::TcpListener::bind("[::1]:0") else {
            panic!("this test needs IPv6 on loopback (::1)");
        };
        let server = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(server).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        let me = kharon_common::paths::uid();
        let (uids, _) = Uids::open(me).expect("Linux can tell");
        assert_eq!(uids.client_uid(peer, server), Lookup::Uid(me));
    }
}
