//! glibc allocator settings for the routed data path, applied once before any thread starts.
//!
//! Why: russh allocates a fresh 32 KiB buffer for every SSH data packet (twice, in fact) and the
//! tunnel frees it on another worker thread. With glibc's defaults a heap returns its free top to
//! the kernel once that passes 128 KiB, so the next packets fault the same pages back in and
//! zero them: `perf` on a routed 1 GiB transfer (`bench/routed.sh`'s rig) puts ~7 % of kharond's
//! time in page faults, unmap and page allocation. A session keeps up to one window (2 MiB near,
//! see `ssh::chain`) of packets in flight, so the heaps are allowed to keep twice that before
//! trimming.
//!
//! `bench/routed.sh` reproduces the choice: it prints kharond's CPU time per GiB of a routed
//! 1 GiB transfer beside `ssh -D`'s, and `KHAROND=PATH` measures a build with another threshold
//! in the same run. A threshold of 1 MiB still trims every window and costs more CPU than glibc's
//! default; 2 to 4 MiB cost least (about `ssh -D`'s figure), and the page faults leave `perf`'s
//! profile; 8 MiB costs more again. The heaps then keep up to 2 MB more resident after a
//! transfer. mimalloc and jemalloc as global allocators save as much CPU but start and end with
//! more resident memory than glibc tuned so.
//!
//! Setting the trim threshold also freezes glibc's mmap threshold, which would otherwise grow
//! past the relay's 256 KiB buffers after the first connection; so it is set to where it would
//! have gone, and the buffers keep coming from the heap instead of a fresh mmap each.
//!
//! The number of heaps (arenas) is capped at two. glibc gives each thread that meets contention a
//! heap of its own, up to eight per core, and a heap only ever returns whole free pages. Under the
//! mixed load of the 30-minute soak (`bench/soak.sh`), with a heap per runtime worker, each heap
//! holds three to four times its live data, spread thin by short-lived packets and relay buffers
//! among longer-lived small allocations: the live data stays flat, `malloc_trim` returns nothing,
//! and yet RSS creeps up (by about a tenth over 25 minutes) as allocations land on pages the heaps
//! have not touched since their peak. Two heaps (the main thread's and one shared by every other
//! thread) pack the same data into fewer pages.

/// Free space a heap keeps at its top instead of returning it to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 4 * 1024 * 1024;
/// Allocations from this size up get their own mapping.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1024 * 1024;
/// Heaps in all; see above.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENA_MAX: libc::c_int = 2;

/// Returns the free memory inside the heaps to the kernel. For after a large, short-lived peak:
/// loading a 50,000-cluster inventory parses ~200 MB of JSON values to keep ~80 MB of table, and
/// without this the process keeps the difference (`bench/inventory.sh` prints kharond's resident
/// memory after such a start). Costs a few milliseconds, so it runs after a load, a PAC render or
/// a burst of connections (trim.rs), never per connection.
pub fn release_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; any thread may call it.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Applies the settings above; a no-op where the C library is not glibc (musl, macOS).
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes allocator parameters; it is called before the runtime
        // starts any thread. A refusal (return 0) leaves glibc's defaults, which still work.
        let ok = unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
                && libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX) == 1
        };
        if !ok {
            tracing::debug!("glibc refused the allocator settings; keeping its defaults");
        }
    }
}
