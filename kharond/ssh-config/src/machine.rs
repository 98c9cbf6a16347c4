//! What resolving a chain asks of the machine it runs on, as ssh(1) asks it: name lookups for
//! `CanonicalizeHostname` (ssh.c `resolve_host`, `resolve_addr`) and running `Match exec`
//! commands (readconf.c `execute_in_shell`). Behind a trait so that unit tests can resolve
//! names that exist only in the test (tests talk to loopback only, and no test may edit
//! /etc/hosts); commands always run for real.

use std::fmt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::hop::AddressFamily;

/// A name that resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The resolver's canonical name (`AI_CANONNAME`), if it gave a valid one.
    pub canonical: Option<String>,
}

pub trait Machine: Send + Sync + fmt::Debug {
    /// Looks `name` up with the system resolver, for addresses of `family` only (ssh's
    /// `AddressFamily`); `None` if it does not resolve to one.
    fn lookup(&self, name: &str, family: AddressFamily) -> Option<Found>;

    /// Runs `shell -c command` with stdin and stdout on /dev/null (stderr is kharond's), and
    /// says whether it exited 0. An error if it cannot start, dies of a signal, or is still
    /// running after `timeout` (it is killed, with its process group).
    fn exec(&self, shell: &Path, command: &str, timeout: Duration) -> Result<bool, String>;
}

/// The real resolver and shell.
#[derive(Debug, Default)]
pub struct System;

impl Machine for System {
    fn lookup(&self, name: &str, family: AddressFamily) -> Option<Found> {
        let hints = dns_lookup::AddrInfoHints {
            flags: libc::AI_CANONNAME,
            address: family.libc(),
            socktype: libc::SOCK_STREAM,
            ..dns_lookup::AddrInfoHints::default()
        };
        let mut found = dns_lookup::getaddrinfo(Some(name), Some("22"), Some(hints)).ok()?;
        let first = found.next()?.ok()?;
        let canonical = first.canonname.filter(|c| valid_domain(c));
        Some(Found { canonical })
    }

    fn exec(&self, shell: &Path, command: &str, timeout: Duration) -> Result<bool, String> {
        use std::os::unix::process::CommandExt as _;
        let mut child = Command::new(shell)
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its own process group, so a timeout kills whatever it started too.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", shell.display()))?;
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(1);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    return match status.code() {
                        Some(code) => {
                            tracing::debug!(command, code, "Match exec finished");
                            Ok(code == 0)
                        }
                        None => Err(format!("it was killed ({status})")),
                    };
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Ok(None) => {
                    kill_group(&mut child);
                    return Err(format!("it was still running after {timeout:?} and was stopped"));
                }
                Err(e) => {
                    kill_group(&mut child);
                    return Err(format!("cannot wait for it: {e}"));
                }
            }
        }
    }
}

fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals that process group; it touches no memory.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.wait();
}

/// misc.c `valid_domain`: what OpenSSH accepts as a CanonicalDomains entry or a CNAME.
pub(super) fn valid_domain(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && !name.contains("..")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

/// ssh.c `resolve_addr`: `name` as a single numeric address of `family`, in its canonical form
/// (`127.1` → `127.0.0.1`, `0:0::1` → `::1`), or `None` if it is not one. No lookup happens.
pub(super) fn numeric(name: &str, family: AddressFamily) -> Option<String> {
    let hints = dns_lookup::AddrInfoHints {
        flags: libc::AI_NUMERICHOST | libc::AI_NUMERICSERV,
        address: family.libc(),
        socktype: libc::SOCK_STREAM,
        ..dns_lookup::AddrInfoHints::default()
    };
    let mut found = dns_lookup::getaddrinfo(Some(name), Some("22"), Some(hints)).ok()?;
    let first = found.next()?.ok()?;
    if found.next().is_some() {
        return None;
    }
    dns_lookup::getnameinfo(&first.sockaddr, libc::NI_NUMERICHOST | libc::NI_NUMERICSERV)
        .ok()
        .map(|(host, _)| host)
}

/// ssh.c `is_addr_fast`: a name that can only be an address.
pub(super) fn looks_numeric(name: &str) -> bool {
    name.contains(['%', ':']) || name.chars().all(|c| c.is_ascii_digit() || c == '.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_forms_are_canonicalised_like_resolve_addr() {
        let any = AddressFamily::Any;
        assert_eq!(numeric("127.1", any).as_deref(), Some("127.0.0.1"));
        assert_eq!(numeric("0:0::1", any).as_deref(), Some("::1"));
        assert_eq!(numeric("localhost", any), None, "no lookup for names");
        // AddressFamily: an address of the other family is no address at all, as in ssh.
        assert_eq!(numeric("127.1", AddressFamily::Inet).as_deref(), Some("127.0.0.1"));
        assert_eq!(numeric("0:0::1", AddressFamily::Inet), None);
        assert_eq!(numeric("127.1", AddressFamily::Inet6), None);
        assert!(looks_numeric("10.0.0.300") && looks_numeric("fe80::1%eth0") && !looks_numeric("a1"));
    }

    #[test]
    fn localhost_resolves_through_the_system_resolver() {
        assert!(System.lookup("localhost", AddressFamily::Any).is_some());
        assert!(System.lookup("127.0.0.1", AddressFamily::Inet).is_some());
        assert!(System.lookup("127.0.0.1", AddressFamily::Inet6).is_none());
    }

    #[test]
    fn exec_reports_exit_status_signals_and_timeouts() {
        let sh = Path::new("/bin/sh");
        let second = Duration::from_secs(10);
        assert_eq!(System.exec(sh, "exit 0", second), Ok(true));
        assert_eq!(System.exec(sh, "exit 3", second), Ok(false));
        assert!(System.exec(sh, "kill -9 $$", second).unwrap_err().contains("killed"));
        let started = Instant::now();
        let err = System.exec(sh, "sleep 30 & sleep 30", Duration::from_millis(200)).unwrap_err();
        assert!(err.contains("still running after 200ms"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20), "the timeout bounds the wait");
        let err = System.exec(Path::new("/nonexistent/shell"), "true", second).unwrap_err();
        assert!(err.starts_with("cannot run /nonexistent/shell: "), "{err}");
    }

    #[test]
    fn domains_are_checked_like_valid_domain() {
        assert!(valid_domain("corp.example.") && valid_domain("a_b-1.example"));
        assert!(
            !valid_domain("-x.example") && !valid_domain("a..b") && !valid_domain("a b") && !valid_domain("")
        );
    }
}
