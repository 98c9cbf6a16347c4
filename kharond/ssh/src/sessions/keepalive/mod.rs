//! Keeping the pool's sessions honest between uses: ServerAlive probes say when a session died,
//! and a session that may be dead is probed before it is trusted again.
//!
//! - The ServerAlive probes themselves are russh's (`client::Config::keepalive_*`, set in `chain`
//!   from `ServerAliveInterval`/`ServerAliveCountMax`); a session they find dead ends, and the
//!   pool drops it (`slot::Slot::drop_session`).
//! - The sleep detector ([`Detector`]). When the laptop slept, every session's TCP path may be
//!   gone, while russh's keepalive would only notice after `ServerAliveInterval × CountMax`
//!   (Tailscale #1555: the first request after wake must not wait for that). The detector runs no
//!   timer and no task (an idle daemon must not wake up for it): at the moments
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
//!   change, and keepalive finds a session that died meanwhile. The clocks are read through a
//!   [`SleepClock`]: a container cannot suspend its machine, so tests give the pool one of their
//!   own (`PoolSettings::sleep_clock`). The detector knows nothing of the pool.
//! - After a sleep ([`probe_all`]): every session is marked suspect and probed at once; one that
//!   answers is trusted again, one that does not is dropped. A connect that finds its session
//!   still suspect probes it first ([`confirm`]), so the request that noticed does not wait.
//! - After a channel open timed out ([`spawn_probe`]): a black-holed target, or a frozen hop? A
//!   probe in the background finds out, so the next request does not wait for the keepalive
//!   either.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::sessions::chain::Dialled;
use crate::sessions::slot::Slot;

/// How long the machine has been suspended since some fixed point, in nanoseconds: the kernel's
/// clocks ([`SleepClock::system`]), or a test's own.
#[derive(Clone)]
pub struct SleepClock(Arc<dyn Fn() -> u64 + Send + Sync>);

impl SleepClock {
    /// The clock that counts suspended time less the one that does not (see the module doc).
    pub fn system() -> Self {
        SleepClock(Arc::new(asleep_so_far))
    }

    /// Suspended time as `read` says, in nanoseconds (tests: a sleep is an addition to a counter).
    pub fn new(read: impl Fn() -> u64 + Send + Sync + 'static) -> Self {
        SleepClock(Arc::new(read))
    }

    fn read(&self) -> u64 {
        (self.0)()
    }
}

impl fmt::Debug for SleepClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SleepClock")
    }
}

/// Remembers how far apart the two clocks were at the last look.
#[derive(Debug)]
pub struct Detector {
    clock: SleepClock,
    /// A shorter sleep is not reported (`SessionSettings::sleep_jump`).
    jump: Duration,
    /// Suspended time so far (ns): the sleep-counting clock minus the other one.
    asleep: AtomicU64,
}

impl Detector {
    pub fn new(clock: SleepClock, jump: Duration) -> Self {
        let asleep = AtomicU64::new(clock.read());
        Detector { clock, jump, asleep }
    }

    /// How long the machine slept since the last look, if longer than the jump. Cheap (two vDSO
    /// clock reads); concurrent lookers see one sleep once between them.
    pub fn look(&self) -> Option<Duration> {
        let now = self.clock.read();
        let before = self.asleep.fetch_max(now, Ordering::Relaxed);
        slept(before, now, self.jump)
    }
}

/// The sleep between two readings of a [`SleepClock`], if it exceeds `jump`.
fn slept(before: u64, now: u64, jump: Duration) -> Option<Duration> {
    let gap = Duration::from_nanos(now.saturating_sub(before));
    (gap > jump).then_some(gap)
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
    let Ok(ts) = nix::time::clock_gettime(nix::time::ClockId::from_raw(clock)) else { return 0 };
    u64::try_from(ts.tv_sec()).unwrap_or(0).saturating_mul(1_000_000_000)
        + u64::try_from(ts.tv_nsec()).unwrap_or(0)
}

/// After a sleep: marks every session suspect and probes them all at once.
pub(crate) fn probe_all(slots: Vec<Arc<Slot>>, probe: Duration) {
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
                let answer = chain.round_trip(probe).await;
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

/// Probes suspect session `id` of `slot` before it is used, within `probe` and `deadline`:
/// true if it answered (it is trusted again), false if not (it was dropped).
pub(crate) async fn confirm(
    slot: &Slot,
    id: u64,
    chain: &Dialled,
    deadline: tokio::time::Instant,
    probe: Duration,
) -> bool {
    let limit = probe.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
    if chain.probe(limit).await {
        slot.trusted(id);
        return true;
    }
    slot.drop_session(id, &format!("{}: no answer to a keepalive after a sleep", slot.hops()));
    false
}

/// Probes a session in the background and drops it if it does not answer.
pub(crate) fn spawn_probe(
    slot: &Arc<Slot>,
    id: u64,
    chain: Arc<Dialled>,
    why: &'static str,
    probe: Duration,
) {
    let weak = Arc::downgrade(slot);
    tokio::spawn(async move {
        if !chain.probe(probe).await
            && let Some(slot) = weak.upgrade()
        {
            slot.drop_session(id, &format!("{}: no answer to a keepalive ({why})", slot.hops()));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const JUMP: Duration = Duration::from_secs(3);

    #[test]
    fn a_sleep_longer_than_the_jump_counts_and_clock_noise_does_not() {
        let s = 1_000_000_000;
        assert_eq!(slept(5 * s, 5 * s, JUMP), None, "nothing slept");
        assert_eq!(slept(5 * s, 5 * s + 1_000, JUMP), None, "two clock reads a microsecond apart");
        assert_eq!(slept(5 * s, 7 * s, JUMP), None, "shorter than the jump");
        assert_eq!(slept(5 * s, 605 * s, JUMP), Some(Duration::from_secs(600)), "a ten-minute suspend");
        assert_eq!(slept(7 * s, 5 * s, JUMP), None, "an older reading never counts as a sleep");
    }

    #[test]
    fn a_machine_that_did_not_sleep_is_not_reported_as_asleep() {
        let detector = Detector::new(SleepClock::system(), JUMP);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(detector.look(), None);
        assert_eq!(detector.look(), None);
    }

    #[test]
    fn a_sleep_is_reported_once_by_whichever_look_comes_first() {
        let asleep = Arc::new(AtomicU64::new(0));
        let read = asleep.clone();
        let detector = Detector::new(SleepClock::new(move || read.load(Ordering::Relaxed)), JUMP);
        asleep.fetch_add(600_000_000_000, Ordering::Relaxed);
        assert_eq!(detector.look(), Some(Duration::from_secs(600)));
        assert_eq!(detector.look(), None, "the same sleep twice");
    }
}

#[cfg(test)]
mod sleep_tests;
