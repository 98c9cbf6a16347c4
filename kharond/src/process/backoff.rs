//! Waiting after a failed accept(2), for every listener the daemon has.
//!
//! The usual failure is EMFILE/ENFILE (out of descriptors). The listening socket stays readable
//! while a connection waits in the backlog, so accepting again at once fails again at once: a
//! busy core, and the tasks whose closing would free descriptors get less of it. Waiting 5 ms,
//! doubling up to 1 s, and starting over after the next success keeps a transient shortage short
//! and a lasting one cheap (one attempt and one log line a second).

use std::time::Duration;

use futures::Stream;
use tokio::net::{UnixListener, UnixStream};

/// The delay after the first failure in a row.
pub const FIRST: Duration = Duration::from_millis(5);
/// The longest delay, however many failures in a row.
pub const MAX: Duration = Duration::from_secs(1);

/// The delay before the next accept after consecutive failures.
#[derive(Debug, Clone)]
pub struct AcceptBackoff {
    next: Duration,
}

impl Default for AcceptBackoff {
    fn default() -> Self {
        Self { next: FIRST }
    }
}

impl AcceptBackoff {
    /// An accept succeeded: the next failure waits [`FIRST`] again.
    pub fn succeeded(&mut self) {
        self.next = FIRST;
    }

    /// An accept failed: how long to wait before the next one.
    pub fn failed(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX);
        delay
    }
}

/// The control socket's connections, for tonic's `serve_with_incoming`. tonic retries a failed
/// accept at once (it only traces the error), so failures are handled here and never reach it:
/// the stream yields only accepted connections and ends only when dropped.
pub fn unix_incoming(listener: UnixListener) -> impl Stream<Item = std::io::Result<UnixStream>> {
    futures::stream::unfold((listener, AcceptBackoff::default()), |(listener, mut backoff)| async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    backoff.succeeded();
                    return Some((Ok(stream), (listener, backoff)));
                }
                Err(e) => {
                    let delay = backoff.failed();
                    tracing::warn!("control socket: accept failed: {e}; retrying in {delay:?}");
                    tokio::time::sleep(delay).await;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_one_second_and_restart_after_a_success() {
        let mut backoff = AcceptBackoff::default();
        let delays: Vec<u64> = (0..10).map(|_| backoff.failed().as_millis() as u64).collect();
        assert_eq!(delays, [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), FIRST);
    }
}
