//! One connection's events, said once by the spine (`proxy/connection.rs`) and heard by every
//! observer: the registry ([`Tracked`]: listed, counted, failures once), the log of failures
//! ([`Logged`]: why, once, within its limits; `failures.rs`) and a trace, if one took the
//! connection ([`Tracer`]: the steps with times). Each implements [`Observer`]; [`Observed`] is the
//! one sink the spine talks to, which passes each event to all of them. A new observer is a new
//! implementation, not another `if let Some(..)` in the spine.

use std::cell::OnceCell;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kharon_routing::table::RoutingTable;

use crate::observe::failures::{Failure, FailureLog, Notice};
use crate::observe::registry::{Entry, Registry, Tracked};
use crate::observe::trace::{self, Tracer};
use crate::proxy::protocol::Protocol;
use crate::routing::dial::Upstream;
use crate::routing::target::Target;
use kharon_routing::table::Route;

/// How long a trace waits for the target's first byte after the reply; a connection that stays
/// quiet longer (the target waits for the client) ends the trace with that said.
const FIRST_BYTE_WAIT: Duration = Duration::from_secs(60);

/// What happens to one connection, in the order it can happen. Each observer takes what it needs;
/// the rest are no-ops.
pub trait Observer {
    /// The handshake read a proxy request from `client`.
    fn requested(&self, _protocol: Protocol, _target: &Target, _client: SocketAddr) {}
    /// It was a plain HTTP request (the PAC file), answered without a route.
    fn answered_http(&self) {}
    /// A request was refused and answered so without counting as a failed connection: a refused
    /// PAC-port request (nothing was asked of a route), or a later request of a forwarding session.
    fn refused(&self, _why: &dyn fmt::Display, _notice: Notice) {}
    /// `table` gave the target `route`; the dial starts.
    fn routed(&self, _route: &Route, _table: &RoutingTable, _target: &Target) {}
    /// The connection failed: before it had a route (handshake, a client of another user), or on
    /// it (the dial that began at `started`).
    fn failed(&self, _failure: &Failure<'_>, _started: Instant) {}
    /// The upstream is connected, by a dial that began at `started`.
    fn connected(&self, _route: &Route, _upstream: &Upstream, _started: Instant) {}
    /// The client went away before it got the success reply.
    fn client_left(&self, _why: &std::io::Error) {}
    /// The success reply, begun at `replying`, is out; bytes move now.
    fn relaying(&self, _protocol: Protocol, _replying: Instant) {}
}

/// The one sink of a connection's events: its registry entry, and the trace that took it, if any.
pub struct Observed<'a> {
    tracked: Tracked<'a>,
    logged: Logged<'a>,
    /// Claimed when the request says where the connection goes (traces wait for a host).
    tracer: OnceCell<Tracer>,
}

impl<'a> Observed<'a> {
    /// A connection just accepted from `client`: listed from now until this is dropped.
    pub fn accepted(registry: &'a Registry, client: SocketAddr) -> Self {
        Observed {
            tracked: registry.track(client),
            logged: Logged { log: &registry.failures, client },
            tracer: OnceCell::new(),
        }
    }

    /// The handshake read a request: kept in the registry, and a trace armed for its host takes
    /// the connection. Returns the target as kept.
    pub fn requested(&self, protocol: Protocol, target: Target, client: SocketAddr) -> &Target {
        let target = self.tracked.requested(protocol, target);
        let entry = self.tracked.entry();
        if let Some(tracer) = self.tracked.registry().traces.claim(target, entry.accepted) {
            self.tracked.traced();
            let _ = self.tracer.set(tracer);
        }
        self.each(|o| o.requested(protocol, target, client));
        target
    }

    /// The relay's live byte counts for this connection.
    pub fn counters(&self) -> &kharon_relay::Counters {
        &self.tracked.entry().counters
    }

    pub fn answered_http(&self) {
        self.each(|o| o.answered_http());
    }

    pub fn refused(&self, why: &dyn fmt::Display, notice: Notice) {
        self.each(|o| o.refused(why, notice));
    }

    pub fn routed(&self, route: &Route, table: &RoutingTable, target: &Target) {
        self.each(|o| o.routed(route, table, target));
    }

    pub fn failed(&self, failure: &Failure<'_>, started: Instant) {
        self.each(|o| o.failed(failure, started));
    }

    pub fn connected(&self, route: &Route, upstream: &Upstream, started: Instant) {
        self.each(|o| o.connected(route, upstream, started));
    }

    pub fn client_left(&self, why: &std::io::Error) {
        self.each(|o| o.client_left(why));
    }

    /// The reply is out: a trace then waits (bounded, in its own task) for the target's first byte.
    pub fn relaying(&self, protocol: Protocol, replying: Instant) {
        self.each(|o| o.relaying(protocol, replying));
        if let Some(tracer) = self.tracer.get() {
            follow_first_byte(tracer.clone(), Arc::clone(self.tracked.entry()));
        }
    }

    fn each(&self, event: impl Fn(&dyn Observer)) {
        event(&self.tracked);
        event(&self.logged);
        if let Some(tracer) = self.tracer.get() {
            event(tracer);
        }
    }
}

/// The registry's part: the entry's protocol, route and phase, and each failure counted once (on
/// its route, or before one).
impl Observer for Tracked<'_> {
    fn answered_http(&self) {
        self.http();
    }

    fn routed(&self, route: &Route, _table: &RoutingTable, _target: &Target) {
        Tracked::routed(self, route);
    }

    fn failed(&self, _failure: &Failure<'_>, _started: Instant) {
        Tracked::failed(self);
    }

    fn connected(&self, _route: &Route, _upstream: &Upstream, _started: Instant) {
        self.established();
    }
}

/// The log's part: each failure, and each refused HTTP request, said once (`failures.rs`).
pub struct Logged<'a> {
    log: &'a FailureLog,
    client: SocketAddr,
}

impl Observer for Logged<'_> {
    fn refused(&self, why: &dyn fmt::Display, notice: Notice) {
        self.log.write(self.client, &Failure::Refused { why, notice });
    }

    fn failed(&self, failure: &Failure<'_>, _started: Instant) {
        self.log.write(self.client, failure);
    }
}

/// A trace's part: each step as a person reads it, timed from the accept (`trace.rs`).
impl Observer for Tracer {
    fn requested(&self, protocol: Protocol, target: &Target, client: SocketAddr) {
        self.span(
            "request",
            self.origin(),
            format!("{} request for {target} from {client}", protocol.as_str()),
        );
    }

    fn routed(&self, route: &Route, table: &RoutingTable, target: &Target) {
        // The same table snapshot explains the decision: a reload meanwhile must not change the story.
        self.note("route", trace::route_decision(table, target, route));
    }

    fn failed(&self, failure: &Failure<'_>, started: Instant) {
        if let Failure::Dial(failed) = failure {
            self.span("failed", started, format!("cannot connect {failed}"));
        }
    }

    fn connected(&self, route: &Route, upstream: &Upstream, started: Instant) {
        trace::dial(self, route, upstream, started);
    }

    fn client_left(&self, why: &std::io::Error) {
        self.note("closed", format!("the client left before the reply: {why}"));
    }

    fn relaying(&self, protocol: Protocol, replying: Instant) {
        self.span("reply", replying, format!("{} sent; relaying", protocol.success_reply()));
    }
}

/// Waits (bounded) for the target's first byte to reach the client, then ends the trace.
fn follow_first_byte(t: Tracer, entry: Arc<Entry>) {
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
                    trace::human(FIRST_BYTE_WAIT)
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
