//! The emulator's two ends: TUN devices, one in each namespace, through libc.
//!
//! A TUN device belongs to the namespace of the thread that opens /dev/net/tun and attaches with
//! TUNSETIFF (`drivers/net/tun.c`, `tun_set_iff`), so the emulator opens each end inside its
//! namespace and then returns to its own. The devices are made beforehand, persistent and
//! configured (`ip tuntap add … mode tun`, address, route, MTU) by the script that owns the
//! namespaces; the emulator only attaches to them, with the flags iproute2 gives them
//! (`IFF_TUN | IFF_NO_PI`: bare IP packets, no packet-information header).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, bail};

use crate::netns;

/// Attaches to the TUN device `iface` of namespace `netns`, non-blocking; the calling thread is
/// back in its own namespace afterwards.
pub fn open(netns: &str, iface: &str) -> anyhow::Result<OwnedFd> {
    let own = File::open("/proc/thread-self/ns/net").context("opening this thread's network namespace")?;
    netns::enter(netns)?;
    let tun = attach(iface).with_context(|| format!("attaching to TUN device {iface} in {netns}"));
    netns::enter_fd(&own).context("returning to the emulator's own network namespace")?;
    tun
}

fn attach(iface: &str) -> anyhow::Result<OwnedFd> {
    let name = iface.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        bail!("{iface:?}: not an interface name (1 to {} bytes)", libc::IFNAMSIZ - 1);
    }
    let path = c"/dev/net/tun";
    // SAFETY: a valid C string; the descriptor returned is owned below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("opening /dev/net/tun");
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let tun = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in req.ifr_name.iter_mut().zip(name) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads and writes the ifreq we own, for the descriptor we own.
    if unsafe { libc::ioctl(tun.as_raw_fd(), libc::TUNSETIFF, &mut req) } != 0 {
        let e = std::io::Error::last_os_error();
        bail!(
            "TUNSETIFF: {e} (made with `ip tuntap add dev {iface} mode tun`, without `pi` or `multi_queue`?)"
        );
    }
    Ok(tun)
}
