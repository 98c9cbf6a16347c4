//! Noticing that sessions may be dead without waiting for a ServerAlive tick.
//!
//! Owns: the sleep detector. When the laptop slept, every session's TCP path may be gone, while
//! russh's keepalive would only notice after `ServerAliveInterval × CountMax` (Tailscale #1555:
//! the first request after wake must not wait for that). The detector runs no timer and no task
//! (an idle daemon must not wake up for it, issue 21): at the moments something happens (a
//! connection routed through a jump host, a `Status` probe) the pool asks [`Detector::look`],
//! which compares how far apart the clock that counts suspended time (Linux `CLOCK_BOOTTIME`,
//! macOS `CLOCK_MONOTONIC`) and the one that does not (`CLOCK_MONOTONIC`, `CLOCK_UPTIME_RAW`)
//! are with how far apart they were at the previous look: the difference grew by exactly the
//! time the machine slept. The pool then probes every session at once and marks them suspect,
//! so this very connection probes before use.
//! A process that was only stopped (SIGSTOP, a debugger) is not a sleep: the network did not
//! change, and keepalive finds a session that died meanwhile.
//! A container cannot suspend its machine, so tests stand in for a sleep with
//! `KHARON_TEST_SLEPT_FILE` (test-only, undocumented for users): a file holding seconds that count
//! as slept, added to what the clocks say.
//! The ServerAlive probes themselves are russh's (`client::Config::keepalive_*`, set in `chain`).
//! Knows nothing of the pool's map: it only says whether, and how long, the machine slept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A sleep shorter than this is not worth probing every session for (nor is clock noise).
pub const JUMP: Duration = Duration::from_secs(3);

/// Remembers how far apart the two clocks were at the last look.
#[derive(Debug)]
pub struct Detector {
    /// Suspended time so far (ns): the sleep-counting clock minus the other one.
    asleep: AtomicU64,
    /// Tests only: a file of seconds that count as slept (see the module doc).
    test_slept: Option<std::path::PathBuf>,
}

impl Default for Detector {
    fn default() -> Self {
        let test_slept = std::env::var_os("KHARON_TEST_SLEPT_FILE").map(std::path::PathBuf::from);
        let detector = Self { asleep: AtomicU64::new(0), test_slept };
        detector.asleep.store(detector.asleep_so_far(), Ordering::Relaxed);
        detector
    }
}

impl Detector {
    /// How long the machine slept since the last look, if longer than [`JUMP`]. Cheap (two
    /// vDSO clock reads); concurrent lookers see one sleep once between them.
    pub fn look(&self) -> Option<Duration> {
        let now = self.asleep_so_far();
        let before = self.asleep.fetch_max(now, Ordering::Relaxed);
        slept(before, now)
    }

    fn asleep_so_far(&self) -> u64 {
        let simulated = self.test_slept.as_ref().and_then(|path| {
            let text = std::fs::read_to_string(path).ok()?;
            Some(text.trim().parse::<u64>().ok()?.saturating_mul(1_000_000_000))
        });
        asleep_so_far().saturating_add(simulated.unwrap_or(0))
    }
}

/// The sleep between two readings of [`asleep_so_far`], if it exceeds [`JUMP`].
fn slept(before: u64, now: u64) -> Option<Duration> {
    let gap = Duration::from_nanos(now.saturating_sub(before));
    (gap > JUMP).then_some(gap)
}

/// Nanoseconds the machine spent suspended since boot (plus a constant); 0 where unknown.
fn asleep_so_far() -> u64 {
    #[cfg(target_os = "linux")]
    let (with_sleep, without_sleep) = (libc::CLOCK_BOOTTIME, libc::CLOCK_MONOTONIC);
    #[cfg(target_os = "macos")]
    let (with_sleep, without_sleep) = (libc::CLOCK_MONOTONIC, libc::CLOCK_UPTIME_RAW);
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    {
        read(with_sleep).saturating_sub(read(without_sleep))
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        0
    }
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec we own; both clocks exist on this platform.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec).unwrap_or(0).saturating_mul(1_000_000_000)
        + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleep_longer_than_the_jump_counts_and_clock_noise_does_not() {
        let s = 1_000_000_000;
        assert_eq!(slept(5 * s, 5 * s), None, "nothing slept");
        assert_eq!(slept(5 * s, 5 * s + 1_000), None, "two clock reads a microsecond apart");
        assert_eq!(slept(5 * s, 7 * s), None, "shorter than JUMP");
        assert_eq!(slept(5 * s, 605 * s), Some(Duration::from_secs(600)), "a ten-minute suspend");
        assert_eq!(slept(7 * s, 5 * s), None, "an older reading never counts as a sleep");
    }

    #[test]
    fn a_machine_that_did_not_sleep_is_not_reported_as_asleep() {
        let detector = Detector::default();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(detector.look(), None);
        assert_eq!(detector.look(), None);
    }
}
