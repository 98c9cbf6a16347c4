//! [`Adaptive`]: the window rule that follows the path. How large an SSH receive window the path
//! to a chain's last hop should get, from what that path measurably carries ([`PathWindow`], a
//! pure rule: `meter` feeds it samples of time, round trip and bytes delivered), and, until it
//! has measured, what a session is dialled with ([`assumed`]). Its parameters are
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
//! three (`MeterSettings::quiet_pings`), and two more after a busy spell, once the queue it left has
//! drained. A dial's own timings seed it too, but they overstate
//! it (sshd's start, a forwarder's own connect): 34-63 ms for a 20 ms path, measured, and a
//! minimum three times too high made a window three times too large.
//!
//! The wanted window is `gain` (1.25) BDPs and `slack`. One BDP, because the vendored russh
//! re-opens a channel's window every three packets, as OpenSSH does, or every eighth of a window
//! larger than 768 KiB (vendor/README.md), so what is in flight stays at the window (within an
//! eighth) and one BDP of it keeps the link full; a quarter more so that the rate can grow past
//! what the window allowed when it was measured, and covers that eighth; and `slack` for
//! the bytes that are in flight without crossing the link: the three packets that arrived before
//! a window adjust goes out, and a packet held by each sshd while it decrypts and re-encrypts it.
//! A shrink also needs the latest sample to move at least half the bottleneck rate: a queue is
//! only ours to remove while we fill the link.
//! - Shrink to that when the round trip stands more than the allowance (`allowance`) above its minimum: a queue
//!   has built that the link does not need (LEDBAT, RFC 6817, backs off from queueing delay above
//!   a target the same way). "Stands": the lowest of the last `recent` samples, so one ping
//!   that waited for a busy CPU is not taken for a queue. Shrink again, queue or not, once the
//!   minimum has fallen by a quarter since the window was set (at the quiet ping that shows it,
//!   [`PathWindow::seed`], or the next sample): that window took part of a
//!   dial's overstated round trip for the path's (measured: 2 MiB from a 63 ms minimum, then
//!   kept through the next download, where 30 ms made it 1 MiB).
//! - Grow towards it (at most doubling per sample, as Linux's receive-buffer autotuning
//!   `tcp_rcv_space_adjust` doubles per round trip) while the round trip has not risen: a wanted
//!   window above the current one then means the senders used the window, not the link, up.
//! - Within `floor` and `ceiling`; until it has measured, the window is the one it was
//!   created with ([`assumed`]: the same rule applied to an assumed 1 Gbit/s link).

use std::collections::VecDeque;
use std::time::Duration;

use crate::flow::rule::WindowRule;
use crate::settings::AdaptiveSettings;

/// The window a session of a hop `rtt` away is dialled with until its path is measured: what
/// the rule would want of an `assumed_rate` link (`gain` BDPs and `slack`), within
/// `assumed_floor` and `ceiling`; unknown (a `ProxyCommand` transport) gets the ceiling, since a
/// slow far link costs more than a busy near sshd. At 50 ms and 1 Gbit/s (`bench/shaped.sh`) the
/// 7.9 MB this gives carried 113 MB/s where two BDPs, 12.6 MB, carried 97.
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

/// The adaptive policy (`WindowPolicy::Adaptive`): each hop's session is dialled with the window
/// [`assumed`] from its own round trip until the path has settled; the path's rule
/// ([`PathWindow`]) is made by its last hop's dial, whose round trip is the path's, and its
/// window is the one the last hop's channels are re-opened to.
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
        let assumed = assumed(&self.settings, rtt);
        if last && self.path.is_none() {
            self.path = Some(PathWindow::new(self.settings.clone(), assumed));
        }
        let Some(path) = self.path.as_mut() else { return assumed };
        if let Some(rtt) = rtt.filter(|_| last) {
            path.seed(now, rtt);
        }
        if path.settled() { path.window() } else { assumed }
    }

    fn window(&self) -> Option<u32> {
        self.path.as_ref().map(PathWindow::window)
    }

    fn measures(&self) -> bool {
        true
    }

    fn quiet(&mut self, now: Duration, rtt: Duration) {
        if let Some(path) = self.path.as_mut() {
            path.seed(now, rtt);
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

    #[cfg(test)]
    fn min_rtt(&self) -> Option<Duration> {
        self.path.as_ref().and_then(PathWindow::min_rtt)
    }
}

/// One path's window and what it has measured.
#[derive(Debug, Clone)]
pub(crate) struct PathWindow {
    settings: AdaptiveSettings,
    window: u32,
    /// (when, round trip) of the samples within `min_rtt_span`, for the min filter.
    rtts: VecDeque<(Duration, Duration)>,
    /// Delivery rates (bytes per second) of the last `rate_samples` samples.
    rates: VecDeque<f64>,
    /// When the previous sample was taken, to turn bytes into a rate.
    last: Option<Duration>,
    samples: usize,
    /// The lowest round trip the window was last set from; `None` until a sample set it (until
    /// then the window is the assumed one, however many samples came in).
    basis: Option<Duration>,
}

impl PathWindow {
    /// A path assumed to want `initial` until measured.
    pub(crate) fn new(settings: AdaptiveSettings, initial: u32) -> Self {
        PathWindow {
            window: initial.clamp(settings.floor, settings.ceiling),
            settings,
            rtts: VecDeque::new(),
            rates: VecDeque::new(),
            last: None,
            samples: 0,
            basis: None,
        }
    }

    /// The window sessions on this path should get now.
    pub(crate) fn window(&self) -> u32 {
        self.window
    }

    /// True once enough samples came in for [`PathWindow::window`] to stand for the path: a
    /// session dialled now gets it (the window of the path's first dial, if no sample found a
    /// reason to change it), not one assumed from its own handshake's round trip, which a loaded
    /// link inflates.
    pub(crate) fn settled(&self) -> bool {
        self.samples >= self.settings.settled
    }

    /// The lowest round trip within `min_rtt_span`.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.rtts.iter().map(|&(_, rtt)| rtt).min()
    }

    /// A round trip measured without load (a session's first pings, a dial, a quiet moment): it
    /// sets the minimum. If that falls by a quarter below the one the window was set from, the
    /// window is set again now from the rates already measured, and the next transfer starts
    /// with it: measured on 10 ms each way at 200 Mbit/s, a window set from a dial's 63 ms was
    /// 2 MiB where the quiet pings after the download found 22 ms, and a small request beside the
    /// next download waited 90 ms behind it instead of 60.
    pub(crate) fn seed(&mut self, now: Duration, rtt: Duration) {
        self.push_rtt(now, rtt);
        let Some(min_rtt) = self.min_rtt() else { return };
        if self.stale(min_rtt)
            && let Some(wanted) = self.wanted(min_rtt)
            && wanted < f64::from(self.window)
        {
            self.window = wanted as u32;
            self.basis = Some(min_rtt);
        }
    }

    /// True when the window was set from a minimum round trip the path has since beaten by a
    /// quarter (see "The rule").
    fn stale(&self, min_rtt: Duration) -> bool {
        self.basis.is_some_and(|basis| min_rtt * 4 < basis * 3)
    }

    /// `gain` BDPs of the highest measured rate and `min_rtt`, and `slack`, within the bounds;
    /// `None` before a rate was measured.
    fn wanted(&self, min_rtt: Duration) -> Option<f64> {
        let rate = self.rates.iter().copied().reduce(f64::max)?;
        let s = &self.settings;
        Some(
            (s.gain * rate * min_rtt.as_secs_f64() + s.slack).clamp(f64::from(s.floor), f64::from(s.ceiling)),
        )
    }

    /// Measuring starts (again) at `now`: the next sample's bytes were delivered since then.
    pub(crate) fn begin(&mut self, now: Duration) {
        self.last = Some(now);
    }

    /// One sample at `now` (any monotonic clock's offset): the ping's round trip, and the bytes
    /// delivered since the previous sample. Returns the window after it.
    pub(crate) fn observe(&mut self, now: Duration, rtt: Duration, delivered: u64) -> u32 {
        let Some(last) = self.last.replace(now) else {
            // The first sample only starts the clock of the delivery rate.
            self.push_rtt(now, rtt);
            return self.window;
        };
        let interval = now.saturating_sub(last).as_secs_f64();
        if interval <= 0.0 {
            return self.window;
        }
        self.push_rtt(now, rtt);
        if self.rates.len() >= self.settings.rate_samples {
            self.rates.pop_front();
        }
        self.rates.push_back(delivered as f64 / interval);
        self.samples += 1;
        let (Some(min_rtt), Some(standing), Some(wanted)) =
            (self.min_rtt(), self.standing(), self.min_rtt().and_then(|min| self.wanted(min)))
        else {
            return self.window;
        };
        let rate = self.rates.iter().copied().fold(0.0, f64::max);
        let latest = self.rates.back().copied().unwrap_or(0.0);
        let queueing = standing.saturating_sub(min_rtt);
        let current = f64::from(self.window);
        // A queue is ours to remove only while we fill the link: a round trip that rose while the
        // senders moved little is someone else's queue (or a busy CPU), and no smaller window
        // would shorten it.
        // A window set from a minimum the path has since beaten by a quarter is as wrong as a
        // queue says it is, queue or not: the shrink that set it had only a dial's overstated
        // round trip to go by (see "The rule").
        if (queueing > allowance(&self.settings, min_rtt) || self.stale(min_rtt))
            && wanted < current
            && latest >= rate / 2.0
        {
            self.window = wanted as u32;
            self.basis = Some(min_rtt);
        } else if queueing <= allowance(&self.settings, min_rtt) / 4 && wanted > current {
            self.window = wanted.min(2.0 * current).min(f64::from(self.settings.ceiling)) as u32;
            self.basis = Some(min_rtt);
        }
        self.window
    }

    /// The lowest of the last `recent` round trips (see the module doc), once there are as many.
    fn standing(&self) -> Option<Duration> {
        let recent = self.settings.recent;
        if self.rtts.len() < recent {
            return None;
        }
        self.rtts.iter().rev().take(recent).map(|&(_, rtt)| rtt).min()
    }

    fn push_rtt(&mut self, now: Duration, rtt: Duration) {
        // Keep the last `recent` samples even when older than the span: `standing` needs them.
        while self.rtts.len() > self.settings.recent
            && self.rtts.front().is_some_and(|&(at, _)| now.saturating_sub(at) > self.settings.min_rtt_span)
        {
            self.rtts.pop_front();
        }
        self.rtts.push_back((now, rtt));
    }
}

#[cfg(test)]
mod tests;
