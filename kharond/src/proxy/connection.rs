//! The spine of one client connection, top to bottom:
//!
//! ```text
//! handshake::accept  protocol, greeting, optional auth, request, one deadline → Request (Target)
//!                    (SOCKS5 or HTTP CONNECT; or the PAC request, answered here)
//! route::dial        the current table snapshot                          → Route (direct | jumphost)
//!                    direct TCP, or a channel from the chain's last hop  → Upstream
//! reply              success, or the failure                             (Request::succeed | fail)
//! relay              splice / large-buffer copy both ways, half-close honoured → Transfer
//! ```
//!
//! It calls the error mappings but implements none of them. The connection is listed in the
//! registry from accept to its end (`registry.rs`: the guard it holds removes it however it ends),
//! and reports its steps to a trace that took it (`trace.rs`), if any.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kharon_shared::routing::{RoutingTable, Via};
use tokio::net::TcpStream;
use tokio::time::Instant as Deadline;
use tracing::{debug, info};

use crate::observe::registry::Protocol;
use crate::observe::trace::Tracer;
use crate::proxy::credentials::Caller;
use crate::proxy::eviction::Handshake;
use crate::proxy::handshake::{self, Accepted};
use crate::proxy::http;
use crate::proxy::owner::NotOurs;
use crate::routing::dial::{Client, Upstream};
use crate::routing::route::{self, Route};
use crate::routing::target::{Target, Unreachable};
use crate::state::State;
use kharon_relay as relay;

/// How long a trace waits for the target's first byte after the reply; a connection that stays
/// quiet longer (the target waits for the client) ends the trace with that said.
const FIRST_BYTE_WAIT: Duration = Duration::from_secs(60);

/// Serves one accepted client until its connection ends. Errors end here, in the client's own
/// span; they never reach the accept loop. Until `handshake` is dropped, the listener may close
/// this connection to make room for a new client (eviction.rs).
pub async fn serve(state: Arc<State>, stream: TcpStream, peer: SocketAddr, handshake: Handshake) {
    let tracked = state.registry.track(peer);
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
                tracked.http();
                // The PAC lists every cluster domain: not for other users, nor for other machines
                // (a non-loopback listener has a password, which a PAC fetch never carries).
                let refused = foreign.is_some() || Client::of(peer) == Client::Remote;
                let request = if refused { request.forbidden() } else { request };
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
    if let Some(not_ours) = foreign {
        state.stats.failed();
        tracked.failed();
        Box::pin(request.fail(Unreachable::NotAllowed, &not_ours)).await;
        return;
    }
    let protocol = if request.is_socks() { Protocol::Socks5 } else { Protocol::HttpConnect };
    let target = tracked.requested(protocol, request.target.clone());
    let accepted = tracked.entry().accepted;
    let tracer = state.registry.traces.claim(target, accepted);
    if let Some(t) = &tracer {
        tracked.traced();
        t.span("request", accepted, format!("{} request for {target} from {peer}", protocol.as_str()));
    }

    // One route per connection, from one table snapshot: a reload in the middle changes nothing
    // for it.
    let table = state.table();
    let route = Route::of(&table.table, target);
    tracked.routed(route.jumphost());
    if let Some(t) = &tracer {
        // The same snapshot explains the decision: a reload meanwhile must not change the story.
        t.note("route", route_decision(&table.table, target, &route));
    }
    drop(table);
    let started = Instant::now();
    let upstream = match Box::pin(route::along(&state, &route, target, Client::of(peer))).await {
        Ok(upstream) => upstream,
        Err(error) => {
            tracked.failed();
            state.stats.failed();
            let failed = route::Failed { route, error };
            let e = &failed.error;
            if let Some(t) = &tracer {
                t.span("failed", started, format!("cannot connect {failed}"));
            }
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
    tracked.established();
    if let Some(t) = &tracer {
        trace_dial(t, &route, &upstream, started);
    }
    let via = route.via();

    let bound = match &upstream {
        Upstream::Tcp(tcp) => tcp.local_addr().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        Upstream::Tunnel(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let replying = Instant::now();
    let (mut client, early) = match request.succeed(bound).await {
        Ok(accepted) => accepted,
        Err(e) => {
            if let Some(t) = &tracer {
                t.note("closed", format!("the client left before the reply: {e}"));
            }
            debug!(client.addr = %peer, %target, "client left before the reply: {e}");
            return;
        }
    };
    if let Some(t) = tracer {
        let reply = match protocol {
            Protocol::HttpConnect => "HTTP/1.1 200 Connection established",
            _ => "SOCKS5 success reply",
        };
        t.span("reply", replying, format!("{reply} sent; relaying"));
        follow_first_byte(t, Arc::clone(tracked.entry()));
    }
    debug!(client.addr = %peer, %target, via = via.as_str(), jumphost = route.jumphost(), "open");

    let counters = &tracked.entry().counters;
    let result = match upstream {
        Upstream::Tcp(mut tcp) => relay::tcp(&mut client, &mut tcp, early, counters).await,
        Upstream::Tunnel(mut tunnel) => relay::stream(&mut client, &mut tunnel, early, counters).await,
    };
    let elapsed = started.elapsed();
    match result {
        Ok(t) => {
            debug!(client.addr = %peer, %target, via = via.as_str(), up = t.up, down = t.down, ?elapsed, "closed")
        }
        Err(e) => {
            debug!(client.addr = %peer, %target, via = via.as_str(), ?elapsed, "closed with error: {e}")
        }
    }
}

/// The route decision as a trace tells it: which rule of the table decided.
fn route_decision(table: &RoutingTable, target: &Target, route: &Route) -> String {
    let Target::Name(host, _) = target else {
        return format!("{target} is an address the client resolved: directly (no name to route by)");
    };
    let explained = table.explain(host);
    match (route, explained.cluster) {
        (Route::Jumphost(jumphost), Some(cluster)) => {
            format!("via jump host {jumphost} (cluster {cluster}): {}", explained.reason)
        }
        _ => format!("{route}: {}", explained.reason),
    }
}

/// The dial as a trace tells it: direct, a connect; routed, the SSH session (reused, and how old,
/// or dialled now, hop by hop) and the channel at the last hop.
fn trace_dial(t: &Tracer, route: &Route, upstream: &Upstream, started: Instant) {
    let tunnel = match upstream {
        Upstream::Tcp(tcp) => {
            let to = tcp.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "the target".to_owned());
            t.span("connect", started, format!("resolved and connected to {to} directly"));
            return;
        }
        Upstream::Tunnel(tunnel) => tunnel,
    };
    let jumphost = route.jumphost().unwrap_or_default();
    let report = tunnel.report();
    let established = report.established;
    if established <= started {
        let age = started.saturating_duration_since(established);
        t.note("session", format!("SSH session through {jumphost} reused (up for {})", human(age)));
    } else {
        let timings = &report.hops;
        let count = timings.len();
        // Hops are dialled one after the other, the last one ending when the chain was up.
        let mut end = established;
        let mut spans = Vec::with_capacity(count);
        for timing in timings.iter().rev() {
            let took = timing.transport + timing.handshake + timing.auth;
            let from = end.checked_sub(took).unwrap_or(end);
            spans.push((from, end));
            end = from;
        }
        spans.reverse();
        for (i, (timing, (from, to))) in timings.iter().zip(spans).enumerate() {
            t.spanned(
                "hop",
                from,
                to,
                format!(
                    "hop {}/{count} {}: connect {}, SSH handshake {}, auth {}",
                    i + 1,
                    timing.hop,
                    human(timing.transport),
                    human(timing.handshake),
                    human(timing.auth)
                ),
            );
        }
    }
    t.span(
        "channel",
        established.max(started),
        format!("channel to the target opened at the last hop of {jumphost}"),
    );
}

/// Waits (bounded) for the target's first byte to reach the client, then ends the trace.
fn follow_first_byte(t: Tracer, entry: Arc<crate::observe::registry::Entry>) {
    tokio::spawn(async move {
        let waited = tokio::time::timeout(FIRST_BYTE_WAIT, entry.counters.first_down.notified()).await;
        let (up, down) = entry.bytes();
        if down > 0 {
            t.note(
                "first-byte",
                format!("first bytes from the target passed to the client ({up} bytes sent up)"),
            );
        } else if waited.is_err() {
            t.note(
                "closed",
                format!(
                    "no byte from the target within {}; the connection stays open",
                    human(FIRST_BYTE_WAIT)
                ),
            );
        } else {
            t.note(
                "closed",
                format!("the connection ended before the target sent anything ({up} bytes sent up)"),
            );
        }
    });
}

/// "0.4 ms", "52 ms", "3.2 s", "5m 3s".
fn human(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1e3;
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else if ms < 1000.0 {
        format!("{ms:.0} ms")
    } else if d < Duration::from_secs(60) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{}m {}s", d.as_secs() / 60, d.as_secs() % 60)
    }
}
