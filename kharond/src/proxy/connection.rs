//! The spine of one client connection, top to bottom:
//!
//! ```text
//! handshake::accept  protocol, greeting, optional auth, request, one deadline → Request (Target)
//!                    (SOCKS5 or HTTP CONNECT; or the PAC request, answered here; or an
//!                    absolute-form HTTP request, the first of a forwarding session)
//! Routed::by         the generation in force: its table                      → Route (direct | jumphost)
//! Routed::dial       the same generation's pool: direct TCP, or a channel from the chain's last hop → Upstream
//! reply              success, or the failure                             (Request::succeed | fail)
//! relay              splice / large-buffer copy both ways, half-close honoured → Transfer
//! ```
//!
//! A forwarding session (plain HTTP proxying, `http/forward`) routes and dials each target its
//! requests go to the same way (`Legs`), and forwards instead of relaying.
//!
//! It calls the error mappings but implements none of them. Each step is said once to the
//! connection's [`Observed`] sink (`observe/events.rs`), which lists and counts it in the
//! registry, logs a failure and tells a trace that took it, if any. Its log lines are written
//! inside the span the listener opened for it (`listener.rs`: `client.addr`), to which the target
//! and the route are added as they become known (a forwarding session's in a span per target).

use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kharon_common::errors::Chain;
use tokio::net::TcpStream;
use tokio::time::Instant as Deadline;
use tracing::{Instrument as _, Span, debug};

use crate::observe::events::Observed;
use crate::observe::failures::{Failure, Notice};
use crate::proxy::credentials::Caller;
use crate::proxy::eviction::Handshake;
use crate::proxy::handshake::{self, Accepted, Protocol, Request};
use crate::proxy::http::{self, forward};
use crate::proxy::linger::{LINGER, linger};
use crate::proxy::owner::NotOurs;
use crate::routing::dial::{Client, Failed, Routed, Upstream};
use crate::routing::target::{Target, Unreachable};
use crate::state::State;
use kharon_routing::table::Route;

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
    let accepted =
        Box::pin(handshake::accept(stream, caller, state.proxy.auth.as_ref(), deadline, timeout)).await;
    if matches!(accepted, Ok(Accepted::Proxy(_) | Accepted::Forward(_))) {
        drop(handshake);
    }
    match accepted {
        Ok(Accepted::Proxy(request)) => match foreign {
            Some(not_ours) => {
                observed.failed(&Failure::Refused { why: &not_ours, notice: Notice::Warned }, Instant::now());
                Box::pin(request.fail(Unreachable::NotAllowed, &not_ours)).await;
            }
            // Boxed too, though it is the common case: the task is moved and copied several
            // times on its way into the runtime (about ten copies of its whole size at spawn and
            // completion, in `tokio::spawn` and the task's cell), and the relay's state is most
            // of its size. One allocation instead (callgrind: `bench/conn_cost.sh`).
            None => Box::pin(tunnel(&state, observed, request, peer)).await,
        },
        Ok(Accepted::Forward(session)) => match foreign {
            Some(not_ours) => {
                observed.failed(&Failure::Refused { why: &not_ours, notice: Notice::Warned }, Instant::now());
                Box::pin(refuse_session(session, &not_ours)).await;
            }
            None => {
                let limits = forward::Limits {
                    auth: state.proxy.auth.as_ref(),
                    caller,
                    head: timeout,
                    idle: forward::IDLE,
                };
                let mut legs =
                    Legs { state: &state, peer, observed, fresh: true, answered: Cell::new(false) };
                Box::pin(forward::serve(session, &mut legs, limits)).await;
            }
        },
        Ok(Accepted::Http(request)) => {
            observed.answered_http();
            // The PAC lists every cluster domain: not for other users, nor for other machines
            // (a non-loopback listener has a password, which a PAC fetch never carries).
            let request = match (&foreign, Client::of(peer)) {
                // The owner check warned of it already.
                (Some(_), _) => request.forbidden(),
                (None, Client::Remote) => {
                    let request = request.forbidden();
                    observed.refused(&"HTTP request from another machine answered 403: the PAC is for this machine's clients", Notice::Explain);
                    request
                }
                (None, _) => {
                    if let Some(why) = request.refusal() {
                        observed.refused(&why, Notice::Explain);
                    }
                    request
                }
            };
            if let Err(e) = Box::pin(http::serve(&state, request)).await {
                debug!("PAC request failed: {e}");
            }
        }
        Err(e) => {
            let why = format!("handshake failed: {}", Chain(&e));
            observed.failed(&Failure::Refused { why: &why, notice: e.notice() }, Instant::now());
        }
    }
}

/// A SOCKS5 or CONNECT request: routed, dialled, answered, relayed.
async fn tunnel(state: &State, observed: Observed<'_>, request: Request, peer: SocketAddr) {
    let protocol = request.protocol();
    let target = observed.requested(protocol, request.target.clone(), peer);
    Span::current().record("target", tracing::field::display(target));
    // One route per connection, by one generation (its table and its chains): a reload in the
    // middle changes nothing for it (routing/in_force.rs). Dropped before relaying.
    let routed = routed(state, &observed, target);
    let started = Instant::now();
    let dialled = Box::pin(routed.dial(target, Client::of(peer), state.proxy.connect_timeout)).await;
    let upstream = match dialled_to(&observed, dialled, started) {
        Ok(upstream) => upstream,
        Err(failed) => {
            Box::pin(request.fail(Unreachable::from(failed.error.kind()), &*failed)).await;
            return;
        }
    };

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

/// The route `target` takes by the generation in force (held with it, for the dial), said to the
/// connection's span and observers.
fn routed(state: &State, observed: &Observed<'_>, target: &Target) -> Routed {
    let routed = Routed::by(&state.routes, target);
    let route = routed.route();
    let span = Span::current();
    span.record("via", route.via().as_str());
    if let Some(jumphost) = route.jumphost() {
        span.record("jumphost", jumphost);
    }
    observed.routed(route, routed.table(), target);
    routed
}

/// The dial's outcome, said to the observers (a failure is logged there, on either route).
fn dialled_to(
    observed: &Observed<'_>,
    dialled: Result<(Route, Upstream), Failed>,
    started: Instant,
) -> Result<Upstream, Box<Failed>> {
    match dialled {
        Ok((route, upstream)) => {
            observed.connected(&route, &upstream, started);
            Ok(upstream)
        }
        Err(failed) => {
            let failed = Box::new(failed);
            observed.failed(&Failure::Dial(&failed), started);
            Err(failed)
        }
    }
}

/// Answers a forwarding session's first request 403 for a client of another user.
async fn refuse_session(session: forward::Session, not_ours: &NotOurs) {
    let forward::Session { mut client, first, .. } = session;
    let answered =
        http::connect::reply_failure(&mut client, &first.target, Unreachable::NotAllowed, not_ours).await;
    if answered.is_ok() {
        linger(&mut client, Deadline::now() + LINGER).await;
    }
}

/// A forwarding session's targets, one leg each: routed and dialled as a tunnel's target is, and
/// each listed and counted as a connection of its own (the first in the entry made at accept).
struct Legs<'a> {
    state: &'a State,
    peer: SocketAddr,
    observed: Observed<'a>,
    /// `observed` has no target yet.
    fresh: bool,
    /// The current leg's first response is on its way.
    answered: Cell<bool>,
}

impl forward::Legs for Legs<'_> {
    fn open(&mut self, target: &Target) -> impl Future<Output = Result<Upstream, Box<Failed>>> + Send {
        let span = tracing::info_span!(
            "request",
            target = %target,
            via = tracing::field::Empty,
            jumphost = tracing::field::Empty
        );
        let target = target.clone();
        async move {
            if !std::mem::take(&mut self.fresh) {
                self.observed = Observed::accepted(&self.state.registry, self.peer);
            }
            self.answered.set(false);
            let target = self.observed.requested(Protocol::Forward, target, self.peer).clone();
            let routed = routed(self.state, &self.observed, &target);
            let started = Instant::now();
            let client = Client::of(self.peer);
            let dialled = Box::pin(routed.dial(&target, client, self.state.proxy.connect_timeout)).await;
            dialled_to(&self.observed, dialled, started)
        }
        .instrument(span)
    }

    fn counters(&self) -> &kharon_relay::Counters {
        self.observed.counters()
    }

    fn answering(&self) {
        if !self.answered.replace(true) {
            self.observed.relaying(Protocol::Forward, Instant::now());
        }
    }

    fn failed(&self, why: &dyn std::fmt::Display, notice: Notice) {
        self.observed.refused(why, notice);
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
