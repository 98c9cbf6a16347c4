//! Closing a connection after an answer without losing the answer. Closing a socket that still
//! holds unread input (a pipelined request, a payload, the rest of a request we stopped reading)
//! makes the kernel send a reset, and many TCP stacks drop received-but-unread data on a reset,
//! so the client might never see why it was refused. So the input is read away first, for a
//! bounded time and number of bytes.
//!
//! Used after every refusal of the proxy handshake (SOCKS5 and HTTP CONNECT), after a failure
//! reply, and after an HTTP answer to a request that was not read to its end.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

/// How long the client gets to read the answer and close before we do.
pub const LINGER: Duration = Duration::from_secs(1);
/// The most input discarded while lingering: a client that keeps sending is not waited for.
const LINGER_BYTES: usize = 64 * 1024;

/// Closes our side after an answer was written, then discards what the client still sends until
/// it closes too, `until` passes or `LINGER_BYTES` were discarded.
pub async fn linger<S: AsyncRead + AsyncWrite + Unpin>(client: &mut S, until: Instant) {
    if client.shutdown().await.is_err() {
        return;
    }
    let discard = async {
        let mut buf = [0u8; 4096];
        let mut discarded = 0;
        while discarded < LINGER_BYTES {
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => discarded += n,
            }
        }
    };
    let _ = tokio::time::timeout_at(until, discard).await;
}
