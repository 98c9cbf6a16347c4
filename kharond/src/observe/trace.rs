//! Per-request traces on demand (`kharonctl route HOST --trace`): the next connection to a host,
//! step by step with times, the answer to "why is this slow".
//!
//! The `Trace` RPC arms a trace ([`Traces::arm`]) and waits; the next connection whose target
//! matches takes every trace armed for it ([`Traces::claim`]) and reports its steps through the
//! [`Tracer`] as they happen. A trace is disarmed when its RPC ends (answered, timed out, or the
//! caller went away).
//!
//! # Cost
//! With nothing armed, a connection pays one relaxed load ([`Traces::claim`]); only a connection
//! that took a trace formats and sends its steps.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use kharon_routing::table::RoutingTable;
use tokio::sync::mpsc;

use crate::routing::dial::Upstream;
use crate::routing::target::Target;
use kharon_routing::table::Route;

/// One step of a traced connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Since the connection was accepted.
    pub at: Duration,
    /// How long the step itself took, when it is a span rather than a moment.
    pub took: Option<Duration>,
    /// What happened, in one word: "accepted", "request", "route", "session", "hop", "channel",
    /// "connect", "reply", "first-byte", "closed", "failed".
    pub kind: &'static str,
    /// The sentence a person reads.
    pub detail: String,
}

impl Step {
    /// Whether the trace ends with this step.
    pub fn is_last(&self) -> bool {
        matches!(self.kind, "first-byte" | "closed" | "failed")
    }
}

/// What a trace waits for: a host, and a port unless any will do.
#[derive(Debug)]
struct Waiter {
    id: u64,
    host: String,
    port: Option<u16>,
    steps: mpsc::UnboundedSender<Step>,
}

/// The traces armed now.
#[derive(Debug, Default)]
pub struct Traces {
    armed: AtomicUsize,
    next: AtomicU64,
    waiting: Mutex<Vec<Waiter>>,
}

fn lock(waiting: &Mutex<Vec<Waiter>>) -> MutexGuard<'_, Vec<Waiter>> {
    // Only pushes and removals happen under it: a panic cannot leave it half done.
    waiting.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Traces {
    /// Arms a trace for the next connection to `host` (as [`Target::host`] spells it) and `port`
    /// (any if `None`). Returns its id, for [`Traces::disarm`], and where its steps arrive.
    pub fn arm(&self, host: String, port: Option<u16>) -> (u64, mpsc::UnboundedReceiver<Step>) {
        let (steps, received) = mpsc::unbounded_channel();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut waiting = lock(&self.waiting);
        waiting.push(Waiter { id, host, port, steps });
        self.armed.store(waiting.len(), Ordering::Relaxed);
        (id, received)
    }

    /// Removes a trace, taken or not.
    pub fn disarm(&self, id: u64) {
        let mut waiting = lock(&self.waiting);
        waiting.retain(|w| w.id != id);
        self.armed.store(waiting.len(), Ordering::Relaxed);
    }

    /// Every trace armed for `target`, taken by the connection accepted at `accepted`; `None`
    /// (at the cost of one relaxed load) when none is armed.
    pub fn claim(&self, target: &Target, accepted: Instant) -> Option<Tracer> {
        if self.armed.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let host = target.host();
        let mut waiting = lock(&self.waiting);
        let mut steps = Vec::new();
        waiting.retain(|w| {
            let wanted = w.host == host && w.port.is_none_or(|p| p == target.port());
            if wanted {
                steps.push(w.steps.clone());
            }
            !wanted
        });
        self.armed.store(waiting.len(), Ordering::Relaxed);
        (!steps.is_empty()).then_some(Tracer { steps, origin: accepted })
    }
}

/// Reports the steps of one traced connection.
#[derive(Debug, Clone)]
pub struct Tracer {
    steps: Vec<mpsc::UnboundedSender<Step>>,
    origin: Instant,
}

impl Tracer {
    /// When the traced connection was accepted: steps are timed from there.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// A moment: `kind` happened now.
    pub fn note(&self, kind: &'static str, detail: impl Into<String>) {
        self.send(Step { at: self.origin.elapsed(), took: None, kind, detail: detail.into() });
    }

    /// A span: `kind` started at `since` and ended now.
    pub fn span(&self, kind: &'static str, since: Instant, detail: impl Into<String>) {
        self.spanned(kind, since, Instant::now(), detail);
    }

    /// A span from `from` to `to`, reported now (e.g. a hop dialled earlier in the dial).
    pub fn spanned(&self, kind: &'static str, from: Instant, to: Instant, detail: impl Into<String>) {
        self.send(Step {
            at: to.saturating_duration_since(self.origin),
            took: Some(to.saturating_duration_since(from)),
            kind,
            detail: detail.into(),
        });
    }

    fn send(&self, step: Step) {
        // A caller that went away just misses the rest.
        for steps in &self.steps {
            let _ = steps.send(step.clone());
        }
    }
}

/// The route decision as a trace tells it: which rule of the table decided.
pub fn route_decision(table: &RoutingTable, target: &Target, route: &Route) -> String {
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
pub fn dial(t: &Tracer, route: &Route, upstream: &Upstream, started: Instant) {
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

/// "0.4 ms", "52 ms", "3.2 s", "5m 3s".
pub fn human(d: Duration) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn name(host: &str, port: u16) -> Target {
        Target::Name(host.to_owned(), port)
    }

    #[tokio::test]
    async fn the_next_matching_connection_takes_the_trace_and_others_do_not() {
        let traces = Traces::default();
        assert!(traces.claim(&name("api.a.example", 443), Instant::now()).is_none(), "nothing armed");
        let (id, mut steps) = traces.arm("api.a.example".into(), Some(443));
        let (_any, mut any_port) = traces.arm("api.a.example".into(), None);
        assert!(traces.claim(&name("api.b.example", 443), Instant::now()).is_none());
        assert!(traces.claim(&name("api.a.example", 80), Instant::now()).is_some(), "port-less trace");
        let tracer = traces.claim(&name("api.a.example", 443), Instant::now()).expect("armed for it");
        tracer.note("route", "direct");
        assert_eq!(steps.recv().await.map(|s| s.kind), Some("route"));
        assert!(any_port.try_recv().is_err(), "that one followed the port-80 connection");
        // Taken: the next connection to the same host is not traced, and disarming is harmless.
        assert!(traces.claim(&name("api.a.example", 443), Instant::now()).is_none());
        traces.disarm(id);
        assert_eq!(traces.armed.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_disarmed_trace_takes_nothing_and_leaves_nothing() {
        let traces = Traces::default();
        let (id, _steps) = traces.arm("api.a.example".into(), None);
        traces.disarm(id);
        assert!(traces.claim(&name("api.a.example", 443), Instant::now()).is_none());
        assert!(lock(&traces.waiting).is_empty());
    }

    #[test]
    fn spans_are_timed_from_the_accept() {
        let traces = Traces::default();
        let (_id, mut steps) = traces.arm("h.example".into(), None);
        let accepted = Instant::now();
        let tracer = traces.claim(&name("h.example", 1), accepted).expect("armed");
        let from = accepted + Duration::from_millis(5);
        tracer.spanned("connect", from, from + Duration::from_millis(20), "x");
        let step = steps.try_recv().expect("sent");
        assert_eq!((step.at, step.took), (Duration::from_millis(25), Some(Duration::from_millis(20))));
        assert!(!step.is_last());
    }
}
