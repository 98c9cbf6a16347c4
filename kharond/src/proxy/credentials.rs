//! The one credentials check for every proxy protocol: SOCKS5's RFC 1929 username/password and
//! HTTP CONNECT's `Proxy-Authorization: Basic` both end here, against `[socks]` in the config.
//!
//! The configured username and password are hashed once, when the daemon starts ([`Credentials`]);
//! an authentication hashes only what the client sent.
//!
//! # Guessing is slow and visible
//! Without a bound, one local program could guess 10,000 passwords a second. So every check goes
//! through one gate, in the order the clients arrived ([`Credentials::check`]): a right password
//! passes it at once, a wrong one holds it for [`WRONG_GUESS_HOLD`] after its answer. At most 10
//! wrong guesses are answered in any second, however many connections a guesser opens. The gate is
//! taken *before* the password is compared, so no answer comes sooner for a right password than for
//! a wrong one: closing a connection that has not been answered yet tells a guesser nothing. The
//! right password keeps working meanwhile, behind the guesses that arrived before it (one hold
//! each). Failed logins are logged at WARN, at most one line per [`WARN_EVERY`] with the count of
//! those in between.
//!
//! A queue that every login shares can be filled: about a hundred waiting guesses (ten seconds of
//! holds) would make the engineer's own login outlast the handshake timeout. So the clients whose
//! socket belongs to kharond's own user (asked of the kernel, as for a password-less kharond:
//! [`Uids`]) pass a gate of their own, and only each other's guesses hold it; everyone else (other
//! local users, other machines, and everyone where the kernel cannot tell) shares the other gate.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kharon_common::Secret;
use kharon_config::SocksAuth;

use crate::proxy::owner::Uids;
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::warn;

type Digest = [u8; 32];

/// How long a wrong guess keeps the gate shut after its answer: a little over a tenth of a second,
/// so that no second, wherever it starts, holds more than 10 answers to wrong guesses.
pub const WRONG_GUESS_HOLD: Duration = Duration::from_millis(101);

/// At most one WARN about failed logins this often.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// `[socks]` username and password as SHA-256 digests, the form `matches()` compares, and the
/// gates every check of them passes. Clones share the gates.
#[derive(Debug, Clone)]
pub struct Credentials {
    username: Secret<Digest>,
    password: Secret<Digest>,
    gates: Arc<Gates>,
}

/// Who asks: the client's address and the listener address it reached (the connection's two
/// ends, which tell the kernel whose socket it is).
#[derive(Debug, Clone, Copy)]
pub struct Caller {
    pub addr: SocketAddr,
    pub local: SocketAddr,
}

#[cfg(test)]
impl Caller {
    /// A loopback client of a loopback listener, for tests that do not ask the kernel.
    pub const TEST: Caller = Caller {
        addr: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 40000),
        local: SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 12000),
    };
}

/// The engineer's own clients' gate and everyone else's (module doc), and the failed logins.
#[derive(Debug)]
struct Gates {
    own: Gate,
    others: Gate,
    /// Tells the engineer's own clients; `None` where the system cannot (all are others).
    uids: Option<Uids>,
    failures: Mutex<Failures>,
}

/// One check at a time, and a pause after each wrong guess.
#[derive(Debug)]
struct Gate {
    /// One permit; tokio's semaphore hands it out in arrival order.
    turn: Semaphore,
    /// Protected by `turn`: when the next check may compare.
    open_at: Mutex<Option<Instant>>,
}

/// Failed logins since the last WARN.
#[derive(Debug, Default)]
struct Failures {
    warned_at: Option<Instant>,
    since: u64,
    /// A task will tell `since` when [`WARN_EVERY`] after `warned_at` is up.
    told_later: bool,
    /// The client of the latest failure, named in the WARN.
    latest: Option<SocketAddr>,
}

impl Credentials {
    /// `uids` tells the engineer's own clients from others (a gate each); without it all share one.
    pub fn new(auth: &SocksAuth, uids: Option<Uids>) -> Self {
        let gate = || Gate { turn: Semaphore::new(1), open_at: Mutex::new(None) };
        Credentials {
            username: Secret::new(digest(auth.username.as_bytes())),
            password: Secret::new(digest(auth.password.as_bytes())),
            gates: Arc::new(Gates {
                own: gate(),
                others: gate(),
                uids,
                failures: Mutex::new(Failures::default()),
            }),
        }
    }

    /// Whether `username` and `password` are ours, through the caller's gate (module doc): waits
    /// for the checks that arrived there before, and for the hold after a wrong guess, then
    /// compares. The caller answers right away; `caller` names who failed in the log.
    pub async fn check(&self, username: &[u8], password: &[u8], caller: Caller) -> bool {
        let gates = &self.gates;
        let own = gates.uids.as_ref().is_some_and(|uids| uids.is_ours(caller.addr, caller.local));
        let gate = if own { &gates.own } else { &gates.others };
        // Never closed, so acquiring cannot fail; if it did, refusing is the safe answer.
        let Ok(_turn) = gate.turn.acquire().await else { return false };
        let open_at = *gate.open_at.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(open_at) = open_at {
            tokio::time::sleep_until(open_at).await;
        }
        let accepted = matches(self, username, password);
        if !accepted {
            *gate.open_at.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(Instant::now() + WRONG_GUESS_HOLD);
            gates.failed(caller.addr);
        }
        accepted
    }
}

impl Gates {
    /// Counts a failed login and logs it, at most once per [`WARN_EVERY`]; failures in between are
    /// told when that time is up, even if no other failure comes (a burst, then silence).
    fn failed(self: &Arc<Self>, client: SocketAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.since += 1;
        failures.latest = Some(client);
        let now = Instant::now();
        if let Some(at) = failures.warned_at.filter(|at| now.duration_since(*at) < WARN_EVERY) {
            if !failures.told_later {
                failures.told_later = true;
                let gates = Arc::clone(self);
                tokio::spawn(async move {
                    tokio::time::sleep_until(at + WARN_EVERY).await;
                    gates.tell();
                });
            }
            return;
        }
        drop(failures);
        self.tell();
    }

    /// Logs the failures counted since the last WARN, if any, naming the latest one's client.
    fn tell(&self) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.told_later = false;
        let count = std::mem::take(&mut failures.since);
        if count == 0 {
            return;
        }
        failures.warned_at = Some(Instant::now());
        let client = failures.latest.map(|c| c.to_string()).unwrap_or_default();
        drop(failures);
        warn!(
            client.addr = %client,
            "wrong proxy username or password ({count} failed login(s) since the last such warning); \
             a guesser gets at most 10 answers a second"
        );
    }
}

fn digest(bytes: &[u8]) -> Digest {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
    out
}

/// Compares the client's credentials with ours in constant time: the SHA-256 digests are
/// compared, not the bytes, since comparing slices of different lengths returns early and would
/// tell the length; both fields are always compared, so neither tells which one was wrong.
/// [`Credentials::check`] is the gated form every client goes through.
/// Not public beyond the proxy: every caller outside tests goes through the gate.
pub(in crate::proxy) fn matches(expected: &Credentials, username: &[u8], password: &[u8]) -> bool {
    let same = |given: &[u8], wanted: &Secret<Digest>| digest(given).ct_eq(wanted.expose());
    bool::from(same(username, &expected.username) & same(password, &expected.password))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> Credentials {
        Credentials::new(&SocksAuth { username: "kh".into(), password: "s3cret".into() }, None)
    }

    const CLIENT: Caller = Caller::TEST;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wrong_guesses_are_answered_at_most_ten_a_second_and_the_right_one_still_passes() {
        let creds = creds();
        let started = Instant::now();
        let guesses: Vec<_> = (0..12)
            .map(|i| {
                let creds = creds.clone();
                tokio::spawn(async move {
                    let wrong = format!("guess-{i}");
                    let ok = creds.check(b"kh", wrong.as_bytes(), CLIENT).await;
                    (ok, Instant::now())
                })
            })
            .collect();
        // Arrives behind some of the guesses, and still gets in.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(creds.check(b"kh", b"s3cret", CLIENT).await, "the right password is refused");
        let mut answered = Vec::new();
        for guess in guesses {
            let (ok, at) = guess.await.unwrap();
            assert!(!ok);
            answered.push(at);
        }
        answered.sort();
        // 12 wrong answers need at least 11 holds between them.
        let span = answered[11].duration_since(answered[0]);
        assert!(span >= WRONG_GUESS_HOLD * 11, "12 wrong guesses answered within {span:?}");
        for pair in answered.windows(2) {
            assert!(pair[1].duration_since(pair[0]) >= WRONG_GUESS_HOLD, "{:?}", pair[1] - pair[0]);
        }
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_right_password_leaves_the_gate_open() {
        let creds = creds();
        let started = Instant::now();
        for _ in 0..50 {
            assert!(creds.check(b"kh", b"s3cret", CLIENT).await);
        }
        assert!(started.elapsed() < WRONG_GUESS_HOLD, "{:?}", started.elapsed());
        assert!(!creds.check(b"KH", b"s3cret", CLIENT).await);
        assert!(!creds.check(b"kh", b"s3cret!", CLIENT).await);
        assert!(started.elapsed() >= WRONG_GUESS_HOLD);
    }
    /// Twenty queued guesses are two seconds of holds (a hundred would outlast the handshake
    /// timeout): the engineer's own client (its socket ours, asked of the kernel) is answered at
    /// once all the same, while a stranger's right password still waits its turn behind them.
    #[cfg(target_os = "linux")]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_engineers_own_login_never_queues_behind_other_clients_guesses() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let _client = std::net::TcpStream::connect(server).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        let (uids, _) = Uids::open(kharon_common::paths::uid()).expect("Linux can tell");
        let auth = SocksAuth { username: "kh".into(), password: "s3cret".into() };
        let creds = Credentials::new(&auth, Some(uids));
        // A connection the kernel does not know: not provably ours, so it is one of the others.
        let stranger = Caller { addr: SocketAddr::from(([127, 0, 0, 1], 1)), local: server };
        let guesses: Vec<_> = (0..20)
            .map(|i| {
                let creds = creds.clone();
                tokio::spawn(
                    async move { creds.check(b"kh", format!("guess-{i}").as_bytes(), stranger).await },
                )
            })
            .collect();
        // Let them queue: the first holds the gate after its answer.
        tokio::time::sleep(Duration::from_millis(20)).await;

        let started = Instant::now();
        assert!(creds.check(b"kh", b"s3cret", Caller { addr: peer, local: server }).await);
        assert!(started.elapsed() < WRONG_GUESS_HOLD, "our own login waited {:?}", started.elapsed());
        assert!(creds.check(b"kh", b"s3cret", stranger).await);
        assert!(started.elapsed() >= WRONG_GUESS_HOLD * 19, "a stranger jumped the queue");
        for guess in guesses {
            assert!(!guess.await.unwrap());
        }
    }
}
