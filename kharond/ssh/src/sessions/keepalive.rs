//! Keeping the pool's sessions honest between uses: ServerAlive probes say when a session died,
//! and a session that may be dead is probed before it is trusted again.
//!
//! - The ServerAlive probes themselves are russh's (`client::Config::keepalive_*`, set in `chain`
//!   from `ServerAliveInterval`/`ServerAliveCountMax`); a session they find dead ends, and the
//!   pool drops it (`slot::Slot::drop_session`).
//! - The sleep detector ([`Detector`]). When the laptop slept, every session's TCP path may be
//!   gone, while russh's keepalive would only notice after `ServerAliveInterval × CountMax`
//!   (Tailscale #1555: the first request after wake must not wait for that). The detector runs no
//!   timer and no task (an idle daemon must not wake up for it, issue 21): at the moments
//!   something happens (a connection routed through a jump host, a `Status` probe) the pool asks
//!   [`Detector::look`], which compares how far apart the clock that counts suspended time (Linux
//!   `CLOCK_BOOTTIME`, macOS `CLOCK_MONOTONIC_RAW`) and the one that does not (`CLOCK_MONOTONIC`,
//!   `CLOCK_UPTIME_RAW`) are with how far apart they were at the previous look: the difference
//!   grew by exactly the time the machine slept. On macOS both are raw clocks on one timebase
//!   (clock_gettime(3): `CLOCK_UPTIME_RAW` is `CLOCK_MONOTONIC_RAW` "but does not increment while
//!   the system is asleep"). `CLOCK_MONOTONIC` counts sleep too, but follows the clock's frequency
//!   adjustments, which the raw clocks do not ("should not be compared to other system time
//!   sources"): its drift against `CLOCK_UPTIME_RAW` would add up to a sleep that never happened.
//!   A process that was only stopped (SIGSTOP, a debugger) is not a sleep: the network did not
//!   change, and keepalive finds a session that died meanwhile. A container cannot suspend its machine, so tests stand in for a sleep with
//!   `KHARON_TEST_SLEPT_FILE` (test-only, undocumented for users): a file holding seconds that
//!   count as slept, added to what the clocks say. The detector knows nothing of the pool.
//! - After a sleep ([`probe_all`]): every session is marked suspect and probed at once; one that
//!   answers is trusted again, one that does not is dropped. A connect that finds its session
//!   still suspect probes it first ([`confirm`]), so the request that noticed does not wait.
//! - After a channel open timed out ([`spawn_probe`]): a black-holed target, or a frozen hop? A
//!   probe in the background finds out, so the next request does not wait for the keepalive
//!   either.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sessions::chain::Dialled;
use crate::sessions::slot::Slot;

/// How long a suspect session (after a sleep, or a channel open that timed out) gets to
/// answer a keepalive before it is given up.
const PROBE: Duration = Duration::from_secs(2);

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
    let (with_sleep, without_sleep) = (libc::CLOCK_MONOTONIC_RAW, libc::CLOCK_UPTIME_RAW);
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

/// After a sleep: marks every session suspect and probes them all at once.
pub(crate) fn probe_all(slots: Vec<Arc<Slot>>) {
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
                        tracing::info!(jumphost = %slot.jumphost, ?rtt, "SSH session answered after the sleep");
                        slot.trusted(id);
                    }
                    Err(why) => {
                        slot.drop_session(id, &format!("{}: {why} after a sleep", slot.hops()));
                    }
                }
            });
        }
    }
}

/// Probes suspect session `id` of `slot` before it is used, within [`PROBE`] and `deadline`:
/// true if it answered (it is trusted again), false if not (it was dropped).
pub(crate) async fn confirm(slot: &Slot, id: u64, chain: &Dialled, deadline: tokio::time::Instant) -> bool {
    let limit = PROBE.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
    if chain.probe(limit).await {
        slot.trusted(id);
        return true;
    }
    slot.drop_session(id, &format!("{}: no answer to a keepalive after a sleep", slot.hops()));
    false
}

/// Probes a session in the background and drops it if it does not answer.
pub(crate) fn spawn_probe(slot: &Arc<Slot>, id: u64, chain: Arc<Dialled>, why: &'static str) {
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
