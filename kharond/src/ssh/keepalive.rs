//! Keeping the pool's sessions honest between uses: ServerAlive probes say when a session died,
//! and a session that may be dead is probed before it is trusted again.
//!
//! - The ServerAlive probes themselves are russh's (`client::Config::keepalive_*`, set in `chain`
//!   from `ServerAliveInterval`/`ServerAliveCountMax`); a session they find dead ends, and the
//!   pool drops it (`slot::Slot::drop_session`).
//! - The wall-clock jump detector ([`spawn_detector`]): a task ticks every [`TICK`] and compares
//!   how much wall time (`SystemTime`) and monotonic time (`Instant`) passed since the last tick.
//!   When the laptop slept, `CLOCK_MONOTONIC` stood still while the wall clock moved on; when the
//!   process was stopped (SIGSTOP, a debugger, a starved VM) both moved on far more than one tick.
//!   Either way every session's TCP path may be gone, while russh's keepalive would only notice
//!   after `ServerAliveInterval × CountMax` (Tailscale #1555: the first request after wake must
//!   not wait for that). The detector bumps a generation counter; it knows nothing of the pool.
//! - After each jump ([`watch_wakeups`]): every session is marked suspect and probed at once; one
//!   that answers is trusted again, one that does not is dropped. A connect that finds its session
//!   still suspect probes it first ([`confirm`]).
//! - After a channel open timed out ([`spawn_probe`]): a black-holed target, or a frozen hop? A
//!   probe in the background finds out, so the next request does not wait for the keepalive
//!   either.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use super::chain::Dialled;
use super::slot::Slot;

/// How long a suspect session (after a clock jump, or a channel open that timed out) gets to
/// answer a keepalive before it is given up.
const PROBE: Duration = Duration::from_secs(2);

/// How often the clocks are compared.
pub const TICK: Duration = Duration::from_secs(1);
/// A tick that took this much longer than [`TICK`] (on either clock) counts as a jump.
pub const JUMP: Duration = Duration::from_secs(3);

/// Receives a new generation number after each detected wake-up.
pub type Wakeups = watch::Receiver<u64>;

/// Starts the detector on the current runtime; it stops when every [`Wakeups`] receiver is gone.
pub fn spawn_detector() -> Wakeups {
    let (tx, rx) = watch::channel(0u64);
    tokio::spawn(async move {
        let mut wall = SystemTime::now();
        let mut mono = Instant::now();
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            interval.tick().await;
            if tx.is_closed() {
                return;
            }
            let (now_wall, now_mono) = (SystemTime::now(), Instant::now());
            if let Some(gap) = jumped(wall, now_wall, mono, now_mono) {
                tracing::info!(gap = ?gap, "clock jump (sleep or stop) detected; probing SSH sessions");
                tx.send_modify(|g| *g += 1);
            }
            (wall, mono) = (now_wall, now_mono);
        }
    });
    rx
}

/// The unexpected extra time between two ticks, if it exceeds [`JUMP`].
fn jumped(wall: SystemTime, now_wall: SystemTime, mono: Instant, now_mono: Instant) -> Option<Duration> {
    // A wall clock set backwards (NTP step) is not a sleep; treat it as no wall time passing.
    let wall_delta = now_wall.duration_since(wall).unwrap_or_default();
    let mono_delta = now_mono.duration_since(mono);
    let gap = wall_delta.max(mono_delta).saturating_sub(TICK);
    (gap > JUMP).then_some(gap)
}

/// After each clock jump: marks every session suspect and probes them all at once. Ends when
/// `slots` returns `None` (the pool is gone) or the detector stops.
pub(super) async fn watch_wakeups(mut wakeups: Wakeups, slots: impl Fn() -> Option<Vec<Arc<Slot>>>) {
    while wakeups.changed().await.is_ok() {
        let Some(slots) = slots() else { return };
        for slot in slots {
            let live = {
                let mut st = slot.lock();
                st.live.as_mut().map(|l| {
                    l.suspect = true;
                    (l.id, l.chain.clone())
                })
            };
            if let Some((id, chain)) = live {
                let weak = Arc::downgrade(&slot);
                tokio::spawn(async move {
                    let answer = chain.round_trip(PROBE).await;
                    let Some(slot) = weak.upgrade() else { return };
                    match answer {
                        Ok(rtt) => {
                            tracing::info!(jumphost = %slot.jumphost, ?rtt, "SSH session answered after the clock jump");
                            slot.trusted(id);
                        }
                        Err(why) => {
                            slot.drop_session(id, &format!("{}: {why} after a clock jump", slot.hops()));
                        }
                    }
                });
            }
        }
    }
}

/// Probes suspect session `id` of `slot` before it is used, within [`PROBE`] and `deadline`:
/// true if it answered (it is trusted again), false if not (it was dropped).
pub(super) async fn confirm(slot: &Slot, id: u64, chain: &Dialled, deadline: tokio::time::Instant) -> bool {
    let limit = PROBE.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
    if chain.probe(limit).await {
        slot.trusted(id);
        return true;
    }
    slot.drop_session(id, &format!("{}: no answer to a keepalive after a clock jump", slot.hops()));
    false
}

/// Probes a session in the background and drops it if it does not answer.
pub(super) fn spawn_probe(slot: &Arc<Slot>, id: u64, chain: Arc<Dialled>, why: &'static str) {
    let weak = Arc::downgrade(slot);
    tokio::spawn(async move {
        if !chain.probe(PROBE).await
            && let Some(slot) = weak.upgrade()
        {
            slot.drop_session(id, &format!("{}: no answer to a keepalive ({why})", slot.hops()));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_or_a_stop_is_a_jump_and_a_normal_tick_is_not() {
        let (w, m) = (SystemTime::now(), Instant::now());
        // Normal tick.
        assert_eq!(jumped(w, w + TICK, m, m + TICK), None);
        // Slight scheduling delay.
        assert_eq!(jumped(w, w + TICK * 2, m, m + TICK * 2), None);
        // Suspend: monotonic clock stood still, wall clock moved 10 minutes.
        assert!(jumped(w, w + Duration::from_secs(600), m, m + TICK).is_some());
        // SIGSTOP for 20 s: both moved.
        assert!(jumped(w, w + Duration::from_secs(20), m, m + Duration::from_secs(20)).is_some());
        // Wall clock stepped back by NTP.
        assert_eq!(jumped(w, w - Duration::from_secs(100), m, m + TICK), None);
    }
}
