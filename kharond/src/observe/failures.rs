//! The one log of failed connections: every connection that fails says why in one line, at INFO,
//! on either route and whatever the client spoke (a name that does not resolve, a jump host that
//! is down, a SOCKS4 or non-SOCKS client, an invalid host name, a malformed HTTP request), so
//! that the default log level answers "why did my client fail?".
//!
//! # Once, and not a flood
//! A client in a retry loop, or a scanner, must not drown the log. So the INFO lines are limited
//! per client address (the client as the network sees it: on loopback every local program shares
//! one, so the rule works per failure too):
//! - the same failure (the same words: same target, same cause) is logged once per [`EVERY`];
//! - at most [`PER_CLIENT`] lines per client address per [`EVERY`], whatever their words.
//!
//! A failure held back is written at DEBUG instead (so `-v` still shows each one), and counted:
//! the next INFO line of that client says how many were held back since the last one. Memory is
//! bounded: at most `CLIENTS` addresses are remembered (beyond that the memory starts over, which
//! costs at most one more line each), each with at most [`PER_CLIENT`] recent failures.
//!
//! What a failure's words are is the caller's ([`Failure`]); whether a failure is one to explain at
//! all ([`Notice`]) too: a client that closes without asking anything, or the 407 challenge of a
//! client that sends its password only when asked, is no failure a person needs to read about,
//! and a wrong password or another user's client has its own WARN (`proxy/credentials.rs`,
//! `proxy/owner`). Every line goes through the log's escaping (`process/logging.rs`): no control
//! character a client sent reaches the log raw.

use std::collections::HashMap;
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tracing::{debug, info};

use crate::routing::dial::Failed;

/// The window of the limits (module doc).
pub const EVERY: Duration = Duration::from_secs(10);
/// INFO lines per client address per [`EVERY`].
pub const PER_CLIENT: usize = 10;
/// Client addresses remembered at most.
const CLIENTS: usize = 1024;

/// How much a failure is worth telling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
    /// Nobody needs to read it: DEBUG (the client went away, or was challenged for a password).
    Quiet,
    /// Its own check logs it at WARN already (a wrong password, another user's client): DEBUG here.
    Warned,
    /// Explained at INFO, within the limits.
    Explain,
}

/// Why a connection failed, as its observers are told.
#[derive(Clone, Copy)]
pub enum Failure<'a> {
    /// Before it had a route: its handshake or request was refused, or the client left.
    Refused { why: &'a dyn fmt::Display, notice: Notice },
    /// On its route: the dial failed. Always explained.
    Dial(&'a Failed),
}

impl Failure<'_> {
    fn notice(&self) -> Notice {
        match self {
            Failure::Refused { notice, .. } => *notice,
            Failure::Dial(_) => Notice::Explain,
        }
    }
}

impl fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Refused { why, .. } => write!(f, "{why}"),
            Failure::Dial(failed) => write!(f, "cannot connect {failed}"),
        }
    }
}

/// The limits' memory (module doc).
#[derive(Debug, Default)]
pub struct FailureLog {
    clients: Mutex<HashMap<IpAddr, Recent>>,
}

/// One client address's INFO lines in the current window.
#[derive(Debug)]
struct Recent {
    since: Instant,
    /// Hashes of the failures logged in this window (at most [`PER_CLIENT`]).
    logged: Vec<u64>,
    /// Failures held back since the last INFO line.
    held: u64,
}

/// Whether a failure is written at INFO.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    /// Yes, with the count of this client's failures held back since its last INFO line.
    Log {
        held: u64,
    },
    Hold,
}

impl FailureLog {
    /// Writes `failure` of the client at `client`: at INFO within the limits, else at DEBUG. The
    /// caller's span names the client and, once known, the target and route.
    pub fn write(&self, client: SocketAddr, failure: &Failure<'_>) {
        if failure.notice() != Notice::Explain {
            debug!("{failure}");
            return;
        }
        let text = failure.to_string();
        match self.judge(client.ip(), &text, Instant::now()) {
            Verdict::Log { held: 0 } => info!("{text}"),
            Verdict::Log { held } => info!(
                "{text} ({held} more failure(s) of this client address held back in the last {} s; \
                 -v logs each)",
                EVERY.as_secs()
            ),
            Verdict::Hold => debug!("{text}"),
        }
    }

    fn judge(&self, client: IpAddr, text: &str, now: Instant) -> Verdict {
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let hash = hasher.finish();
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() >= CLIENTS && !clients.contains_key(&client) {
            clients.clear();
        }
        let recent =
            clients.entry(client).or_insert_with(|| Recent { since: now, logged: Vec::new(), held: 0 });
        if now.duration_since(recent.since) >= EVERY {
            recent.since = now;
            recent.logged.clear();
        }
        if recent.logged.contains(&hash) || recent.logged.len() >= PER_CLIENT {
            recent.held += 1;
            return Verdict::Hold;
        }
        recent.logged.push(hash);
        Verdict::Log { held: std::mem::take(&mut recent.held) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const B: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    #[test]
    fn the_same_failure_is_logged_once_per_window_and_the_held_back_ones_are_counted() {
        let log = FailureLog::default();
        let t0 = Instant::now();
        assert_eq!(log.judge(A, "cannot connect directly: x", t0), Verdict::Log { held: 0 });
        for i in 1..=5 {
            assert_eq!(
                log.judge(A, "cannot connect directly: x", t0 + Duration::from_secs(i)),
                Verdict::Hold
            );
        }
        // Another failure of the same client is news, and says what was held back.
        assert_eq!(log.judge(A, "refused: y", t0 + Duration::from_secs(6)), Verdict::Log { held: 5 });
        // Another client is not held back by this one.
        assert_eq!(
            log.judge(B, "cannot connect directly: x", t0 + Duration::from_secs(6)),
            Verdict::Log { held: 0 }
        );
        // The next window logs it again.
        assert_eq!(log.judge(A, "cannot connect directly: x", t0 + EVERY), Verdict::Log { held: 0 });
    }

    #[test]
    fn a_client_with_many_different_failures_gets_at_most_its_share_of_lines() {
        let log = FailureLog::default();
        let t0 = Instant::now();
        let logged =
            (0..100).filter(|i| log.judge(A, &format!("refused: name {i}"), t0) != Verdict::Hold).count();
        assert_eq!(logged, PER_CLIENT);
        assert_eq!(
            log.judge(A, "refused: later", t0 + EVERY),
            Verdict::Log { held: 100 - PER_CLIENT as u64 }
        );
    }

    #[test]
    fn memory_is_bounded_by_the_number_of_clients() {
        let log = FailureLog::default();
        let t0 = Instant::now();
        for i in 0..(CLIENTS as u32 * 3) {
            log.judge(IpAddr::V4(i.into()), "refused: x", t0);
        }
        assert!(log.clients.lock().unwrap().len() <= CLIENTS);
    }
}
