//! Room for the well-behaved when every connection slot is taken.
//!
//! Any local user can open connections and never finish the SOCKS handshake; so when a new client
//! arrives and every slot is taken, kharond closes the *oldest connection still in its handshake*
//! (greeting, authentication, request, or a PAC request) and serves the new one in its place. A
//! connection whose handshake has finished is never closed for this: when every slot holds one,
//! new clients wait in the kernel's listen backlog (one of them accepted and held by the listener)
//! until a connection closes. The handshake deadline closes silent clients anyway; this makes room
//! before it does.
//!
//! # Concurrency
//! Connections in their handshake are kept in [`Handshakes`], ordered by accept sequence, each
//! with an abort handle. A connection enters it at accept (one short lock) and leaves it when its
//! handshake ends or the connection closes (another); only the accept loop evicts. An abort takes
//! effect at the task's next poll: a connection evicted just as its handshake ended is closed
//! before its SOCKS reply (dialing the target always waits at least once), so a client that was
//! told "succeeded" is never closed by an eviction.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::AbortHandle;

/// Connections still in their handshake, oldest first, each with the handle that closes it.
#[derive(Debug, Default)]
pub struct Handshakes {
    open: Mutex<BTreeMap<u64, AbortHandle>>,
}

impl Handshakes {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<u64, AbortHandle>> {
        // A map of handles cannot be left torn by a panic elsewhere.
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers connection `sequence` (accept order) until the returned guard is dropped.
    pub fn enter(self: &Arc<Self>, sequence: u64, abort: AbortHandle) -> Handshake {
        self.lock().insert(sequence, abort);
        Handshake { registry: Arc::clone(self), sequence }
    }

    /// Closes the oldest connection still in its handshake; returns its sequence number.
    pub fn evict_oldest(&self) -> Option<u64> {
        let (sequence, abort) = self.lock().pop_first()?;
        abort.abort();
        Some(sequence)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }
}

/// A connection's place in [`Handshakes`]; dropping it (handshake done, or connection closed)
/// makes the connection safe from eviction.
#[derive(Debug)]
pub struct Handshake {
    registry: Arc<Handshakes>,
    sequence: u64,
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.sequence);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::future::Abortable;

    use super::*;

    #[tokio::test]
    async fn eviction_closes_the_oldest_handshake_and_spares_finished_ones() {
        let registry = Arc::new(Handshakes::default());
        let mut tasks = Vec::new();
        let mut guards = Vec::new();
        for sequence in 1..=3 {
            let (abort, registration) = AbortHandle::new_pair();
            guards.push(Some(registry.enter(sequence, abort)));
            tasks.push(tokio::spawn(Abortable::new(std::future::pending::<()>(), registration)));
        }
        // Connection 1 finishes its handshake: it leaves the registry and can no longer be evicted.
        guards[0].take();
        assert_eq!(registry.len(), 2);
        assert_eq!(registry.evict_oldest(), Some(2));
        assert_eq!(registry.evict_oldest(), Some(3));
        assert_eq!(registry.evict_oldest(), None, "finished handshakes are never evicted");
        let third = tasks.pop().unwrap();
        let second = tasks.pop().unwrap();
        for evicted in [second, third] {
            let ended = tokio::time::timeout(Duration::from_secs(10), evicted).await;
            assert!(matches!(ended, Ok(Ok(Err(_)))), "an evicted connection's task is aborted");
        }
        assert!(!tasks[0].is_finished(), "connection 1 keeps running");
        // The evicted connection's own guard leaving later changes nothing.
        guards.clear();
        assert_eq!(registry.len(), 0);
    }
}
