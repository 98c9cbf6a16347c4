//! [`Meter`]: measures one jump host's path while its channels carry data, and keeps the window
//! its sessions should have (`window::PathWindow`, the rule itself).
//!
//! # What it measures, and when
//! While bytes flow, a task pings the chain's newest session with `keepalive@openssh.com`
//! want-reply (`send_ping`): the last hop answers, so the answer waits behind every byte queued on
//! the path (window.rs, "The signal"). Between two pings it reads how many bytes the jump host's
//! channels moved, both ways (`tunnel::Counters`): the delivery rate. One ping at a time, then
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

/// Bytes moved so far through a jump host's channels, both ways.
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

    /// The window for a session of this path whose last hop is `rtt` away unloaded (as dialled):
    /// the measured one once there is one, else `assumed`. The round trip seeds the rule's minimum.
    pub fn window_for_dial(&self, rtt: Option<Duration>, assumed: u32) -> u32 {
        if let Some(pinned) = pinned() {
            return pinned;
        }
        let mut rule = self.rule();
        let rule = rule.get_or_insert_with(|| PathWindow::new(assumed));
        if let Some(rtt) = rtt {
            rule.seed(self.born.elapsed(), rtt);
        }
        if rule.settled() { rule.window() } else { assumed }
    }

    /// The measured window, once the rule has measured one.
    pub fn measured(&self) -> Option<u32> {
        pinned().or_else(|| self.rule().as_ref().filter(|r| r.settled()).map(PathWindow::window))
    }

    /// Makes `session` the one the task pings (the newest session of the path).
    pub fn follow(&self, session: Weak<dyn Probe>) {
        *self.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session);
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
