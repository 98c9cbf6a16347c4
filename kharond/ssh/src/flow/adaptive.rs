//! [`Adaptive`]: the window rule that follows the path. How large an SSH receive window the path
//! to a chain's last hop should get, from what that path measurably carries ([`PathWindow`], a
//! pure rule: `meter` feeds it samples of time, round trip and bytes delivered), and what a hop
//! before the last is dialled with ([`assumed`]). Its parameters are
//! [`AdaptiveSettings`]; the names below (`gain`, `slack`, …) are its fields.
//!
//! # The signal, and why
//! Delay, not loss: the round trip of an SSH-level ping (`keepalive@openssh.com` with want-reply,
//! RFC 4254 §4) sent on the session itself, and the delivery rate (bytes the chain's channels
//! moved per interval between two pings).
//! - A window too large for the path costs no loss anywhere we could see it: the far sshd parks
//!   the excess in the link's queue, in the jump hosts' socket buffers and in each sshd's channel
//!   buffer, in front of every other channel's bytes (12 MB stood 3.5 s behind a 50 Mbit/s link,
//!   `bench/shaped.sh`). What grows with it is the time a byte waits, so delay is what shows it.
//! - The ping, not the kernel's RTT (TCP_INFO): the answer of the last hop queues behind every
//!   byte on the way, wherever it waits, while the kernel only knows the first TCP connection,
//!   which ends at the first jump host (or at a ProxyCommand, or a link emulator on loopback) and
//!   sees none of the queues behind it.
//!
//! # The rule
//! As BBR sizes what it keeps in flight (Cardwell et al., "BBR: Congestion-Based Congestion
//! Control", ACM Queue 14(5), 2016): the bottleneck rate is the highest delivery rate of the last
//! `rate_samples` samples, the propagation delay the lowest round trip of the last
//! `min_rtt_span` (BBR's min_rtt filter, kept longer), their product the bandwidth-delay product
//! (BDP). The lowest round trip comes from pings on a quiet path: each new session's first
//! three (`MeterSettings::quiet_pings`), two more after a busy spell, once the queue it left
//! has drained, and a drain's ("Draining", below). A dial's own timings seed it too, but they
//! overstate it (sshd's start, a forwarder's own connect: 34-63 ms for a 20 ms path, measured
//! with `bench/shaped.sh`).
//!
//! The wanted window is `gain` (1.25) BDPs, the path's spread, and `slack`:
//! - one BDP, because the vendored russh re-opens a channel's window every three packets, as
//!   OpenSSH does, or every eighth of a window larger than 768 KiB (vendor/README.md), so what is
//!   in flight stays at the window (within an eighth) and one BDP of it keeps the link full; a
//!   quarter more so that the rate can grow past what the window allowed when it was measured;
//! - the spread: the delivery rate times twice the smoothed rise of a busy round trip over the
//!   lowest of this spell's recent ones, at most half a minimum round trip. A lost segment holds
//!   every byte behind it for a round trip of the link (TCP delivers in order), and the window
//!   must cover that wait or the link idles behind it; a queue that stands does not rise from
//!   sample to sample, so it adds nothing (RFC 6298's mean deviation, counted upwards only);
//! - `slack` for the bytes in flight without crossing the link: the three packets that arrive
//!   before a window adjust goes out, and a packet held by each sshd while it re-encrypts it.
//!
//! A path's window moves in two phases:
//! - **Startup** (BBR's): the path starts with OpenSSH's window (`start`), what `ssh -D` keeps, so
//!   that no first transfer queues more than it would; each sample doubles it while the delivery
//!   rate grew by `startup_growth` since the last doubling and no queue showed. A queue above half
//!   the allowance (below) ends it at the wanted window: the last doubling overshot. A rate that
//!   stopped growing without a queue ends it at the window before the last doubling, which
//!   carried the same rate: the window does not limit the transfer (a CPU does, on loopback,
//!   where a window twice OpenSSH's carried a sixth less, `HOPS=1 bench/routed.sh`).
//! - **Steady**: the window **shrinks** to the wanted one when the round trip stands more than
//!   half the allowance above its minimum and the spread: a queue the link does not need.
//!   "Stands": the lowest of this spell's last `recent` samples, so one ping that waited for a
//!   busy CPU is not taken for a queue, and no round trip of an earlier spell or a quiet moment
//!   counts. It shrinks again, queue or not, once the minimum has fallen by a quarter since the
//!   window was set (at the quiet ping that shows it, [`PathWindow::seed`], or the next sample):
//!   that window took part of a dial's overstated round trip for the path's. It **grows** towards
//!   the wanted window (at most doubling per sample, as Linux's receive-buffer autotuning
//!   `tcp_rcv_space_adjust` doubles per round trip) while no more than a quarter of the allowance
//!   stands: a wanted window above the current one then means the senders used the window, not
//!   the link, up.
//!
//! The allowance is one minimum round trip and at least `queue_floor` ([`allowance`]); LEDBAT
//! (RFC 6817) backs off from queueing delay above a target the same way. Windows stay within
//! `floor` and `ceiling`. `flow/sim` runs the rule on simulated paths (a deep buffer, loss, a
//! rate that halves, 1 Gbit/s) against OpenSSH's fixed window.
//!
//! # Draining
//! A minimum round trip that is too high hides the queue it stands for: every sample looks like
//! a path with nothing queued, and the window grows on its own queue. That happens whenever a
//! transfer starts with its session, the usual first use of a cluster: its quiet pings go out
//! while the transfer fills the link, and the first waits for the last sshd's own start after
//! the login as well. On 10 ms each way at 200 Mbit/s a new session's three pings found 61 ms at
//! best, and its first download ran with a window of 1.8 MB, three times the path's need, and
//! small requests beside it waited 134 ms (`bench/shaped.sh`, traced).
//!
//! So the rule makes a quiet moment itself, as BBR's ProbeRTT does (four packets in flight for
//! 200 ms and a round trip, when its minimum is 10 s old; Cardwell et al., above): once its
//! startup is over, the window is held at `drain_window` ([`PathWindow::drain`]). A receiver
//! cannot take back what the far side was allowed, so the meter waits until the far side has
//! used it up (counted in the bytes delivered since the hold began; `MeterSettings::drain_limit`
//! bounds the wait, for a transfer that ends meanwhile). What stood in the queue has then gone
//! through the link, what is in flight is less than the link carries per round trip, and the
//! ping sent then measures the path's own round trip. Its answer ends the hold
//! ([`PathWindow::drained`]) and seeds the minimum as a quiet moment's does (docs/ssh-engine.md,
//! "A minimum round trip learned late", has what it measured). Several transfers at once were
//! each allowed a window, and the drain waits for one: its ping may then still find a queue,
//! which lowers nothing.
//!
//! A path is drained at most once per `min_rtt_span`, and not at all while quiet pings with
//! nothing bulk arriving beside them (a new session used a moment later, the end of a transfer)
//! keep measuring it: they see what a drain would. So it costs a window's worth of time at a
//! lower rate, once, when a transfer starts with its session; the transfers that follow, on a
//! path already measured, do not drain.

use std::collections::VecDeque;
use std::time::Duration;

use crate::flow::rule::{Drain, WindowRule};
use crate::settings::AdaptiveSettings;

/// The window a session of a hop before the last is dialled with, and what the window of a
/// path `rtt` long may come to (its packet size follows from it): what the rule would want of an
/// `assumed_rate` link (`gain` BDPs and `slack`), within `assumed_floor` and `ceiling`; unknown
/// (a `ProxyCommand` transport) gets the ceiling, since a slow far link costs more than a busy
/// near sshd.
pub(crate) fn assumed(settings: &AdaptiveSettings, rtt: Option<Duration>) -> u32 {
    match rtt {
        None => settings.ceiling,
        Some(rtt) => (settings.gain * settings.assumed_rate * rtt.as_secs_f64() + settings.slack)
            .clamp(f64::from(settings.assumed_floor), f64::from(settings.ceiling))
            as u32,
    }
}

/// How far above its minimum the round trip may stand before the window shrinks: one minimum
/// round trip (more than the quarter BDP and `slack` the rule itself puts in the queue), and
/// never less than `queue_floor`.
pub(crate) fn allowance(settings: &AdaptiveSettings, min_rtt: Duration) -> Duration {
    min_rtt.max(settings.queue_floor)
}

/// The adaptive policy (`WindowPolicy::Adaptive`): a hop before the last is dialled with the
/// window [`assumed`] from its own round trip (it carries only what the last hop's window lets
/// in); the path's rule ([`PathWindow`]) is made by its last hop's first dial, starts from
/// [`AdaptiveSettings::start`], and its window is the one every session of the last hop is
/// dialled with and its channels are re-opened to.
#[derive(Debug)]
pub(crate) struct Adaptive {
    settings: AdaptiveSettings,
    path: Option<PathWindow>,
}

impl Adaptive {
    pub(crate) fn new(settings: AdaptiveSettings) -> Self {
        Adaptive { settings, path: None }
    }
}

impl WindowRule for Adaptive {
    fn dial(&mut self, now: Duration, rtt: Option<Duration>, last: bool) -> u32 {
        if !last {
            return assumed(&self.settings, rtt);
        }
        let settings = &self.settings;
        let path = self.path.get_or_insert_with(|| PathWindow::new(settings.clone(), settings.start));
        if let Some(rtt) = rtt {
            path.seed(now, rtt);
        }
        path.window()
    }

    /// A path's window grows to what its link carries; the window [`assumed`] of a 1 Gbit/s link
    /// is what a session this far may come to.
    fn reach(&self, rtt: Option<Duration>) -> u32 {
        assumed(&self.settings, rtt)
    }

    fn window(&self) -> Option<u32> {
        self.path.as_ref().map(PathWindow::window)
    }

    fn measures(&self) -> bool {
        true
    }

    fn quiet(&mut self, now: Duration, rtt: Duration, idle: bool) {
        if let Some(path) = self.path.as_mut() {
            if idle {
                path.drained(now, Some(rtt));
            } else {
                path.seed(now, rtt);
            }
        }
    }

    fn begin(&mut self, now: Duration) -> bool {
        match self.path.as_mut() {
            Some(path) => {
                path.begin(now);
                true
            }
            None => false,
        }
    }

    fn sample(&mut self, now: Duration, rtt: Duration, delivered: u64) -> Option<u32> {
        self.path.as_mut().map(|path| path.observe(now, rtt, delivered))
    }

    fn drain(&mut self, now: Duration) -> Option<Drain> {
        self.path.as_mut().and_then(|path| path.drain(now))
    }

    fn drained(&mut self, now: Duration, rtt: Option<Duration>) {
        if let Some(path) = self.path.as_mut() {
            path.drained(now, rtt);
        }
    }

    #[cfg(test)]
    fn min_rtt(&self) -> Option<Duration> {
        self.path.as_ref().and_then(PathWindow::min_rtt)
    }
}

/// Where a path's window is in its life (see "The rule").
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Doubling per sample while the delivery rate grows with it; `rate` is the highest one
    /// measured when the window last doubled.
    Startup { rate: f64 },
    /// Following the wanted window.
    Steady,
}

/// One path's window and what it has measured.
#[derive(Debug, Clone)]
pub(crate) struct PathWindow {
    settings: AdaptiveSettings,
    window: u32,
    phase: Phase,
    /// (when, round trip) of every round trip within `min_rtt_span`, quiet or busy: the min filter.
    rtts: VecDeque<(Duration, Duration)>,
    /// The round trips of this busy spell's samples, newest last (at most `recent`): what stands.
    spell: VecDeque<Duration>,
    /// Delivery rates (bytes per second) of the last `rate_samples` samples.
    rates: VecDeque<f64>,
    /// When the previous sample was taken, to turn bytes into a rate.
    last: Option<Duration>,
    /// The lowest round trip the window was last set from; `None` until a sample set it.
    basis: Option<Duration>,
    /// How far a busy round trip rises above the one before, smoothed (see "The rule"): the
    /// waits a lost segment or a burst of cross traffic adds now and then, which a queue that
    /// stands does not.
    jitter: Duration,
    /// The window in force until the last sample changed it: what the far side may still have
    /// been allowed when a drain starts right after that sample shrank the window.
    previous: u32,
    /// When the path was last drained (see "Draining"); `None` before its first drain.
    drained_at: Option<Duration>,
    /// A drain holds the window at `drain_window` until its ping answers.
    holding: bool,
}

impl PathWindow {
    /// A path that starts with `initial`, within the bounds.
    pub(crate) fn new(settings: AdaptiveSettings, initial: u32) -> Self {
        PathWindow {
            window: initial.clamp(settings.floor, settings.ceiling),
            phase: Phase::Startup { rate: 0.0 },
            settings,
            rtts: VecDeque::new(),
            spell: VecDeque::new(),
            rates: VecDeque::new(),
            last: None,
            basis: None,
            jitter: Duration::ZERO,
            previous: 0,
            drained_at: None,
            holding: false,
        }
    }

    /// The window sessions on this path should get now: during a drain, the drain's.
    pub(crate) fn window(&self) -> u32 {
        if self.holding { self.window.min(self.settings.drain_window) } else { self.window }
    }

    /// Called after each sample: drains the path if its last drain is older than `min_rtt_span`
    /// (or it never had one) and its startup is over, so that the rate is known. The far side may
    /// still send what the larger of the window now and the one before the last sample allowed
    /// (the startup ends by shrinking the window), less the drain's own window (see "Draining").
    pub(crate) fn drain(&mut self, now: Duration) -> Option<Drain> {
        let s = &self.settings;
        let due = self.drained_at.is_none_or(|at| now.saturating_sub(at) > s.min_rtt_span);
        if self.holding || !due || self.phase != Phase::Steady || self.window <= s.drain_window {
            return None;
        }
        let rate = self.rate().filter(|&rate| rate > 0.0)?;
        self.holding = true;
        let allowed = u64::from(self.window.max(self.previous) - s.drain_window);
        Some(Drain { allowed, rate, window: s.drain_window })
    }

    /// The drain's ping answered after `rtt`, or not at all, or a quiet moment with nothing bulk
    /// arriving measured the path as a drain would: the hold ends, the round trip seeds the
    /// minimum ([`Self::seed`]), and the next drain is due `min_rtt_span` from now.
    pub(crate) fn drained(&mut self, now: Duration, rtt: Option<Duration>) {
        self.holding = false;
        // A drain whose ping went unanswered is not tried again at once: the session is failing.
        self.drained_at = Some(now);
        if let Some(rtt) = rtt {
            self.seed(now, rtt);
        }
    }

    /// The lowest round trip within `min_rtt_span`.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.rtts.iter().map(|&(_, rtt)| rtt).min()
    }

    /// True while the window still doubles per sample.
    #[cfg(test)]
    pub(crate) fn starting(&self) -> bool {
        matches!(self.phase, Phase::Startup { .. })
    }

    /// A round trip measured without load (a session's first pings, a dial, a quiet moment): it
    /// sets the minimum. If that falls by a quarter below the one the window was set from, the
    /// window is set again now from the rates already measured, and the next transfer starts
    /// with it (see "The rule").
    pub(crate) fn seed(&mut self, now: Duration, rtt: Duration) {
        self.push_rtt(now, rtt);
        let Some(min_rtt) = self.min_rtt() else { return };
        if self.stale(min_rtt)
            && let Some(wanted) = self.wanted(min_rtt)
            && wanted < f64::from(self.window)
        {
            self.set(wanted, min_rtt);
        }
    }

    /// True when the window was set from a minimum round trip the path has since beaten by a
    /// quarter (see "The rule").
    fn stale(&self, min_rtt: Duration) -> bool {
        self.basis.is_some_and(|basis| min_rtt * 4 < basis * 3)
    }

    /// The path's rate, bytes per second: the highest of the last `rate_samples` samples (BBR's
    /// max filter); `None` before a sample.
    fn rate(&self) -> Option<f64> {
        self.rates.iter().copied().reduce(f64::max)
    }

    /// `gain` BDPs of the path's rate ([`Self::rate`]) and `min_rtt`, and `slack`, within the
    /// bounds; `None` before a rate was measured.
    fn wanted(&self, min_rtt: Duration) -> Option<f64> {
        let rate = self.rate()?;
        let s = &self.settings;
        Some(
            (rate * (s.gain * min_rtt.as_secs_f64() + self.spread(min_rtt).as_secs_f64()) + s.slack)
                .clamp(f64::from(s.floor), f64::from(s.ceiling)),
        )
    }

    /// The window becomes `window`, set from `min_rtt`: a later, lower minimum makes it stale.
    fn set(&mut self, window: f64, min_rtt: Duration) {
        self.resize(window);
        self.basis = Some(min_rtt);
    }

    /// The window becomes `window`, set from no round trip (the startup's doublings): only a
    /// queue changes it later, not a lower minimum (on loopback the minimum falls to a tenth of
    /// a millisecond, and the wanted window with it).
    fn resize(&mut self, window: f64) {
        self.window = window.clamp(f64::from(self.settings.floor), f64::from(self.settings.ceiling)) as u32;
    }

    /// Measuring starts (again) at `now`: the next sample's bytes were delivered since then, and
    /// the round trips of an earlier spell no longer say what stands now.
    pub(crate) fn begin(&mut self, now: Duration) {
        self.last = Some(now);
        self.spell.clear();
    }

    /// One sample at `now` (any monotonic clock's offset): the ping's round trip, and the bytes
    /// delivered since the previous sample. Returns the window after it.
    pub(crate) fn observe(&mut self, now: Duration, rtt: Duration, delivered: u64) -> u32 {
        let Some(last) = self.last.replace(now) else {
            // Without a start, the first sample only starts the clock of the delivery rate.
            self.push_rtt(now, rtt);
            return self.window;
        };
        let interval = now.saturating_sub(last).as_secs_f64();
        if interval <= 0.0 {
            return self.window;
        }
        self.previous = self.window;
        self.push_rtt(now, rtt);
        if self.spell.len() >= self.settings.recent {
            self.spell.pop_front();
        }
        self.spell.push_back(rtt);
        if self.phase == Phase::Steady {
            // The startup's rises are the queue of its own doublings.
            self.follow_jitter(rtt);
        }
        if self.rates.len() >= self.settings.rate_samples {
            self.rates.pop_front();
        }
        let latest = delivered as f64 / interval;
        self.rates.push_back(latest);
        let (Some(min_rtt), Some(wanted)) = (self.min_rtt(), self.min_rtt().and_then(|min| self.wanted(min)))
        else {
            return self.window;
        };
        let allowance = allowance(&self.settings, min_rtt);
        // The queue of this sample alone: in the startup a queue that shows once is enough to
        // stop doubling into it; in the steady phase it must stand (`recent` samples).
        let queued = rtt.saturating_sub(min_rtt);
        let standing = self.standing().map(|standing| standing.saturating_sub(min_rtt));
        match self.phase {
            Phase::Startup { rate } => {
                if queued <= allowance / 2 && latest >= rate * self.settings.startup_growth {
                    self.phase = Phase::Startup { rate: latest.max(rate) };
                    self.resize(2.0 * f64::from(self.window));
                } else {
                    // A queue showed: the last doubling overshot, and the window goes to what the
                    // path wants. No queue, but no more rate either: the last doubling bought
                    // nothing (something else limits the transfer, a CPU on loopback), and the
                    // window goes back to the one before it, which carried the same rate.
                    self.phase = Phase::Steady;
                    if queued > allowance / 2 {
                        self.set(wanted, min_rtt);
                    } else {
                        self.resize(f64::from(self.window) / 2.0);
                    }
                }
            }
            Phase::Steady => {
                let current = f64::from(self.window);
                // What the jitter holds up is not a queue of ours: the window covers it.
                let standing = standing.unwrap_or(queued).saturating_sub(self.spread(min_rtt));
                if (standing > allowance / 2 || self.stale(min_rtt)) && wanted < current {
                    self.set(wanted, min_rtt);
                } else if standing <= allowance / 4 && wanted > current {
                    self.set(wanted.min(2.0 * current), min_rtt);
                }
            }
        }
        self.window
    }

    /// The wait the window covers beyond the minimum round trip for the path's jitter: twice the
    /// smoothed rise (the mean rise of two independent waits is half their mean difference), at
    /// most half a minimum round trip: a busy CPU's waits rise too, and on a short path they
    /// would buy a queue longer than the path itself (20 ms of spread on a 20 ms path at
    /// 200 Mbit/s made a small request beside a download wait 98 ms instead of 63,
    /// `ONLY=200m bench/shaped.sh`).
    fn spread(&self, min_rtt: Duration) -> Duration {
        (2 * self.jitter).min(min_rtt / 2)
    }

    /// Smooths this sample's rise above the lowest of this spell's recent round trips with
    /// RFC 6298 §2.3's deviation gain (a quarter): a rise that stays (a queue building) counts
    /// once, a fall not at all, spikes each time.
    fn follow_jitter(&mut self, rtt: Duration) {
        let lowest = self.spell.iter().copied().min().unwrap_or(rtt);
        self.jitter = (self.jitter * 3 + rtt.saturating_sub(lowest)) / 4;
    }

    /// The lowest round trip of this spell's last `recent` samples, once there are as many.
    fn standing(&self) -> Option<Duration> {
        if self.spell.len() < self.settings.recent {
            return None;
        }
        self.spell.iter().copied().min()
    }

    fn push_rtt(&mut self, now: Duration, rtt: Duration) {
        while self.rtts.len() > 1
            && self.rtts.front().is_some_and(|&(at, _)| now.saturating_sub(at) > self.settings.min_rtt_span)
        {
            self.rtts.pop_front();
        }
        self.rtts.push_back((now, rtt));
    }
}

#[cfg(test)]
mod tests;
