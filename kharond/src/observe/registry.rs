//! The connections kharond holds right now, and per-route totals since it started: what
//! `kharonctl connections` lists and what `status` sums up per route.
//!
//! # Bounded memory
//! An [`Entry`] exists exactly while its connection does: [`Registry::track`] inserts it at
//! accept, and the [`Tracked`] guard removes it when the connection ends, however it ends (closed,
//! failed, evicted or cancelled: the guard is dropped with the connection's future). So the
//! registry holds at most `max_connections` entries (listener.rs), under 300 bytes each with
//! the host name (a test holds the struct to that), and no history. A closed connection leaves
//! only its counts, folded into its route's [`RouteTotals`]: one record for the direct route and
//! one per jump host the routing table names. A reload that drops a
//! jump host drops its record too once no open connection uses it ([`Registry::retain_routes`]),
//! so the totals are bounded by the table.
//!
//! # Cost on the connection path
//! One insert and one remove in a std mutex, each held for the map operation only and never across
//! an `.await`; for a routed connection one lookup of its jump host's record (direct's is kept
//! outside the map); byte counts are the relay's relaxed atomics ([`relay::Counters`]), updated
//! per chunk. Which process holds a client socket is only looked up when someone lists the
//! connections (`peer.rs`); a trace costs one relaxed load per connection unless one is armed
//! (`trace.rs`).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use crate::observe::failures::FailureLog;
use crate::observe::trace::Traces;
use crate::proxy::protocol::Protocol;
use crate::routing::target::Target;
use kharon_relay as relay;
use kharon_routing::table::Route;

/// How the registry keeps a [`Protocol`] in an atomic: 0 until the handshake says.
fn protocol_code(protocol: Protocol) -> u8 {
    match protocol {
        Protocol::Socks5 => 1,
        Protocol::HttpConnect => 2,
        Protocol::Http => 3,
        Protocol::Forward => 4,
    }
}

fn protocol_of(code: u8) -> Option<Protocol> {
    match code {
        1 => Some(Protocol::Socks5),
        2 => Some(Protocol::HttpConnect),
        3 => Some(Protocol::Http),
        4 => Some(Protocol::Forward),
        _ => None,
    }
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the client's greeting and request.
    Handshake,
    /// Routed; connecting to the target (directly or through the jump host chain).
    Dialing,
    /// Relaying both ways.
    Open,
    /// One direction has ended, the other still relays.
    HalfClosed,
}

/// What a route has seen since start. Relaxed: statistics, not synchronisation.
#[derive(Debug)]
pub struct RouteTotals {
    pub route: Route,
    /// Established connections not yet closed.
    open: AtomicU64,
    /// Connections established since start.
    total: AtomicU64,
    /// Connections whose dial failed on this route.
    failed: AtomicU64,
    /// Bytes of closed connections (open ones add theirs when listed).
    up: AtomicU64,
    down: AtomicU64,
}

impl RouteTotals {
    fn new(route: Route) -> Self {
        RouteTotals {
            route,
            open: AtomicU64::new(0),
            total: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            up: AtomicU64::new(0),
            down: AtomicU64::new(0),
        }
    }
}

/// One route's totals as `Status` shows them: closed connections plus the live bytes of open ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSummary {
    pub route: Route,
    pub open: u64,
    pub total: u64,
    pub failed: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

/// One open connection.
#[derive(Debug)]
pub struct Entry {
    /// Unique for the daemon's life; the order of accept.
    pub id: u64,
    /// The client's address (its socket's local end; which process holds it: `peer.rs`).
    pub client: SocketAddr,
    pub accepted: Instant,
    protocol: AtomicU8,
    target: OnceLock<Target>,
    route: OnceLock<Arc<RouteTotals>>,
    established: AtomicBool,
    /// A trace follows it: its end wakes the trace's wait for the first byte.
    traced: AtomicBool,
    pub counters: relay::Counters,
}

impl Entry {
    /// The protocol the client speaks, once its handshake has said.
    pub fn protocol(&self) -> Option<Protocol> {
        protocol_of(self.protocol.load(Ordering::Relaxed))
    }

    pub fn target(&self) -> Option<&Target> {
        self.target.get()
    }

    /// The route taken, once decided.
    pub fn route(&self) -> Option<&Route> {
        self.route.get().map(|totals| &totals.route)
    }

    pub fn phase(&self) -> Phase {
        if self.established.load(Ordering::Relaxed) {
            let c = &self.counters;
            if c.ended(relay::Way::Up) || c.ended(relay::Way::Down) { Phase::HalfClosed } else { Phase::Open }
        } else if self.route.get().is_some() {
            Phase::Dialing
        } else {
            Phase::Handshake
        }
    }

    pub fn bytes(&self) -> (u64, u64) {
        (self.counters.up.load(Ordering::Relaxed), self.counters.down.load(Ordering::Relaxed))
    }
}

/// Open connections and per-route totals (see the module doc).
#[derive(Debug)]
pub struct Registry {
    next: AtomicU64,
    open: Mutex<HashMap<u64, Arc<Entry>>>,
    direct: Arc<RouteTotals>,
    routed: Mutex<BTreeMap<String, Arc<RouteTotals>>>,
    /// Connections that failed before they had a route: their handshake, or a client of another
    /// user. Those that failed on their route count in its totals.
    unrouted_failures: AtomicU64,
    pub traces: Traces,
    /// The limits of the log of failed connections (`failures.rs`).
    pub failures: FailureLog,
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            next: AtomicU64::new(1),
            open: Mutex::default(),
            direct: Arc::new(RouteTotals::new(Route::Direct)),
            routed: Mutex::default(),
            unrouted_failures: AtomicU64::new(0),
            traces: Traces::default(),
            failures: FailureLog::default(),
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here is a plain map operation: a panic cannot leave it half done.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    /// Registers a connection just accepted from `client`; it is listed until the returned guard
    /// is dropped.
    pub fn track(&self, client: SocketAddr) -> Tracked<'_> {
        let entry = Arc::new(Entry {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            client,
            accepted: Instant::now(),
            protocol: AtomicU8::new(0),
            target: OnceLock::new(),
            route: OnceLock::new(),
            established: AtomicBool::new(false),
            traced: AtomicBool::new(false),
            counters: relay::Counters::default(),
        });
        lock(&self.open).insert(entry.id, Arc::clone(&entry));
        Tracked { registry: self, entry }
    }

    /// Every open connection, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Entry>> {
        let mut entries: Vec<Arc<Entry>> = lock(&self.open).values().cloned().collect();
        entries.sort_by_key(|e| e.id);
        entries
    }

    /// The totals of every route seen since start (direct first, then jump hosts by name), with
    /// the live bytes of open connections added.
    pub fn routes(&self) -> Vec<RouteSummary> {
        let records: Vec<Arc<RouteTotals>> =
            std::iter::once(Arc::clone(&self.direct)).chain(lock(&self.routed).values().cloned()).collect();
        let mut summaries: Vec<RouteSummary> = records
            .iter()
            .map(|r| RouteSummary {
                route: r.route.clone(),
                open: r.open.load(Ordering::Relaxed),
                total: r.total.load(Ordering::Relaxed),
                failed: r.failed.load(Ordering::Relaxed),
                bytes_up: r.up.load(Ordering::Relaxed),
                bytes_down: r.down.load(Ordering::Relaxed),
            })
            .collect();
        for entry in self.snapshot() {
            let Some(route) = entry.route() else { continue };
            if let Some(summary) = summaries.iter_mut().find(|s| &s.route == route) {
                let (up, down) = entry.bytes();
                summary.bytes_up += up;
                summary.bytes_down += down;
            }
        }
        summaries
    }

    /// Every failed connection since start: on a route (the dial failed) or before one.
    pub fn failed(&self) -> u64 {
        let routed: u64 = self.routes().iter().map(|r| r.failed).sum();
        routed + self.unrouted_failures.load(Ordering::Relaxed)
    }

    /// Forgets the totals of jump hosts not in `jumphosts` (the new table's) that no open
    /// connection uses: a reload's clean-up, which keeps the totals bounded by the table.
    pub fn retain_routes(&self, jumphosts: &[String]) {
        let in_use: Vec<Route> = self.snapshot().iter().filter_map(|e| e.route().cloned()).collect();
        lock(&self.routed).retain(|jumphost, totals| {
            jumphosts.iter().any(|j| j == jumphost) || in_use.contains(&totals.route)
        });
    }

    fn totals(&self, route: &Route) -> Arc<RouteTotals> {
        let Route::Jumphost(jumphost) = route else { return Arc::clone(&self.direct) };
        let mut routed = lock(&self.routed);
        if let Some(totals) = routed.get(&**jumphost) {
            return Arc::clone(totals);
        }
        let totals = Arc::new(RouteTotals::new(route.clone()));
        routed.insert(jumphost.to_string(), Arc::clone(&totals));
        totals
    }
}

/// A connection's place in the registry, held by the connection itself; dropping it (however the
/// connection ends) removes the entry and folds its bytes into the totals.
#[derive(Debug)]
pub struct Tracked<'a> {
    registry: &'a Registry,
    entry: Arc<Entry>,
}

impl<'a> Tracked<'a> {
    pub fn entry(&self) -> &Arc<Entry> {
        &self.entry
    }

    /// The registry it is listed in.
    pub fn registry(&self) -> &'a Registry {
        self.registry
    }

    /// The handshake read a request for `target` in `protocol`; returns the target as kept here.
    pub fn requested(&self, protocol: Protocol, target: Target) -> &Target {
        self.entry.protocol.store(protocol_code(protocol), Ordering::Relaxed);
        self.entry.target.get_or_init(|| target)
    }

    /// The request was plain HTTP (the PAC file).
    pub fn http(&self) {
        self.entry.protocol.store(protocol_code(Protocol::Http), Ordering::Relaxed);
    }

    /// The connection takes `route`; it now dials.
    pub fn routed(&self, route: &Route) {
        let totals = self.registry.totals(route);
        let _ = self.entry.route.set(totals);
    }

    /// The connection failed: on its route if it has one (the dial), else before one. Counted
    /// once, here, for `Status` and the route's totals alike.
    pub fn failed(&self) {
        match self.entry.route.get() {
            Some(totals) => totals.failed.fetch_add(1, Ordering::Relaxed),
            None => self.registry.unrouted_failures.fetch_add(1, Ordering::Relaxed),
        };
    }

    /// The upstream is connected; the connection counts as open on its route until it ends.
    pub fn established(&self) {
        if let Some(totals) = self.entry.route.get()
            && !self.entry.established.swap(true, Ordering::Relaxed)
        {
            totals.open.fetch_add(1, Ordering::Relaxed);
            totals.total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A trace follows this connection: its end must wake the trace's wait for a first byte.
    pub fn traced(&self) {
        self.entry.traced.store(true, Ordering::Relaxed);
    }
}

impl Drop for Tracked<'_> {
    fn drop(&mut self) {
        lock(&self.registry.open).remove(&self.entry.id);
        let (up, down) = self.entry.bytes();
        if let Some(totals) = self.entry.route.get() {
            totals.up.fetch_add(up, Ordering::Relaxed);
            totals.down.fetch_add(down, Ordering::Relaxed);
            if self.entry.established.load(Ordering::Relaxed) {
                totals.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
        if self.entry.traced.load(Ordering::Relaxed) {
            self.entry.counters.first_down.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kharon_relay::Way;

    fn client(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn target() -> Target {
        Target::Name("api.c1.example".into(), 443)
    }

    #[test]
    fn an_entry_stays_small() {
        // The README and the module doc promise under 300 bytes with the host name: the struct,
        // its Arc header and map slot (about 40 bytes) and a name of up to 64 bytes.
        let size = std::mem::size_of::<Entry>();
        assert!(size + 40 + 64 < 300, "Entry is {size} bytes");
    }

    #[test]
    fn an_entry_lives_exactly_as_long_as_its_guard_and_walks_through_its_phases() {
        let registry = Registry::default();
        let first = registry.track(client(1000));
        let second = registry.track(client(1001));
        assert_eq!(
            registry.snapshot().iter().map(|e| e.client).collect::<Vec<_>>(),
            [client(1000), client(1001)]
        );
        assert_eq!(first.entry().phase(), Phase::Handshake);
        assert_eq!(first.requested(Protocol::Socks5, target()), &target());
        first.routed(&Route::Jumphost("jump-a".into()));
        assert_eq!(first.entry().phase(), Phase::Dialing);
        first.established();
        assert_eq!(first.entry().phase(), Phase::Open);
        first.entry().counters.end(Way::Up);
        assert_eq!(first.entry().phase(), Phase::HalfClosed);
        drop(second);
        assert_eq!(registry.snapshot().len(), 1, "a handshake that ended is forgotten");
        drop(first);
        assert!(registry.snapshot().is_empty());
    }

    #[test]
    fn a_closed_connection_leaves_only_its_counts_on_its_route() {
        let registry = Registry::default();
        {
            let routed = registry.track(client(2000));
            routed.routed(&Route::Jumphost("jump-a".into()));
            routed.established();
            routed.entry().counters.add(Way::Up, 100);
            routed.entry().counters.add(Way::Down, 5000);
            let open = registry.routes();
            let jump = open.iter().find(|r| r.route.jumphost() == Some("jump-a")).expect("listed");
            assert_eq!(
                (jump.open, jump.total, jump.bytes_up, jump.bytes_down),
                (1, 1, 100, 5000),
                "live bytes"
            );
            let failed = registry.track(client(2001));
            failed.routed(&Route::Jumphost("jump-a".into()));
            failed.failed();
            let direct = registry.track(client(2002));
            direct.routed(&Route::Direct);
            direct.established();
            direct.entry().counters.add(Way::Down, 7);
        }
        assert!(registry.snapshot().is_empty());
        let routes = registry.routes();
        assert_eq!(
            routes,
            [
                RouteSummary {
                    route: Route::Direct,
                    open: 0,
                    total: 1,
                    failed: 0,
                    bytes_up: 0,
                    bytes_down: 7
                },
                RouteSummary {
                    route: Route::Jumphost("jump-a".into()),
                    open: 0,
                    total: 1,
                    failed: 1,
                    bytes_up: 100,
                    bytes_down: 5000
                },
            ]
        );
    }

    #[tokio::test]
    async fn a_cancelled_or_failed_connection_leaves_no_entry() {
        let registry = Arc::new(Registry::default());
        let held = Arc::clone(&registry);
        let (started, running) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let tracked = held.track(client(3000));
            tracked.routed(&Route::Jumphost("jump-b".into()));
            tracked.established();
            tracked.entry().counters.add(Way::Down, 42);
            let _ = started.send(());
            std::future::pending::<()>().await;
        });
        running.await.expect("the task ran");
        assert_eq!(registry.snapshot().len(), 1);
        task.abort();
        assert!(task.await.is_err_and(|e| e.is_cancelled()));
        assert!(registry.snapshot().is_empty(), "the aborted connection is still listed");
        let jump =
            registry.routes().into_iter().find(|r| r.route.jumphost() == Some("jump-b")).expect("kept");
        assert_eq!((jump.open, jump.bytes_down), (0, 42));

        // A panic in the middle of a connection unwinds through the guard too.
        let held = Arc::clone(&registry);
        let panicked = tokio::spawn(async move {
            let _tracked = held.track(client(3001));
            panic!("a bug in the middle of a connection");
        })
        .await;
        assert!(panicked.is_err_and(|e| e.is_panic()));
        assert!(registry.snapshot().is_empty());
    }

    #[test]
    fn a_reload_forgets_jump_hosts_the_table_dropped_unless_still_in_use() {
        let registry = Registry::default();
        for jumphost in ["old", "kept", "busy"] {
            let t = registry.track(client(4000));
            t.routed(&Route::Jumphost(jumphost.into()));
        }
        let busy = registry.track(client(4001));
        busy.routed(&Route::Jumphost("busy".into()));
        registry.retain_routes(&["kept".to_owned()]);
        let names: Vec<Option<String>> =
            registry.routes().into_iter().map(|r| r.route.jumphost().map(str::to_owned)).collect();
        assert_eq!(names, [None, Some("busy".into()), Some("kept".into())]);
        drop(busy);
        registry.retain_routes(&["kept".to_owned()]);
        assert_eq!(registry.routes().len(), 2, "direct and the table's jump host");
    }
}
