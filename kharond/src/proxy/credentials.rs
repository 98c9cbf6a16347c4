//! The one credentials check for every proxy protocol: SOCKS5's RFC 1929 username/password and
//! HTTP CONNECT's `Proxy-Authorization: Basic` both end here, against `[socks]` in the config.
//!
//! The configured username and password are hashed once, when the daemon starts ([`Credentials`]);
//! an authentication hashes only what the client sent.
//!
//! # Guessing is slow and visible (issue 33)
//! Without a bound, one local program guessed 10,000 passwords a second. So every check goes
//! through one gate, in the order the clients arrived ([`Credentials::check`]): a right password
//! passes it at once, a wrong one holds it for [`WRONG_GUESS_HOLD`] after its answer. At most 10
//! wrong guesses are answered in any second, however many connections a guesser opens. The gate is
//! taken *before* the password is compared, so no answer comes sooner for a right password than for
//! a wrong one: closing a connection that has not been answered yet tells a guesser nothing. The
//! right password keeps working meanwhile, behind the guesses that arrived before it (one hold
//! each, within the handshake timeout). Failed logins are logged at WARN, at most one line per
//! [`WARN_EVERY`] with the count of those in between.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kharon_shared::Secret;
use kharon_shared::config::SocksAuth;
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

/// `[socks]` username and password as SHA-256 digests, the form [`matches()`] compares, and the
/// gate every check of them passes. Clones share the gate.
#[derive(Debug, Clone)]
pub struct Credentials {
    username: Secret<Digest>,
    password: Secret<Digest>,
    gate: Arc<Gate>,
}

/// One check at a time, and a pause after each wrong guess.
#[derive(Debug)]
struct Gate {
    /// One permit; tokio's semaphore hands it out in arrival order.
    turn: Semaphore,
    /// Protected by `turn`: when the next check may compare.
    open_at: Mutex<Option<Instant>>,
    failures: Mutex<Failures>,
}

/// Failed logins since the last WARN.
#[derive(Debug, Default)]
struct Failures {
    warned_at: Option<Instant>,
    since: u64,
}

impl Credentials {
    pub fn new(auth: &SocksAuth) -> Self {
        Credentials {
            username: Secret::new(digest(auth.username.as_bytes())),
            password: Secret::new(digest(auth.password.as_bytes())),
            gate: Arc::new(Gate {
                turn: Semaphore::new(1),
                open_at: Mutex::new(None),
                failures: Mutex::new(Failures::default()),
            }),
        }
    }

    /// Whether `username` and `password` are ours, through the gate (module doc): waits for the
    /// checks that arrived before, and for the hold after a wrong guess, then compares. The caller
    /// answers right away; `client` names who failed in the log.
    pub async fn check(&self, username: &[u8], password: &[u8], client: SocketAddr) -> bool {
        let gate = &self.gate;
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
            gate.failed(client);
        }
        accepted
    }
}

impl Gate {
    /// Counts a failed login and logs it, at most once per [`WARN_EVERY`].
    fn failed(&self, client: SocketAddr) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.since += 1;
        let now = Instant::now();
        if failures.warned_at.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            return;
        }
        let count = std::mem::take(&mut failures.since);
        failures.warned_at = Some(now);
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
pub fn matches(expected: &Credentials, username: &[u8], password: &[u8]) -> bool {
    let same = |given: &[u8], wanted: &Secret<Digest>| digest(given).ct_eq(wanted.expose());
    bool::from(same(username, &expected.username) & same(password, &expected.password))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds() -> Credentials {
        Credentials::new(&SocksAuth { username: "kh".into(), password: "s3cret".into() })
    }

    const CLIENT: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 40000);

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
}
