//! [`PathWindow`]: how large an SSH receive window the path to a chain's last hop should get,
//! from what that path measurably carries. A pure rule: `meter` feeds it samples (time, round
//! trip, bytes delivered), `chain` dials sessions with its window, and the last hop's channels
//! are re-opened to it at every window adjust (meter.rs, "How a window changes").
//!
//! # The signal, and why
//! Delay, not loss: the round trip of an SSH-level ping (`keepalive@openssh.com` with want-reply,
//! RFC 4254 §4) sent on the session itself, and the delivery rate (bytes the chain's channels
//! moved per interval between two pings).
//! - A window too large for the path costs no loss anywhere we could see it: the far sshd parks
//!   the excess in the link's queue, in the jump hosts' socket buffers and in each sshd's channel
//!   buffer, in front of every other channel's bytes (issue 43: 12 MB, 3.5 s, behind a
//!   50 Mbit/s link). What grows with it is the time a byte waits, so delay is what shows it.
//! - The ping, not the kernel's RTT (TCP_INFO): the answer of the last hop queues behind every
//!   byte on the way, wherever it waits, while the kernel only knows the first TCP connection,
//!   which ends at the first jump host (or at a ProxyCommand, or a link emulator on loopback) and
//!   sees none of the queues behind it.
//!
//! # The rule
//! As BBR sizes what it keeps in flight (Cardwell et al., "BBR: Congestion-Based Congestion
//! Control", ACM Queue 14(5), 2016): the bottleneck rate is the highest delivery rate of the last
//! [`RATE_SAMPLES`] samples, the propagation delay the lowest round trip of the last
//! [`MIN_RTT_SPAN`] (BBR's min_rtt filter, kept longer), their product the bandwidth-delay product
//! (BDP). The lowest round trip comes from pings on a quiet path: each new session's first
//! three (meter.rs, `QUIET_PINGS`), and two more after a busy spell, once the queue it left has
//! drained. A dial's own timings seed it too, but they overstate
//! it (sshd's start, a forwarder's own connect): 34-63 ms for a 20 ms path, measured, and a
//! minimum three times too high made a window three times too large.
//!
//! The wanted window is [`GAIN`] (1.25) BDPs and [`SLACK`]. One BDP, because the vendored russh
//! re-opens a channel's window every three packets, as OpenSSH does, or every eighth of a window
//! larger than 768 KiB (vendor/README.md), so what is in flight stays at the window (within an
//! eighth) and one BDP of it keeps the link full; a quarter more so that the rate can grow past
//! what the window allowed when it was measured, and covers that eighth; and [`SLACK`] for
//! the bytes that are in flight without crossing the link: the three packets that arrived before
//! a window adjust goes out, and a packet held by each sshd while it decrypts and re-encrypts it.
//! A shrink also needs the latest sample to move at least half the bottleneck rate: a queue is
//! only ours to remove while we fill the link.
//! - Shrink to that when the round trip stands more than [`allowance`] above its minimum: a queue
//!   has built that the link does not need (LEDBAT, RFC 6817, backs off from queueing delay above
//!   a target the same way). "Stands": the lowest of the last [`RECENT`] samples, so one ping
//!   that waited for a busy CPU is not taken for a queue. Shrink again, queue or not, once the
//!   minimum has fallen by a quarter since the window was set (at the quiet ping that shows it,
//!   [`PathWindow::seed`], or the next sample): that window took part of a
//!   dial's overstated round trip for the path's (measured: 2 MiB from a 63 ms minimum, then
//!   kept through the next download, where 30 ms made it 1 MiB).
//! - Grow towards it (at most doubling per sample, as Linux's receive-buffer autotuning
//!   `tcp_rcv_space_adjust` doubles per round trip) while the round trip has not risen: a wanted
//!   window above the current one then means the senders used the window, not the link, up.
//! - Within [`FLOOR`] and [`CEILING`]; until it has measured, the window is the one it was
//!   created with ([`assumed`]: the same rule applied to an assumed 1 Gbit/s link).

use std::collections::VecDeque;
use std::time::Duration;

/// See the module doc: one BDP keeps the link full once windows re-open every three packets, and
/// the quarter more lets a rate that the window limited show that it can grow. Measured
/// (`bench/shaped.sh`, 10 ms each way at 200 Mbit/s): 1.0 with no [`SLACK`] settled at 527 KiB and
/// left the link a fifth short; a fixed 768 KiB (what 1.25 BDP and [`SLACK`] come to there)
/// filled it at the small-request latency of an idle link.
pub const GAIN: f64 = 1.25;
/// Bytes in flight that a ping's round trip does not account for: three 32 KiB packets before
/// the window is re-opened, one more held by an sshd on the way.
pub const SLACK: f64 = 4.0 * 32.0 * 1024.0;
/// The smallest window: eight 32 KiB packets, well under a BDP of any path worth measuring, and
/// what a link of ~20 Mbit/s at 50 ms needs. The slow links of issue 43 want 0.6-1 MB.
pub const FLOOR: u32 = 256 * 1024;
/// The largest window: chain.rs's cap (a full 1 Gbit/s link up to ~65 ms).
pub const CEILING: u32 = 16 * 1024 * 1024;
/// How long the lowest round trip stands for the path's own. BBR keeps 10 s and then drains its
/// own queue (ProbeRTT) to measure again; a receiver cannot make the far sshd drain. Under a long
/// download every ping waits behind the window's own quarter BDP and [`SLACK`], so a minimum that
/// expires there is replaced by a queued one, and the window grows on its own queue: measured
/// with 30 s (`bench/shaped.sh`, 10 ms each way at 200 Mbit/s), 783, 957 and then 1175 KiB within
/// a minute, and the small requests' wait back at 120 ms. Ten minutes: a path whose round trip
/// really grew gets too small a window (less rate, not more waiting) until then. Every dial and
/// every quiet moment measures it too (`seed`).
pub const MIN_RTT_SPAN: Duration = Duration::from_secs(600);
/// BBR's bottleneck-rate filter: the highest rate of this many samples (about ten round trips).
pub const RATE_SAMPLES: usize = 10;
/// A queue must show in this many consecutive samples (their lowest round trip) to count. Two:
/// under the queue of issue 43 a sample takes 2-4 s, and every second of it is a second other
/// requests wait.
pub const RECENT: usize = 2;
/// Queueing below this is not worth a smaller window: on a loaded 2-core machine a ping may wait
/// tens of milliseconds for its turn on the CPU, and a loopback path would shrink for that. Half
/// of LEDBAT's target (RFC 6817 §2.5: TARGET at most 100 ms).
pub const QUEUE_FLOOR: Duration = Duration::from_millis(50);
/// Samples needed before the rule trusts its own window over the assumed one.
pub const SETTLED: usize = RECENT;

/// When a channel's window is re-opened: once three 32 KiB packets of it have arrived, as OpenSSH
/// does (channels.c, `channel_check_window`: `c->local_window_max - c->local_window >
/// c->local_maxpacket*3`), or an eighth of a window larger than eight such batches; and when less
/// than half is left, russh's own rule. What is in flight then stays within an eighth of the
/// window, which is what lets one BDP and [`GAIN`]'s quarter fill a link (module doc, "The rule").
/// An eighth rather than three packets for large windows: each adjust of a nested hop's session is
/// a packet of its own on every hop before it (vendor/README.md, "The re-open rule").
pub const REOPEN: russh::WindowReopen = russh::WindowReopen::Early { at_least: 3 * 32 * 1024, divisor: 8 };

/// The smallest window a session is dialled with: OpenSSH's own. A near hop (a LAN, loopback)
/// needs little, but the first samples of a path take a few hundred milliseconds, and a smaller
/// one would slow a fast transfer until they grow it; it costs nothing either, since russh
/// re-opens a window as its bytes arrive and what a slow client piles up is bounded by the
/// tunnel's buffer (tunnel.rs).
pub const ASSUMED_FLOOR: u32 = 2 * 1024 * 1024;
/// The rate a path is assumed to carry until measured: 1 Gbit/s, in bytes per second. A window
/// too large for the real link queues until the first samples shrink it; one too small starves
/// the transfer until they grow it, one doubling per sample.
pub const ASSUMED_RATE: f64 = 125_000_000.0;

/// The window a session of a hop `rtt` away is dialled with until its path is measured: what
/// the rule would want of an [`ASSUMED_RATE`] link ([`GAIN`] BDPs and [`SLACK`]), within
/// [`ASSUMED_FLOOR`] and [`CEILING`]; unknown (a `ProxyCommand` transport) gets the ceiling,
/// since a slow far link costs more than a busy near sshd. It was two BDPs while russh re-opened
/// windows only when half was gone; measured at 50 ms and 1 Gbit/s (`bench/shaped.sh`) those
/// 12.6 MB stood 46 ms queued, within the allowance, and carried 97 MB/s where 7.9 MB carried
/// 113.
pub fn assumed(rtt: Option<Duration>) -> u32 {
    match rtt {
        None => CEILING,
        Some(rtt) => (GAIN * ASSUMED_RATE * rtt.as_secs_f64() + SLACK)
            .clamp(f64::from(ASSUMED_FLOOR), f64::from(CEILING)) as u32,
    }
}

/// How far above its minimum the round trip may stand before the window shrinks: one minimum
/// round trip (more than the quarter BDP and [`SLACK`] the rule itself puts in the queue), and
/// never less than [`QUEUE_FLOOR`].
pub fn allowance(min_rtt: Duration) -> Duration {
    min_rtt.max(QUEUE_FLOOR)
}

/// One path's window and what it has measured.
#[derive(Debug, Clone)]
pub struct PathWindow {
    window: u32,
    /// (when, round trip) of the samples within [`MIN_RTT_SPAN`], for the min filter.
    rtts: VecDeque<(Duration, Duration)>,
    /// Delivery rates (bytes per second) of the last [`RATE_SAMPLES`] samples.
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
    pub fn new(initial: u32) -> Self {
        PathWindow {
            window: initial.clamp(FLOOR, CEILING),
            rtts: VecDeque::new(),
            rates: VecDeque::new(),
            last: None,
            samples: 0,
            basis: None,
        }
    }

    /// The window sessions on this path should get now.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// True once enough samples came in for [`PathWindow::window`] to stand for the path: a
    /// session dialled now gets it (the window of the path's first dial, if no sample found a
    /// reason to change it), not one assumed from its own handshake's round trip, which a loaded
    /// link inflates.
    pub fn settled(&self) -> bool {
        self.samples >= SETTLED
    }

    /// The lowest round trip within [`MIN_RTT_SPAN`].
    pub fn min_rtt(&self) -> Option<Duration> {
        self.rtts.iter().map(|&(_, rtt)| rtt).min()
    }

    /// A round trip measured without load (a session's first pings, a dial, a quiet moment): it
    /// sets the minimum. If that falls by a quarter below the one the window was set from, the
    /// window is set again now from the rates already measured, and the next transfer starts
    /// with it: measured on 10 ms each way at 200 Mbit/s, a window set from a dial's 63 ms was
    /// 2 MiB where the quiet pings after the download found 22 ms, and a small request beside the
    /// next download waited 90 ms behind it instead of 60.
    pub fn seed(&mut self, now: Duration, rtt: Duration) {
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

    /// [`GAIN`] BDPs of the highest measured rate and `min_rtt`, and [`SLACK`], within the bounds;
    /// `None` before a rate was measured.
    fn wanted(&self, min_rtt: Duration) -> Option<f64> {
        let rate = self.rates.iter().copied().reduce(f64::max)?;
        Some((GAIN * rate * min_rtt.as_secs_f64() + SLACK).clamp(f64::from(FLOOR), f64::from(CEILING)))
    }

    /// Measuring starts (again) at `now`: the next sample's bytes were delivered since then.
    pub fn begin(&mut self, now: Duration) {
        self.last = Some(now);
    }

    /// One sample at `now` (any monotonic clock's offset): the ping's round trip, and the bytes
    /// delivered since the previous sample. Returns the window after it.
    pub fn observe(&mut self, now: Duration, rtt: Duration, delivered: u64) -> u32 {
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
        if self.rates.len() == RATE_SAMPLES {
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
        if (queueing > allowance(min_rtt) || self.stale(min_rtt)) && wanted < current && latest >= rate / 2.0
        {
            self.window = wanted as u32;
            self.basis = Some(min_rtt);
        } else if queueing <= allowance(min_rtt) / 4 && wanted > current {
            self.window = wanted.min(2.0 * current).min(f64::from(CEILING)) as u32;
            self.basis = Some(min_rtt);
        }
        self.window
    }

    /// The lowest of the last [`RECENT`] round trips (see the module doc), once there are as many.
    fn standing(&self) -> Option<Duration> {
        if self.rtts.len() < RECENT {
            return None;
        }
        self.rtts.iter().rev().take(RECENT).map(|&(_, rtt)| rtt).min()
    }

    fn push_rtt(&mut self, now: Duration, rtt: Duration) {
        // Keep the last RECENT samples even when older than the span: `standing` needs them.
        while self.rtts.len() > RECENT
            && self.rtts.front().is_some_and(|&(at, _)| now.saturating_sub(at) > MIN_RTT_SPAN)
        {
            self.rtts.pop_front();
        }
        self.rtts.push_back((now, rtt));
    }
}

#[cfg(test)]
mod tests;
