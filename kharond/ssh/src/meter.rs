//! [`Meter`]: measures one jump host's path while its channels carry data, and keeps the window
//! its sessions should have (`window::PathWindow`, the rule itself).
//!
//! # What it measures, and when
//! While bytes flow, a task pings the chain's newest session with `keepalive@openssh.com`
//! want-reply (`send_ping`): the last hop answers, so the answer waits behind every byte queued on
//! the path (window.rs, "The signal"). Between two pings it reads how many bytes the jump host's
//! channels received (`tunnel::Counters::down`): the delivery rate of the direction our receive
//! window paces. Bytes sent are paced by the far side's window, not ours: counted in, an upload
//! looked like a rate our window had to carry. One ping at a time, then
//! [`GAP`]: about five samples a second on a 50 ms path, a 60-byte request each.
//!
//! The task runs only while there is traffic: a tunnel's pump starts it when data arrives
//! ([`Meter::kick`]), and it ends after an interval that moved less than [`BUSY`]. An idle
//! daemon wakes for nothing (issue 21).
//!
//! # What it cannot do
//! russh 0.65 fixes a client session's receive window for good when the session is made: each
//! channel opens with `client::Config::window_size`, and every CHANNEL_WINDOW_ADJUST tops it up
//! to that same value (russh client/encrypted.rs, `adjust_window_size(…, config.window_size)`).
//! Its `Handler::adjust_window` hook is called, but on the client its answer only sets a field
//! nothing reads (it works on russh's server side). So a new window takes effect with the next
//! session: `slot` replaces the session when the measured window is far from the one it was
//! dialled with, and the channels already open finish on the old one.
//!
//! # A window pinned for a benchmark
//! `KHARON_BENCH_SSH_WINDOW=BYTES` in kharond's environment gives every session that window and
//! turns the measuring off. Not a setting: `bench/shaped.sh` (`PIN_WINDOWS`) measures with it
//! what fixed windows of several sizes do on one path, the rule's figures beside them
//! (docs/ssh-engine.md, "Windows that follow the path").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::window::PathWindow;

/// The pause between one ping's answer and the next ping.
pub const GAP: Duration = Duration::from_millis(100);
/// How long a ping may take; one that takes longer counts as this long (a queue that deep shrinks
/// the window anyway), and the next one is sent.
pub const PING_LIMIT: Duration = Duration::from_secs(3);
/// An interval that moved fewer bytes than this ends the measuring: nothing bulk is flowing.
pub const BUSY: u64 = 64 * 1024;

/// The window `KHARON_BENCH_SSH_WINDOW` pins (module doc), within the rule's bounds; read once.
fn pinned() -> Option<u32> {
    static PINNED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *PINNED.get_or_init(|| {
        let bytes = std::env::var("KHARON_BENCH_SSH_WINDOW").ok()?.trim().parse::<u32>().ok()?;
        let pinned = bytes.clamp(super::window::FLOOR, super::window::CEILING);
        tracing::warn!(
            window_kib = pinned / 1024,
            "KHARON_BENCH_SSH_WINDOW: every SSH window pinned, for a benchmark"
        );
        Some(pinned)
    })
}

/// What the meter pings: a chain's session (`chain::Dialled`).
pub trait Probe: Send + Sync {
    /// A keepalive with want-reply to the last hop: its round trip, `limit` if it took longer,
    /// `None` once the session has ended.
    fn ping(&self, limit: Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send + '_>>;
}

/// Bytes received so far through a jump host's channels: the direction the receive window paces.
pub type Moved = Box<dyn Fn() -> u64 + Send + Sync>;

/// One jump host's path: its window rule, and the task that feeds it.
pub struct Meter {
    rule: Mutex<Option<PathWindow>>,
    running: AtomicBool,
    /// The zero of the rule's clock.
    born: Instant,
    /// The newest session: what the task pings.
    follow: Mutex<Option<Weak<dyn Probe>>>,
    moved: Moved,
}

impl std::fmt::Debug for Meter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meter")
            .field("rule", &*self.rule())
            .field("running", &self.running)
            .finish_non_exhaustive()
    }
}

impl Meter {
    pub fn new(moved: Moved) -> Self {
        Meter {
            rule: Mutex::new(None),
            running: AtomicBool::new(false),
            born: Instant::now(),
            follow: Mutex::new(None),
            moved,
        }
    }

    fn rule(&self) -> std::sync::MutexGuard<'_, Option<PathWindow>> {
        // Plain data: a panic elsewhere leaves nothing half-written that matters.
        self.rule.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The window for a session of a hop of this path: the path's once it has settled, else
    /// `assumed`. The path is its last hop's (`last`): its dial creates the rule with its own
    /// assumption and seeds the minimum round trip with `rtt` (window.rs, "The rule").
    pub fn window_for_dial(&self, rtt: Option<Duration>, last: bool, assumed: u32) -> u32 {
        if let Some(pinned) = pinned() {
            return pinned;
        }
        let mut rule = self.rule();
        if last && rule.is_none() {
            *rule = Some(PathWindow::new(assumed));
        }
        let Some(rule) = rule.as_mut() else { return assumed };
        if let Some(rtt) = rtt.filter(|_| last) {
            rule.seed(self.born.elapsed(), rtt);
        }
        if rule.settled() { rule.window() } else { assumed }
    }

    /// The measured window, once a sample has set one (`PathWindow::measured`).
    pub fn measured(&self) -> Option<u32> {
        pinned().or_else(|| self.rule().as_ref().and_then(PathWindow::measured))
    }

    /// Makes `session` the one the task pings (the newest session of the path), and pings it
    /// once now: a session is new when the link is often quiet (the first use, or a replacement
    /// between two transfers), and then that round trip is nearer the path's own than the dial's
    /// timings, which count a forwarder's connect and sshd's start (window.rs, "The rule").
    /// Measured (`bench/shaped.sh`): 52 ms on a 50 ms path whose first hop's dial took 68 ms; on
    /// a 20 ms path it took 64 ms, as long as the dial, where the quiet end of a download found
    /// 30 ms. A ping that found a queue lowers nothing: the minimum is a minimum.
    pub fn follow(self: &Arc<Self>, session: Weak<dyn Probe>) {
        *self.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session.clone());
        if pinned().is_some() {
            return;
        }
        let meter = self.clone();
        tokio::spawn(async move {
            let Some(probe) = session.upgrade() else { return };
            let Some(rtt) = probe.ping(PING_LIMIT).await.filter(|&rtt| rtt < PING_LIMIT) else { return };
            drop(probe);
            tracing::trace!(rtt_ms = rtt.as_secs_f64() * 1e3, "path round trip of a new session");
            if let Some(rule) = meter.rule().as_mut() {
                rule.seed(meter.born.elapsed(), rtt);
            }
        });
    }

    /// Data arrived: starts measuring unless it is going on. Cheap enough for every packet.
    pub fn kick(self: &Arc<Self>) {
        if pinned().is_some() {
            return;
        }
        if self.running.load(Ordering::Relaxed) || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let meter = self.clone();
        tokio::spawn(async move {
            meter.measure().await;
            meter.running.store(false, Ordering::Release);
        });
    }

    /// Pings while bytes flow; see the module doc.
    async fn measure(&self) {
        let mut moved = (self.moved)();
        match self.rule().as_mut() {
            Some(rule) => rule.begin(self.born.elapsed()),
            None => return,
        }
        loop {
            let probe = self.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            let Some(probe) = probe.and_then(|weak| weak.upgrade()) else { return };
            let Some(rtt) = probe.ping(PING_LIMIT).await else { return };
            drop(probe);
            tokio::time::sleep(GAP).await;
            let now = (self.moved)();
            let delivered = now.saturating_sub(moved);
            moved = now;
            let mut rule = self.rule();
            let Some(rule) = rule.as_mut() else { return };
            if delivered < BUSY {
                // Too little moved to say anything of the path's rate (BBR's application-limited
                // samples): ten small requests would fill the rate filter with their trickle, and
                // a ping that waited for a busy CPU would then shrink the window to it. Their
                // round trip may still be the path's lowest.
                rule.seed(self.born.elapsed(), rtt);
                return;
            }
            let window = rule.observe(self.born.elapsed(), rtt, delivered);
            tracing::trace!(
                rtt_ms = rtt.as_secs_f64() * 1e3,
                delivered,
                window_kib = window / 1024,
                "path sample"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session whose last hop answers after `0`.
    struct Answers(Duration);

    impl Probe for Answers {
        fn ping(&self, _: Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send + '_>> {
            Box::pin(async move {
                tokio::time::sleep(self.0).await;
                Some(self.0)
            })
        }
    }

    fn lowest(meter: &Meter) -> Option<Duration> {
        meter.rule().as_ref().and_then(PathWindow::min_rtt)
    }

    #[test]
    fn the_path_is_its_last_hop_s_the_first_hop_s_dial_assumes_for_itself_only() {
        let meter = Meter::new(Box::new(|| 0));
        let first = meter.window_for_dial(Some(Duration::from_millis(60)), false, 15_000_000);
        assert_eq!(first, 15_000_000);
        assert!(meter.rule().is_none(), "a hop before the last made the path's rule");
        let last = meter.window_for_dial(Some(Duration::from_millis(50)), true, 12_500_000);
        assert_eq!(last, 12_500_000);
        assert_eq!(meter.rule().as_ref().map(PathWindow::window), Some(12_500_000));
        assert_eq!(lowest(&meter), Some(Duration::from_millis(50)));
        assert_eq!(meter.measured(), None, "nothing measured yet");
    }

    #[tokio::test]
    async fn a_new_session_s_first_ping_lowers_the_minimum_its_dial_overstated() {
        let meter = Arc::new(Meter::new(Box::new(|| 0)));
        // The dial took three round trips of a 20 ms path (sshd's start, a forwarder's connect).
        meter.window_for_dial(Some(Duration::from_millis(63)), true, 5_000_000);
        let session: Arc<dyn Probe> = Arc::new(Answers(Duration::from_millis(20)));
        meter.follow(Arc::downgrade(&session));
        for _ in 0..200 {
            if lowest(&meter) != Some(Duration::from_millis(63)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(lowest(&meter), Some(Duration::from_millis(20)));
    }
}
