//! Network namespaces and clocks, through libc (the bench crate's only system dependency): a
//! thread enters a namespace with setns(2) and from then on opens sockets and devices in it.

use std::fs::File;
use std::os::fd::AsRawFd;

use anyhow::Context;

/// `/run/netns/NAME` for a name as `ip netns add` makes it; a path as it is.
fn namespace_path(netns: &str) -> String {
    if netns.contains('/') { netns.to_owned() } else { format!("/run/netns/{netns}") }
}

/// Moves the calling thread into the network namespace `netns` (a name of `ip netns` or a path
/// such as /proc/PID/ns/net).
pub fn enter(netns: &str) -> anyhow::Result<()> {
    let path = namespace_path(netns);
    let ns = File::open(&path).with_context(|| format!("opening network namespace {path}"))?;
    enter_fd(&ns).with_context(|| format!("entering network namespace {path}"))
}

pub fn enter_fd(ns: &File) -> anyhow::Result<()> {
    // SAFETY: setns only reads the descriptor, which `ns` keeps open for the call.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// The monotonic clock (CLOCK_MONOTONIC, as `Instant`), in nanoseconds: the same in every
/// namespace and process of the machine, so the emulator and its check can compare times.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime fills the timespec we own; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Lets this thread's sleeps end within a microsecond of when they were asked to (the default
/// slack of 50 µs would blur a 1 Gbit/s link's 12 µs per packet).
pub fn precise_sleeps() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}
