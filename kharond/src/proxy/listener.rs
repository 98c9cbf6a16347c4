//! The accept loop: a bound on concurrent connections, backoff on accept errors (the one every
//! listener uses: `process/backoff.rs`), one task and one span per client, and a wait for open
//! connections on shutdown. Knows nothing of SOCKS or routes.
//!
//! kharond serves at most `limit` clients at once: [`MAX_CONNECTIONS`], lowered to what the
//! descriptor limit fits (`fd_limit`) and to the `max_connections` config key. A client counts
//! from accept until its connection closes. When every slot is taken, a new client makes room by
//! closing the oldest unfinished handshake, or waits ([`eviction`](crate::proxy::eviction)).
//!
//! Every client counts in [`IdleTrim`] too, which gives the memory of a burst of connections back
//! to the system once it is over (`process::trim`).
//!
//! Every client socket gets TCP_NODELAY (a SOCKS reply or a short response must not wait for an
//! ACK). On Linux an accepted socket inherits it from the listener, so it is set once there
//! instead of once per connection: one syscall less for each (`bench/routed.sh`'s rate phase).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{AbortHandle, Abortable};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{Instrument as _, debug, info, warn};

use crate::process::backoff::AcceptBackoff;
use crate::process::trim::IdleTrim;
use crate::proxy::connection;
use crate::proxy::eviction::Handshakes;
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
    let inherits_nodelay = nodelay_for_all(&listener);
    let trim = IdleTrim::new(state.proxy.trim);
    let trimmer = tokio::spawn(Arc::clone(&trim).run());
    tokio::pin!(shutdown);
    let mut backoff = AcceptBackoff::default();
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Usually EMFILE: back off instead of spinning, the next accept may succeed.
                let delay = backoff.failed();
                warn!("accept failed: {e}; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                continue;
            }
        };
        backoff.succeeded();
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
        let counted = trim.open();
        if !inherits_nodelay {
            let _ = stream.set_nodelay(true);
        }
        // One span per connection, from here: every line it logs names its client.
        let serving = connection::serve(state, stream, peer, handshake).instrument(connection::span(peer));
        tokio::spawn(async move {
            // Aborted means evicted: the stream closes with the future, the slot with `permit`.
            let _ = Abortable::new(serving, registration).await;
            drop(permit);
            drop(counted);
        });
    }
    trimmer.abort();
    let open = limit - slots.available_permits();
    if open > 0 {
        info!("waiting up to {DRAIN:?} for {open} open connection(s)");
        let all = u32::try_from(limit).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(DRAIN, slots.acquire_many(all)).await;
    }
}

/// Sets TCP_NODELAY on the listener; whether the sockets it accepts have it from there (Linux).
fn nodelay_for_all(listener: &TcpListener) -> bool {
    let set = socket2::SockRef::from(listener).set_tcp_nodelay(true).is_ok();
    cfg!(target_os = "linux") && set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn accepted_sockets_have_nodelay_whether_inherited_or_set() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let inherits = nodelay_for_all(&listener);
        assert_eq!(inherits, cfg!(target_os = "linux"));
        let addr = listener.local_addr().unwrap();
        let (_client, accepted) = tokio::join!(tokio::net::TcpStream::connect(addr), listener.accept());
        let (stream, _) = accepted.unwrap();
        if !inherits {
            stream.set_nodelay(true).unwrap();
        }
        assert!(stream.nodelay().unwrap(), "an accepted client socket would wait for ACKs (Nagle)");
    }
}
