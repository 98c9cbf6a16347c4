//! [`Meter`]: measures one jump host's path while its channels carry data, and feeds what it
//! measures to the path's window rule (`flow`'s [`WindowRule`]).
//!
//! # What it measures, and when
//! While bytes flow, a task pings the chain's newest session with `keepalive@openssh.com`
//! want-reply (`send_ping`): the last hop answers, so the answer waits behind every byte queued on
//! the path (adaptive.rs, "The signal"). Between two pings it reads how many bytes the jump host's
//! channels received (`tunnel::Counters::down`): the delivery rate of the direction our receive
//! window paces. Bytes sent are paced by the far side's window, not ours: counted in, an upload
//! would look like a rate our window had to carry. One ping at a time, then `gap`
//! ([`MeterSettings`]): about five samples a second on a 50 ms path, a 60-byte request each.
//!
//! When the rule asks for it after a sample, the task drains the path (adaptive.rs, "Draining"):
//! it watches the bytes delivered while the rule holds the window small, and pings once the
//! queue has gone.
//!
//! The task runs only while there is traffic and only for a rule that measures: a tunnel's pump
//! starts it once `busy` bytes have arrived since it last ended ([`Meter::kick`]), and it ends
//! after an interval that moved less. An idle daemon wakes for nothing, and small requests send
//! no ping.
//!
//! # How a window changes
//! On the live session, channel by channel. The vendored russh re-opens each client channel to
//! the window its session's `Handler::adjust_window` answers, and opens new channels with it
//! (vendor/README.md, change 2); the last hop's handler answers the rule's window
//! ([`super::Flow::window`]), so a new window reaches every channel of the path at its next
//! adjust (every eighth of a window, under load several times per round trip), the transfer that
//! taught it included. A smaller one takes effect as the far side uses up what it was already
//! allowed; nothing is taken back.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::flow::rule::{Drain, WindowRule};
use crate::settings::MeterSettings;

/// What the meter pings: a chain's session (`chain::Dialled`).
pub(crate) trait Probe: Send + Sync {
    /// A keepalive with want-reply to the last hop: its round trip, `limit` if it took longer,
    /// `None` once the session has ended.
    fn ping(&self, limit: Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send + '_>>;
}

/// Bytes received so far through a jump host's channels: the direction the receive window paces.
pub(crate) type Moved = Box<dyn Fn() -> u64 + Send + Sync>;

/// One jump host's measuring task and what it feeds.
pub(crate) struct Meter {
    settings: MeterSettings,
    rule: Arc<Mutex<Box<dyn WindowRule>>>,
    running: AtomicBool,
    /// The zero of the rule's clock.
    born: Instant,
    /// The newest session: what the task pings.
    follow: Mutex<Option<Weak<dyn Probe>>>,
    moved: Moved,
    /// What [`Meter::moved`] read when the task last ended: the task starts again only once
    /// `busy` more has arrived (see [`Meter::kick`]).
    moved_when_ended: AtomicU64,
}

impl Meter {
    pub(crate) fn new(
        settings: MeterSettings,
        rule: Arc<Mutex<Box<dyn WindowRule>>>,
        born: Instant,
        moved: Moved,
    ) -> Self {
        Meter {
            settings,
            rule,
            running: AtomicBool::new(false),
            born,
            follow: Mutex::new(None),
            moved,
            moved_when_ended: AtomicU64::new(0),
        }
    }

    fn rule(&self) -> std::sync::MutexGuard<'_, Box<dyn WindowRule>> {
        // Plain data: a panic elsewhere leaves nothing half-written that matters.
        self.rule.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn measures(&self) -> bool {
        self.rule().measures()
    }

    /// Makes `session` the one the task pings (the newest session of the path), and pings it
    /// `quiet_pings` times now: a session is new when the link is often quiet (the first use, a
    /// reconnect after a drop or a sleep), and then its round trip is nearer the path's own than
    /// the dial's timings, which count a forwarder's connect and sshd's start (adaptive.rs, "The
    /// rule"): 52 ms on a 50 ms path whose first hop's dial took 68 ms, and on a 20 ms path the
    /// first answer took 64 ms once, as long as the dial (`bench/shaped.sh`). A ping that found a
    /// queue lowers nothing: the minimum is a minimum.
    pub(crate) fn follow(self: &Arc<Self>, session: Weak<dyn Probe>) {
        *self.follow.lock().unwrap_or_else(PoisonError::into_inner) = Some(session.clone());
        if !self.measures() {
            return;
        }
        let meter = self.clone();
        tokio::spawn(async move {
            let Some(probe) = session.upgrade() else { return };
            let lowest = meter.quiet_round_trip(&*probe, meter.settings.quiet_pings).await;
            drop(probe);
            if let Some((rtt, idle)) = lowest {
                tracing::trace!(rtt_ms = rtt.as_secs_f64() * 1e3, idle, "path round trip of a new session");
                meter.rule().quiet(meter.born.elapsed(), rtt, idle);
            }
        });
    }

    /// Data arrived: starts measuring unless it is going on, once `busy` bytes have arrived since
    /// it last ended. Cheap enough for every packet. A ping's answer delays the next connection's
    /// open confirmation by about 1.7 round trips (measured; which socket holds it is not traced),
    /// so small requests send none.
    pub(crate) fn kick(self: &Arc<Self>) {
        if self.running.load(Ordering::Relaxed) {
            return;
        }
        if (self.moved)().saturating_sub(self.moved_when_ended.load(Ordering::Relaxed)) < self.settings.busy {
            return;
        }
        if !self.measures() || self.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let meter = self.clone();
        tokio::spawn(async move {
            meter.measure().await;
            meter.moved_when_ended.store((meter.moved)(), Ordering::Relaxed);
            meter.running.store(false, Ordering::Release);
        });
    }

    fn probe(&self) -> Option<Arc<dyn Probe>> {
        let follow = self.follow.lock().unwrap_or_else(PoisonError::into_inner).clone();
        follow.and_then(|weak| weak.upgrade())
    }

    /// Pings while bytes flow; see the module doc.
    async fn measure(&self) {
        let mut moved = (self.moved)();
        // A sample has moved `busy` or more: a transfer is under way.
        let mut carrying = false;
        if !self.rule().begin(self.born.elapsed()) {
            return;
        }
        loop {
            let Some(probe) = self.probe() else { return };
            let Some(rtt) = probe.ping(self.settings.ping_limit).await else { return };
            drop(probe);
            tokio::time::sleep(self.settings.gap).await;
            let now = (self.moved)();
            let delivered = now.saturating_sub(moved);
            moved = now;
            if delivered < self.settings.busy {
                // Too little moved to say anything of the path's rate (BBR's application-limited
                // samples): ten small requests would fill the rate filter with their trickle, and
                // a ping that waited for a busy CPU would then shrink the window to it. Their
                // round trip may still be the path's lowest; after a transfer, the path is quiet
                // now, and a few more pings find its own round trip once the queue has drained.
                self.rule().quiet(self.born.elapsed(), rtt, false);
                if carrying {
                    self.quiet_end().await;
                }
                return;
            }
            carrying = true;
            let Some(window) = self.rule().sample(self.born.elapsed(), rtt, delivered) else { return };
            tracing::trace!(
                rtt_ms = rtt.as_secs_f64() * 1e3,
                delivered,
                window_kib = window / 1024,
                "path sample"
            );
            // Its own statement: the rule's lock must be let go before the drain awaits.
            let drain = self.rule().drain(self.born.elapsed());
            if let Some(plan) = drain {
                self.drain(plan).await;
                // The next sample's rate counts from the hold's end, and what stood before the
                // drain no longer stands.
                moved = (self.moved)();
                self.rule().begin(self.born.elapsed());
            }
        }
    }

    /// Drains the path (adaptive.rs, "Draining"): the rule holds the window small; once the far
    /// side has used up what it was allowed before (what stood in the queue has gone through the
    /// link), a ping measures the path's own round trip. Its answer ends the hold.
    async fn drain(&self, plan: Drain) {
        let s = &self.settings;
        let rate = plan.rate;
        let step = Duration::from_secs_f64(f64::from(plan.window) / rate).clamp(s.drain_step, s.gap);
        let limit = Duration::from_secs_f64(s.drain_limit * plan.allowed as f64 / rate).max(step);
        let started = Instant::now();
        let first = (self.moved)();
        let mut delivered = 0;
        while delivered < plan.allowed && started.elapsed() < limit {
            tokio::time::sleep(step).await;
            delivered = (self.moved)().saturating_sub(first);
        }
        let held = started.elapsed();
        let rtt = match self.probe() {
            Some(probe) => probe.ping(s.ping_limit).await,
            None => None,
        };
        let rtt = rtt.filter(|&rtt| rtt < s.ping_limit);
        tracing::trace!(
            held_ms = held.as_secs_f64() * 1e3,
            delivered,
            allowed = plan.allowed,
            rtt_ms = rtt.map(|rtt| rtt.as_secs_f64() * 1e3),
            "path round trip of a drain"
        );
        self.rule().drained(self.born.elapsed(), rtt);
    }

    /// The end of a busy spell: pings the quiet path again (adaptive.rs, "The rule").
    async fn quiet_end(&self) {
        let Some(probe) = self.probe() else { return };
        tokio::time::sleep(self.settings.gap).await;
        let pings = self.settings.quiet_pings.saturating_sub(1);
        if let Some((rtt, idle)) = self.quiet_round_trip(&*probe, pings).await {
            tracing::trace!(rtt_ms = rtt.as_secs_f64() * 1e3, idle, "path round trip after a transfer");
            self.rule().quiet(self.born.elapsed(), rtt, idle);
        }
    }

    /// The lowest round trip of `pings` pings `gap` apart, and whether less than `busy` arrived
    /// meanwhile (the path was idle: no transfer's queue stood in them); `None` if none was
    /// answered in time.
    async fn quiet_round_trip(&self, probe: &dyn Probe, pings: usize) -> Option<(Duration, bool)> {
        let before = (self.moved)();
        let mut lowest: Option<Duration> = None;
        for i in 0..pings {
            if i > 0 {
                tokio::time::sleep(self.settings.gap).await;
            }
            let Some(rtt) = probe.ping(self.settings.ping_limit).await else { break };
            if rtt < self.settings.ping_limit {
                lowest = Some(lowest.map_or(rtt, |low| low.min(rtt)));
            }
        }
        let idle = (self.moved)().saturating_sub(before) < self.settings.busy;
        lowest.map(|rtt| (rtt, idle))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::Flow;
    use crate::settings::{AdaptiveSettings, FlowSettings};

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

    fn flow(moved: Moved) -> Flow {
        Flow::new(Arc::new(FlowSettings::default()), moved)
    }

    fn assumed(rtt: Duration) -> u32 {
        crate::flow::adaptive::assumed(&AdaptiveSettings::default(), Some(rtt))
    }

    fn busy() -> u64 {
        MeterSettings::default().busy
    }

    #[test]
    fn the_path_is_its_last_hop_s_and_starts_at_openssh_s_window_the_first_hop_s_dial_assumes_for_itself_only()
     {
        let flow = flow(Box::new(|| 0));
        let first = flow.dial(Some(Duration::from_millis(60)), false);
        assert_eq!(first.window, assumed(Duration::from_millis(60)));
        assert_eq!(flow.window(), None, "a hop before the last made the path's rule");
        let last = flow.dial(Some(Duration::from_millis(50)), true);
        assert_eq!(last.window, AdaptiveSettings::default().start, "a path starts at OpenSSH's window");
        assert_eq!(flow.min_rtt(), Some(Duration::from_millis(50)));
        assert_eq!(flow.window(), Some(last.window), "the path's channels follow the path's rule");
    }

    #[tokio::test]
    async fn a_new_session_s_first_ping_lowers_the_minimum_its_dial_overstated() {
        let flow = flow(Box::new(|| 0));
        // The dial took three round trips of a 20 ms path (sshd's start, a forwarder's connect).
        flow.dial(Some(Duration::from_millis(63)), true);
        let session: Arc<dyn Probe> = Arc::new(Answers(Duration::from_millis(20)));
        flow.follow(Arc::downgrade(&session));
        for _ in 0..200 {
            if flow.min_rtt() != Some(Duration::from_millis(63)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(flow.min_rtt(), Some(Duration::from_millis(20)));
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
        let flow = flow(Box::new(move || counted.load(Ordering::Relaxed)));
        flow.dial(Some(Duration::from_millis(20)), true);
        let session = Arc::new(Counts::default());
        let probe: Arc<dyn Probe> = session.clone();
        *flow.meter.follow.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::downgrade(&probe));
        let pings = || session.0.load(Ordering::Relaxed);
        let running = || flow.meter.running.load(Ordering::Acquire);
        // Small responses, a few KiB each, up to just under `busy` in all.
        for _ in 0..15 {
            moved.fetch_add((busy() - 1) / 15, Ordering::Relaxed);
            flow.kick();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(pings(), 0, "small requests were answered by pings");
        assert!(!running());
        moved.fetch_add(1, Ordering::Relaxed);
        flow.kick();
        for _ in 0..100 {
            if pings() > 0 && !running() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(pings() > 0, "`busy` bytes since the start sent no ping");
        assert!(!running(), "a quiet interval did not end the measuring");
        // It counts again from where the measuring ended.
        let before = pings();
        moved.fetch_add(busy() / 2, Ordering::Relaxed);
        flow.kick();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(pings(), before, "bytes that arrived before the measuring ended counted twice");
    }

    #[tokio::test]
    async fn a_fixed_window_is_never_measured() {
        let moved = Arc::new(AtomicU64::new(0));
        let counted = moved.clone();
        let settings =
            FlowSettings { policy: crate::settings::WindowPolicy::OPENSSH, ..FlowSettings::default() };
        let flow = Flow::new(Arc::new(settings), Box::new(move || counted.load(Ordering::Relaxed)));
        flow.dial(Some(Duration::from_millis(20)), true);
        let session = Arc::new(Counts::default());
        let probe: Arc<dyn Probe> = session.clone();
        flow.follow(Arc::downgrade(&probe));
        moved.fetch_add(100 * busy(), Ordering::Relaxed);
        flow.kick();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(session.0.load(Ordering::Relaxed), 0, "a fixed window sent pings");
        assert!(!flow.meter.running.load(Ordering::Acquire));
    }

    #[tokio::test]
    async fn the_quiet_path_after_a_transfer_seeds_the_minimum() {
        let moved = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = moved.clone();
        let flow = flow(Box::new(move || counted.load(Ordering::Relaxed)));
        // The dial overstated a 20 ms path; every ping during the transfer waits 180 ms of queue.
        flow.dial(Some(Duration::from_millis(60)), true);
        let busy = Arc::new(AtomicBool::new(true));
        let session: Arc<dyn Probe> = Arc::new(Queues {
            busy: busy.clone(),
            quiet: Duration::from_millis(20),
            queued: Duration::from_millis(200),
        });
        *flow.meter.follow.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::downgrade(&session));
        let start = flow.window().expect("the last hop's dial made the rule");
        for _ in 0..40 {
            moved.fetch_add(500_000, Ordering::Relaxed);
            flow.kick();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let during = flow.window().expect("the rule stays");
        assert!(during < start, "two seconds of 10 MB/s behind 180 ms of queue: {during} B");
        assert_eq!(flow.min_rtt(), Some(Duration::from_millis(60)), "a queued ping lowered the minimum");
        // The transfer ends, and its queue drains for a while: the ping that finds the interval
        // quiet still waited in it (the 30-40 ms of a 20 ms path, measured), the next ones do not.
        tokio::time::sleep(Duration::from_millis(600)).await;
        busy.store(false, Ordering::Relaxed);
        let running = || flow.meter.running.load(Ordering::Acquire);
        for _ in 0..100 {
            if !running() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!running(), "still measuring two seconds after the transfer");
        assert_eq!(flow.min_rtt(), Some(Duration::from_millis(20)), "the quiet path after it was not pinged");
        let after = flow.window().expect("the rule stays");
        assert!(after < during, "the window was not set again from the lower minimum: {after} B");
    }
}
