//! One jump host's slot in the pool: its resolved chain, its session if one is up, the state
//! `Status` shows (with the last failure and the last channel the jump host refused, each with
//! its time), the desk where its hops' questions for a person wait (desk.rs), and the counters
//! its tunnels feed. The pool decides when to dial a slot
//! (pool.rs), keepalive.rs when to doubt its session, health.rs reads it.
//!
//! # Concurrency
//! `state` is a std mutex held only for field updates, never across an `.await`; `dial` is the
//! tokio mutex that serialises dialling the chain (see pool.rs).

use std::io::ErrorKind;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use russh::ChannelOpenFailure;
use tokio::time::Instant;

use crate::flow::Flow;
use crate::login::desk::Desk;
use crate::sessions::chain::Dialled;
use crate::sessions::tunnel::Counters;
use crate::settings::{SessionSettings, Settings};
use kharon_ssh_config::Chain;

/// Numbers sessions, so that a report about a session that is gone cannot drop its successor.
pub(crate) static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainState {
    Idle,
    Connecting,
    Connected,
    Failed,
    /// A hop asks a person a question now (desk.rs); connections through it wait for the answer.
    Asking,
    /// A hop asked a person and got no answer it took: connections fail at once until someone
    /// logs in (`kharonctl login-jump`, [`Pool::login`](crate::Pool::login)).
    LoginRequired,
}

/// A connected chain in a slot. `id` tells a stale "this session died" report from a current one.
pub(crate) struct Live {
    pub id: u64,
    pub chain: Arc<Dialled>,
    /// Must answer a probe before its next use (the machine slept).
    pub suspect: bool,
}

/// Something that went wrong, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamped {
    pub text: String,
    pub at: SystemTime,
}

impl Stamped {
    pub fn now(text: impl Into<String>) -> Self {
        Stamped { text: text.into(), at: SystemTime::now() }
    }
}

/// A channel the jump host would not open: the target refused, or forwarding not allowed there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRefusal {
    /// host:port, as the client asked for it.
    pub target: String,
    /// The SSH reason in words, e.g. "administratively prohibited".
    pub reason: String,
    /// What the jump host's sshd said, e.g. "open failed".
    pub description: String,
    pub at: SystemTime,
}

pub(crate) struct SlotState {
    pub live: Option<Live>,
    pub state: ChainState,
    pub since: SystemTime,
    /// Why the chain last failed; cleared once a session is up again.
    pub last_error: Option<Stamped>,
    /// The last channel the chain's last hop refused; kept until a channel to that target opens.
    pub last_refusal: Option<ChannelRefusal>,
    /// The io kind of the last dial failure, for requests failed fast during backoff.
    pub last_kind: ErrorKind,
    /// Set when a login failed for want of a person (nobody answered, the answers were
    /// refused): why. No dial is made until someone logs in; cleared when a session is up.
    pub login_required: Option<Stamped>,
    pub failures: u32,
    pub retry_at: Option<(Instant, SystemTime)>,
}

/// One jump host's chain and its session.
pub(crate) struct Slot {
    pub jumphost: String,
    pub chain: Chain,
    /// Held by the dial task for the whole handshake (see pool.rs, `# Concurrency`).
    pub dial: Arc<tokio::sync::Mutex<()>>,
    state: Mutex<SlotState>,
    pub counters: Arc<Counters>,
    /// Where the chain's questions for a person wait for an answer.
    pub desk: Desk,
    /// The chain's path: what its sessions are dialled with and re-open their windows to (flow).
    pub flow: Arc<Flow>,
    /// Backoff, and how many abandoned channels retire a session (`SessionSettings`).
    pub sessions: SessionSettings,
}

impl Slot {
    pub fn new(jumphost: &str, chain: Chain, settings: &Settings) -> Self {
        let counters: Arc<Counters> = Arc::default();
        let moved = counters.clone();
        let flow =
            Flow::new(Arc::new(settings.flow.clone()), Box::new(move || moved.down.load(Ordering::Relaxed)));
        Slot {
            flow: Arc::new(flow),
            sessions: settings.sessions.clone(),
            jumphost: jumphost.to_owned(),
            chain,
            dial: Arc::new(tokio::sync::Mutex::new(())),
            state: Mutex::new(SlotState {
                live: None,
                state: ChainState::Idle,
                since: SystemTime::now(),
                last_error: None,
                last_refusal: None,
                last_kind: ErrorKind::NetworkUnreachable,
                login_required: None,
                failures: 0,
                retry_at: None,
            }),
            counters,
            desk: Desk::default(),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        // A panic while holding this lock leaves plain data behind; keep serving.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The chain as log lines show it: "user@host:port -> …".
    pub fn hops(&self) -> String {
        self.chain.hops.iter().map(|h| h.display()).collect::<Vec<_>>().join(" -> ")
    }

    /// Forgets session `id` (if it is still the current one) because it died.
    pub fn drop_session(&self, id: u64, why: &str) {
        let mut st = self.lock();
        if st.live.as_ref().is_some_and(|l| l.id == id) {
            st.live = None;
            st.state = ChainState::Failed;
            st.since = SystemTime::now();
            st.last_error = Some(Stamped::now(why));
            tracing::info!(jumphost = %self.jumphost, chain = %self.hops(), reason = %why, "SSH session down");
        }
    }

    /// The live session (id, chain, whether it is suspect), unless it is closed (then it is
    /// dropped) or due for retirement.
    pub fn current(&self) -> Option<(u64, Arc<Dialled>, bool)> {
        let mut st = self.lock();
        let live = st.live.as_ref()?;
        if live.chain.is_closed() {
            let id = live.id;
            drop(st);
            self.drop_session(id, "session closed");
            return None;
        }
        // Tunnels still on a retired session keep it up until they end; the caller dials a fresh one.
        let abandoned = live.chain.abandoned();
        if abandoned >= self.sessions.retire_after {
            st.live = None;
            st.state = ChainState::Idle;
            st.since = SystemTime::now();
            drop(st);
            tracing::info!(
                jumphost = %self.jumphost,
                "replacing the SSH session: {abandoned} channels were closed before the server closed \
                 them, and russh keeps the state of each until the session ends"
            );
            return None;
        }
        Some((live.id, live.chain.clone(), live.suspect))
    }

    /// The last hop refused a channel to `host:port`: `Status` shows it until one opens.
    pub fn refused(&self, host: &str, port: u16, reason: &ChannelOpenFailure, description: Option<&str>) {
        let target = format!("{host}:{port}");
        let refusal = ChannelRefusal {
            reason: crate::sessions::chain::reason_words(reason),
            description: description.unwrap_or_default().to_owned(),
            target,
            at: SystemTime::now(),
        };
        // The client's connection logs the refusal at INFO, in its own span; this is the slot's side.
        tracing::debug!(jumphost = %self.jumphost, target = %refusal.target, reason = %refusal.reason,
            description = %refusal.description, "the jump host refused a channel");
        self.lock().last_refusal = Some(refusal);
    }

    /// A channel to `host:port` opened: a refusal of that target is over.
    pub fn opened(&self, host: &str, port: u16) {
        let mut st = self.lock();
        if let Some(refusal) = &st.last_refusal
            && refusal.target.strip_suffix(&format!(":{port}")) == Some(host)
        {
            st.last_refusal = None;
        }
    }

    /// Session `id` answered a probe: it is no longer suspect (if it is still the current one).
    pub fn trusted(&self, id: u64) {
        if let Some(live) = self.lock().live.as_mut().filter(|l| l.id == id) {
            live.suspect = false;
        }
    }
}
