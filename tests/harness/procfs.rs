//! What `/proc` says about a process and the kernel: open descriptors, descriptor limits,
//! resident memory, and the kernel's slab and TCP memory, for tests that count what a daemon
//! holds. Linux only, like those tests.

use std::path::Path;

/// Descriptors `pid` has open right now.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|dir| dir.count()).expect("/proc/PID/fd")
}

/// `pid`'s RLIMIT_NOFILE, (soft, hard).
pub fn nofile_limit(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc/PID/limits");
    let line = limits.lines().find(|l| l.starts_with("Max open files")).expect("Max open files line");
    let mut numbers =
        line["Max open files".len()..].split_whitespace().map(|n| n.parse().unwrap_or(u64::MAX));
    (numbers.next().expect("soft"), numbers.next().expect("hard"))
}

/// Resident memory of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    field_kib(format!("/proc/{pid}/status"), "VmRSS:")
}

/// The kernel's slab memory, in KiB (system-wide).
pub fn slab_kib() -> u64 {
    field_kib("/proc/meminfo", "Slab:")
}

/// Memory of all TCP sockets' buffers, in KiB (system-wide; `/proc/net/sockstat` counts pages).
pub fn tcp_buffers_kib() -> u64 {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").expect("/proc/net/sockstat");
    let line = sockstat.lines().find(|l| l.starts_with("TCP:")).expect("TCP line");
    let words: Vec<&str> = line.split_whitespace().collect();
    let pages: u64 =
        words.windows(2).find(|w| w[0] == "mem").and_then(|w| w[1].parse().ok()).expect("TCP mem field");
    let page =
        nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096).max(1) as u64;
    pages * page / 1024
}

/// Raises this process's soft descriptor limit to at least `wanted` (up to its hard limit);
/// returns the limit it now has. Children started afterwards inherit it.
pub fn raise_own_nofile(wanted: u64) -> (u64, u64) {
    let (mut soft, hard) = rlimit::getrlimit(rlimit::Resource::NOFILE).expect("getrlimit");
    if soft < wanted {
        soft = hard.min(wanted);
        rlimit::setrlimit(rlimit::Resource::NOFILE, soft, hard).expect("setrlimit");
    }
    (soft, hard)
}

fn field_kib(path: impl AsRef<Path>, field: &str) -> u64 {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in {}", path.display()));
    line.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("bad {field} line: {line}"))
}
