//! The shared SSH sessions, one dialled chain per jump host, opened on first use.
//!
//! Owns: resolving each jump host's chain from the ssh config once per reload (a jump host the
//! config cannot give a chain is remembered as refused, with the reason and its file:line, and
//! fails at once until the next reload), when to dial (first use, after a session died, after a
//! reload changed the chain), sharing one handshake between concurrent first uses, backoff after
//! failures, and the retry of a channel open on a fresh session.
//! Leaves one jump host's state to `slot`, doubting and probing sessions (sleep/wake, frozen hops)
//! to `keepalive`, what `Status` shows to `health`, what each failure means to `error`, ssh_config
//! syntax to `config`, the hop-by-hop handshake to `chain`, and the relay of bytes to the daemon
//! (`kharon_relay::stream`); each [`Tunnel`] reads its channel promptly itself (tunnel.rs;
//! docs/ssh-engine.md, "Slow readers").
//!
//! # Generations
//! A [`Pool`] is one generation: one read of the ssh config and the chains resolved against it.
//! A reload never changes a pool; it makes the next one ([`Pool::prepare`]: slow, changes
//! nothing; [`Pool::next`]: quick), which shares the slots (and so the live sessions) of every
//! chain that did not change. The caller swaps the new pool in together with whatever it routes
//! by (kharond: the routing table), so a connection routed by one table dials the chains read
//! with it. Only the jump hosts a generation had not resolved yet are added to it later, on first
//! use, against its own config.
//!
//! # Concurrency
//! A pool's `chains` and `refused` maps and each slot's `state` are std mutexes held only for
//! map/field updates, never across an `.await`; lock order: `chains`, then `refused`. Dialling is
//! serialised per chain by a tokio mutex (`Slot::dial`) owned by a
//! spawned dial task: concurrent first uses wait for that one handshake and then reuse its
//! session (sshd's `MaxStartups` would otherwise drop some of 20 parallel handshakes), and a
//! request that gives up (the daemon's own timeout) does not abort the dial for the others.
//! While a chain is in backoff, requests fail at once with the last error; the first request after
//! the backoff window dials again.
//!
//! # A hop that asks a person
//! When a hop wants answers from a person (prompt.rs), the question waits on the slot's desk
//! (desk.rs). Every wait for a dial, the dial's own and each request's, lasts as long as the
//! person is given ([`Patience::Wait`], `desk::within`), or stops at the question and reports it
//! ([`Patience::Report`]). A login that fails for want of an answer leaves the slot
//! [`ChainState::LoginRequired`]: requests fail at once, with that failure, and nothing is dialled
//! (nobody is asked again by connections in the background) until a person logs in:
//! [`Pool::login`] dials and returns the first question, [`Pool::answer`] answers one and returns
//! what follows.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use kharon_common::errors;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::error::Error;
use crate::login::desk::{self, AnswerError, Answers, Question, Stopped};
use crate::login::prompt::{Asker, QuestionSender};
use crate::sessions::chain::{self, Dialled, OpenError};
use crate::sessions::health::{self, ChainHealth, Refusal};
use crate::sessions::keepalive;
use crate::sessions::keepalive::SleepClock;
use crate::sessions::slot::{ChainState, Live, NEXT_SESSION, Slot, Stamped};
pub use crate::sessions::tunnel::Tunnel;
use crate::settings::{SessionSettings, Settings};
use kharon_ssh_config::{self, Chain, SshConfig};

/// A reload's ssh config and every jump host resolved against it, not yet a pool
/// ([`Pool::prepare`], [`Pool::next`]).
pub struct Prepared {
    config: Arc<SshConfig>,
    /// Whether `config` is a fresh read (false: it failed, and `config` is the one in force).
    fresh: bool,
    config_error: Option<String>,
    resolved: HashMap<String, Result<Chain, Refusal>>,
    /// The fresh inventory's jump hosts: the refusals a reload reports.
    wanted: Vec<String>,
    /// The jump hosts the pool knew before (a fresh config resolves them again): with `wanted`,
    /// those the next generation keeps ([`Prepared::want`]).
    known: Vec<String>,
}

/// The `HostName` of a chain's last hop: the jump host's own.
fn last_host_name(chain: &Chain) -> Option<&str> {
    chain.hops.last().map(|hop| hop.host_name.as_str())
}

impl Prepared {
    /// The `HostName` the prepared ssh config gives `jumphost`'s own hop (its alias when it has
    /// none), if `jumphost` was resolved here and has a chain: what the routing table anchors
    /// the jump host's cluster in.
    pub fn host_name(&self, jumphost: &str) -> Option<&str> {
        last_host_name(self.resolved.get(jumphost)?.as_ref().ok()?)
    }

    /// Narrows what was prepared to the jump hosts of the routing table (and those known
    /// before), as if only they had been asked for: the table is known only once it is compiled,
    /// which needs [`Prepared::host_name`] of all its inventory's jump hosts first. So a jump host
    /// of a cluster that routes nothing is neither reported nor kept.
    pub fn want(&mut self, jumphosts: Vec<String>) {
        let keep: std::collections::HashSet<&String> = self.known.iter().chain(&jumphosts).collect();
        self.resolved.retain(|jumphost, _| keep.contains(jumphost));
        self.wanted = jumphosts;
    }
}

/// What a reload put in force, beyond the routing table.
#[derive(Debug, Default)]
pub struct Installed {
    /// The new ssh config could not be read or is invalid; the one read before stays in force.
    pub config_error: Option<String>,
    /// Jump hosts of the fresh inventory that the config in force gives no chain, by name.
    pub refused: Vec<(String, Refusal)>,
}

/// What a request does while a hop of its chain asks a person (see `# A hop that asks a person`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// Waits for the answer as long as the question is open, then for the rest of the login: a
    /// client's connection goes through once the person has answered.
    Wait,
    /// Does not wait for it: fails at once with the question and how to answer it (kharond's own
    /// checks, which a person is watching).
    Report,
}

/// Where a person's login to a jump host stands ([`Pool::login`], [`Pool::answer`]).
#[derive(Debug, Clone)]
pub enum LoginStep {
    /// A hop asks this; [`Pool::answer`] answers it.
    Asked(Arc<Question>),
    /// The chain is up.
    Connected,
    /// The login failed: why, with every cause.
    Failed(String),
}

/// What the pool needs to know, fixed at start (a reload re-reads the ssh config file).
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub ssh_config: PathBuf,
    /// The system-wide ssh config read after `ssh_config` (`/etc/ssh/ssh_config`), or none: ssh
    /// reads it unless `-F` names a config, and kharond unless one is named (README).
    pub system_ssh_config: Option<PathBuf>,
    pub home: PathBuf,
    /// Environment the SSH engine may consult (`SSH_AUTH_SOCK`, `${VAR}` expansion). Captured once.
    pub env: HashMap<String, String>,
    /// Upper bound for dialling a chain plus opening the channel.
    pub connect_timeout: Duration,
    /// The engine's tuning: defaults unless the daemon's config file or a test sets them.
    pub engine: Settings,
    /// How long the machine has been suspended: [`SleepClock::system`] unless a test stands in
    /// for a sleep (keepalive.rs).
    pub sleep_clock: SleepClock,
    /// Where every question a hop asks a person is sent as it opens, once however many
    /// connections wait for it (kharond tells the person at the desktop); none: nowhere.
    pub questions: Option<QuestionSender>,
}

/// What every generation of a pool shares: the settings and the sleep detector.
struct Engine {
    settings: PoolSettings,
    /// Asked when a connection is routed or `Status` probes: did the machine sleep meanwhile?
    sleep: keepalive::Detector,
}

/// The shared SSH sessions of one generation (see `# Generations`), keyed by jump host.
pub struct Pool {
    engine: Arc<Engine>,
    config: Arc<SshConfig>,
    chains: Mutex<HashMap<String, Arc<Slot>>>,
    /// Jump hosts this generation's config gives no chain.
    refused: Mutex<HashMap<String, Refusal>>,
}

impl Pool {
    /// The first generation: reads the ssh config. An unreadable or invalid file is an error here,
    /// at start.
    pub fn new(settings: PoolSettings) -> Result<Self, Error> {
        let config = Self::load(&settings)?;
        let sleep =
            keepalive::Detector::new(settings.sleep_clock.clone(), settings.engine.sessions.sleep_jump);
        let engine = Arc::new(Engine { settings, sleep });
        Ok(Pool {
            engine,
            config: Arc::new(config),
            chains: Mutex::new(HashMap::new()),
            refused: Mutex::new(HashMap::new()),
        })
    }

    /// After a sleep: every session is suspect (the next use probes it first) and all are
    /// probed at once, so the request that noticed does not wait for keepalive either.
    fn woke_up(&self) {
        if let Some(slept) = self.engine.sleep.look() {
            tracing::info!(?slept, "the machine slept; probing SSH sessions");
            keepalive::probe_all(self.slots(), self.engine.settings.engine.sessions.probe);
        }
    }

    /// `SSH_AUTH_SOCK` as captured at start: the agent of every hop without an `IdentityAgent` of
    /// its own.
    pub fn default_agent(&self) -> Option<&str> {
        self.engine.settings.env.get("SSH_AUTH_SOCK").map(String::as_str).filter(|s| !s.is_empty())
    }

    /// What the pool was started with (the ssh config's path, HOME, the captured environment).
    pub fn settings(&self) -> &PoolSettings {
        &self.engine.settings
    }

    fn load(settings: &PoolSettings) -> Result<SshConfig, Error> {
        let env = &settings.env;
        let system = settings.system_ssh_config.as_deref();
        Ok(SshConfig::load(&settings.ssh_config, system, &settings.home, &|name| env.get(name).cloned())?)
    }

    fn chains(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.chains.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn refusals(&self) -> std::sync::MutexGuard<'_, HashMap<String, Refusal>> {
        self.refused.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Every slot, with the map's lock already released (see `# Concurrency`).
    fn slots(&self) -> Vec<Arc<Slot>> {
        self.chains().values().cloned().collect()
    }

    /// [`Pool::prepare`] then [`Pool::next`], for callers without a deadline (tests).
    #[cfg(test)]
    pub fn reload(&self, jumphosts: &[String]) -> (Pool, Installed) {
        match self.prepare(jumphosts, &|| false) {
            Some(prepared) => self.next(prepared),
            None => unreachable!("never abandoned"),
        }
    }

    /// The slow half of a reload, which changes nothing: re-reads the ssh config and resolves
    /// every jump host against it (those known so far and `jumphosts`, the fresh inventory's).
    /// If the file cannot be read or is invalid, the config in force stays, and only jump hosts
    /// not seen before are resolved, against it. Blocking: resolving may run `Match exec`
    /// commands and look names up (`config`). `abandoned` is asked before each jump host; once
    /// it says yes, nothing more is resolved and `None` comes back (the caller gave up, so at
    /// most one `Match exec` outlives it).
    pub fn prepare(&self, jumphosts: &[String], abandoned: &dyn Fn() -> bool) -> Option<Prepared> {
        let (config, config_error, mut names) = match Self::load(&self.engine.settings) {
            Ok(config) => {
                let mut names: Vec<String> = self.chains().keys().cloned().collect();
                names.extend(self.refusals().keys().cloned());
                (Arc::new(config), None, names)
            }
            Err(e) => (Arc::clone(&self.config), Some(errors::chain(&e)), Vec::new()),
        };
        let fresh = config_error.is_none();
        let known = names.clone();
        if !fresh {
            names.extend(jumphosts.iter().filter(|j| self.known(j).is_none()).cloned());
        } else {
            names.extend(jumphosts.iter().cloned());
        }
        names.sort();
        names.dedup();
        let mut resolved = HashMap::new();
        for jumphost in names {
            if abandoned() {
                return None;
            }
            let chain = config.chain(&jumphost).map_err(|e| Refusal::from(&e));
            resolved.insert(jumphost, chain);
        }
        Some(Prepared { config, fresh, config_error, resolved, wanted: jumphosts.to_vec(), known })
    }

    /// The quick half of a reload: the next generation, from what [`Pool::prepare`] resolved.
    /// With a fresh config, sessions whose chain did not change carry over (the slot is shared),
    /// changed chains are dialled anew on next use, and jump hosts refused before are looked at
    /// again; with the old config kept, only the jump hosts new to it are added. This pool stays
    /// as it is, for whoever still holds it.
    pub fn next(&self, prepared: Prepared) -> (Pool, Installed) {
        let Prepared { config, fresh, config_error, resolved, wanted, .. } = prepared;
        let chains = self.chains();
        let refusals = self.refusals();
        let (slots, refused) = if fresh {
            let mut slots = HashMap::new();
            let mut refused = HashMap::new();
            for (jumphost, chain) in &resolved {
                match chain {
                    Ok(chain) => {
                        // Unchanged, or settled by a first use meanwhile: keep its session.
                        let kept = chains.get(jumphost).filter(|slot| slot.chain == *chain).cloned();
                        if kept.is_none() && chains.contains_key(jumphost) {
                            tracing::info!(%jumphost, "ssh config changed this chain; it is dialled anew on next use");
                        }
                        let slot = kept.unwrap_or_else(|| {
                            Arc::new(Slot::new(jumphost, chain.clone(), &self.engine.settings.engine))
                        });
                        slots.insert(jumphost.clone(), slot);
                    }
                    Err(refusal) => {
                        refused.insert(jumphost.clone(), refusal.clone());
                    }
                }
            }
            (slots, refused)
        } else {
            let mut slots = chains.clone();
            let mut refused = refusals.clone();
            for (jumphost, chain) in &resolved {
                match chain {
                    Ok(chain) if !refused.contains_key(jumphost) => {
                        slots.entry(jumphost.clone()).or_insert_with(|| {
                            Arc::new(Slot::new(jumphost, chain.clone(), &self.engine.settings.engine))
                        });
                    }
                    Err(refusal) if !slots.contains_key(jumphost) => {
                        refused.entry(jumphost.clone()).or_insert_with(|| refusal.clone());
                    }
                    _ => {}
                }
            }
            (slots, refused)
        };
        drop(refusals);
        drop(chains);
        let mut wanted_refused: Vec<(String, Refusal)> = wanted
            .iter()
            .filter_map(|jumphost| Some((jumphost.clone(), refused.get(jumphost)?.clone())))
            .collect();
        wanted_refused.sort_by(|a, b| a.0.cmp(&b.0));
        wanted_refused.dedup_by(|a, b| a.0 == b.0);
        for (jumphost, refusal) in &wanted_refused {
            tracing::warn!("jump host {jumphost} cannot be used: {}", refusal.reason);
        }
        if let Some(e) = &config_error {
            tracing::warn!("ssh config not reloaded, the one read before stays in force: {e}");
        }
        let pool = Pool {
            engine: Arc::clone(&self.engine),
            config,
            chains: Mutex::new(slots),
            refused: Mutex::new(refused),
        };
        (pool, Installed { config_error, refused: wanted_refused })
    }

    /// Resolves every given jump host not resolved yet; returns the errors (for the start-up log).
    /// Valid ones appear in [`Pool::status`] as idle from now on, refused ones with the reason.
    /// Blocking: resolving may run `Match exec` commands and look names up (`config`).
    pub fn validate(&self, jumphosts: &[String]) -> Vec<(String, Error)> {
        let mut errors = Vec::new();
        for jumphost in jumphosts {
            if let Err(e) = self.slot(jumphost) {
                errors.push((jumphost.clone(), e));
            }
        }
        errors
    }

    /// The slot for `jumphost`'s chain in this generation, resolving it (blocking) if no one has
    /// yet. A slot in the map is current by construction: the next generation replaces every slot
    /// whose chain changed, so the ssh config is resolved once per chain and reload, not on every
    /// connection; a refusal is remembered the same way.
    fn slot(&self, jumphost: &str) -> Result<Arc<Slot>, Error> {
        if let Some(found) = self.known(jumphost) {
            return found;
        }
        let resolved = self.config.chain(jumphost);
        self.settle(jumphost, resolved)
    }

    /// [`Pool::slot`] for async callers: resolving runs on the blocking pool.
    async fn slot_async(&self, jumphost: &str) -> Result<Arc<Slot>, Error> {
        if let Some(found) = self.known(jumphost) {
            return found;
        }
        let (config, name) = (Arc::clone(&self.config), jumphost.to_owned());
        let resolved =
            tokio::task::spawn_blocking(move || config.chain(&name)).await.map_err(|e| Error::Refused {
                jumphost: jumphost.to_owned(),
                reason: format!("resolving its chain failed: {e}"),
            })?;
        self.settle(jumphost, resolved)
    }

    /// The slot or refusal already known for `jumphost`.
    fn known(&self, jumphost: &str) -> Option<Result<Arc<Slot>, Error>> {
        if let Some(slot) = self.chains().get(jumphost) {
            return Some(Ok(slot.clone()));
        }
        let refusal = self.refusals().get(jumphost).cloned()?;
        Some(Err(Error::Refused { jumphost: jumphost.to_owned(), reason: refusal.reason }))
    }

    /// Records in this generation what resolving `jumphost` against its config gave; concurrent
    /// first uses keep the first.
    fn settle(
        &self,
        jumphost: &str,
        resolved: Result<Chain, kharon_ssh_config::Error>,
    ) -> Result<Arc<Slot>, Error> {
        match resolved {
            Ok(chain) => Ok(self
                .chains()
                .entry(jumphost.to_owned())
                .or_insert_with(|| Arc::new(Slot::new(jumphost, chain, &self.engine.settings.engine)))
                .clone()),
            Err(e) => {
                self.refusals().insert(jumphost.to_owned(), Refusal::from(&e));
                Err(Error::Refused { jumphost: jumphost.to_owned(), reason: errors::chain(&e) })
            }
        }
    }

    /// Opens a direct-tcpip channel from `jumphost`'s last hop to `host:port`, dialling the chain
    /// first if needed. `host` is sent as a name: the last hop resolves it. Bounded by the
    /// connect timeout, and with [`Patience::Wait`] by the time a person is given to answer a
    /// hop's question (then the channel has the time the rest of the login has).
    pub async fn connect(
        &self,
        jumphost: &str,
        host: &str,
        port: u16,
        patience: Patience,
    ) -> Result<Tunnel, Error> {
        let connect_timeout = self.engine.settings.connect_timeout;
        let deadline = Instant::now() + connect_timeout;
        self.woke_up();
        let slot = tokio::time::timeout_at(deadline, self.slot_async(jumphost)).await.map_err(|_| {
            Error::Timeout {
                jumphost: jumphost.to_owned(),
                what: "resolving its chain",
                after: connect_timeout,
            }
        })??;
        let (mut id, mut dialled, mut reused) = self.session(&slot, deadline, patience).await?;
        let deadline = deadline.max(slot.desk.patience().unwrap_or(deadline));
        let mut retried = false;
        loop {
            let opened = tokio::time::timeout_at(deadline, dialled.open(host, port)).await;
            let fail = |reason, description| Error::Target {
                jumphost: jumphost.to_owned(),
                host: host.to_owned(),
                port,
                reason,
                description,
            };
            match opened {
                Ok(Ok(channel)) => {
                    slot.opened(host, port);
                    let settings = &self.engine.settings.engine;
                    return Ok(Tunnel::new(channel, slot.counters.clone(), dialled, settings));
                }
                Ok(Err(OpenError::Refused { reason, description })) => {
                    slot.refused(host, port, &reason, description.as_deref());
                    return Err(fail(reason, description));
                }
                Ok(Err(OpenError::Transport(source))) => {
                    slot.drop_session(id, &format!("{}: {}", slot.hops(), errors::Chain(&source)));
                    // Only a reused session may have died unnoticed; a fresh one failing is real.
                    if !reused || retried {
                        return Err(Error::Session {
                            jumphost: jumphost.to_owned(),
                            host: host.to_owned(),
                            port,
                            source: Box::new(source),
                        });
                    }
                    tracing::debug!(%jumphost, "channel open failed on a reused session; retrying on a fresh one");
                    retried = true;
                    (id, dialled, reused) = self.session(&slot, deadline, patience).await?;
                }
                Err(_) => {
                    // A black-holed target, or a frozen hop: find out which, in the background,
                    // so the next request does not wait for the keepalive either.
                    let probe = self.engine.settings.engine.sessions.probe;
                    keepalive::spawn_probe(&slot, id, dialled.clone(), "channel open timed out", probe);
                    return Err(Error::Timeout {
                        jumphost: jumphost.to_owned(),
                        what: "opening the channel",
                        after: self.engine.settings.connect_timeout,
                    });
                }
            }
        }
    }

    /// A usable session for `slot`: the live one (probed first if suspect), or a fresh one.
    /// Returns (session id, chain, whether it was reused).
    async fn session(
        &self,
        slot: &Arc<Slot>,
        deadline: Instant,
        patience: Patience,
    ) -> Result<(u64, Arc<Dialled>, bool), Error> {
        if let Some((id, chain, suspect)) = slot.current()
            && (!suspect
                || keepalive::confirm(slot, id, &chain, deadline, self.engine.settings.engine.sessions.probe)
                    .await)
        {
            return Ok((id, chain, true));
        }
        let timeout = |what| Error::Timeout {
            jumphost: slot.jumphost.clone(),
            what,
            after: self.engine.settings.connect_timeout,
        };
        // Wait for a dial in progress (it may be for us), then look again.
        let guard = wait(slot, deadline, patience, slot.dial.clone().lock_owned())
            .await
            .map_err(|stopped| stopped_error(slot, stopped, timeout("waiting for the SSH handshake")))?;
        if let Some((id, chain, _)) = slot.current() {
            return Ok((id, chain, false));
        }
        {
            let st = slot.lock();
            if let Some(why) = &st.login_required {
                return Err(Error::LoginRequired { jumphost: slot.jumphost.clone(), why: why.text.clone() });
            }
            if let Some((at, _)) = st.retry_at
                && Instant::now() < at
            {
                return Err(Error::Backoff {
                    jumphost: slot.jumphost.clone(),
                    last_error: st.last_error.as_ref().map(|e| e.text.clone()).unwrap_or_default(),
                    kind: st.last_kind,
                    retry_in: at.saturating_duration_since(Instant::now()),
                });
            }
        }
        let task = tokio::spawn(dial(
            slot.clone(),
            guard,
            self.engine.settings.clone(),
            self.config.path().to_owned(),
        ));
        match wait(slot, deadline, patience, task).await {
            Err(stopped) => Err(stopped_error(slot, stopped, timeout("the SSH handshake"))),
            Ok(Err(join)) => Err(Error::Timeout {
                jumphost: slot.jumphost.clone(),
                what: if join.is_panic() { "the SSH handshake (it panicked)" } else { "the SSH handshake" },
                after: self.engine.settings.connect_timeout,
            }),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Ok(Ok((id, chain)))) => Ok((id, chain, false)),
        }
    }

    /// Logs in to `jumphost` for a person (`kharonctl login-jump`): the question a hop asks now
    /// if there is one, else a dial now (past any backoff, and after a login nobody finished),
    /// and what it comes to: a hop's question (as soon as it is asked), the chain up, or why it
    /// failed. Waits at most the connect timeout for a dial to get that far.
    pub async fn login(&self, jumphost: &str) -> Result<LoginStep, Error> {
        let settings = &self.engine.settings;
        let deadline = Instant::now() + settings.connect_timeout;
        let slot = tokio::time::timeout_at(deadline, self.slot_async(jumphost)).await.map_err(|_| {
            Error::Timeout {
                jumphost: jumphost.to_owned(),
                what: "resolving its chain",
                after: settings.connect_timeout,
            }
        })??;
        if let Some(question) = slot.desk.question() {
            return Ok(LoginStep::Asked(question));
        }
        if slot.current().is_some() {
            return Ok(LoginStep::Connected);
        }
        let mut changes = slot.desk.watch();
        let task = tokio::spawn(login_dial(slot.clone(), settings.clone(), self.config.path().to_owned()));
        Ok(next_step(&slot, &mut changes, Some(task), None, deadline, settings.connect_timeout).await)
    }

    /// Answers question `id` of `jumphost` for a person, once, and waits (at most the connect
    /// timeout) for what follows: the next question, the chain up, or why the login failed.
    pub async fn answer(&self, jumphost: &str, id: u64, answers: Answers) -> Result<LoginStep, AnswerError> {
        let slot = self
            .chains()
            .get(jumphost)
            .cloned()
            .ok_or_else(|| AnswerError::Unknown { jumphost: jumphost.to_owned() })?;
        let mut changes = slot.desk.watch();
        slot.desk.answer(jumphost, id, answers)?;
        let after = self.engine.settings.connect_timeout;
        Ok(next_step(&slot, &mut changes, None, Some(id), Instant::now() + after, after).await)
    }

    /// Times a keepalive through every connected chain, all at once, none waiting longer than
    /// `limit` (health.rs, `round_trips`).
    pub async fn round_trips(&self, limit: Duration) -> HashMap<String, Result<Duration, String>> {
        self.woke_up();
        health::round_trips(&self.slots(), limit).await
    }

    /// The `HostName` this generation's ssh config gives `jumphost`'s own hop (its alias when it
    /// has none); `None` for a jump host the config refuses. A jump host not resolved yet is
    /// resolved (blocking, as [`Pool::validate`]) but not kept: only the routing table's jump
    /// hosts have a place in the pool, and which those are this answer helps decide.
    pub fn host_name(&self, jumphost: &str) -> Option<String> {
        match self.known(jumphost) {
            Some(found) => last_host_name(&found.ok()?.chain).map(str::to_owned),
            None => last_host_name(&self.config.chain(jumphost).ok()?).map(str::to_owned),
        }
    }

    /// [`Pool::host_name`] of a jump host this generation resolved already; never resolves (a
    /// reload asks it while its own resolving is done, and must not wait for the old config's
    /// `Match exec`).
    pub fn known_host_name(&self, jumphost: &str) -> Option<String> {
        last_host_name(&self.known(jumphost)?.ok()?.chain).map(str::to_owned)
    }

    /// The hops of `jumphost`'s chain as `status` shows them; empty for a refused or unknown one.
    pub fn hops(&self, jumphost: &str) -> Vec<String> {
        self.chains().get(jumphost).map(|slot| health::hops(slot)).unwrap_or_default()
    }

    /// Checks `jumphosts` (the routing table's) for what will fail before a connection does: jump
    /// hosts no Host block names whose name does not resolve, and no ssh-agent with no key file
    /// usable without one (preflight.rs).
    pub async fn preflight(&self, jumphosts: &[String]) -> crate::sessions::preflight::Findings {
        let resolved = self.resolved_hops(jumphosts);
        crate::sessions::preflight::run(&resolved, self.default_agent(), &self.engine.settings.ssh_config)
            .await
    }

    /// Only the credentials part of [`Pool::preflight`]: why `jumphosts` will refuse us, if they
    /// will.
    pub async fn credentials_problem(&self, jumphosts: &[String]) -> Option<String> {
        crate::sessions::preflight::credentials_in(&self.resolved_hops(jumphosts), self.default_agent()).await
    }

    /// The hops of each of `jumphosts` that has a chain, sorted by jump host (what `preflight`
    /// checks).
    fn resolved_hops(&self, jumphosts: &[String]) -> Vec<(String, Vec<kharon_ssh_config::Hop>)> {
        let mut found: Vec<(String, Vec<kharon_ssh_config::Hop>)> = self
            .slots()
            .into_iter()
            .filter(|slot| jumphosts.contains(&slot.jumphost))
            .map(|slot| (slot.jumphost.clone(), slot.chain.hops.clone()))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }

    /// What `Status` shows of every jump host known so far (health.rs).
    pub fn status(&self) -> Vec<ChainHealth> {
        let refused: Vec<(String, Refusal)> =
            self.refusals().iter().map(|(jumphost, refusal)| (jumphost.clone(), refusal.clone())).collect();
        health::status(&self.slots(), refused.iter().map(|(jumphost, refusal)| (jumphost, refusal)))
    }
}

/// Dials `slot`'s chain while holding its dial lock, records the outcome, and watches the new
/// session until it ends. Runs as its own task: see `# Concurrency`.
async fn dial(
    slot: Arc<Slot>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
    settings: PoolSettings,
    ssh_config: PathBuf,
) -> Result<(u64, Arc<Dialled>), Error> {
    {
        let mut st = slot.lock();
        st.state = ChainState::Connecting;
        st.since = SystemTime::now();
    }
    slot.desk.dialling();
    let dial_settings = chain::Settings {
        env: &settings.env,
        ssh_config: &ssh_config,
        connect_timeout: settings.connect_timeout,
        open_channels: &slot.counters.open,
        asker: Asker {
            desk: &slot.desk,
            jumphost: &slot.jumphost,
            wait: settings.engine.login.answer_wait,
            announce: settings.questions.as_ref(),
        },
        flow: &slot.flow,
        engine: &settings.engine,
    };
    let deadline = Instant::now() + settings.connect_timeout;
    let result = match desk::within(&slot.desk, deadline, chain::dial(&slot.chain, dial_settings)).await {
        Some(r) => {
            r.map_err(|source| Error::Dial { jumphost: slot.jumphost.clone(), source: Box::new(source) })
        }
        None => Err(Error::Timeout {
            jumphost: slot.jumphost.clone(),
            what: "the SSH handshake",
            after: settings.connect_timeout,
        }),
    };
    let outcome = settled(&slot, result);
    // Whoever waits for this login's next step (Pool::login, Pool::answer) looks again.
    slot.desk.touch();
    outcome
}

/// Records what a dial of `slot` came to, and watches a new session until it ends.
fn settled(slot: &Arc<Slot>, result: Result<Dialled, Error>) -> Result<(u64, Arc<Dialled>), Error> {
    let mut st = slot.lock();
    st.since = SystemTime::now();
    match result {
        Ok(dialled) => {
            let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
            let dialled = Arc::new(dialled);
            // The path is measured on its newest session (flow/meter.rs).
            let probe: Arc<dyn crate::flow::Probe> = dialled.clone();
            slot.flow.follow(Arc::downgrade(&probe));
            st.live = Some(Live { id, chain: dialled.clone(), suspect: false });
            st.state = ChainState::Connected;
            st.failures = 0;
            st.retry_at = None;
            // Recovered: what failed before is history, not the chain's state.
            st.last_error = None;
            st.login_required = None;
            drop(st);
            tracing::info!(jumphost = %slot.jumphost, chain = %slot.hops(), "SSH session up");
            let closed = dialled.closed();
            let weak = Arc::downgrade(slot);
            tokio::spawn(async move {
                let why = closed.await;
                if let Some(slot) = weak.upgrade() {
                    slot.drop_session(id, &why);
                }
            });
            Ok((id, dialled))
        }
        Err(e) => {
            st.state = ChainState::Failed;
            st.last_error = Some(Stamped::now(errors::chain(&e)));
            st.last_kind = e.io_kind();
            if slot.desk.failed_for_person() {
                // No dial until a person logs in (`# A hop that asks a person`).
                st.login_required = st.last_error.clone();
                st.retry_at = None;
                drop(st);
                tracing::warn!(jumphost = %slot.jumphost, error = %errors::Chain(&e), "SSH login failed for want of an answer");
                return Err(e);
            }
            st.failures += 1;
            let backoff = backoff(&slot.sessions, st.failures);
            st.retry_at = Some((Instant::now() + backoff, SystemTime::now() + backoff));
            drop(st);
            tracing::warn!(jumphost = %slot.jumphost, error = %errors::Chain(&e), retry_in = ?backoff, "SSH session failed");
            Err(e)
        }
    }
}

/// A dial for a person's login ([`Pool::login`]): after the one in progress, if any; past any
/// backoff, and after a login nobody finished.
async fn login_dial(slot: Arc<Slot>, settings: PoolSettings, ssh_config: PathBuf) -> Result<(), Error> {
    // Bounded: a dial holds the lock for its own bounded time.
    let guard = slot.dial.clone().lock_owned().await;
    if slot.current().is_some() {
        return Ok(());
    }
    {
        let mut st = slot.lock();
        st.login_required = None;
        st.retry_at = None;
    }
    dial(slot, guard, settings, ssh_config).await.map(|_| ())
}

/// Waits for `fut` until `deadline`, and while a hop of `slot`'s chain asks a person as
/// `patience` says.
async fn wait<F: std::future::Future>(
    slot: &Slot,
    deadline: Instant,
    patience: Patience,
    fut: F,
) -> Result<F::Output, Stopped> {
    match patience {
        Patience::Wait => desk::within(&slot.desk, deadline, fut).await.ok_or(Stopped::Deadline),
        Patience::Report => desk::asking(&slot.desk, deadline, fut).await,
    }
}

/// The error of a [`wait`] that stopped: `timeout` at the deadline, else the question.
fn stopped_error(slot: &Slot, stopped: Stopped, timeout: Error) -> Error {
    match stopped {
        Stopped::Deadline => timeout,
        Stopped::Asking(question) => Error::Asking { jumphost: slot.jumphost.clone(), question },
    }
}

/// What `slot`'s login comes to after question `answered` (or, with `task`, after the dial a
/// person asked for): a new question, the session up, or the failure; watching `changes` on its
/// desk until `deadline`.
async fn next_step(
    slot: &Slot,
    changes: &mut watch::Receiver<u64>,
    mut task: Option<JoinHandle<Result<(), Error>>>,
    answered: Option<u64>,
    deadline: Instant,
    after: Duration,
) -> LoginStep {
    loop {
        if let Some(question) = slot.desk.question().filter(|q| Some(q.id) != answered) {
            return LoginStep::Asked(question);
        }
        if slot.current().is_some() {
            return LoginStep::Connected;
        }
        if task.is_none() {
            // The dial the answer went to has ended (no dial is `Connecting` then).
            let st = slot.lock();
            if st.state == ChainState::Failed {
                return LoginStep::Failed(st.last_error.as_ref().map(|e| e.text.clone()).unwrap_or_default());
            }
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return LoginStep::Failed("the jump host's session was replaced (reload)".to_owned());
                }
            }
            Some(joined) = futures::future::OptionFuture::from(task.as_mut()), if task.is_some() => {
                match joined {
                    Ok(Ok(())) => return LoginStep::Connected,
                    Ok(Err(e)) => return LoginStep::Failed(errors::chain(&e)),
                    Err(_) => return LoginStep::Failed("the SSH handshake panicked".to_owned()),
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                return LoginStep::Failed(format!(
                    "jump host {}: no question, no session and no failure within {after:?}",
                    slot.jumphost
                ));
            }
        }
    }
}

/// `backoff_min`, twice that, four times, … capped at `backoff_max` (0.5 s to 8 s by default),
/// each ±20 % so many daemons do not retry in step.
fn backoff(settings: &SessionSettings, failures: u32) -> Duration {
    let doubled = settings.backoff_min.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(settings.backoff_max).mul_f64(rand::random_range(0.8..1.2))
}

#[cfg(test)]
mod tests;
