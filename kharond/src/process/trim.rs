//! Memory a burst of connections leaves behind, given back once the burst is over.
//!
//! Each connection's task, its handshake and relay buffers and its registry entry are small heap
//! allocations; thousands at once spread them over many pages of the heaps. When they close, the
//! heaps keep those pages: glibc returns free memory to the kernel only from the top of a heap
//! (past `M_TRIM_THRESHOLD`, 4 MiB here: malloc.rs), and a few allocations that live on (a
//! session, a table entry, the next connections) pin the pages between. `malloc_trim(0)` also
//! gives back every whole free page inside the heaps (glibc malloc.c, `mtrim`; `madvise
//! MADV_DONTNEED`, so the pages stay mapped and come back zeroed on their next use).
//!
//! Measured with `bench/burst.sh 3000 30 3` (3,000 concurrent SOCKS connections through the
//! direct route, each moving 16 KiB both ways, then 30 s idle), release build: RSS 12.3 MiB at
//! start, 28.9 MiB with every connection open, still 27.3-28.0 MiB after 30 s idle, with 0.4 MiB
//! of live allocations in 15.1-15.7 MiB of heaps. With this trim: 13.3 MiB after the 30 s (12.1
//! at start), in each of three runs. Fewer heaps do not help: with `M_ARENA_MAX` 1 instead of 2
//! (malloc.rs) the same runs kept 28.6-29.0 MiB.
//!
//! So [`IdleTrim`] counts the connections open (the listener holds one [`Open`] per client) and
//! trims once after each burst: when at least [`TrimSettings::burst`] were open at once since the
//! last trim, the count has fallen to a quarter of that peak or less, and it is still there
//! [`TrimSettings::settle`] later. A trim walks the heaps (a few milliseconds after such a burst),
//! so it is never made per connection, and an idle daemon is never woken for it: the trimmer waits
//! for a connection to close.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// When a burst counts as over ([`IdleTrim`]); the defaults are [`TrimSettings::default`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrimSettings {
    /// Connections open at once that make a burst worth a trim. 256 of them hold about 1.3 MiB of
    /// the heaps (the measurement in the module doc, scaled); fewer leave too little to matter.
    pub burst: usize,
    /// How long the count must stay down before the trim: a pause between two waves of a client's
    /// requests is not the end of its burst, and what the burst's name lookups leave comes back
    /// only when tokio's blocking threads end, 10 s after their last lookup (each gives its
    /// thread cache back to the heap then). Trimmed 5 s after the burst's end, kharond kept
    /// 19.1-20.1 MiB in the measurement of the module doc; 15 s after, 13.3 MiB.
    pub settle: Duration,
}

impl Default for TrimSettings {
    fn default() -> Self {
        TrimSettings { burst: 256, settle: Duration::from_secs(15) }
    }
}

/// The open-connection count and the trim after a burst (see the module doc).
#[derive(Debug)]
pub struct IdleTrim {
    settings: TrimSettings,
    open: AtomicUsize,
    /// The most connections open at once since the last trim (or the start).
    peak: AtomicUsize,
    /// Signalled when a close leaves the count low after a burst.
    low: Notify,
}

/// One open connection, counted until dropped.
#[derive(Debug)]
pub struct Open {
    trim: Arc<IdleTrim>,
}

impl Drop for Open {
    fn drop(&mut self) {
        let open = self.trim.open.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
        if self.trim.over(open) {
            self.trim.low.notify_one();
        }
    }
}

impl IdleTrim {
    pub fn new(settings: TrimSettings) -> Arc<Self> {
        Arc::new(IdleTrim {
            settings,
            open: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            low: Notify::new(),
        })
    }

    /// A connection opens; it counts until the returned guard is dropped.
    pub fn open(self: &Arc<Self>) -> Open {
        let open = self.open.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(open, Ordering::Relaxed);
        Open { trim: Arc::clone(self) }
    }

    /// Whether `open` connections mean a burst is over: one happened since the last trim, and
    /// the count is down to a quarter of its peak.
    fn over(&self, open: usize) -> bool {
        let peak = self.peak.load(Ordering::Relaxed);
        peak >= self.settings.burst && open <= peak / 4
    }

    /// Trims after every burst, for as long as it runs (the listener's life). Sleeps until a
    /// close ends a burst, then [`TrimSettings::settle`]; trims if the burst is still over.
    pub async fn run(self: Arc<Self>) {
        loop {
            self.low.notified().await;
            tokio::time::sleep(self.settings.settle).await;
            let open = self.open.load(Ordering::Relaxed);
            if !self.over(open) {
                continue;
            }
            let peak = self.peak.swap(open, Ordering::Relaxed);
            let before = super::memory::now();
            super::malloc::release_free();
            let after = super::memory::now();
            tracing::debug!(
                peak,
                open,
                resident_before = before.resident,
                resident_after = after.resident,
                "a burst of connections is over: the heaps' free pages went back to the system"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TrimSettings {
        TrimSettings { burst: 8, settle: Duration::from_millis(100) }
    }

    #[test]
    fn a_burst_is_over_at_a_quarter_of_its_peak() {
        let trim = IdleTrim::new(settings());
        let mut open: Vec<Open> = (0..7).map(|_| trim.open()).collect();
        open.truncate(0);
        assert!(!trim.over(0), "7 at once is no burst");
        let mut open: Vec<Open> = (0..12).map(|_| trim.open()).collect();
        assert_eq!(trim.peak.load(Ordering::Relaxed), 12);
        open.truncate(4);
        assert!(!trim.over(trim.open.load(Ordering::Relaxed)), "4 of 12 still open");
        open.truncate(3);
        assert!(trim.over(trim.open.load(Ordering::Relaxed)));
    }

    #[tokio::test]
    async fn it_trims_once_the_count_stays_down_and_not_while_a_new_burst_runs() {
        let ms = Duration::from_millis;
        let trim = IdleTrim::new(TrimSettings { burst: 8, settle: ms(400) });
        let runner = tokio::spawn(Arc::clone(&trim).run());
        let burst: Vec<Open> = (0..10).map(|_| trim.open()).collect();
        drop(burst);
        // A second wave within the settle time: no trim while it runs.
        tokio::time::sleep(ms(100)).await;
        let wave: Vec<Open> = (0..9).map(|_| trim.open()).collect();
        tokio::time::sleep(ms(500)).await;
        assert_eq!(trim.peak.load(Ordering::Relaxed), 10, "not trimmed while 9 are open");
        drop(wave);
        // Trimmed once it ends and stays ended: the peak starts again from the count.
        let mut waited = 0;
        while trim.peak.load(Ordering::Relaxed) != 0 && waited < 50 {
            tokio::time::sleep(ms(100)).await;
            waited += 1;
        }
        assert_eq!(trim.peak.load(Ordering::Relaxed), 0, "no trim within 5 s of the wave's end");
        // Quiet now: a close that ends no burst wakes nothing.
        drop(trim.open());
        assert!(!trim.over(0));
        runner.abort();
    }
}
