//! Noticing that sessions may be dead without waiting for a ServerAlive tick.
//!
//! Owns: the wall-clock jump detector. A task ticks every [`TICK`] and compares how much wall
//! time (`SystemTime`) and monotonic time (`Instant`) passed since the last tick. When the laptop
//! slept, `CLOCK_MONOTONIC` stood still while the wall clock moved on; when the process was
//! stopped (SIGSTOP, a debugger, a starved VM) both moved on far more than one tick. Either way
//! every session's TCP path may be gone, while russh's keepalive would only notice after
//! `ServerAliveInterval × CountMax` (Tailscale #1555: the first request after wake must not wait
//! for that). The detector bumps a generation counter; the pool probes every session at once and
//! marks them suspect so the next connect probes before use.
//! The ServerAlive probes themselves are russh's (`client::Config::keepalive_*`, set in `chain`).
//! Knows nothing of the pool's map: it only publishes wake-ups.

use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

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
