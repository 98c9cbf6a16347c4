//! glibc allocator settings for the routed data path, applied once before any thread starts.
//!
//! Why: russh allocates a fresh 32 KiB buffer for every SSH data packet (twice, in fact) and the
//! tunnel frees it on another worker thread. With glibc's defaults a heap returns its free top to
//! the kernel once that passes 128 KiB, so the next packets fault the same pages back in and
//! zero them: `perf` on a routed 1 GiB transfer put ~7 % of kharond's time in page faults, unmap
//! and page allocation. A session keeps up to one window (2 MiB near, see `ssh::chain`) of
//! packets in flight, so the heaps are allowed to keep twice that before trimming.
//!
//! Measured with bench/routed.sh-style A/B runs (1 GiB, cubic, 6 runs each, same run), kharond's
//! CPU per GiB: default 0.51 s; trim at 1 MiB 0.54 s (too small: still trims every window);
//! 2 MiB 0.44 s; 4 MiB 0.43 s; 8 MiB 0.46 s; `ssh -D` 0.42 s. This code in a later run, 8 runs:
//! 0.48 s against 0.51 s (`ssh -D` 0.44 s), and the page faults were gone from the profile. RSS
//! after two 1 GiB transfers went from 11–13 to 13–15 MB. mimalloc and jemalloc as global
//! allocators saved as much CPU but started at 20 MB and 11 MB and ended at 30 MB and 19 MB.
//!
//! Setting the trim threshold also freezes glibc's mmap threshold, which would otherwise grow
//! past the relay's 256 KiB buffers after the first connection; so it is set to where it would
//! have gone, and the buffers keep coming from the heap instead of a fresh mmap each.
//!
//! The number of heaps (arenas) is capped at two. glibc gives each thread that meets contention a
//! heap of its own, up to eight per core, and a heap only ever returns whole free pages: in the
//! 30-minute soak (bench/soak.sh, issue 21) kharond's two runtime workers each had a heap of
//! 4.8–6.0 MB holding 1.4–1.8 MB of live data, spread thin by short-lived packets and relay
//! buffers among longer-lived small allocations. The live data stayed at 3.5 MB between two
//! samples eight minutes apart, `malloc_trim` returned nothing, and yet RSS crept up as
//! allocations landed on pages the heaps had not touched since their peak (+11 % over 25 minutes).
//! Two heaps (the main thread's and one shared by every other thread) pack the same data into
//! fewer pages.

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
/// without this the process keeps the difference (measured 222 MB RSS at start, 92 MB after a
/// trim). Costs a few milliseconds, so it runs after a load, a PAC render or a burst of connections
/// (trim.rs), never per connection.
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
