//! The spine of one client connection, top to bottom:
//!
//! ```text
//! proxy::accept      protocol, greeting, optional auth, request, one deadline → Request (Target)
//!                    (SOCKS5 or HTTP CONNECT; or the PAC request, answered here)
//! route::dial        the current table snapshot                          → Route (direct | jumphost)
//!                    direct TCP, or a channel from the chain's last hop  → Upstream
//! reply              success, or the failure                             (Request::succeed | fail)
//! relay              splice / large-buffer copy both ways, half-close honoured → Transfer
//! ```
//!
//! It calls the error mappings but implements none of them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use kharon_shared::routing::Via;
use tokio::net::TcpStream;
use tokio::time::Instant as Deadline;
use tracing::{debug, info};

use crate::dial::Upstream;
use crate::eviction::Handshake;
use crate::http;
use crate::proxy::{self, Accepted};
use crate::relay;
use crate::route;
use crate::state::State;
use crate::target::Unreachable;

/// Serves one accepted client until its connection ends. Errors end here, in the client's own
/// span; they never reach the accept loop. Until `handshake` is dropped, the listener may close
/// this connection to make room for a new client (eviction.rs).
pub async fn serve(state: Arc<State>, stream: TcpStream, peer: SocketAddr, handshake: Handshake) {
    let _ = stream.set_nodelay(true);
    // Taken once, at accept: the whole handshake, whatever its protocol, shares it.
    let timeout = state.proxy.handshake_timeout;
    let deadline = Deadline::now() + timeout;
    // Boxed, as are the dial, the refusal and the PAC answer: a task is as large as its largest
    // stage, and a relayed connection lives long in the smallest. Inline, the refusal's 4 KiB
    // discard buffer alone made every connection's task 5.7 KB.
    let request = match Box::pin(proxy::accept(stream, state.proxy.auth.as_ref(), deadline, timeout)).await {
        Ok(Accepted::Proxy(request)) => request,
        Ok(Accepted::Http(request)) => {
            if let Err(e) = Box::pin(http::serve(&state, request)).await {
                debug!(client.addr = %peer, "PAC request failed: {e}");
            }
            return;
        }
        Err(e) => {
            state.stats.failed();
            debug!(client.addr = %peer, "handshake failed: {e}");
            return;
        }
    };
    drop(handshake);
    let target = request.target.clone();

    // One route per connection, from one table snapshot: a reload in the middle changes nothing
    // for it.
    let started = Instant::now();
    let (route, upstream) = match Box::pin(route::dial(&state, &target)).await {
        Ok(dialled) => dialled,
        Err(failed) => {
            state.stats.failed();
            let e = &failed.error;
            match failed.route.jumphost() {
                // A routed failure is something the user can act on (dead jump host, ssh config).
                Some(jumphost) => info!(client.addr = %peer, %target, jumphost, "cannot connect: {e}"),
                None => {
                    debug!(client.addr = %peer, %target, via = Via::Direct.as_str(), "cannot connect: {e}")
                }
            }
            Box::pin(request.fail(Unreachable::from(e.kind()), &failed)).await;
            return;
        }
    };
    let via = route.via();

    let _open = state.stats.open(via);
    let bound = match &upstream {
        Upstream::Tcp(tcp) => tcp.local_addr().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        Upstream::Tunnel(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let mut client = match request.succeed(bound).await {
        Ok(client) => client,
        Err(e) => {
            debug!(client.addr = %peer, %target, "client left before the reply: {e}");
            return;
        }
    };
    debug!(client.addr = %peer, %target, via = via.as_str(), jumphost = route.jumphost(), "open");

    let result = match upstream {
        Upstream::Tcp(mut tcp) => relay::tcp(&mut client, &mut tcp).await,
        Upstream::Tunnel(mut tunnel) => relay::stream(&mut client, &mut tunnel).await,
    };
    let elapsed = started.elapsed();
    match result {
        Ok(t) => {
            state.stats.transferred(t.up, t.down);
            debug!(client.addr = %peer, %target, via = via.as_str(), up = t.up, down = t.down, ?elapsed, "closed");
        }
        Err(e) => {
            debug!(client.addr = %peer, %target, via = via.as_str(), ?elapsed, "closed with error: {e}")
        }
    }
}
