//! The descriptor budget: how many descriptors kharond may hold (RLIMIT_NOFILE), raised at start
//! as far as the system allows, and how many client connections fit in it.
//!
//! A relayed connection holds two descriptors, its client socket and its upstream (a socket on
//! the direct path; on the jump host path the channel rides on a shared session). The relay's
//! splice pipes are shared and bounded (`relay::PIPE_DESCRIPTORS`) and count in the [`RESERVE`],
//! with SSH sessions, ProxyCommand pipes, the control socket and its clients, files read on a
//! reload, and the runtime's own descriptors. So `connections = (soft limit - RESERVE) / 2`.
//!
//! At start the soft limit goes up to the hard limit (the default soft limit of 1024 would fit
//! ~300 clients). When even the hard limit is short of what the wanted connections need, kharond
//! asks for more: that works only with CAP_SYS_RESOURCE (root, or a service manager that allows
//! it); unprivileged it fails with EPERM, which is fine: the daemon then serves what fits.
//!
//! macOS differs (getrlimit(2), setrlimit in xnu's `kern_resource.c`): the hard limit is usually
//! `RLIM_INFINITY` and the soft one 256, and the kernel holds a process to
//! `kern.maxfilesperproc` whatever its limits say. A soft limit above that ceiling is refused
//! with EINVAL rather than clamped (Apple: "use `rlim_cur = min(OPEN_MAX, rlim_max)`"), so there
//! the soft limit goes up to the hard limit *or the ceiling*, whichever is lower: the sysctl when
//! it can be read, else [`OPEN_MAX`]. [`ceiling_for`], [`hard_request`] and [`soft_request`] are
//! those rules, pure and tested on every platform; only reading the sysctl is macOS code.
//!
//! When the limit cannot even be read, the connection limit assumes the platform's usual soft
//! limit ([`USUAL_SOFT`]: 1024 on Linux, 256 on macOS) rather than a number that would admit
//! more clients than there are descriptors; when raising it fails, what was there stays and counts.
//!
//! The limits are read and set with the `rlimit` crate's `getrlimit`/`setrlimit`; its
//! `increase_nofile_limit` is not used because its policy is not this one (rlimit 0.11,
//! `tools.rs`): it never asks for a higher hard limit, raises the soft one only up to the number
//! it is given, and fails outright where `kern.maxfilesperproc` cannot be read instead of falling
//! back to [`OPEN_MAX`]. The sysctl is read here, with `sysctlbyname(3)`: rlimit keeps its own
//! reader private.

use std::io;

use kharon_relay as relay;
use rlimit::Resource;

/// Descriptors kept for everything but client connections; see the module doc.
pub const RESERVE: u64 = 256 + relay::PIPE_DESCRIPTORS as u64;
/// Descriptors one client connection holds.
pub const PER_CONNECTION: u64 = 2;
/// The connection limit never goes below this, however small the descriptor limit: the reserve
/// is generous, and a daemon that serves a few clients beats one that serves none.
pub const MIN_CONNECTIONS: usize = 16;
/// What a workstation needs at worst: browsers keep a few dozen connections per proxy (Chrome and
/// Firefox: 32 per proxy server) in a handful of profiles, plus kubectl, oc and their watches. A
/// limit that fits fewer than this is worth a warning at start; above it, fitting fewer than the
/// wanted connections is only said (a laptop's 20,000 fits 9,808, which nobody reaches).
pub const WORKSTATION_NEEDS: usize = 1024;

/// macOS `OPEN_MAX` (`<sys/syslimits.h>`): the soft limit Apple's getrlimit(2) says to ask for
/// at most when `kern.maxfilesperproc` is not known.
pub const OPEN_MAX: u64 = 10_240;

/// The soft limit a process usually starts with, assumed when it cannot be read.
#[cfg(target_os = "macos")]
pub const USUAL_SOFT: u64 = 256;
#[cfg(not(target_os = "macos"))]
pub const USUAL_SOFT: u64 = 1024;

/// RLIMIT_NOFILE, soft and hard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    pub soft: u64,
    pub hard: u64,
}

/// What [`raise`] found and what it got.
#[derive(Debug)]
pub struct Raised {
    pub before: Limit,
    pub now: Limit,
    /// Why the hard limit could not go up to what was wanted (usually EPERM), if it was tried.
    pub hard_refused: Option<io::Error>,
    /// Why the soft limit could not go up (it stays at `now.soft`), if it was tried.
    pub soft_refused: Option<io::Error>,
}

/// The highest soft limit the kernel accepts, given what `kern.maxfilesperproc` read (`None`:
/// not readable) on macOS; `None` (no ceiling but the hard limit) elsewhere.
pub fn ceiling_for(macos: bool, maxfilesperproc: Option<u64>) -> Option<u64> {
    macos.then(|| maxfilesperproc.filter(|&n| n > 0).unwrap_or(OPEN_MAX))
}

/// The first setrlimit [`raise`] makes, if any: both limits up to `wanted` when the hard one is
/// lower (only a privileged process gets that), the soft part held to `ceiling`, which macOS
/// would refuse to exceed with EINVAL.
pub fn hard_request(found: Limit, wanted: u64, ceiling: Option<u64>) -> Option<Limit> {
    (found.hard < wanted).then(|| Limit { soft: capped(wanted, ceiling), hard: wanted })
}

/// The soft limit to ask for once the hard limit is what it will be: the hard limit, held to
/// `ceiling`; `None` when the soft limit is there already (never lowered).
pub fn soft_request(current: Limit, ceiling: Option<u64>) -> Option<Limit> {
    let soft = capped(current.hard, ceiling);
    (soft > current.soft).then_some(Limit { soft, hard: current.hard })
}

fn capped(soft: u64, ceiling: Option<u64>) -> u64 {
    ceiling.map_or(soft, |c| soft.min(c))
}

/// Descriptors `connections` clients need, reserve included.
pub fn needed_for(connections: usize) -> u64 {
    connections as u64 * PER_CONNECTION + RESERVE
}

/// Client connections that fit under a soft limit of `soft` descriptors.
pub fn connections_fitting(soft: u64) -> usize {
    let fit = soft.saturating_sub(RESERVE) / PER_CONNECTION;
    usize::try_from(fit).unwrap_or(usize::MAX).max(MIN_CONNECTIONS)
}

/// Raises the descriptor limit for `wanted` connections and returns how many fit in what was
/// obtained; says so at start when that is fewer, and how to fix it.
pub fn connection_limit(wanted: usize) -> usize {
    let needed = needed_for(wanted);
    let raised = match raise(needed) {
        Ok(raised) => raised,
        Err(e) => {
            tracing::warn!("cannot read the descriptor limit (RLIMIT_NOFILE): {e}");
            // The platform's usual soft limit, so the guess errs on the side of waiting clients
            // over EMFILE.
            return wanted.min(connections_fitting(USUAL_SOFT));
        }
    };
    if let Some(e) = &raised.soft_refused {
        tracing::warn!(
            "cannot raise the soft descriptor limit from {} (RLIMIT_NOFILE): {e}",
            raised.now.soft
        );
    }
    let fit = connections_fitting(raised.now.soft);
    let limit = wanted.min(fit);
    if raised.now != raised.before {
        tracing::debug!(
            "descriptor limit raised from {}/{} to {}/{} (soft/hard)",
            raised.before.soft,
            raised.before.hard,
            raised.now.soft,
            raised.now.hard
        );
    }
    match shortfall(raised.now.soft, wanted, fit, raised.hard_refused.as_ref()) {
        Some((Level::Warn, text)) => tracing::warn!("{text}"),
        Some((Level::Info, text)) => tracing::info!("{text}"),
        None if limit < crate::proxy::listener::MAX_CONNECTIONS => {
            tracing::info!("serving at most {limit} connections at once (max_connections)");
        }
        None => {}
    }
    limit
}

/// How loudly a limit that fits fewer connections than wanted is said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Fewer than a workstation may need ([`WORKSTATION_NEEDS`]): clients may have to wait.
    Warn,
    /// More than a workstation needs, fewer than wanted: worth knowing, not worth an alarm.
    Info,
}

/// What to say when `fit` connections (under a soft limit of `soft` descriptors) are fewer than
/// the `wanted` ones, and how loudly; `None` when all fit. The text keeps "fits only N of M" in
/// both cases (scripts and the scale test read it).
pub fn shortfall(
    soft: u64,
    wanted: usize,
    fit: usize,
    hard_refused: Option<&io::Error>,
) -> Option<(Level, String)> {
    if fit >= wanted {
        return None;
    }
    let limit = wanted.min(fit);
    let needed = needed_for(wanted);
    let refused = match hard_refused {
        Some(e) => format!(" (kharond may not raise its hard limit itself: {e})"),
        None => String::new(),
    };
    let fix = format!("{}{refused}", how_to_allow(needed));
    if limit < WORKSTATION_NEEDS {
        Some((
            Level::Warn,
            format!(
                "the descriptor limit of {soft} fits only {limit} of {wanted} connections, fewer than a \
                 browser and kubectl may hold at once; more clients wait for a free one. To serve all, {fix}"
            ),
        ))
    } else {
        Some((
            Level::Info,
            format!(
                "the descriptor limit of {soft} fits only {limit} of {wanted} connections at once, plenty \
                 for a workstation; to serve more, {fix}"
            ),
        ))
    }
}

/// What the user can change so that `needed` descriptors are allowed.
fn how_to_allow(needed: u64) -> String {
    if cfg!(target_os = "macos") {
        // The ceiling first: kharond raises its own soft limit up to it.
        format!(
            "raise macOS's per-process cap with `sudo sysctl kern.maxfilesperproc={needed}` (kern.maxfiles \
             too if it is lower), start kharond without a lower `ulimit -n`, and restart it"
        )
    } else {
        format!(
            "set LimitNOFILE={needed} in the service unit or run `ulimit -n {needed}` where kharond starts"
        )
    }
}

/// Raises the soft limit to the hard limit (on macOS: no higher than the kernel's per-process
/// ceiling), and both to `wanted` when the hard limit is lower and the process may raise it.
/// Fails only when the limit cannot be read; a refused raise is reported in [`Raised`].
pub fn raise(wanted: u64) -> io::Result<Raised> {
    let ceiling = ceiling();
    let before = get()?;
    let mut hard_refused = None;
    if let Some(ask) = hard_request(before, wanted, ceiling) {
        hard_refused = set(ask).err();
    }
    let current = get()?;
    let soft_refused = soft_request(current, ceiling).and_then(|ask| set(ask).err());
    Ok(Raised { before, now: get()?, hard_refused, soft_refused })
}

/// This platform's ceiling for the soft limit ([`ceiling_for`]).
fn ceiling() -> Option<u64> {
    #[cfg(target_os = "macos")]
    {
        ceiling_for(true, maxfilesperproc())
    }
    #[cfg(not(target_os = "macos"))]
    {
        ceiling_for(false, None)
    }
}

/// `kern.maxfilesperproc`, if it can be read.
#[cfg(target_os = "macos")]
fn maxfilesperproc() -> Option<u64> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>();
    // SAFETY: the name is NUL-terminated, and sysctlbyname writes at most `len` bytes into
    // `value`, which is that large; no new value is set.
    let rc = unsafe {
        libc::sysctlbyname(
            c"kern.maxfilesperproc".as_ptr(),
            (&raw mut value).cast(),
            &mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    (rc == 0 && len == std::mem::size_of::<libc::c_int>()).then(|| u64::try_from(value).ok()).flatten()
}

fn get() -> io::Result<Limit> {
    let (soft, hard) = rlimit::getrlimit(Resource::NOFILE)?;
    Ok(Limit { soft, hard })
}

fn set(limit: Limit) -> io::Result<()> {
    rlimit::setrlimit(Resource::NOFILE, limit.soft, limit.hard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_descriptors_per_connection_after_the_reserve() {
        assert_eq!(connections_fitting(RESERVE + 2 * 10_000), 10_000);
        assert_eq!(connections_fitting(RESERVE + 2 * 10_000 + 1), 10_000);
        assert_eq!(needed_for(10_000), RESERVE + 20_000);
        assert_eq!(connections_fitting(needed_for(16_384)), 16_384);
    }

    #[test]
    fn a_limit_no_workstation_reaches_is_said_without_alarm() {
        // A laptop's usual 20,000 (or a container's): fits 9,808 of 16,384; nobody has that many.
        let (level, text) = shortfall(20_000, 16_384, connections_fitting(20_000), None).unwrap();
        assert_eq!(level, Level::Info, "{text}");
        assert!(text.contains("fits only 9808 of 16384") && text.contains("plenty"), "{text}");
        // The old default of 1024 fits ~300: clients would wait, and that is worth a warning.
        let (level, text) = shortfall(1024, 16_384, connections_fitting(1024), None).unwrap();
        assert_eq!(level, Level::Warn, "{text}");
        assert!(text.contains("LimitNOFILE=") && text.contains("ulimit -n"), "{text}");
        assert_eq!(shortfall(40_000, 16_384, connections_fitting(40_000), None), None, "all fit");
        // max_connections below what fits: nothing to say here.
        assert_eq!(shortfall(20_000, 500, connections_fitting(20_000), None), None);
    }

    #[test]
    fn a_tiny_limit_still_serves_a_few() {
        assert_eq!(connections_fitting(0), MIN_CONNECTIONS);
        assert_eq!(connections_fitting(RESERVE), MIN_CONNECTIONS);
    }

    /// macOS's `RLIM_INFINITY` (`(1 << 63) - 1`) as `get` reads it.
    const INFINITY: u64 = i64::MAX as u64;
    // What rlimit reads there for it (`rlimit::INFINITY` is the platform's RLIM_INFINITY).
    #[cfg(target_os = "macos")]
    const _: () = assert!(rlimit::INFINITY == INFINITY);
    /// A macOS login session's limits: soft 256, hard unlimited.
    const MAC_DEFAULT: Limit = Limit { soft: 256, hard: INFINITY };

    #[test]
    fn macos_hard_infinite_raises_the_soft_limit_to_kern_maxfilesperproc_not_to_infinity() {
        let ceiling = ceiling_for(true, Some(61_440));
        assert_eq!(ceiling, Some(61_440));
        // Nothing to ask of the hard limit: unlimited is more than any number of connections.
        assert_eq!(hard_request(MAC_DEFAULT, needed_for(16_384), ceiling), None);
        // setrlimit with rlim_cur = RLIM_INFINITY (or anything above the sysctl) fails with EINVAL.
        assert_eq!(soft_request(MAC_DEFAULT, ceiling), Some(Limit { soft: 61_440, hard: INFINITY }));
        assert_eq!(connections_fitting(61_440), (61_440 - RESERVE as usize) / 2);
    }

    #[test]
    fn macos_hard_below_open_max_raises_the_soft_limit_to_the_hard_one() {
        // `ulimit -Hn 4096` in the shell that started kharond: the hard limit is the ceiling.
        let found = Limit { soft: 256, hard: 4096 };
        for ceiling in [ceiling_for(true, Some(61_440)), ceiling_for(true, None)] {
            // More is asked for (EPERM unless root), the soft part within the kernel's ceiling...
            let ask = hard_request(found, needed_for(16_384), ceiling).expect("hard limit is short");
            assert_eq!(ask.hard, needed_for(16_384));
            assert!(ask.soft <= ceiling.unwrap(), "{ask:?} above {ceiling:?}");
            // ...and refused, so the soft limit goes up to the hard one, below either ceiling.
            assert_eq!(soft_request(found, ceiling), Some(Limit { soft: 4096, hard: 4096 }));
        }
    }

    #[test]
    fn macos_raised_kern_maxfilesperproc_is_used_in_full_and_open_max_only_without_it() {
        // `sudo sysctl kern.maxfilesperproc=524288`: kharond goes up to it, past OPEN_MAX.
        let raised = ceiling_for(true, Some(524_288));
        assert_eq!(soft_request(MAC_DEFAULT, raised), Some(Limit { soft: 524_288, hard: INFINITY }));
        // The sysctl unreadable (or zero): Apple's rule, min(OPEN_MAX, rlim_max).
        for unknown in [ceiling_for(true, None), ceiling_for(true, Some(0))] {
            assert_eq!(soft_request(MAC_DEFAULT, unknown), Some(Limit { soft: OPEN_MAX, hard: INFINITY }));
        }
        // A hard request by root stays within the ceiling too (EINVAL above it).
        let root = hard_request(Limit { soft: 256, hard: 1024 }, 600_000, raised).expect("short");
        assert_eq!(root, Limit { soft: 524_288, hard: 600_000 });
    }

    #[test]
    fn linux_has_no_ceiling_but_the_hard_limit_and_no_limit_is_lowered() {
        assert_eq!(ceiling_for(false, Some(10)), None);
        let login = Limit { soft: 1024, hard: 524_288 };
        assert_eq!(soft_request(login, None), Some(Limit { soft: 524_288, hard: 524_288 }));
        assert_eq!(hard_request(login, needed_for(16_384), None), None);
        let short = Limit { soft: 1024, hard: 4096 };
        let wanted = needed_for(16_384);
        assert_eq!(hard_request(short, wanted, None), Some(Limit { soft: wanted, hard: wanted }));
        // Already at the hard limit, or above a ceiling someone raised it past: left alone.
        assert_eq!(soft_request(Limit { soft: 4096, hard: 4096 }, None), None);
        assert_eq!(soft_request(Limit { soft: 20_000, hard: INFINITY }, Some(10_240)), None);
    }

    /// Runs in a child process: limits are process-wide and other tests share this one.
    #[test]
    fn raise_lifts_the_soft_limit_to_the_hard_limit() {
        if std::env::var_os("KHAROND_FD_LIMIT_CHILD").is_none() {
            let exe = std::env::current_exe().unwrap();
            let out = std::process::Command::new(exe)
                .args([
                    "--exact",
                    "process::fd_limit::tests::raise_lifts_the_soft_limit_to_the_hard_limit",
                    "--nocapture",
                ])
                .env("KHAROND_FD_LIMIT_CHILD", "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "child failed:\n{stdout}");
            assert!(stdout.contains("1 passed"), "the child did not run the test:\n{stdout}");
            return;
        }
        let start = get().unwrap();
        // Start from a low soft limit, as a login shell's 1024 would be.
        set(Limit { soft: 64.min(start.hard), hard: start.hard }).unwrap();
        let raised = raise(0).unwrap();
        assert_eq!(raised.before, Limit { soft: 64.min(start.hard), hard: start.hard });
        assert_eq!(raised.now, Limit { soft: start.hard, hard: start.hard });
        assert!(raised.hard_refused.is_none(), "nothing above the hard limit was asked for");
    }
}
