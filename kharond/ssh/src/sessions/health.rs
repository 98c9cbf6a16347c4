//! What `Status` shows of the pool: one [`ChainHealth`] per jump host (state, last error and its
//! time, the last channel the jump host refused, next retry, channels and bytes, the question a
//! hop asks a person, or why the ssh config refuses it), and a live round trip through every
//! connected chain. Reads the slots; changes nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::login::desk::Question;
use crate::sessions::slot::{ChainState, Slot};
pub use crate::sessions::slot::{ChannelRefusal, Stamped};

/// Why the ssh config gives a jump host no chain, as `Status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The whole error, with its file:line when it has one.
    pub reason: String,
    /// "file:line" of the line that decided, if one did.
    pub origin: Option<String>,
    /// When the chain was resolved (start or reload).
    pub since: SystemTime,
}

impl From<&kharon_ssh_config::Error> for Refusal {
    fn from(e: &kharon_ssh_config::Error) -> Self {
        Refusal {
            reason: kharon_common::errors::chain(e),
            origin: e.origin().map(ToString::to_string),
            since: SystemTime::now(),
        }
    }
}

/// One hop of a chain as the ssh config resolved it, as `Status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopSummary {
    /// The name the chain uses for it (a Host alias, or what ProxyJump names).
    pub alias: String,
    pub user: String,
    /// Where it connects (`HostName`).
    pub host_name: String,
    pub port: u16,
    pub identity_files: Vec<std::path::PathBuf>,
    /// The `ProxyCommand` that reaches it, if one does instead of TCP.
    pub proxy_command: Option<String>,
    /// "file:line" of the Host block or option that decided, if one did.
    pub origin: Option<String>,
}

impl From<&kharon_ssh_config::Hop> for HopSummary {
    fn from(hop: &kharon_ssh_config::Hop) -> Self {
        HopSummary {
            alias: hop.alias.clone(),
            user: hop.user.clone(),
            host_name: hop.host_name.clone(),
            port: hop.port,
            identity_files: hop.identity_files.clone(),
            proxy_command: match &hop.transport {
                kharon_ssh_config::Transport::Command(command) => Some(command.clone()),
                kharon_ssh_config::Transport::Tcp => None,
            },
            origin: hop.origin.as_ref().map(ToString::to_string),
        }
    }
}

/// What `Status` shows for one jump host chain.
#[derive(Debug, Clone)]
pub struct ChainHealth {
    pub jumphost: String,
    /// "user@host:port", first to last.
    pub hops: Vec<String>,
    /// The hops as resolved, first to last (empty when refused).
    pub details: Vec<HopSummary>,
    /// Set when the ssh config gives this jump host no chain; it is then never dialled.
    pub refused: Option<Refusal>,
    pub state: ChainState,
    pub since: SystemTime,
    /// Why the chain last failed, until it is up again.
    pub last_error: Option<Stamped>,
    /// The last channel its last hop refused (kept until a channel to that target opens).
    pub last_refusal: Option<ChannelRefusal>,
    pub open_channels: u32,
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub next_retry: Option<SystemTime>,
    /// The question a hop of the chain asks a person now (state `Asking`).
    pub question: Option<Arc<Question>>,
}

/// The health of every slot, and of every refused jump host, sorted by jump host.
pub(crate) fn status<'r>(
    slots: &[Arc<Slot>],
    refused: impl IntoIterator<Item = (&'r String, &'r Refusal)>,
) -> Vec<ChainHealth> {
    let mut out: Vec<ChainHealth> = slots
        .iter()
        .map(|slot| {
            let question = slot.desk.question();
            let st = slot.lock();
            // A dial is `Connecting` while a hop asks; a failed login waits for a person.
            let state = match (&question, &st.login_required) {
                (Some(_), _) => ChainState::Asking,
                (None, Some(_)) if st.live.is_none() => ChainState::LoginRequired,
                _ => st.state,
            };
            ChainHealth {
                jumphost: slot.jumphost.clone(),
                hops: hops(slot),
                details: slot.chain.hops.iter().map(HopSummary::from).collect(),
                refused: None,
                state,
                question,
                since: st.since,
                last_error: st.last_error.clone(),
                last_refusal: st.last_refusal.clone(),
                open_channels: slot.counters.open.load(Ordering::Relaxed),
                bytes_up: slot.counters.up.load(Ordering::Relaxed),
                bytes_down: slot.counters.down.load(Ordering::Relaxed),
                next_retry: st
                    .retry_at
                    .filter(|(at, _)| *at > Instant::now() && st.live.is_none())
                    .map(|(_, wall)| wall),
            }
        })
        .collect();
    out.extend(refused.into_iter().map(|(jumphost, refusal)| ChainHealth {
        jumphost: jumphost.clone(),
        hops: Vec::new(),
        details: Vec::new(),
        state: ChainState::Failed,
        since: refusal.since,
        last_error: Some(Stamped { text: refusal.reason.clone(), at: refusal.since }),
        last_refusal: None,
        refused: Some(refusal.clone()),
        open_channels: 0,
        bytes_up: 0,
        bytes_down: 0,
        next_retry: None,
        question: None,
    }));
    out.sort_by(|a, b| a.jumphost.cmp(&b.jumphost));
    out
}

/// The hops of a slot's chain as `Status` shows them: "user@host:port", first to last.
pub(crate) fn hops(slot: &Slot) -> Vec<String> {
    slot.chain.hops.iter().map(|h| h.display()).collect()
}

/// Times a keepalive through every connected chain, all at once, none waiting longer than
/// `limit`; chains not connected are left out. A live check for `Status`: a frozen jump host
/// shows here before keepalive gives up on it.
pub(crate) async fn round_trips(
    slots: &[Arc<Slot>],
    limit: Duration,
) -> HashMap<String, Result<Duration, String>> {
    let live = slots.iter().filter_map(|slot| {
        let chain = slot.lock().live.as_ref().map(|live| live.chain.clone())?;
        Some((slot.jumphost.clone(), chain))
    });
    let probes = live.map(|(jumphost, chain)| async move { (jumphost, chain.round_trip(limit).await) });
    futures::future::join_all(probes).await.into_iter().collect()
}
