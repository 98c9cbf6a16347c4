//! The accept loop: a bound on concurrent connections, backoff on accept errors (EMFILE), one task
//! per client, and a drain on shutdown. Knows nothing of SOCKS or routes.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::{info, warn};

use crate::connection;
use crate::state::State;

/// At most this many clients at once; beyond it, accepting waits (the kernel backlog queues them).
pub const MAX_CONNECTIONS: usize = 16_384;
/// How long a shutdown waits for open connections before leaving them.
pub const DRAIN: Duration = Duration::from_secs(5);

/// Accepts until `shutdown` resolves, then waits up to [`DRAIN`] for open connections.
pub async fn run(listener: TcpListener, state: Arc<State>, shutdown: impl Future<Output = ()>) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    tokio::pin!(shutdown);
    let mut backoff = Duration::from_millis(5);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            permit = Arc::clone(&limit).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                backoff = Duration::from_millis(5);
                let state = Arc::clone(&state);
                tokio::spawn(async move {
                    connection::serve(state, stream, peer).await;
                    drop(permit);
                });
            }
            Err(e) => {
                // Usually EMFILE: back off instead of spinning, the next accept may succeed.
                warn!("accept failed: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
        }
    }
    let open = MAX_CONNECTIONS - limit.available_permits();
    if open > 0 {
        info!("waiting up to {DRAIN:?} for {open} open connection(s)");
        let all = u32::try_from(MAX_CONNECTIONS).unwrap_or(u32::MAX);
        let _ = tokio::time::timeout(DRAIN, limit.acquire_many(all)).await;
    }
}
