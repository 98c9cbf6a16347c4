//! The spine of one client connection, top to bottom:
//!
//! ```text
//! handshake::accept  protocol, greeting, optional auth, request, one deadline → Request (Target)
//!                    (SOCKS5 or HTTP CONNECT; or the PAC request, answered here)
//! Route::of          the generation in force: its table                      → Route (direct | jumphost)
//! dial::along        its pool: direct TCP, or a channel from the chain's last hop → Upstream
//! reply              success, or the failure                             (Request::succeed | fail)
//! relay              splice / large-buffer copy both ways, half-close honoured → Transfer
//! ```
//!
//! It calls the error mappings but implements none of them. Each step is said once to the
//! connection's [`Observed`] sink (`observe/events.rs`), which lists and counts it in the
//! registry and tells a trace that took it, if any. Its log lines are written inside the span the
//! listener opened for it (`listener.rs`: `client.addr`), to which the target and the route are
//! added as they become known.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kharon_shared::errors::Chain;
use tokio::net::TcpStream;
use tokio::time::Instant as Deadline;
use tracing::{Span, debug, info};

use crate::observe::events::Observed;
use crate::proxy::credentials::Caller;
use crate::proxy::eviction::Handshake;
use crate::proxy::handshake::{self, Accepted};
use crate::proxy::http;
use crate::proxy::owner::NotOurs;
use crate::routing::dial::{self, Client, Failed, Upstream};
use crate::routing::route::Route;
use crate::routing::target::Unreachable;
use crate::state::State;

/// Serves one accepted client until its connection ends. Errors end here, in the connection's
/// span; they never reach the accept loop. Until `handshake` is dropped, the listener may close
/// this connection to make room for a new client (eviction.rs).
pub async fn serve(state: Arc<State>, stream: TcpStream, peer: SocketAddr, handshake: Handshake) {
    let observed = Observed::accepted(&state.registry, peer);
    // The connection's two ends tell the kernel whose socket the client's is. A listener bound to
    // one address is our end on every connection (no getsockname); only an unspecified one (never
    // password-less) asks.
    let local = match state.listen {
        listen if listen.ip().is_unspecified() => stream.local_addr().unwrap_or(listen),
        listen => listen,
    };
    let caller = Caller { addr: peer, local };
    // Asked now, while the client's socket surely exists; answered once its request is read.
    let foreign = state
        .proxy
        .owner_only
        .as_ref()
        .and_then(|owner| (!owner.admits(peer, local)).then(|| NotOurs { me: owner.me() }));
    // Taken once, at accept: the whole handshake, whatever its protocol, shares it.
    let timeout = state.proxy.handshake_timeout;
    let deadline = Deadline::now() + timeout;
    // Boxed, as are the dial, the refusal and the PAC answer: a task is as large as its largest
    // stage, and a relayed connection lives long in the smallest. Inline, the refusal's 4 KiB
    // discard buffer alone made every connection's task 5.7 KB.
    let request =
        match Box::pin(handshake::accept(stream, caller, state.proxy.auth.as_ref(), deadline, timeout)).await
        {
            Ok(Accepted::Proxy(request)) => request,
            Ok(Accepted::Http(request)) => {
                observed.answered_http();
                // The PAC lists every cluster domain: not for other users, nor for other machines
                // (a non-loopback listener has a password, which a PAC fetch never carries).
                let refused = foreign.is_some() || Client::of(peer) == Client::Remote;
                let request = if refused { request.forbidden() } else { request };
                if let Err(e) = Box::pin(http::serve(&state, request)).await {
                    debug!("PAC request failed: {e}");
                }
                return;
            }
            Err(e) => {
                observed.failed(None, Instant::now());
                debug!("handshake failed: {}", Chain(&e));
                return;
            }
        };
    drop(handshake);
    if let Some(not_ours) = foreign {
        observed.failed(None, Instant::now());
        Box::pin(request.fail(Unreachable::NotAllowed, &not_ours)).await;
        return;
    }
    let protocol = request.protocol();
    let target = observed.requested(protocol, request.target.clone(), peer);
    let span = Span::current();
    span.record("target", tracing::field::display(target));

    // One route per connection, by one generation (its table and its chains): a reload in the
    // middle changes nothing for it (routing/in_force.rs). Dropped before relaying.
    let generation = state.routes.current();
    let route = Route::of(&generation.table.table, target);
    span.record("via", route.via().as_str());
    if let Some(jumphost) = route.jumphost() {
        span.record("jumphost", jumphost);
    }
    observed.routed(&route, &generation.table.table, target);
    let started = Instant::now();
    let dialled = Box::pin(dial::along(
        &generation.pool,
        &route,
        target,
        Client::of(peer),
        state.proxy.connect_timeout,
    ))
    .await;
    drop(generation);
    let upstream = match dialled {
        Ok(upstream) => upstream,
        Err(error) => {
            let failed = Failed { route, error };
            observed.failed(Some(&failed), started);
            let e = &failed.error;
            // A routed failure is something the user can act on (dead jump host, ssh config).
            match failed.route {
                Route::Jumphost(_) => info!("cannot connect: {}", Chain(e)),
                Route::Direct => debug!("cannot connect: {}", Chain(e)),
            }
            Box::pin(request.fail(Unreachable::from(e.kind()), &failed)).await;
            return;
        }
    };
    observed.connected(&route, &upstream, started);

    let bound = match &upstream {
        Upstream::Tcp(tcp) => tcp.local_addr().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        Upstream::Tunnel(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let replying = Instant::now();
    let (mut client, early) = match request.succeed(bound).await {
        Ok(accepted) => accepted,
        Err(e) => {
            observed.client_left(&e);
            debug!("client left before the reply: {e}");
            return;
        }
    };
    observed.relaying(protocol, replying);
    debug!("open");

    let counters = observed.counters();
    let result = match upstream {
        Upstream::Tcp(mut tcp) => kharon_relay::tcp(&mut client, &mut tcp, early, counters).await,
        Upstream::Tunnel(mut tunnel) => kharon_relay::stream(&mut client, &mut tunnel, early, counters).await,
    };
    let elapsed = started.elapsed();
    match result {
        Ok(t) => debug!(up = t.up, down = t.down, ?elapsed, "closed"),
        Err(e) => {
            // Reset, not closed: an end of stream would pass a broken transfer (a jump host's
            // session lost mid-download) off as a complete one.
            let _ = socket2::SockRef::from(&client).set_linger(Some(Duration::ZERO));
            debug!(?elapsed, "closed with error: {e}");
        }
    }
}

/// The span of one connection, opened by the listener at accept: every log line of the
/// connection carries the client's address, and the target and the route once they are known.
pub fn span(peer: SocketAddr) -> Span {
    tracing::info_span!(
        "connection",
        client.addr = %peer,
        target = tracing::field::Empty,
        via = tracing::field::Empty,
        jumphost = tracing::field::Empty
    )
}
