//! The routing in force: one [`Generation`] (the routing table and the SSH chains read with it),
//! how a reload replaces it, and what the reloads did, for `Status`. The one owner of all three.
//!
//! # The invariant
//! A connection routes and dials by **one generation**: it loads [`InForce::current`] once, looks
//! its target up in that generation's table and dials through that generation's pool. A reload
//! builds the whole next generation first (the table from the inventory, the chains from the ssh
//! config: [`Generation`] is one value) and then swaps it in with one atomic store; so a
//! connection sees either the old table with the old chains or the new table with the new
//! chains, never a jump host named by one read and resolved by the other. Sessions of chains the
//! reload did not change carry over (the two pools share their slots), and a connection already
//! relaying keeps its upstream whatever the reload does.
//!
//! How a reload runs (off the async threads, one at a time, within a deadline, everything or
//! nothing) is [`reload`](crate::routing::reload)'s; what it changed, and how the last ones
//! ended, is kept here.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use kharon_common::errors::{Chain, chain};
use kharon_routing::anchor::Anchors;
use kharon_routing::changes::{self, ClusterChange};
use kharon_routing::table::RoutingTable;
use kharon_routing::trust::OwnHosts;

use crate::routing::loaded::{self, InventorySource, LoadedInventory};
use crate::routing::reload::{Failure, Job, Reloads};

/// What routes a connection, in force together (see the invariant in the module doc).
pub struct Generation {
    /// The inventory as loaded: the routing table compiled from it, and what hangs off that.
    pub inventory: LoadedInventory,
    /// The SSH chains of this generation's ssh config read; shares live sessions with the
    /// generations before it where the chain is unchanged.
    pub pool: kharon_ssh::Pool,
}

impl Generation {
    /// The routing table of this generation: where a target goes, read with its `pool`.
    pub fn table(&self) -> &RoutingTable {
        &self.inventory.table
    }
}

/// What a reload installed and changed, for the `Reload` answer and the log.
pub struct ReloadOutcome {
    /// The generation this reload swapped in. The answer describes it, not whatever is in force
    /// by the time the answer is written: a reload right behind this one may have replaced it.
    pub installed: Arc<Generation>,
    /// Per cluster, the names routed and refused that the replaced table did not.
    pub changes: Vec<ClusterChange>,
    /// The new ssh config could not be read or is invalid: the table was installed, the ssh
    /// config read before stays in force.
    pub ssh_config_error: Option<String>,
    /// Jump hosts of the new inventory that the ssh config in force gives no chain.
    pub refused: Vec<(String, kharon_ssh::Refusal)>,
    /// What will fail although it is in force (not a partial reload): the preflight check after it.
    pub preflight: kharon_ssh::Findings,
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
    /// Its word in `Status`.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Signal => "sighup",
            Trigger::Rpc => "rpc",
        }
    }

    /// Who asked, as the log line about the reload starts.
    fn asked_by(self) -> &'static str {
        match self {
            Trigger::Signal => "SIGHUP",
            Trigger::Rpc => "kharonctl reload",
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
    pub refused: Vec<(String, kharon_ssh::Refusal)>,
}

/// The latest reload, and the latest that did not install everything.
#[derive(Debug, Clone, Default)]
pub struct ReloadHistory {
    pub last: Option<ReloadRecord>,
    pub last_failed: Option<ReloadRecord>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("inventory not reloaded, the old routing table stays")]
    Inventory(#[from] loaded::Error),
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

/// The caller gave up while the chains were being resolved: nothing is installed.
struct Abandoned;

/// The routing in force, its reloads and their history (see the module doc).
pub struct InForce {
    /// Where the table is read from.
    pub source: InventorySource,
    /// The hosts kharon itself talks to, as the settings name them: no dynamic fact may claim
    /// them (a cache adds its own on every load).
    pub own_hosts: OwnHosts,
    /// The config file's zones for dynamic names; each reload adds the jump hosts' `HostName`s.
    pub anchors: Anchors,
    current: ArcSwap<Generation>,
    reloads: Reloads,
    deadline: Duration,
    history: Mutex<ReloadHistory>,
    /// What the last preflight check found (start, then every reload), for `Status`.
    preflight: Mutex<kharon_ssh::Findings>,
}

impl InForce {
    /// The routing `first` is in force; a reload may take `deadline` (`reload_deadline_secs`).
    pub fn new(
        source: InventorySource,
        own_hosts: OwnHosts,
        anchors: Anchors,
        first: Generation,
        deadline: Duration,
    ) -> Self {
        InForce {
            source,
            own_hosts,
            anchors,
            current: ArcSwap::from_pointee(first),
            reloads: Reloads::default(),
            deadline,
            history: Mutex::default(),
            preflight: Mutex::default(),
        }
    }

    /// The generation in force. Cheap (a lock-free load); a connection calls it once, routes and
    /// dials by what it got, and drops it before relaying.
    pub fn current(&self) -> Arc<Generation> {
        self.current.load_full()
    }

    /// The latest reload, and the latest that did not install everything (for `Status`).
    pub fn history(&self) -> ReloadHistory {
        self.history.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Checks the chains of the generation in force for what will fail before a connection does
    /// ([`kharon_ssh::Pool::preflight`]), logs what the last check did not find, and keeps it all
    /// for `Status`.
    pub async fn preflight(&self) -> kharon_ssh::Findings {
        self.preflight_of(self.current()).await
    }

    /// As [`InForce::preflight`], for `checked`: what a reload installed. Kept and logged only
    /// while `checked` is still in force.
    async fn preflight_of(&self, checked: Arc<Generation>) -> kharon_ssh::Findings {
        let findings = checked.pool.preflight(checked.table().jumphosts()).await;
        // The start's check runs beside a reload's, and its lookups can take seconds: the findings
        // of a generation no longer in force are not kept (the newer check's are, or will be).
        if Arc::ptr_eq(&checked, &self.current()) {
            // Kept before it is logged: whoever read the log line finds the same in `Status`.
            let mut kept = self.preflight.lock().unwrap_or_else(PoisonError::into_inner);
            let news = news(&findings, &kept);
            *kept = findings.clone();
            drop(kept);
            news.log();
        }
        findings
    }

    /// What the last [`InForce::preflight`] found.
    pub fn preflight_findings(&self) -> kharon_ssh::Findings {
        self.preflight.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Re-reads the inventory and the ssh config and resolves every jump host, then swaps the next
    /// generation in, within the reload deadline and one reload at a time (see
    /// [`crate::routing::reload`]). A failure or a reload past its deadline installs nothing. The
    /// outcome is logged and recorded for `Status`.
    pub async fn reload(self: &Arc<Self>, trigger: Trigger) -> Result<ReloadOutcome, ReloadError> {
        let deadline = self.deadline;
        let this = Arc::clone(self);
        let loaded = self
            .reloads
            .run(deadline, move |job| this.prepare(job), |next| next.map(|next| self.install(next)))
            .await;
        let path = || self.source.path().to_owned();
        let result = match loaded {
            Ok(Ok(mut outcome)) => {
                outcome.preflight = self.preflight_of(outcome.installed.clone()).await;
                loaded::log_report(outcome.installed.table());
                Ok(outcome)
            }
            // Only reachable when the deadline passed between the last check and the answer.
            Ok(Err(Abandoned)) | Err(Failure::Deadline) => {
                Err(ReloadError::Deadline { path: path(), deadline })
            }
            Err(Failure::Load(e)) => Err(e),
            Err(Failure::Busy) => Err(ReloadError::Busy { path: path(), deadline }),
            Err(Failure::Panicked(why)) => Err(ReloadError::Panicked(why)),
        };
        match &result {
            Ok(outcome) => tracing::info!(
                added = outcome.changes.iter().map(|c| c.added.len()).sum::<usize>(),
                removed = outcome.changes.iter().map(|c| c.removed.len()).sum::<usize>(),
                partial = outcome.partial(),
                "{}: reloaded routing table from {}",
                trigger.asked_by(),
                self.source.path().display()
            ),
            Err(e) => tracing::warn!("{}: {}", trigger.asked_by(), Chain(e)),
        }
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
                error: Some(chain(e)),
                refused: Vec::new(),
            },
        };
        let mut history = self.history.lock().unwrap_or_else(PoisonError::into_inner);
        if record.result != ReloadResult::Ok {
            history.last_failed = Some(record.clone());
        }
        history.last = Some(record);
    }

    /// The blocking half: reads the inventory and the ssh config, resolves every jump host of
    /// the inventory, then compiles the table with their `HostName`s as anchors; changes nothing.
    /// Stops early once the caller gave up.
    fn prepare(
        &self,
        job: &Job,
    ) -> Result<Result<(LoadedInventory, kharon_ssh::Prepared), Abandoned>, ReloadError> {
        let read = loaded::read(&self.source, &self.own_hosts)?;
        let jumphosts = read.jumphosts();
        let current = self.current();
        // The pool asks first right after reading the ssh config file: from then on only
        // resolving is left, which is bounded, so the loader slot goes back (reload.rs).
        let Some(mut prepared) = current.pool.prepare(&jumphosts, &|| {
            job.reads_done();
            job.abandoned()
        }) else {
            return Ok(Err(Abandoned));
        };
        // A jump host the prepared config did not resolve (its file failed, so the config in
        // force stays) is known to the pool in force: no lookup blocks here.
        let host_name = |jumphost: &str| {
            prepared.host_name(jumphost).map(str::to_owned).or_else(|| current.pool.known_host_name(jumphost))
        };
        let anchors = read.anchors(&self.anchors, &jumphosts, &host_name);
        let inventory = read.compile(&anchors);
        prepared.want(inventory.table.jumphosts().to_vec());
        Ok(Ok((inventory, prepared)))
    }

    /// Makes the next generation from what [`InForce::prepare`] read and swaps it in, as one
    /// value; says what changed.
    fn install(&self, (inventory, prepared): (LoadedInventory, kharon_ssh::Prepared)) -> ReloadOutcome {
        // Within the reload's turn (reload.rs): no other reload installs between this read of
        // the pool in force and the swap below.
        let old = self.current();
        let (pool, installed) = old.pool.next(prepared);
        let (old_all, new_all) = (old.table().routes(), inventory.table.routes());
        let changes = changes::between(
            &changes::Snapshot { routes: &old_all, refused: &old.table().report().refused },
            &changes::Snapshot { routes: &new_all, refused: &inventory.table.report().refused },
        );
        let generation = Arc::new(Generation { inventory, pool });
        self.current.store(generation.clone());
        ReloadOutcome {
            installed: generation,
            changes,
            ssh_config_error: installed.config_error,
            refused: installed.refused,
            preflight: kharon_ssh::Findings::default(),
        }
    }
}

/// What `now` found that `before` (the last check in force) did not: each condition (a jump host
/// that does not resolve, no way to authenticate) is logged once when it appears, not again at
/// every reload while it lasts; one that cleared and comes back is news again.
fn news(now: &kharon_ssh::Findings, before: &kharon_ssh::Findings) -> kharon_ssh::Findings {
    kharon_ssh::Findings {
        at: now.at,
        unresolved: now.unresolved.iter().filter(|u| !before.unresolved.contains(u)).cloned().collect(),
        credentials: now.credentials.clone().filter(|why| before.credentials.as_ref() != Some(why)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An inventory of `n` direct clusters (no jump host: no SSH is needed to install it).
    fn inventory(n: usize) -> String {
        let clusters: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    r#"{{"id":"c-{i}","displayName":"c-{i}","tenant":"t-1","facts":{{"jumphostDomains":"c-{i}.example.net"}},"dynamicFacts":{{}}}}"#
                )
            })
            .collect();
        format!("[{}]", clusters.join(","))
    }

    fn in_force(dir: &std::path::Path) -> Arc<InForce> {
        let source = InventorySource::File(dir.join("inventory.json"));
        let own_hosts = OwnHosts::default();
        let read = loaded::read_at_start(&source, &own_hosts).expect("the inventory reads");
        let ssh_config = dir.join("ssh_config");
        std::fs::write(&ssh_config, "").expect("write the ssh config");
        let pool = kharon_ssh::Pool::new(kharon_ssh::PoolSettings {
            ssh_config,
            system_ssh_config: None,
            home: dir.to_owned(),
            env: Default::default(),
            connect_timeout: Duration::from_secs(5),
            engine: kharon_ssh::Settings::default(),
            sleep_clock: kharon_ssh::SleepClock::system(),
            questions: None,
        })
        .expect("an empty ssh config reads");
        let anchors = Anchors::default();
        let inventory = read.compile(&anchors);
        Arc::new(InForce::new(
            source,
            own_hosts,
            anchors,
            Generation { inventory, pool },
            Duration::from_secs(30),
        ))
    }

    /// A reload's answer describes the generation it swapped in, even once the next reload has
    /// replaced it: it does not read the generation in force again to say what it installed.
    #[tokio::test]
    async fn a_reload_answers_for_what_it_installed_not_for_the_reload_after_it() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let file = dir.path().join("inventory.json");
        std::fs::write(&file, inventory(1)).expect("write the inventory");
        let routes = in_force(dir.path());

        std::fs::write(&file, inventory(2)).expect("write the inventory");
        let first = routes.reload(Trigger::Rpc).await.expect("the first reload installs");
        std::fs::write(&file, inventory(3)).expect("write the inventory");
        let second = routes.reload(Trigger::Rpc).await.expect("the second reload installs");

        let clusters = |generation: &Generation| generation.table().report().clusters_total;
        assert_eq!(clusters(&first.installed), 2, "the first reload's answer");
        assert_eq!(clusters(&second.installed), 3, "the second reload's answer");
        assert!(Arc::ptr_eq(&second.installed, &routes.current()), "the second is in force");
    }

    fn findings(unresolved: &[&str], credentials: Option<&str>) -> kharon_ssh::Findings {
        kharon_ssh::Findings {
            at: SystemTime::now(),
            unresolved: unresolved
                .iter()
                .map(|j| kharon_ssh::Unresolved {
                    jumphost: (*j).to_owned(),
                    reason: format!("{j} does not resolve"),
                })
                .collect(),
            credentials: credentials.map(str::to_owned),
        }
    }

    #[test]
    fn a_condition_is_news_once_and_again_after_it_cleared() {
        let first = findings(&["jump-a"], Some("no ssh-agent"));
        let news_at_start = news(&first, &kharon_ssh::Findings::default());
        assert_eq!(news_at_start.unresolved.len(), 1);
        assert_eq!(news_at_start.credentials.as_deref(), Some("no ssh-agent"));
        // The same after a reload: nothing to log.
        let again = news(&findings(&["jump-a"], Some("no ssh-agent")), &first);
        assert!(again.unresolved.is_empty() && again.credentials.is_none(), "{again:?}");
        // A new jump host, and another reason, are news; what cleared is not.
        let changed = findings(&["jump-a", "jump-b"], Some("no ssh-agent, and the key is encrypted"));
        let news_now = news(&changed, &first);
        assert_eq!(news_now.unresolved.iter().map(|u| u.jumphost.as_str()).collect::<Vec<_>>(), ["jump-b"]);
        assert!(news_now.credentials.is_some());
        let cleared = findings(&[], None);
        assert_eq!(news(&first, &cleared).credentials.as_deref(), Some("no ssh-agent"), "back again");
    }
}
