//! The emulator's loop: a thread per direction waits in ppoll(2) for a packet on its TUN device or
//! for its next packet due at the far end, reads what has arrived into its shaper, and writes to
//! the other device what is due. SIGTERM and SIGINT end both.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::shaper::Shaper;

/// The largest IP packet a TUN device hands over (its MTU can be at most this).
pub const MAX_PACKET: usize = 65_535;
/// Packets read per turn before the due ones are written.
const READS_PER_TURN: usize = 64;
/// The longest the loop sleeps with nothing due, so that a signal to stop is seen.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// One direction of traffic: the device it is read from, the one it is written to, its shaper.
pub struct Way {
    pub from: OwnedFd,
    pub to: OwnedFd,
    pub shaper: Shaper,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// SIGTERM and SIGINT end the loop (without SA_RESTART, so a waiting ppoll returns at once).
pub fn stop_on_signals() -> anyhow::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: a zeroed sigaction is valid (no flags, empty mask).
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // SAFETY: installs a handler that only stores to an atomic, which is async-signal-safe.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error()).context("installing the signal handler");
        }
    }
    Ok(())
}

/// Reads what `way.from` has, at most [`READS_PER_TURN`] packets, into its shaper.
fn read_some(way: &mut Way, now: u64, buf: &mut [u8]) -> anyhow::Result<()> {
    for _ in 0..READS_PER_TURN {
        // SAFETY: reads into the buffer we own, of its length, from a descriptor we own.
        let n = unsafe { libc::read(way.from.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted) {
                return Ok(());
            }
            return Err(e).context("reading a TUN device");
        }
        if n == 0 {
            return Ok(());
        }
        way.shaper.offer(now, buf[..n as usize].to_vec());
    }
    Ok(())
}

/// Writes every packet of `way` that is due by `now` to its far device.
fn write_due(way: &mut Way, now: u64) {
    while let Some((due, packet)) = way.shaper.take_due(now) {
        way.shaper.counters.record_late(now.saturating_sub(due));
        // SAFETY: writes the packet we own to a descriptor we own.
        let n = unsafe { libc::write(way.to.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if n == packet.len() as isize {
            way.shaper.counters.delivered += 1;
            way.shaper.counters.delivered_bytes += packet.len() as u64;
        } else {
            way.shaper.counters.write_errors += 1;
        }
    }
}

/// Moves packets both ways until a signal says stop, a thread per direction (each direction's
/// packets and shaper are its own; on two cores the data of a transfer and its ACKs move side by
/// side). `started` is the shapers' time zero.
pub fn run(ways: &mut [Way; 2], started: Instant) -> anyhow::Result<()> {
    let [up, down] = ways;
    std::thread::scope(|s| {
        let up = s.spawn(|| carry(up, started));
        let down = carry(down, started);
        // One direction that fails stops the other too.
        STOP.store(true, Ordering::Relaxed);
        let up = up.join().map_err(|_| anyhow::anyhow!("the near → far thread panicked"))?;
        up.and(down)
    })
}

/// Moves one direction's packets until [`STOP`].
fn carry(way: &mut Way, started: Instant) -> anyhow::Result<()> {
    let mut buf = vec![0u8; MAX_PACKET];
    let since = |started: Instant| started.elapsed().as_nanos() as u64;
    while !STOP.load(Ordering::Relaxed) {
        let now = since(started);
        let wait = way
            .shaper
            .next_due()
            .map_or(IDLE_WAIT, |due| Duration::from_nanos(due.saturating_sub(now)).min(IDLE_WAIT));
        let mut fd = libc::pollfd { fd: way.from.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let timeout =
            libc::timespec { tv_sec: wait.as_secs() as libc::time_t, tv_nsec: wait.subsec_nanos() as _ };
        // SAFETY: polls the descriptor we own, with a timeout we own; no signal mask change.
        let ready = unsafe { libc::ppoll(&mut fd, 1, &timeout, std::ptr::null()) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e).context("waiting for packets");
        }
        if fd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            bail!("a TUN device went away (was its namespace deleted?)");
        }
        if fd.revents & libc::POLLIN != 0 {
            read_some(way, since(started), &mut buf)?;
        }
        write_due(way, since(started));
    }
    Ok(())
}

/// This process's CPU time so far (user and system), in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
