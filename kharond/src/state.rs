//! What the daemon knows while it runs: the current routing table (swapped atomically on
//! reload), where it came from, the proxy settings, the counters `Status` reports and the
//! registry of open connections (`registry.rs`).
//!
//! It knows nothing of the SOCKS wire format or of gRPC.
//!
//! # Concurrency
//! Every connection reads the table once, at routing time, through [`State::table`], which is a
//! lock-free `ArcSwap` load. A reload builds the new table completely and then swaps it in, so a
//! connection sees either the old table or the new one, never a mix, and a connection that is
//! already relaying keeps its upstream whatever the reload does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use crate::observe::registry::Registry;
use crate::proxy::credentials::Credentials;
use crate::routing::table::{Inventory, LoadedTable};
use kharon_ssh as ssh;

/// Settings of the SOCKS side, fixed at start.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// `[socks]` username and password, hashed at start.
    pub auth: Option<Credentials>,
    /// Without a password (and without `allow_other_users`): serve only clients of our own user.
    pub owner_only: Option<Arc<crate::proxy::owner::OwnerOnly>>,
    pub handshake_timeout: Duration,
    pub connect_timeout: Duration,
    /// Clients served at once; the listener's bound (listener.rs, fd_limit.rs).
    pub max_connections: usize,
}

/// Connections that failed before they had a route (handshake) or on it (dial). Open and total
/// connections per route are the registry's (`registry.rs`); `Status` sums them from there.
#[derive(Debug, Default)]
pub struct Stats {
    pub failed: AtomicU64,
}

impl Stats {
    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }
}

/// The daemon's shared state; one `Arc<State>` is handed to every component.
pub struct State {
    pub source: Inventory,
    /// The hosts kharon itself talks to, as the settings name them: no dynamic fact may claim
    /// them (a cache adds its own on every load).
    pub own_hosts: kharon_shared::trust::OwnHosts,
    pub proxy: ProxySettings,
    pub pool: Arc<ssh::Pool>,
    /// The listener's real address (the configured port may have been 0).
    pub listen: std::net::SocketAddr,
    pub control_socket: std::path::PathBuf,
    pub stats: Arc<Stats>,
    /// Open connections and per-route totals (bytes are counted there).
    pub registry: Registry,
    pub started_at: SystemTime,
    table: ArcSwap<LoadedTable>,
    reloads: crate::routing::reload::Reloads,
    reload_deadline: Duration,
    reload_history: std::sync::Mutex<ReloadHistory>,
    /// What the last preflight check found (start, then every reload), for `Status`.
    preflight: std::sync::Mutex<ssh::Findings>,
}

impl State {
    pub fn new(
        source: Inventory,
        own_hosts: kharon_shared::trust::OwnHosts,
        proxy: ProxySettings,
        pool: Arc<ssh::Pool>,
        listen: std::net::SocketAddr,
        control_socket: std::path::PathBuf,
        table: LoadedTable,
    ) -> Self {
        Self {
            source,
            own_hosts,
            proxy,
            pool,
            listen,
            control_socket,
            stats: Arc::new(Stats::default()),
            registry: Registry::default(),
            started_at: SystemTime::now(),
            table: ArcSwap::from_pointee(table),
            reloads: crate::routing::reload::Reloads::default(),
            reload_deadline: crate::routing::reload::DEADLINE,
            reload_history: std::sync::Mutex::default(),
            preflight: std::sync::Mutex::default(),
        }
    }

    /// Checks the chains of the table in force for what will fail before a connection does
    /// ([`ssh::Pool::preflight`]), logs it, and keeps it for `Status`.
    pub async fn preflight(&self) -> ssh::Findings {
        let checked = self.table();
        let findings = self.pool.preflight(&checked.table.jumphosts()).await;
        // The start's check runs beside a reload's, and its lookups can take seconds: the findings
        // of a table no longer in force are not kept (the newer check's are, or will be).
        if Arc::ptr_eq(&checked, &self.table()) {
            // Kept before it is logged: whoever read the log line finds the same in `Status`.
            *self.preflight.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = findings.clone();
            findings.log();
        }
        findings
    }

    /// What the last [`State::preflight`] found.
    pub fn preflight_findings(&self) -> ssh::Findings {
        self.preflight.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// A reload deadline other than [`crate::routing::reload::DEADLINE`]: for tests only, so that a
    /// reload stuck past it takes seconds rather than half a minute.
    pub fn with_reload_deadline(mut self, deadline: Duration) -> Self {
        self.reload_deadline = deadline;
        self
    }

    /// The latest reload, and the latest that did not install everything (for `Status`).
    pub fn reload_history(&self) -> ReloadHistory {
        self.reload_history.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
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
    /// The new ssh config could not be read or is invalid: the table was installed, the ssh
    /// config read before stays in force.
    pub ssh_config_error: Option<String>,
    /// Jump hosts of the new inventory that the ssh config in force gives no chain.
    pub refused: Vec<(String, ssh::Refusal)>,
    /// What will fail although it is in force (not a partial reload): the preflight check after it.
    pub preflight: ssh::Findings,
}

impl ReloadOutcome {
    /// The table went in, but not everything the files asked for is usable.
    pub fn partial(&self) -> bool {
        self.ssh_config_error.is_some() || !self.refused.is_empty()
    }
}

/// Who asked for a reload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    Signal,
    Rpc,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Signal => "sighup",
            Trigger::Rpc => "rpc",
        }
    }
}

/// How a reload ended, as `Status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReloadResult {
    Ok,
    Partial,
    Failed,
}

/// One reload, as `Status` shows it.
#[derive(Debug, Clone)]
pub struct ReloadRecord {
    pub at: SystemTime,
    pub trigger: Trigger,
    pub result: ReloadResult,
    /// Why nothing was installed (failed), or why the ssh config was not (partial).
    pub error: Option<String>,
    pub refused: Vec<(String, ssh::Refusal)>,
}

/// The latest reload, and the latest that did not install everything.
#[derive(Debug, Clone, Default)]
pub struct ReloadHistory {
    pub last: Option<ReloadRecord>,
    pub last_failed: Option<ReloadRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("inventory not reloaded, the old routing table stays: {0}")]
    Inventory(#[from] crate::routing::table::Error),
    #[error(
        "nothing reloaded, the old routing table and ssh config stay: reading {} and the ssh config \
         and resolving every jump host (Match exec, canonicalization) did not finish within \
         {deadline:?} (a hung network file system? a slow Match exec?); the next reload starts afresh",
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

/// A reload's fresh table and jump host chains, prepared and not yet installed.
struct Fresh {
    table: LoadedTable,
    pool: ssh::Prepared,
}

/// The caller gave up while the chains were being resolved: nothing is installed.
struct Abandoned;

impl State {
    /// Re-reads the inventory and the ssh config and resolves every jump host, then installs
    /// the table and the chains together, within the reload deadline and one reload at a time
    /// (see [`crate::routing::reload`]). A failure or a reload past its deadline installs nothing;
    /// connections already relaying are never touched either way. The outcome is recorded for
    /// `Status`.
    pub async fn reload(self: &Arc<Self>, trigger: Trigger) -> Result<ReloadOutcome, ReloadError> {
        let deadline = self.reload_deadline;
        let state = Arc::clone(self);
        let loaded = self
            .reloads
            .run(deadline, move |job| state.prepare(job), |fresh| fresh.map(|fresh| self.install(fresh)))
            .await;
        let path = || self.source.path().to_owned();
        let result = match loaded {
            Ok(Ok(mut outcome)) => {
                outcome.preflight = self.preflight().await;
                crate::routing::table::log_report(&self.table().table);
                Ok(outcome)
            }
            // Only reachable when the deadline passed between the last check and the answer.
            Ok(Err(Abandoned)) | Err(crate::routing::reload::Failure::Deadline) => {
                Err(ReloadError::Deadline { path: path(), deadline })
            }
            Err(crate::routing::reload::Failure::Load(e)) => Err(e),
            Err(crate::routing::reload::Failure::Busy) => Err(ReloadError::Busy { path: path(), deadline }),
            Err(crate::routing::reload::Failure::Panicked(why)) => Err(ReloadError::Panicked(why)),
        };
        self.record(trigger, &result);
        result
    }

    fn record(&self, trigger: Trigger, result: &Result<ReloadOutcome, ReloadError>) {
        let record = match result {
            Ok(outcome) => ReloadRecord {
                at: SystemTime::now(),
                trigger,
                result: if outcome.partial() { ReloadResult::Partial } else { ReloadResult::Ok },
                error: outcome.ssh_config_error.clone(),
                refused: outcome.refused.clone(),
            },
            Err(e) => ReloadRecord {
                at: SystemTime::now(),
                trigger,
                result: ReloadResult::Failed,
                error: Some(e.to_string()),
                refused: Vec::new(),
            },
        };
        let mut history = self.reload_history.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if record.result != ReloadResult::Ok {
            history.last_failed = Some(record.clone());
        }
        history.last = Some(record);
    }

    /// The blocking half: reads the inventory and the ssh config, then resolves every jump host;
    /// changes nothing. Stops early once the caller gave up.
    fn prepare(&self, job: &crate::routing::reload::Job) -> Result<Result<Fresh, Abandoned>, ReloadError> {
        let table = crate::routing::table::load(&self.source, &self.own_hosts)?;
        // The pool asks first right after reading the ssh config file: from then on only
        // resolving is left, which is bounded, so the loader slot goes back (reload.rs).
        let prepared = self.pool.prepare(&table.table.jumphosts(), &|| {
            job.reads_done();
            job.abandoned()
        });
        Ok(prepared.map(|pool| Fresh { table, pool }).ok_or(Abandoned))
    }

    /// Swaps the table and the chains in, together, and says what changed.
    fn install(&self, fresh: Fresh) -> ReloadOutcome {
        let describe = |t: &LoadedTable| -> std::collections::BTreeSet<String> {
            t.table
                .routes()
                .into_iter()
                .map(|(suffix, jumphost, _)| format!("{suffix} -> {jumphost}"))
                .collect()
        };
        let new_routes = describe(&fresh.table);
        self.registry.retain_routes(&fresh.table.table.jumphosts());
        let installed = self.pool.install(fresh.pool);
        let old = self.swap_table(fresh.table);
        let old_routes = describe(&old);
        ReloadOutcome {
            routes_added: new_routes.difference(&old_routes).cloned().collect(),
            routes_removed: old_routes.difference(&new_routes).cloned().collect(),
            ssh_config_error: installed.config_error,
            refused: installed.refused,
            preflight: ssh::Findings::default(),
        }
    }
}
