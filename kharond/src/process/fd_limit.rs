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

use std::io;

use crate::relay;

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
            tracing::warn!("cannot read or raise the descriptor limit (RLIMIT_NOFILE): {e}");
            // The usual soft limit, so the guess errs on the side of waiting clients over EMFILE.
            return wanted.min(connections_fitting(1024));
        }
    };
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
    let fix = format!(
        "set LimitNOFILE={needed} in the service unit or run `ulimit -n {needed}` where kharond starts{refused}"
    );
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

/// Raises the soft limit to the hard limit, and both to `wanted` when the hard limit is lower
/// and the process may raise it.
pub fn raise(wanted: u64) -> io::Result<Raised> {
    let before = get()?;
    let mut hard_refused = None;
    if before.hard < wanted {
        match set(Limit { soft: wanted, hard: wanted }) {
            Ok(()) => {}
            Err(e) => hard_refused = Some(e),
        }
    }
    let current = get()?;
    if current.soft < current.hard {
        set(Limit { soft: current.hard, hard: current.hard })?;
    }
    Ok(Raised { before, now: get()?, hard_refused })
}

#[allow(clippy::unnecessary_cast, reason = "rlim_t is u32 on 32-bit Linux")]
fn get() -> io::Result<Limit> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Limit { soft: limit.rlim_cur as u64, hard: limit.rlim_max as u64 })
}

fn set(limit: Limit) -> io::Result<()> {
    let limit = libc::rlimit { rlim_cur: limit.soft as libc::rlim_t, rlim_max: limit.hard as libc::rlim_t };
    // SAFETY: setrlimit reads only the struct we pass.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
