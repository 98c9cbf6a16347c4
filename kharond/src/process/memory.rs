//! How much memory the daemon holds, for `Status`: its resident set, and what its heaps hold for
//! live allocations. Over weeks the two tell a leak (live bytes grow) from an allocator that keeps
//! pages it once needed (only the resident set grows); bench/soak.sh samples both.
//!
//! Linux: VmRSS from /proc and glibc's `mallinfo2`. macOS: the resident size libproc reports
//! (`proc_pidinfo(PROC_PIDTASKINFO)`, what `ps` shows) and the malloc zones' own statistics
//! (`malloc_zone_statistics` over every zone: bytes in use, bytes the zones hold).

/// The daemon's memory now. Fields the system cannot tell are 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// Resident set (VmRSS).
    pub resident: u64,
    /// Bytes of live allocations, mmapped chunks included.
    pub heap_in_use: u64,
    /// Bytes the heaps hold for them: the allocations, the free space between them, mmapped chunks.
    pub heap: u64,
}

/// Reads it. Walks every heap under its lock (a few microseconds): for `Status`, never per
/// connection.
pub fn now() -> Memory {
    let (heap_in_use, heap) = heap().unwrap_or_default();
    Memory { resident: resident().unwrap_or_default(), heap_in_use, heap }
}

#[cfg(target_os = "linux")]
fn resident() -> Option<u64> {
    let status = procfs::process::Process::myself().ok()?.status().ok()?;
    status.vmrss.map(|kib| kib * 1024)
}

#[cfg(target_os = "macos")]
fn resident() -> Option<u64> {
    let pid = i32::try_from(std::process::id()).ok()?;
    let info = libproc::proc_pid::pidinfo::<libproc::task_info::TaskInfo>(pid, 0).ok()?;
    Some(info.pti_resident_size)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn resident() -> Option<u64> {
    None
}

/// (live, held) bytes as glibc counts them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap() -> Option<(u64, u64)> {
    // SAFETY: mallinfo2 only reads the allocator's own counters (glibc >= 2.33).
    let info = unsafe { libc::mallinfo2() };
    let mapped = info.hblkhd as u64;
    Some((info.uordblks as u64 + mapped, info.arena as u64 + mapped))
}

/// (live, held) bytes as the malloc zones count them, summed over every zone.
#[cfg(target_os = "macos")]
fn heap() -> Option<(u64, u64)> {
    let mut stats =
        libc::malloc_statistics_t { blocks_in_use: 0, size_in_use: 0, max_size_in_use: 0, size_allocated: 0 };
    // SAFETY: a null zone asks for the sum over all zones (malloc/malloc.h); it writes `stats` only.
    unsafe { libc::malloc_zone_statistics(std::ptr::null_mut(), &mut stats) };
    Some((stats.size_in_use as u64, stats.size_allocated as u64))
}

#[cfg(not(any(all(target_os = "linux", target_env = "gnu"), target_os = "macos")))]
fn heap() -> Option<(u64, u64)> {
    None
}
