//! [`WindowRule`]: what decides a path's window, the seam's one trait (`flow`, "The seam"), and
//! [`Drain`]: what a rule that drains the path asks the meter to wait for.

use std::fmt;
use std::time::Duration;

/// What a drain waits for before its ping: the far side to have used up what it was allowed
/// beyond the drain's window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Drain {
    /// Bytes the far side may still send beyond the drain's window, at most.
    pub allowed: u64,
    /// The path's rate, in bytes per second (the highest measured): what bounds the wait.
    pub rate: f64,
    /// The drain's window: the wait reads the bytes delivered once per time the link takes to
    /// carry it.
    pub window: u32,
}

/// What decides a path's window from what the path is measured to carry. `now` is any monotonic
/// X
pub(crate) trait WindowRule: Send + fmt::Debug {
    /// The window a hop's session is dialled with: `rtt` is how long the hop's transport took to
    /// answer (`None`: unknown, a `ProxyCommand`), `last` whether it is the chain's last hop,
    /// whose round trip is the path's.
    fn dial(&mut self, now: Duration, rtt: Option<Duration>, last: bool) -> u32;
    /// The largest window a session of a hop `rtt` away may come to have: what its packet size
    /// is chosen for (`Flow::dial_hop`), since a session keeps the packet size it was dialled with.
    fn reach(&self, rtt: Option<Duration>) -> u32;
    /// The window the path's channels are re-opened to now; `None` until the rule has one (each
    /// channel keeps the window its session was dialled with).
    fn window(&self) -> Option<u32>;
    /// Whether the rule reads measurements at all: a path is pinged only for one that does.
    fn measures(&self) -> bool;
    /// A round trip measured without load: a new session's first pings, the end of a transfer.
    /// `idle`: nothing bulk arrived while it was measured, so no queue of ours can have stood in
    /// it (it measures the path as a drain does).
    fn quiet(&mut self, now: Duration, rtt: Duration, idle: bool);
    /// Measuring starts (again) at `now`: the next sample's bytes were delivered since then.
    /// False when there is nothing to measure for (the measuring stops).
    fn begin(&mut self, now: Duration) -> bool;
    /// One sample while data flows: the round trip of a ping and the bytes delivered since the
    /// previous sample. The window after it; `None` when the rule takes no samples.
    fn sample(&mut self, now: Duration, rtt: Duration, delivered: u64) -> Option<u32>;
    /// Called after each sample: whether the path is to be drained now, to measure its own round
    /// trip under the queue its transfers keep (adaptive.rs, "Draining"). If so, the path's
    /// window is held small from now on, and what the drain waits for before its ping is returned.
    fn drain(&mut self, now: Duration) -> Option<Drain>;
    /// The drain's ping was answered after `rtt` (`None`: not in time): the hold ends.
    fn drained(&mut self, now: Duration, rtt: Option<Duration>);
    /// The lowest round trip the rule holds for the path's own, if any.
    #[cfg(test)]
    fn min_rtt(&self) -> Option<Duration>;
}
