//! What the bench client reads from /proc: a process's CPU time and memory, and the kernel's;
//! the CPU of whole process trees, of its own threads and of the machine, for the rate phase.
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

/// CPU time split into user and system (kernel) time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cpu {
    pub user: f64,
    pub system: f64,
}

impl Cpu {
    pub fn total(self) -> f64 {
        self.user + self.system
    }

    /// `self - before`, never negative (a process that left the tree takes its time with it).
    pub fn since(self, before: Cpu) -> Cpu {
        Cpu { user: (self.user - before.user).max(0.0), system: (self.system - before.system).max(0.0) }
    }
}

/// User and system seconds so far of `root` and every process below it (sshd's session
/// processes, ssh's ProxyJump children). Each process's own figure includes its exited threads.
pub fn tree_cpu(root: u32) -> Cpu {
    let mut parents = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for entry in dir.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            if let Some((ppid, cpu)) = proc_stat(pid) {
                parents.push((pid, ppid, cpu));
            }
        }
    }
    let mut total = Cpu::default();
    let mut todo = vec![root];
    while let Some(pid) = todo.pop() {
        for &(child, ppid, cpu) in &parents {
            if child == pid {
                total.user += cpu.user;
                total.system += cpu.system;
            }
            if ppid == pid && child != pid {
                todo.push(child);
            }
        }
    }
    total
}

/// (parent pid, CPU) of a process, from /proc/PID/stat.
fn proc_stat(pid: u32) -> Option<(u32, Cpu)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = clock_ticks_per_second();
    let at = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // ppid, utime and stime are fields 4, 14 and 15 of stat(5); `rest` starts at field 3.
    Some((at(1)? as u32, Cpu { user: at(11)? / tick, system: at(12)? / tick }))
}

/// This process's own CPU so far, all threads, exited ones included.
pub fn own_cpu() -> Cpu {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getrusage fills the struct we own.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: as above; RUSAGE_SELF is always valid.
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0 {
            let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
            return Cpu { user: secs(usage.ru_utime), system: secs(usage.ru_stime) };
        }
    }
    Cpu::default()
}

/// CPU seconds so far of this process's live threads named `name`. From schedstat (nanoseconds):
/// many threads with a little CPU each would each round down to zero clock ticks in stat.
pub fn threads_cpu(name: &str) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else { return 0.0 };
    let mut ns = 0u64;
    for entry in dir.flatten() {
        let path = entry.path();
        let named = std::fs::read_to_string(path.join("comm")).is_ok_and(|c| c.trim_end() == name);
        if named
            && let Some(n) = std::fs::read_to_string(path.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next().and_then(|f| f.parse::<u64>().ok()))
        {
            ns += n;
        }
    }
    ns as f64 / 1e9
}

/// (idle, all) clock ticks of the whole machine so far, from the first line of /proc/stat.
pub fn machine_ticks() -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else { return (0, 0) };
    let Some(line) = stat.lines().next() else { return (0, 0) };
    let v: Vec<u64> = line.split_whitespace().skip(1).take(8).filter_map(|f| f.parse().ok()).collect();
    // idle + iowait, over user nice system idle iowait irq softirq steal
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (idle, v.iter().sum())
}

/// CPU seconds the whole machine has been busy so far (every core, every process, the kernel's
/// own work included): what a battery pays for.
pub fn machine_busy_seconds() -> f64 {
    let (idle, all) = machine_ticks();
    all.saturating_sub(idle) as f64 / clock_ticks_per_second()
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
