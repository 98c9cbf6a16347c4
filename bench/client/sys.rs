//! What the bench client reads from /proc: a process's CPU time and memory, and the kernel's.
//! Linux only; elsewhere the figures are zero.

use std::time::Duration;

use anyhow::Context;

/// User + system CPU time of a process so far.
pub fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat =
        std::fs::read_to_string(&path).with_context(|| format!("reading {path} (has the proxy exited?)"))?;
    // Fields after the parenthesised command name, which may itself contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> { Ok(fields.get(i).context("short /proc stat")?.parse()?) };
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    Ok(Duration::from_secs_f64((ticks(11)? + ticks(12)?) as f64 / clock_ticks_per_second()))
}

#[cfg(target_os = "linux")]
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as f64,
        _ => 100.0,
    }
}

#[cfg(not(target_os = "linux"))]
fn clock_ticks_per_second() -> f64 {
    100.0
}

/// A process's resident memory and the kernel's memory that grows with connections.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// VmRSS of the process (0 without one).
    pub rss_kib: u64,
    /// `Slab` of /proc/meminfo: sockets, files, epoll items, pipe bookkeeping.
    pub slab_kib: u64,
    /// `TCP: … mem N` of /proc/net/sockstat (pages of socket buffers), in KiB.
    pub tcp_mem_kib: u64,
}

impl Memory {
    pub fn sample(pid: Option<u32>) -> anyhow::Result<Memory> {
        let rss_kib = match pid {
            Some(pid) => field(&format!("/proc/{pid}/status"), "VmRSS:", 1)?,
            None => 0,
        };
        let slab_kib = field("/proc/meminfo", "Slab:", 1).unwrap_or(0);
        let page_kib = page_size() / 1024;
        let tcp_pages = std::fs::read_to_string("/proc/net/sockstat")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("TCP:"))?.to_owned();
                let words: Vec<&str> = line.split_whitespace().collect();
                let at = words.iter().position(|w| *w == "mem")?;
                words.get(at + 1)?.parse::<u64>().ok()
            })
            .unwrap_or(0);
        Ok(Memory { rss_kib, slab_kib, tcp_mem_kib: tcp_pages * page_kib })
    }
}

/// The number after `key` on its line of `path` (the `index`th word).
fn field(path: &str, key: &str, index: usize) -> anyhow::Result<u64> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?;
    let line = text.lines().find(|l| l.starts_with(key)).with_context(|| format!("no {key} in {path}"))?;
    line.split_whitespace()
        .nth(index)
        .context("short line")?
        .parse()
        .with_context(|| format!("{path}: {line}"))
}

#[cfg(target_os = "linux")]
fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        n if n > 0 => n as u64,
        _ => 4096,
    }
}

#[cfg(not(target_os = "linux"))]
fn page_size() -> u64 {
    4096
}
