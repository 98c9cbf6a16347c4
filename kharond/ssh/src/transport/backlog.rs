//! [`Layer`]: what one session's transport holds that has not been passed on yet, counted as it
//! moves, so that the session's writer (sessions/uplink.rs) can keep what waits in front of the
//! link small. A chain has a layer per hop: the first hop's gathered writes (gather.rs), and each
//! later hop's queue into the channel of the hop before it (carrier.rs). The kernel's own send
//! buffer is kept small by `TCP_NOTSENT_LOWAT` (tcp.rs).
//!
//! # Two totals, not one running count
//! What a layer holds is the bytes appended so far less the bytes passed on so far, two totals
//! that only grow. The two are counted by different tasks: a nested hop's session appends, and
//! the carrier's own task, on another worker thread, passes on; that task can take bytes and count
//! them passed on before the appending write has counted them (a preempted thread is enough). A
//! single running count that may not fall below zero would then lose the decrement and hold those
//! bytes for good: the writer hands russh a packet only while the layers hold less than its
//! budget, so after a few such moments it would wait for ever and no channel of the chain could
//! send again. That order is not rare: `bench/shaped.sh`'s 200m profile (two hops, a download
//! and an upload of a few seconds) meets it about once per run. With two totals the order does
//! not matter: once both tasks have counted, the difference is exact again.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// One transport's counts.
#[derive(Debug, Default)]
pub(crate) struct Layer {
    /// Bytes the session above has written into this transport so far.
    appended: AtomicU64,
    /// Bytes the layer below (the socket, or the outer hop's channel) has taken so far.
    passed: AtomicU64,
    /// Woken whenever bytes are appended or passed on.
    moved: Notify,
}

impl Layer {
    /// The session wrote `n` bytes into the transport, which holds them.
    pub(crate) fn appended(&self, n: usize) {
        self.appended.fetch_add(n as u64, Ordering::AcqRel);
        self.moved.notify_waiters();
    }

    /// The layer below took `n` of the bytes held.
    pub(crate) fn passed_on(&self, n: usize) {
        self.passed.fetch_add(n as u64, Ordering::AcqRel);
        self.moved.notify_waiters();
    }

    /// Bytes held now. Read while the other task counts, this may be one write off; never below
    /// zero (passed on and not yet counted as appended reads as nothing held).
    pub(crate) fn queued(&self) -> usize {
        // Passed first: a total read later is never smaller, so this errs towards more held.
        let passed = self.passed.load(Ordering::Acquire);
        let appended = self.appended.load(Ordering::Acquire);
        usize::try_from(appended.saturating_sub(passed)).unwrap_or(usize::MAX)
    }

    /// Bytes the session has written into the transport so far.
    pub(crate) fn total_appended(&self) -> u64 {
        self.appended.load(Ordering::Acquire)
    }
}

/// Every layer of a chain, first hop first: what the last hop's session has written that is still
/// on its way to the first hop's socket.
#[derive(Debug, Clone, Default)]
pub(crate) struct Backlog {
    layers: Vec<Arc<Layer>>,
}

impl Backlog {
    pub(crate) fn new(layers: Vec<Arc<Layer>>) -> Self {
        Backlog { layers }
    }

    /// Bytes held by every layer together.
    pub(crate) fn queued(&self) -> usize {
        self.layers.iter().map(|layer| layer.queued()).sum()
    }

    /// Bytes the last hop's session has written into its transport so far: it grows once the
    /// session has taken a message off its queue and written it out.
    pub(crate) fn last_appended(&self) -> u64 {
        self.layers.last().map_or(0, |layer| layer.total_appended())
    }

    /// Resolves once the layers hold less than `limit` bytes together.
    pub(crate) async fn below(&self, limit: usize) {
        loop {
            let waits: Vec<_> = self.layers.iter().map(|layer| layer.moved.notified()).collect();
            let mut waits: Vec<_> = waits.into_iter().map(Box::pin).collect();
            for wait in &mut waits {
                wait.as_mut().enable();
            }
            if self.queued() < limit {
                return;
            }
            if waits.is_empty() {
                return;
            }
            futures::future::select_all(waits).await;
        }
    }

    /// Resolves once the last hop's session has written past `appended` bytes in all.
    pub(crate) async fn appended_past(&self, appended: u64) {
        let Some(last) = self.layers.last() else { return };
        loop {
            let wait = last.moved.notified();
            tokio::pin!(wait);
            wait.as_mut().enable();
            if last.total_appended() > appended {
                return;
            }
            wait.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_backlog_is_every_layer_s_bytes_and_a_wait_ends_when_they_are_passed_on() {
        let (first, second) = (Arc::new(Layer::default()), Arc::new(Layer::default()));
        let backlog = Backlog::new(vec![first.clone(), second.clone()]);
        first.appended(40_000);
        second.appended(30_000);
        assert_eq!(backlog.queued(), 70_000);
        assert_eq!(backlog.last_appended(), 30_000);
        let waiting = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.below(50_000).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "70,000 bytes are not below 50,000");
        first.passed_on(30_000);
        tokio::time::timeout(Duration::from_secs(2), waiting).await.expect("woken").expect("no panic");
        first.passed_on(10_000);
        assert_eq!(backlog.queued(), 30_000, "the first layer passed on all it held");
        let written = tokio::spawn({
            let backlog = backlog.clone();
            async move { backlog.appended_past(30_000).await }
        });
        second.appended(1);
        tokio::time::timeout(Duration::from_secs(2), written).await.expect("woken").expect("no panic");
    }

    /// The carrier's task passes bytes on from another thread, and may count them before the
    /// write that queued them has (module doc, "Two totals"): the layer still ends holding
    /// nothing.
    #[test]
    fn bytes_passed_on_before_they_were_counted_as_appended_leave_nothing_held() {
        let layer = Layer::default();
        layer.appended(1_000);
        layer.passed_on(1_000);
        layer.passed_on(32_804);
        assert_eq!(layer.queued(), 0, "passed on ahead of its count: nothing held meanwhile");
        layer.appended(32_804);
        assert_eq!(layer.queued(), 0, "every byte appended was passed on");
        layer.appended(500);
        assert_eq!(layer.queued(), 500);
    }
}
