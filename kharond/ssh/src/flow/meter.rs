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
//! The task runs only while there is traffic: a tunnel's pump starts it once [`BUSY`] bytes have
//! arrived since it last ended ([`Meter::kick`]), and it ends after an interval that moved less
//! than [`BUSY`]. An idle daemon wakes for nothing (issue 21), and small requests send no ping.
//!
//! # How a window changes
//! On the live session, channel by channel. russh 0.65 as published fixes a client session's
//! receive window when the session is made: every CHANNEL_WINDOW_ADJUST tops a channel up to
//! `client::Config::window_size`, and the answer of `Handler::adjust_window`, which russh asks at
//! each adjust, only sets a field nothing on the client reads (russh issue #770; its server side
//! uses it). The vendored russh (vendor/README.md, second change) re-opens each channel to that
//! answer and opens new channels with it. The last hop's handler answers [`Meter::window`], so a
//! new window reaches every channel of the path at its next adjust (every eighth of a window,
//! under load several times per round trip), the transfer that taught it included. A smaller one
//! takes effect as the far side uses up what it was already allowed; nothing is taken back.
//! Before, a new window waited for the next session, and a transfer kept the window it started
//! with: a download that began with the assumed 15 MB behind a 200 Mbit/s link ran its 8 s
//! with small requests beside it at 565-742 ms; now 60 ms (`bench/shaped.sh`, first download).
//!
//! # A window pinned for a benchmark
//! `KHARON_BENCH_SSH_WINDOW=BYTES` in kharond's environment gives every session that window and
//! turns the measuring off. Not a setting: `bench/shaped.sh` (`PIN_WINDOWS`) measures with it
//! what fixed windows of several sizes do on one path, the rule's figures beside them
//! (docs/ssh-engine.md, "Windows that follow the path").

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::flow::window::PathWindow;

/// The pause between one ping's answer and the next ping.
pub const GAP: Duration = Duration::from_millis(100);
/// How long a ping may take; one that takes longer counts as this long (a queue that deep shrinks
/// the window anyway), and the next one is sent.
pub const PING_LIMIT: Duration = Duration::from_secs(3);
/// An interval that moved fewer bytes than this ends the measuring: nothing bulk is flowing.
pub const BUSY: u64 = 64 * 1024;
/// Pings of a quiet path, [`GAP`] apart, of which the lowest seeds the minimum round trip: a new
/// session's, and the end of a busy spell's. One was not enough: a new session's first answer
/// took 64 ms on a 20 ms path in one run (22 ms in another), and the end of a download found
/// 30-40 ms while the queue drained (`bench/shaped.sh`, traced).
pub const QUIET_PINGS: usize = 3;

/// The window `KHARON_BENCH_SSH_WINDOW` pins (module doc), within the rule's bounds; read once.
fn pinned() -> Option<u32> {
    static PINNED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *PINNED.get_or_init(|| {
        let bytes = std::env::var("KHARON_BENCH_SSH_WINDOW").ok()?.trim().parse::<u32>().ok()?;
        let pinned = bytes.clamp(crate::flow::window::FLOOR, crate::flow::window::CEILING);
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
    /// What [`Meter::moved`] read when the task last ended: the task starts again only once
    /// [`BUSY`] more has arrived (see [`Meter::kick`]).
    moved_when_ended: AtomicU64,
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
            moved_when_ended: AtomicU64::new(0),
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

    /// The window the path's channels should have now (the last hop's handler hands it to the
    /// vendored russh at every window adjust: "How a window changes"); `None` until the last
    /// hop's dial made the rule.
    pub fn window(&self) -> Option<u32> {
        pinned().or_else(|| self.rule().as_ref().map(PathWindow::window))
    }

    /// Makes `session` the one the task pings (the newest session of the path), and pings it
    /// [`QUIET_PINGS`] times now: a session is new when the link is often quiet (the first use,
    /// a reconnect after a drop or a sleep), and then its round trip is nearer the path's own
    /// than the dial's timings, which count a forwarder's connect and sshd's start (window.rs,
    /// "The rule"). Measured (`bench/shaped.sh`): 52 ms on a 50 ms path whose first hop's dial
    /// took 68 ms; on a 20 ms path the first answer took 64 ms once, as long as the dial. A ping
    /// that found a queue lowers nothing: the minimum is a minimum.
    pub fn follow(self: &Arc<Self>, session: Weak<dyn Probe>) {
        *self.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(session.clone());
        if pinned().is_some() {
            return;
        }
        let meter = self.clone();
        tokio::spawn(async move {
            let Some(probe) = session.upgrade() else { return };
            let lowest = quiet_round_trip(&*probe, QUIET_PINGS).await;
            drop(probe);
            if let Some(rtt) = lowest {
                tracing::trace!(rtt_ms = rtt.as_secs_f64() * 1e3, "path round trip of a new session");
                meter.seed(rtt);
            }
        });
    }

    fn seed(&self, rtt: Duration) {
        if let Some(rule) = self.rule().as_mut() {
            rule.seed(self.born.elapsed(), rtt);
        }
    }

    /// Data arrived: starts measuring unless it is going on, once [`BUSY`] bytes have arrived
    /// since it last ended. Cheap enough for every packet. Not at the first byte: small requests
    /// then sent a ping each, and on an idle 50 ms path (`bench/shaped.sh`, 4 repetitions) one
    /// request in ten, scattered, took 185-200 ms instead of 104; gated, none of the scattered
    /// ones did. That a ping's answer delays the next connection's open confirmation by about
    /// 1.7 round trips is measured; why (which socket holds it) is not traced.
    pub fn kick(self: &Arc<Self>) {
        if pinned().is_some() || self.running.load(Ordering::Relaxed) {
            return;
        }
        if (self.moved)().saturating_sub(self.moved_when_ended.load(Ordering::Relaxed)) < BUSY {
            return;
        }
        if self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let meter = self.clone();
        tokio::spawn(async move {
            meter.measure().await;
            meter.moved_when_ended.store((meter.moved)(), Ordering::Relaxed);
            meter.running.store(false, Ordering::Release);
        });
    }

    /// Pings while bytes flow; see the module doc.
    async fn measure(&self) {
        let mut moved = (self.moved)();
        // A sample has moved [`BUSY`] or more: a transfer is under way.
        let mut carrying = false;
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
            if delivered < BUSY {
                // Too little moved to say anything of the path's rate (BBR's application-limited
                // samples): ten small requests would fill the rate filter with their trickle, and
                // a ping that waited for a busy CPU would then shrink the window to it. Their
                // round trip may still be the path's lowest; after a transfer, the path is quiet
                // now, and a few more pings find its own round trip once the queue has drained.
                self.seed(rtt);
                if carrying {
                    self.quiet_end().await;
                }
                return;
            }
            carrying = true;
            let mut rule = self.rule();
            let Some(rule) = rule.as_mut() else { return };
            let window = rule.observe(self.born.elapsed(), rtt, delivered);
            tracing::trace!(
                rtt_ms = rtt.as_secs_f64() * 1e3,
                delivered,
                window_kib = window / 1024,
                "path sample"
            );
        }
    }

    /// The end of a busy spell: pings the quiet path again (module doc of window.rs, "The rule").
    async fn quiet_end(&self) {
        let probe = self.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let Some(probe) = probe.and_then(|weak| weak.upgrade()) else { return };
        tokio::time::sleep(GAP).await;
        if let Some(rtt) = quiet_round_trip(&*probe, QUIET_PINGS - 1).await {
            tracing::trace!(rtt_ms = rtt.as_secs_f64() * 1e3, "path round trip after a transfer");
            self.seed(rtt);
        }
    }
}

/// The lowest round trip of `pings` pings [`GAP`] apart; `None` if none was answered in time.
async fn quiet_round_trip(probe: &dyn Probe, pings: usize) -> Option<Duration> {
    let mut lowest: Option<Duration> = None;
    for i in 0..pings {
        if i > 0 {
            tokio::time::sleep(GAP).await;
        }
        let Some(rtt) = probe.ping(PING_LIMIT).await else { break };
        if rtt < PING_LIMIT {
            lowest = Some(lowest.map_or(rtt, |low| low.min(rtt)));
        }
    }
    lowest
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

    /// A session on a path whose round trip is `quiet`, or `queued` while `busy` is set.
    struct Queues {
        busy: Arc<AtomicBool>,
        quiet: Duration,
        queued: Duration,
    }

    impl Probe for Queues {
        fn ping(&self, _: Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send + '_>> {
            let rtt = if self.busy.load(Ordering::Relaxed) { self.queued } else { self.quiet };
            Box::pin(async move {
                tokio::time::sleep(rtt).await;
                Some(rtt)
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
        assert_eq!(meter.window(), Some(12_500_000), "the path's channels follow the last hop's assumption");
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

    /// A session that counts the pings it answers.
    #[derive(Default)]
    struct Counts(std::sync::atomic::AtomicUsize);

    impl Probe for Counts {
        fn ping(&self, _: Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send + '_>> {
            self.0.fetch_add(1, Ordering::Relaxed);
            Box::pin(async { Some(Duration::from_millis(1)) })
        }
    }

    #[tokio::test]
    async fn small_requests_send_no_ping_and_the_first_busy_bytes_since_the_last_measuring_do() {
        let moved = Arc::new(AtomicU64::new(0));
        let counted = moved.clone();
        let meter = Arc::new(Meter::new(Box::new(move || counted.load(Ordering::Relaxed))));
        meter.window_for_dial(Some(Duration::from_millis(20)), true, 5_000_000);
        let session = Arc::new(Counts::default());
        let probe: Arc<dyn Probe> = session.clone();
        *meter.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Arc::downgrade(&probe));
        let pings = || session.0.load(Ordering::Relaxed);
        // Small responses, a few KiB each, up to just under BUSY in all.
        for _ in 0..15 {
            moved.fetch_add((BUSY - 1) / 15, Ordering::Relaxed);
            meter.kick();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(pings(), 0, "small requests were answered by pings");
        assert!(!meter.running.load(Ordering::Acquire));
        moved.fetch_add(1, Ordering::Relaxed);
        meter.kick();
        for _ in 0..100 {
            if pings() > 0 && !meter.running.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(pings() > 0, "BUSY bytes since the start sent no ping");
        assert!(!meter.running.load(Ordering::Acquire), "a quiet interval did not end the measuring");
        // It counts again from where the measuring ended.
        let before = pings();
        moved.fetch_add(BUSY / 2, Ordering::Relaxed);
        meter.kick();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(pings(), before, "bytes that arrived before the measuring ended counted twice");
    }

    #[tokio::test]
    async fn the_quiet_path_after_a_transfer_seeds_the_minimum() {
        let moved = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = moved.clone();
        let meter = Arc::new(Meter::new(Box::new(move || counted.load(Ordering::Relaxed))));
        // The dial overstated a 20 ms path; every ping during the transfer waits 180 ms of queue.
        meter.window_for_dial(Some(Duration::from_millis(60)), true, 5_000_000);
        let busy = Arc::new(AtomicBool::new(true));
        let session: Arc<dyn Probe> = Arc::new(Queues {
            busy: busy.clone(),
            quiet: Duration::from_millis(20),
            queued: Duration::from_millis(200),
        });
        *meter.follow.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Arc::downgrade(&session));
        for _ in 0..40 {
            moved.fetch_add(2_000_000, Ordering::Relaxed);
            meter.kick();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let during = meter.window().expect("the last hop's dial made the rule");
        assert!(during < 5_000_000, "two seconds of 40 MB/s behind 180 ms of queue: {during} B");
        assert_eq!(lowest(&meter), Some(Duration::from_millis(60)), "a queued ping lowered the minimum");
        // The transfer ends, and its queue drains for a while: the ping that finds the interval
        // quiet still waited in it (the 30-40 ms of a 20 ms path, measured), the next ones do not.
        tokio::time::sleep(Duration::from_millis(600)).await;
        busy.store(false, Ordering::Relaxed);
        for _ in 0..100 {
            if !meter.running.load(Ordering::Acquire) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!meter.running.load(Ordering::Acquire), "still measuring two seconds after the transfer");
        assert_eq!(lowest(&meter), Some(Duration::from_millis(20)), "the quiet path after it was not pinged");
        let after = meter.window().expect("the rule stays");
        assert!(after < during, "the window was not set again from the lower minimum: {after} B");
    }
}
