//! The accept loop: a bound on concurrent connections, room for the well-behaved when that bound
//! is reached, backoff on accept errors, one task per client, and a drain on shutdown. Knows
//! nothing of SOCKS or routes.
//!
//! # When every slot is taken
//! kharond serves at most `limit` clients at once: [`MAX_CONNECTIONS`], lowered to what the
//! descriptor limit fits (`fd_limit`) and to the `max_connections` config key. A client counts
//! from accept until its connection closes. Any local user can open connections and never finish
//! the SOCKS handshake; so when a new client arrives and every slot is taken, kharond closes the
//! *oldest connection still in its handshake* (greeting, authentication, request, or a PAC
//! request) and serves the new one in its place. A connection whose handshake has finished is
//! never closed for this: when every slot holds one, new clients wait in the kernel's listen
//! backlog (one of them accepted and held here) until a connection closes. The handshake deadline
//! closes silent clients anyway; this makes room before it does.
//!
//! # Concurrency
//! Connections in their handshake are kept in [`Handshakes`], ordered by accept sequence, each
//! with an abort handle. A connection enters it at accept (one short lock) and leaves it when its
//! handshake ends or the connection closes (another); only the accept loop evicts. An abort takes
//! effect at the task's next poll: a connection evicted just as its handshake ended is closed
//! before its SOCKS reply (dialing the target always waits at least once), so a client that was
//! told "succeeded" is never closed by an eviction.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::{AbortHandle, Abortable};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{debug, info, warn};

use crate::connection;
use crate::state::State;

/// At most this many clients at once, whatever the descriptor limit allows.
pub const MAX_CONNECTIONS: usize = 16_384;
/// How long a shutdown waits for open connections before leaving them.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Accepts until `shutdown` resolves, then waits up to [`DRAIN`] for open connections. At most
/// `state.proxy.max_connections` clients are served at once (see the module doc).
pub async fn run(listener: TcpListener, state: Arc<State>, shutdown: impl Future<Output = ()>) {
    let limit = state.proxy.max_connections.max(1);
    let slots = Arc::new(Semaphore::new(limit));
    let handshakes = Arc::new(Handshakes::default());
    let mut sequence = 0u64;
    let mut warned_full = false;
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Usually EMFILE: back off instead of spinning, the next accept may succeed.
                warn!("accept failed: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = Duration::from_millis(5);
        let permit = match Arc::clone(&slots).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !warned_full {
                    warned_full = true;
                    warn!(
                        "all {limit} connection slots are taken; closing the oldest unfinished \
                         handshakes to make room, or holding new clients until a connection closes \
                         (raise max_connections or the descriptor limit if this is legitimate load)"
                    );
                }
                if let Some(evicted) = handshakes.evict_oldest() {
                    debug!(client.addr = %peer, evicted, "slots full: closing the oldest unfinished handshake");
                }
                let permit = tokio::select! {
                    _ = &mut shutdown => break,
                    permit = Arc::clone(&slots).acquire_owned() => permit,
                };
                match permit {
                    Ok(permit) => permit,
                    Err(_) => break,
                }
            }
        };
        sequence += 1;
        let (abort, registration) = AbortHandle::new_pair();
        let handshake = handshakes.enter(sequence, abort);
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            // Aborted means evicted: the stream closes with the future, the slot with `permit`.
            let _ = Abortable::new(connection::serve(state, stream, peer, handshake), registration).await;
            drop(permit);
        });
    }
    let open = limit - slots.available_permits();
    if open > 0 {
        info!("waiting up to {DRAIN:?} for {open} open connection(s)");
        let all = u32::try_from(limit).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(DRAIN, slots.acquire_many(all)).await;
    }
}

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
