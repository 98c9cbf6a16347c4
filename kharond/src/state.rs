//! What the daemon knows while it runs: the current routing table (swapped atomically on
//! reload), where it came from, the proxy settings, and the counters `Status` reports.
//!
//! It knows nothing of the SOCKS wire format or of gRPC.
//!
//! # Concurrency
//! Every connection reads the table once, at routing time, through [`State::table`], which is a
//! lock-free `ArcSwap` load. A reload builds the new table completely and then swaps it in, so a
//! connection sees either the old table or the new one, never a mix, and a connection that is
//! already relaying keeps its upstream whatever the reload does.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use kharon_shared::routing::Via;

use crate::credentials::Credentials;
use crate::ssh;
use crate::table::{Inventory, LoadedTable};

/// Settings of the SOCKS side, fixed at start.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// `[socks]` username and password, hashed at start.
    pub auth: Option<Credentials>,
    pub handshake_timeout: Duration,
    pub connect_timeout: Duration,
    /// Clients served at once; the listener's bound (listener.rs, fd_limit.rs).
    pub max_connections: usize,
}

/// Connection counters. Relaxed ordering: they are statistics, not synchronisation.
#[derive(Debug, Default)]
pub struct Stats {
    pub open_direct: AtomicU64,
    pub open_jumphost: AtomicU64,
    pub total_direct: AtomicU64,
    pub total_jumphost: AtomicU64,
    pub failed: AtomicU64,
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
}

impl Stats {
    /// Counts a connection as open via `via` until the returned guard is dropped.
    pub fn open(self: &Arc<Self>, via: Via) -> OpenGuard {
        let (open, total) = self.counters(via);
        open.fetch_add(1, Ordering::Relaxed);
        total.fetch_add(1, Ordering::Relaxed);
        OpenGuard { stats: Arc::clone(self), via }
    }

    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn transferred(&self, up: u64, down: u64) {
        self.bytes_up.fetch_add(up, Ordering::Relaxed);
        self.bytes_down.fetch_add(down, Ordering::Relaxed);
    }

    fn counters(&self, via: Via) -> (&AtomicU64, &AtomicU64) {
        match via {
            Via::Direct => (&self.open_direct, &self.total_direct),
            Via::Jumphost => (&self.open_jumphost, &self.total_jumphost),
        }
    }
}

/// Decrements the open-connection counter when the connection ends, however it ends.
#[derive(Debug)]
pub struct OpenGuard {
    stats: Arc<Stats>,
    via: Via,
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.stats.counters(self.via).0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The daemon's shared state; one `Arc<State>` is handed to every component.
pub struct State {
    pub source: Inventory,
    pub proxy: ProxySettings,
    pub pool: Arc<ssh::Pool>,
    /// The listener's real address (the configured port may have been 0).
    pub listen: std::net::SocketAddr,
    pub control_socket: std::path::PathBuf,
    pub stats: Arc<Stats>,
    pub started_at: SystemTime,
    table: ArcSwap<LoadedTable>,
    reloads: crate::reload::Reloads,
}

impl State {
    pub fn new(
        source: Inventory,
        proxy: ProxySettings,
        pool: Arc<ssh::Pool>,
        listen: std::net::SocketAddr,
        control_socket: std::path::PathBuf,
        table: LoadedTable,
    ) -> Self {
        Self {
            source,
            proxy,
            pool,
            listen,
            control_socket,
            stats: Arc::new(Stats::default()),
            started_at: SystemTime::now(),
            table: ArcSwap::from_pointee(table),
            reloads: crate::reload::Reloads::default(),
        }
    }

    /// The current table. Cheap; call it once per connection and keep the `Arc`.
    pub fn table(&self) -> Arc<LoadedTable> {
        self.table.load_full()
    }

    /// Replaces the table; returns the one it replaced.
    pub fn swap_table(&self, table: LoadedTable) -> Arc<LoadedTable> {
        self.table.swap(Arc::new(table))
    }
}

/// What a reload changed, for the `Reload` answer and the log.
#[derive(Debug, Default)]
pub struct ReloadOutcome {
    /// "suffix -> jumphost" lines that appeared or disappeared.
    pub routes_added: Vec<String>,
    pub routes_removed: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("inventory not reloaded, the old routing table stays: {0}")]
    Inventory(#[from] crate::table::Error),
    #[error(
        "inventory not reloaded, the old routing table stays: reading {} and the ssh config did \
         not finish within {deadline:?} (a hung network file system?); the next reload waits for it",
        path.display()
    )]
    Deadline { path: std::path::PathBuf, deadline: Duration },
    #[error(
        "inventory not reloaded, the old routing table stays: an earlier reload is stuck reading {} \
         (for over {deadline:?}); try again once it has finished",
        path.display()
    )]
    Busy { path: std::path::PathBuf, deadline: Duration },
    #[error("inventory not reloaded, the old routing table stays: the reload failed: {0}")]
    Panicked(String),
}

impl State {
    /// Re-reads the inventory and the ssh config, then swaps the table in one step, within
    /// [`crate::reload::DEADLINE`] and one reload at a time (see [`crate::reload`]). A failure
    /// keeps the old table; connections already relaying are never touched either way.
    pub async fn reload(self: &Arc<Self>) -> Result<ReloadOutcome, ReloadError> {
        let deadline = crate::reload::DEADLINE;
        let state = Arc::clone(self);
        let loaded = self
            .reloads
            .run(deadline, move |abandoned| state.load_fresh(abandoned), |fresh| self.install(fresh))
            .await;
        let path = || self.source.path().to_owned();
        loaded.map_err(|failure| match failure {
            crate::reload::Failure::Load(e) => e,
            crate::reload::Failure::Deadline => ReloadError::Deadline { path: path(), deadline },
            crate::reload::Failure::Busy => ReloadError::Busy { path: path(), deadline },
            crate::reload::Failure::Panicked(why) => ReloadError::Panicked(why),
        })
    }

    /// The blocking half: reads the inventory, then the ssh config unless the caller gave up.
    fn load_fresh(&self, abandoned: &AtomicBool) -> Result<LoadedTable, ReloadError> {
        let fresh = crate::table::load(&self.source)?;
        if abandoned.load(Ordering::Relaxed) {
            // The caller was told nothing changed; keep it that way for the ssh config too.
            return Ok(fresh);
        }
        if let Err(e) = self.pool.reload(&fresh.table.jumphosts()) {
            // A broken ssh config must not block routing updates; the pool keeps its old config
            // and the error reaches the user through Status and the next routed connection.
            tracing::warn!("ssh config not reloaded: {e}");
        }
        Ok(fresh)
    }

    /// Swaps `fresh` in and says which routes changed.
    fn install(&self, fresh: LoadedTable) -> ReloadOutcome {
        let describe = |t: &LoadedTable| -> std::collections::BTreeSet<String> {
            t.table
                .routes()
                .into_iter()
                .map(|(suffix, jumphost, _)| format!("{suffix} -> {jumphost}"))
                .collect()
        };
        let new_routes = describe(&fresh);
        let old = self.swap_table(fresh);
        let old_routes = describe(&old);
        ReloadOutcome {
            routes_added: new_routes.difference(&old_routes).cloned().collect(),
            routes_removed: old_routes.difference(&new_routes).cloned().collect(),
        }
    }
}
