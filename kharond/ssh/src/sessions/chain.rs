//! Dialling a [`Chain`] hop by hop, and opening direct-tcpip channels at its last hop.
//!
//! Owns: the transport of the first hop (TCP from `tcp` with a connect timeout, or a
//! `ProxyCommand` child from `proxy_command`), each later hop as a direct-tcpip channel of the previous session plus
//! `client::connect_stream` (docs/ssh-engine.md, "Hops over channels"), the russh client settings (window, keepalive, the
//! algorithm lists the hop's ssh_config chose, ordered by what known_hosts holds for it), the
//! russh `Handler` (host keys through `known_hosts`, the channel-open failure text, session
//! end), and errors that name the hop.
//! Knows nothing of pooling, retries or SOCKS: `pool` decides when to dial and what a failure
//! means for the client.
//!
//! # Lifetimes
//! A session stays alive while its `Handle` or any of its channels exists, and a nested hop's
//! session task owns the parent's channel stream (docs/ssh-engine.md, "Lifetimes"). So a [`Dialled`] chain keeps
//! every hop up, and a [`russh::ChannelStream`] handed out keeps the path it uses up, even after
//! the pool has replaced the chain.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use russh::client::{self, DisconnectReason, Msg};
use russh::keys::PublicKeyOrCertificate;
use russh::{ChannelId, ChannelOpenFailure};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};

use crate::flow::{Dial, Flow, Probe};
use crate::login::known_hosts::KnownHosts;
use crate::login::prompt::{Asker, Person};
use crate::login::{auth, desk, known_hosts, negotiation};
use crate::sessions::report::{DialReport, HopTiming};
use crate::sessions::uplink::{Lane, Uplink};
use crate::transport::backlog::{Backlog, Layer};
use crate::transport::carrier::Carried;
use crate::transport::gather::Gathered;
use crate::transport::quickack::QuickAck;
use crate::transport::tcp::keep_unsent_small;
use crate::transport::{proxy_command, tcp};
use kharon_ssh_config::{Chain, Hop, KnownHostKeys, RekeyLimit, Transport};

/// What dialling needs besides the chain.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// The daemon's captured environment (agent socket, ProxyCommand environment).
    pub env: &'a HashMap<String, String>,
    /// The ssh_config the chain came from, for the host key hint command.
    pub ssh_config: &'a Path,
    /// Per-hop limit when the hop has no `ConnectTimeout`.
    pub connect_timeout: Duration,
    /// How many channels the jump host's tunnels hold open (their `Counters::open`): the first
    /// hop's transport reads it (gather.rs).
    pub open_channels: &'a Arc<AtomicU32>,
    /// Where a hop's questions for a person go (prompt.rs).
    pub asker: Asker<'a>,
    /// The jump host's path: what each hop's session is dialled with (flow).
    pub flow: &'a Arc<Flow>,
    /// The engine's tuning.
    pub engine: &'a crate::settings::Settings,
}

/// Which hop failed, as a user finds it in their ssh_config.
#[derive(Debug, Clone)]
pub struct HopId {
    /// 1-based.
    pub index: usize,
    pub count: usize,
    pub alias: String,
    /// "user@host:port".
    pub target: String,
    pub origin: Option<String>,
    /// A close explicit Host name when no Host block names this alias (a likely typo).
    pub suggestion: Option<String>,
}

impl HopId {
    fn new(chain: &Chain, index: usize) -> Self {
        let hop = &chain.hops[index];
        HopId {
            index: index + 1,
            count: chain.hops.len(),
            alias: hop.alias.clone(),
            target: hop.display(),
            origin: hop.origin.as_ref().map(ToString::to_string),
            suggestion: hop.suggestion.clone(),
        }
    }
}

impl fmt::Display for HopId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hop {}/{} {} ({}", self.index, self.count, self.alias, self.target)?;
        if let Some(origin) = &self.origin {
            write!(f, ", {origin}")?;
        }
        if let Some(suggestion) = &self.suggestion {
            write!(f, "; no Host block names it, did you mean {suggestion:?}?")?;
        }
        f.write_str(")")
    }
}

/// Which hop failed; what went wrong there is the `source()`.
#[derive(Debug, thiserror::Error)]
#[error("{hop}")]
pub struct Error {
    pub hop: HopId,
    #[source]
    pub kind: ErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    #[error(transparent)]
    Tcp(tcp::Error),
    #[error("{}", unreachable(reason, description))]
    Unreachable { reason: ChannelOpenFailure, description: Option<String> },
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    #[error("cannot start ProxyCommand: {0}")]
    ProxyCommand(std::io::Error),
    /// Not a `source()`: the ProxyCommand's stderr, when there is any, follows the cause.
    #[error("SSH handshake failed: {}{}", kharon_common::errors::Chain(cause), stderr_note(stderr))]
    Handshake { cause: russh::Error, stderr: String },
    /// The server and the hop's algorithm lists have nothing in common (ssh's words).
    #[error(transparent)]
    Negotiation(negotiation::Mismatch),
    #[error(transparent)]
    HostKey(known_hosts::Error),
    /// The server's signature of the key exchange is not of the host key algorithm agreed, or
    /// does not verify with its host key (russh `client/kex.rs`: `Error::WrongServerSig`).
    #[error(
        "its signature of the key exchange does not match its host key and the algorithm agreed \
         (for example an ssh-rsa SHA-1 signature where rsa-sha2-512 was agreed): refused, as ssh \
         refuses it (\"incorrect signature\"); a server that does this is broken or is not the \
         jump host"
    )]
    Signature,
    #[error(transparent)]
    Auth(auth::Error),
}

/// An SSH channel-open failure code in words, as OpenSSH prints them.
pub fn reason_words(reason: &ChannelOpenFailure) -> String {
    match reason {
        ChannelOpenFailure::AdministrativelyProhibited => "administratively prohibited".to_owned(),
        ChannelOpenFailure::ConnectFailed => "connect failed".to_owned(),
        ChannelOpenFailure::UnknownChannelType => "unknown channel type".to_owned(),
        ChannelOpenFailure::ResourceShortage => "resource shortage".to_owned(),
        ChannelOpenFailure::Other { code, reason } if reason.is_empty() => format!("reason {code}"),
        ChannelOpenFailure::Other { code, reason } => format!("reason {code} ({reason})"),
    }
}

/// The previous hop would not open the channel to this one: refused by its own sshd's policy
/// (which the user cannot change), or this hop did not answer it.
fn unreachable(reason: &ChannelOpenFailure, description: &Option<String>) -> String {
    match reason {
        ChannelOpenFailure::AdministrativelyProhibited => format!(
            "the previous hop refuses to forward to it ({}{}): its sshd allows no TCP forwarding there \
             (AllowTcpForwarding no, or a PermitOpen list without this hop)",
            reason_words(reason),
            description.as_deref().filter(|d| !d.is_empty()).map(|d| format!(": {d}")).unwrap_or_default()
        ),
        _ => format!("the previous hop cannot reach it: {}{}", reason_words(reason), text(description)),
    }
}

fn text(d: &Option<String>) -> String {
    d.as_ref().filter(|d| !d.is_empty()).map(|d| format!(" ({d})")).unwrap_or_default()
}

fn stderr_note(s: &str) -> String {
    if s.is_empty() { String::new() } else { format!("; ProxyCommand said: {s}") }
}

impl ErrorKind {
    /// A timeout, as opposed to a refusal.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ErrorKind::Timeout(_))
    }
}

/// Why opening a channel at the last hop failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The last hop answered: it could not or would not connect (`ConnectFailed`, prohibited, …).
    #[error("{}{}", reason_words(reason), text(description))]
    Refused { reason: ChannelOpenFailure, description: Option<String> },
    /// The session itself failed (closed, send error): a fresh session may succeed.
    #[error("session failed")]
    Transport(#[source] russh::Error),
}

/// Errors from the russh handler: the host key verdict must survive the handshake's error path.
#[derive(Debug)]
pub enum HandlerError {
    Russh(russh::Error),
    HostKey(known_hosts::Error),
}

impl From<russh::Error> for HandlerError {
    fn from(e: russh::Error) -> Self {
        HandlerError::Russh(e)
    }
}

/// What a session's handler reports to its owner.
#[derive(Debug, Default)]
struct Events {
    /// The last channel-open failure description: (sequence number, text).
    last_failure: Mutex<(u64, String)>,
    /// A keepalive or the handshake found the session dead.
    dead: AtomicBool,
}

/// The russh client handler of one hop.
pub struct Handler {
    hop: Hop,
    /// Read before the handshake: it also chose which host key algorithms were offered.
    known: KnownHosts,
    ssh_config: std::path::PathBuf,
    events: Arc<Events>,
    /// Set once when the session ends; dropped with the session task, which also means "ended".
    down: watch::Sender<Option<String>>,
    /// Reached through another hop: small messages from it get an answer (see [`Handler::answer`]).
    nested: bool,
    /// Below this, a message from a nested hop is answered (`SessionSettings::small_message`).
    small_message: usize,
    /// The last hop's: told of every window adjust, so that its chain's writer looks again at
    /// the lanes it passed over for want of window (uplink.rs).
    window_opened: Option<Arc<Notify>>,
    /// The last hop's: the path whose window its channels follow (flow/meter.rs, "How a window
    /// changes"). Hops before it carry one channel each, the next hop's session, whose own
    /// window bounds what is in flight; they keep the window they were dialled with.
    path: Option<Arc<Flow>>,
}

impl Handler {
    /// sshd leaves Nagle on, so it holds a small packet until the previous one is
    /// acknowledged, and whoever receives on a socket it has nothing to answer on delays that
    /// ACK. On our own first-hop socket `quickack` acknowledges at once. A hop behind another
    /// one talks to us over a TCP connection between two sshd, where neither end is ours.
    /// Measured (bench/routed.sh, HOPS=3): every warm connection and every small round trip
    /// took 44 ms. Answering each small message with a tiny one (a keepalive that wants no
    /// reply) makes every sshd on the way write to the socket it was silent on, and the ACK
    /// rides along. Full data packets need none: a stream of them is acknowledged anyway.
    ///
    /// Not for a ProxyCommand first hop, although it has the same 44 ms: the answer only helps
    /// when whoever forwards it has Nagle off, as sshd has on its forwarding sockets. Through a
    /// relay with Nagle on, the answer itself is the unacknowledged small packet that holds back
    /// the next request: a warm connection takes 44 ms instead of 0.9 (`bench/routed.sh`).
    ///
    /// Sent as a bare global request, not with `send_keepalive(false)`: russh queues a reply slot
    /// for that one although no reply comes, so every answer would leak a slot, and the next
    /// `send_ping` (the status and wake-up probes) would get a slot's reply instead of its own and
    /// never complete (sessions/keepalive/sleep_tests.rs keeps a two-hop chain through a sleep).
    fn answer(&self, session: &mut client::Session, len: usize) {
        if self.nested && len < self.small_message {
            let _ = session.send_global_request(None, "keepalive@openssh.com", &[]);
        }
    }
}

impl client::Handler for Handler {
    type Error = HandlerError;

    async fn check_server_key(&mut self, key: &PublicKeyOrCertificate) -> Result<bool, Self::Error> {
        let ctx = known_hosts::Context { ssh_config: &self.ssh_config };
        match self.known.check(&self.hop, key, &ctx) {
            Ok(verdict) => {
                tracing::debug!(hop = %self.hop.display(), ?verdict, "host key accepted");
                Ok(true)
            }
            Err(e) => Err(HandlerError::HostKey(e)),
        }
    }

    async fn channel_open_failure(
        &mut self,
        _channel: ChannelId,
        _reason: ChannelOpenFailure,
        description: &str,
        _language: &str,
        _session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        if let Ok(mut last) = self.events.last_failure.lock() {
            // The server's words end up in logs, errors and `status`: no control characters.
            *last = (last.0 + 1, description.escape_debug().to_string());
        }
        Ok(())
    }

    /// Asked by the vendored russh each time it re-opens a channel's window: the answer is the
    /// window it re-opens to next, and the one new channels open with (vendor/README.md).
    fn adjust_window(&mut self, _channel: ChannelId, window: u32) -> u32 {
        self.path.as_ref().and_then(|path| path.window()).unwrap_or(window)
    }

    async fn channel_open_confirmation(
        &mut self,
        _id: ChannelId,
        _max_packet_size: u32,
        _window_size: u32,
        session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        self.answer(session, 0);
        Ok(())
    }

    async fn data(
        &mut self,
        _channel: ChannelId,
        data: &[u8],
        session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        self.answer(session, data.len());
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        _channel: ChannelId,
        session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        self.answer(session, 0);
        Ok(())
    }

    async fn channel_close(
        &mut self,
        _channel: ChannelId,
        session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        self.answer(session, 0);
        Ok(())
    }

    async fn window_adjusted(
        &mut self,
        _channel: ChannelId,
        _new_size: u32,
        session: &mut client::Session,
    ) -> Result<(), Self::Error> {
        if let Some(opened) = &self.window_opened {
            opened.notify_one();
        }
        self.answer(session, 0);
        Ok(())
    }

    async fn disconnected(&mut self, reason: DisconnectReason<Self::Error>) -> Result<(), Self::Error> {
        let why = match reason {
            DisconnectReason::ReceivedDisconnect(info) if !info.message.is_empty() => {
                format!("closed by the server: {}", info.message.escape_debug())
            }
            DisconnectReason::ReceivedDisconnect(info) => {
                format!("closed by the server: {:?}", info.reason_code)
            }
            DisconnectReason::Error(HandlerError::Russh(e)) => kharon_common::errors::chain(&e),
            DisconnectReason::Error(HandlerError::HostKey(e)) => kharon_common::errors::chain(&e),
        };
        self.events.dead.store(true, Ordering::Relaxed);
        self.down.send_replace(Some(why));
        Ok(())
    }
}

/// One connected, authenticated hop.
struct Session {
    handle: client::Handle<Handler>,
    events: Arc<Events>,
    down: watch::Receiver<Option<String>>,
    hop: HopId,
    timing: HopTiming,
    /// What its transport holds that has not been passed on yet (transport/backlog.rs).
    layer: Arc<Layer>,
    /// The largest data packet its jump host may send (`flow::Dial::largest_packet`): what a
    /// buffer of its channel's packets is counted in.
    largest_packet: u32,
}

/// A connected chain: one session per hop, first to last.
pub struct Dialled {
    sessions: Vec<Session>,
    /// When the last hop was up.
    established: Instant,
    /// Channels we had to close before the server did; russh keeps each one's state until the
    /// session ends (tunnel.rs, "Who closes"), so the pool retires a session with too many.
    abandoned: AtomicU64,
    flow: Arc<Flow>,
    /// What the chain's tunnels send, served channel by channel (uplink.rs).
    uplink: Uplink,
}

impl Dialled {
    /// How this chain came up, for a trace.
    pub fn report(&self) -> DialReport {
        DialReport {
            established: self.established,
            hops: self.sessions.iter().map(|s| s.timing.clone()).collect(),
        }
    }

    /// Counts a channel closed by us first (see [`Dialled::abandoned`]).
    pub fn note_abandoned(&self) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
    }

    /// How many channels of this chain were closed by us first so far.
    pub fn abandoned(&self) -> u64 {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// A lane of the chain's writer for the channel `write` sends on (uplink.rs).
    pub(crate) fn lane(&self, write: Arc<russh::ChannelWriteHalf<Msg>>) -> Lane {
        self.uplink.lane(write)
    }

    /// Data arrived on one of this chain's channels: the path is worth measuring (flow/meter.rs).
    pub fn kick_flow(&self) {
        self.flow.kick();
    }

    /// The largest data packet the last hop may send on a channel of this chain.
    pub(crate) fn largest_packet(&self) -> u32 {
        self.sessions.last().map_or(0, |s| s.largest_packet).max(1)
    }

    /// True once any hop's session has ended (closed, keepalive timeout, transport error).
    pub fn is_closed(&self) -> bool {
        self.sessions.iter().any(|s| s.handle.is_closed() || s.events.dead.load(Ordering::Relaxed))
    }

    /// Why the chain ended, once any hop's session has ended with a reason ("hop 2/2 …: why").
    pub fn ended(&self) -> Option<String> {
        self.sessions.iter().find_map(|s| s.down.borrow().as_ref().map(|why| format!("{}: {why}", s.hop)))
    }

    /// Resolves when any hop's session ends, with the hop and the reason.
    pub fn closed(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let watches: Vec<(HopId, watch::Receiver<Option<String>>)> =
            self.sessions.iter().map(|s| (s.hop.clone(), s.down.clone())).collect();
        async move {
            let waits = watches.into_iter().map(|(hop, mut rx)| {
                Box::pin(async move {
                    let why = match rx.wait_for(Option::is_some).await {
                        Ok(v) => v.clone().unwrap_or_default(),
                        Err(_) => "session ended".to_owned(),
                    };
                    format!("{hop}: {why}")
                })
            });
            futures::future::select_all(waits).await.0
        }
    }

    /// Sends a keepalive request to the last hop (its packets cross every hop) and waits at most
    /// `limit` for the answer. False if the chain is dead or frozen.
    pub async fn probe(&self, limit: Duration) -> bool {
        self.round_trip(limit).await.is_ok()
    }

    /// As [`Dialled::probe`], timing the answer; the error says why there is none.
    pub async fn round_trip(&self, limit: Duration) -> Result<Duration, String> {
        let Some(last) = self.sessions.last() else { return Err("no session".to_owned()) };
        let started = Instant::now();
        match tokio::time::timeout(limit, last.handle.send_ping()).await {
            Ok(Ok(())) if !self.is_closed() => Ok(started.elapsed()),
            Ok(_) => Err("the session ended".to_owned()),
            Err(_) => Err(format!("no answer within {limit:?}")),
        }
    }

    /// Opens a direct-tcpip channel from the last hop to `host:port`. The name is sent as is: the
    /// last hop resolves it (socks5h semantics).
    pub async fn open(&self, host: &str, port: u16) -> Result<russh::Channel<Msg>, OpenError> {
        let Some(last) = self.sessions.last() else {
            return Err(OpenError::Transport(russh::Error::Disconnect));
        };
        // Held teardowns go first, in the same write as this open (uplink.rs).
        self.uplink.release_held().await;
        open_on(last, host, port).await
    }
}

async fn open_on(session: &Session, host: &str, port: u16) -> Result<russh::Channel<Msg>, OpenError> {
    let before = session.events.last_failure.lock().map(|l| l.0).unwrap_or(0);
    match session.handle.channel_open_direct_tcpip(host, u32::from(port), "127.0.0.1", 0).await {
        Ok(channel) => Ok(channel),
        Err(russh::Error::ChannelOpenFailure(reason)) => {
            let description = failure_text(&session.events, before).await;
            Err(OpenError::Refused { reason, description })
        }
        Err(e) => Err(OpenError::Transport(e)),
    }
}

/// russh hands the open's failure to the waiting caller *before* it calls
/// `Handler::channel_open_failure` with sshd's text (russh client/encrypted.rs), so wait briefly
/// for the text. Concurrent failures on one session may swap texts; only the message suffers.
async fn failure_text(events: &Events, before: u64) -> Option<String> {
    for _ in 0..40 {
        if let Ok(last) = events.last_failure.lock()
            && last.0 > before
        {
            return Some(last.1.clone());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    None
}

fn client_config(hop: &Hop, known: &KnownHostKeys, dial: Dial) -> Arc<client::Config> {
    let interval = hop.server_alive_interval;
    Arc::new(client::Config {
        keepalive_interval: (!interval.is_zero()).then_some(interval),
        keepalive_max: hop.server_alive_count_max.max(1) as usize,
        // Shared sessions must never be reaped for being quiet (docs/ssh-engine.md, "Keepalive and inactivity").
        inactivity_timeout: None,
        nodelay: true,
        limits: rekey_limits(hop.rekey_limit),
        window_size: dial.window,
        window_reopen: dial.reopen,
        maximum_packet_size: dial.largest_packet,
        preferred: hop.algorithms.preferred(known),
        ..Default::default()
    })
}

/// The most russh lets a session's keys carry in either direction (`russh::Limits::new` refuses
/// more, for AES-GCM's nonces), and its default.
const REKEY_CEILING: u64 = 1 << 30;

/// russh's key re-exchange limits for a hop's `RekeyLimit` (config/hop.rs), read as ssh reads
/// it: the size per direction as given, within [`REKEY_CEILING`], which also stands for
/// `default` (ssh's default is never below it: 1 GiB for 8-byte cipher blocks, far more for
/// 16-byte ones); the interval as given, and none when unset, as in ssh. A session re-keyed
/// sooner than ssh would costs a round trip; either side may start a re-exchange at any time.
fn rekey_limits(limit: RekeyLimit) -> russh::Limits {
    let bytes = limit.data.map_or(REKEY_CEILING, |bytes| bytes.min(REKEY_CEILING));
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    russh::Limits {
        rekey_write_limit: bytes,
        rekey_read_limit: bytes,
        rekey_time_limit: limit.interval.unwrap_or(Duration::MAX),
    }
}

/// Connects every hop of `chain` in turn. Each hop's transport, handshake and authentication
/// are bounded by its `ConnectTimeout` (else `settings.connect_timeout`), not counting the time a
/// person is given to answer its questions (`desk::within`); the caller bounds the whole.
pub async fn dial(chain: &Chain, settings: Settings<'_>) -> Result<Dialled, Error> {
    let mut sessions: Vec<Session> = Vec::with_capacity(chain.hops.len());
    let window_opened = Arc::new(Notify::new());
    for (i, hop) in chain.hops.iter().enumerate() {
        let id = HopId::new(chain, i);
        let limit = hop.connect_timeout.unwrap_or(settings.connect_timeout);
        let step = dial_hop(hop, sessions.last(), &id, settings, &window_opened);
        let deadline = tokio::time::Instant::now() + limit;
        let session = match desk::within(settings.asker.desk, deadline, step).await {
            Some(Ok(s)) => s,
            Some(Err(kind)) => return Err(Error { hop: id, kind }),
            None => return Err(Error { hop: id, kind: ErrorKind::Timeout(limit) }),
        };
        tracing::debug!(hop = %id, "hop connected");
        sessions.push(session);
    }
    let backlog = Backlog::new(sessions.iter().map(|s| s.layer.clone()).collect());
    let engine = settings.engine;
    let uplink = Uplink::new(
        backlog,
        window_opened,
        engine.sessions.uplink_backlog,
        engine.sessions.lane_bytes,
        engine.flow.packet,
    );
    Ok(Dialled {
        sessions,
        established: Instant::now(),
        abandoned: AtomicU64::new(0),
        flow: settings.flow.clone(),
        uplink,
    })
}

impl Probe for Dialled {
    fn ping(
        &self,
        limit: Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Duration>> + Send + '_>> {
        Box::pin(async move {
            let last = self.sessions.last()?;
            let started = Instant::now();
            match tokio::time::timeout(limit, last.handle.send_ping()).await {
                Ok(Ok(())) if !self.is_closed() => Some(started.elapsed()),
                Ok(_) => None,
                Err(_) => Some(limit),
            }
        })
    }
}

async fn dial_hop(
    hop: &Hop,
    previous: Option<&Session>,
    id: &HopId,
    settings: Settings<'_>,
    window_opened: &Arc<Notify>,
) -> Result<Session, ErrorKind> {
    let (tx, mut rx) = watch::channel(None);
    let events = Arc::new(Events::default());
    let known = KnownHosts::load(hop);
    let hints = known.hints();
    // The last hop's round trip is the path's: the flow's pings go there.
    let last = id.index == id.count;
    let handler = Handler {
        hop: hop.clone(),
        known,
        ssh_config: settings.ssh_config.to_owned(),
        events: events.clone(),
        down: tx,
        nested: previous.is_some(),
        small_message: settings.engine.sessions.small_message,
        window_opened: last.then(|| window_opened.clone()),
        path: last.then(|| settings.flow.clone()),
    };
    let layer: Arc<Layer> = Arc::default();
    let started = Instant::now();
    let step = Step { hop, id, settings: &settings, last, hints: &hints, layer: &layer };
    let (mut handle, transport, dial) = step.handshake(previous, handler).await?;
    let handshake = started.elapsed().saturating_sub(transport);
    step.log_in(&mut handle, &mut rx).await?;
    let auth = started.elapsed().saturating_sub(transport + handshake);
    let timing = HopTiming { hop: hop.display(), transport, handshake, auth };
    Ok(Session {
        handle,
        events,
        down: rx,
        hop: id.clone(),
        timing,
        layer,
        largest_packet: dial.largest_packet,
    })
}

/// What dialling one hop needs at each of its steps.
struct Step<'a, 's> {
    hop: &'a Hop,
    id: &'a HopId,
    settings: &'a Settings<'s>,
    /// The chain's last hop: its round trip is the path's.
    last: bool,
    hints: &'a KnownHostKeys,
    /// What the hop's transport holds that has not been passed on (transport/backlog.rs).
    layer: &'a Arc<Layer>,
}

impl Step<'_, '_> {
    /// Makes the hop's transport (over `previous`, or TCP, or a ProxyCommand) and runs the SSH
    /// handshake on it: the session, how long the transport took (one round trip), and what the
    /// session was dialled with.
    async fn handshake(
        &self,
        previous: Option<&Session>,
        handler: Handler,
    ) -> Result<(client::Handle<Handler>, Duration, Dial), ErrorKind> {
        let (hop, settings, engine) = (self.hop, self.settings, self.settings.engine);
        let started = Instant::now();
        let mut stderr = None;
        // Each transport's own set-up takes one round trip to this hop: a TCP connect, or a
        // channel open that the previous hop confirms once its TCP connect to this one is done.
        let (connected, transport, dial) = match (previous, &hop.transport) {
            (Some(prev), _) => {
                let channel = open_on(prev, &hop.host_name, hop.port).await.map_err(|e| match e {
                    OpenError::Refused { reason, description } => {
                        ErrorKind::Unreachable { reason, description }
                    }
                    OpenError::Transport(cause) => ErrorKind::Handshake { cause, stderr: String::new() },
                })?;
                let transport = started.elapsed();
                let dial = measured(self.id, Some(transport), Some(transport), self.last, settings.flow);
                let layer = self.layer.clone();
                let carried =
                    Carried::new(channel, prev.largest_packet, layer, &engine.transport, engine.flow.packet);
                (
                    client::connect_stream(client_config(hop, self.hints, dial), carried, handler).await,
                    transport,
                    dial,
                )
            }
            (None, Transport::Tcp) => {
                let (tcp, connect) = tcp::connect(hop).await.map_err(ErrorKind::Tcp)?;
                let transport = started.elapsed();
                let first_byte = first_byte(&tcp, engine.sessions.banner_wait).await;
                let dial =
                    measured(self.id, Some(connect.max(first_byte)), Some(connect), self.last, settings.flow);
                keep_unsent_small(&tcp, engine.transport.notsent_lowat);
                let channels = settings.open_channels.clone();
                let stream =
                    Gathered::new(QuickAck::new(tcp), channels, self.layer.clone(), &engine.transport);
                (
                    client::connect_stream(client_config(hop, self.hints, dial), stream, handler).await,
                    transport,
                    dial,
                )
            }
            (None, Transport::Command(command)) => {
                let (stream, tail) =
                    proxy_command::spawn(command, settings.env, engine.transport.stderr_tail)
                        .map_err(ErrorKind::ProxyCommand)?;
                stderr = Some(tail);
                let transport = started.elapsed();
                let channels = settings.open_channels.clone();
                let stream = Gathered::new(stream, channels, self.layer.clone(), &engine.transport);
                let dial = measured(self.id, None, None, self.last, settings.flow);
                (
                    client::connect_stream(client_config(hop, self.hints, dial), stream, handler).await,
                    transport,
                    dial,
                )
            }
        };
        let handle = connected.map_err(|e| match e {
            HandlerError::HostKey(e) => ErrorKind::HostKey(e),
            HandlerError::Russh(russh::Error::WrongServerSig) => ErrorKind::Signature,
            HandlerError::Russh(cause) => match negotiation::Mismatch::from_russh(&cause, hop) {
                Some(mismatch) => ErrorKind::Negotiation(mismatch),
                None => ErrorKind::Handshake {
                    cause,
                    stderr: stderr.as_ref().map(|s| s.tail()).unwrap_or_default(),
                },
            },
        })?;
        Ok((handle, transport, dial))
    }

    /// Authenticates on the hop's new session (auth.rs); a session the server ended meanwhile
    /// waits briefly for its reason, which names the cause ("Too many authentication failures").
    async fn log_in(
        &self,
        handle: &mut client::Handle<Handler>,
        down: &mut watch::Receiver<Option<String>>,
    ) -> Result<(), ErrorKind> {
        let settings = self.settings;
        let person = Person {
            asker: settings.asker,
            hop: self.id.to_string(),
            env: settings.env,
            after_answer: settings.connect_timeout,
        };
        match auth::authenticate(handle, self.hop, settings.env, &person).await {
            Ok(()) => Ok(()),
            Err(auth::Error::Interrupted { tried, refused, source, .. }) => {
                // The session reports the server's disconnect message on its own task.
                let wait = settings.engine.sessions.auth_disconnect_wait;
                let said = tokio::time::timeout(wait, down.wait_for(Option::is_some))
                    .await
                    .ok()
                    .and_then(|r| r.ok().and_then(|v| v.clone()));
                Err(ErrorKind::Auth(auth::Error::Interrupted { tried, refused, said, source }))
            }
            Err(e) => Err(ErrorKind::Auth(e)),
        }
    }
}

/// How long sshd's identification line takes to arrive after the connect: a round trip plus
/// sshd's start-up (about 6 ms on loopback). It also shows a delay that a TCP-terminating
/// middlebox (or `bench/client/slow_link.rs`) hides from the connect itself. The server speaks
/// first (RFC 4253 §4.2); one that does not is waited for at most `wait`, and the connect time
/// stands.
async fn first_byte(tcp: &TcpStream, wait: Duration) -> Duration {
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let _ = tokio::time::timeout(wait, tcp.peek(&mut byte)).await;
    started.elapsed().min(wait)
}

/// What a hop `rtt` away (`None`: unknown, a ProxyCommand) whose transport took `transport` is
/// dialled with (`Flow::dial_hop`), logged: it explains a session's speed. Only the last hop's
/// round trip is the path's (the flow pings the last hop).
fn measured(id: &HopId, rtt: Option<Duration>, transport: Option<Duration>, last: bool, flow: &Flow) -> Dial {
    let dial = flow.dial_hop(rtt, transport, last);
    tracing::debug!(hop = %id, rtt_ms = rtt.map(|r| r.as_secs_f64() * 1e3), window_kib = dial.window / 1024,
        largest_packet = dial.largest_packet, "round trip measured");
    dial
}

#[cfg(test)]
mod russh_patch_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// A loopback server that accepts one connection, writes `banner`, and keeps it open.
    async fn server(banner: &'static [u8]) -> TcpStream {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local address");
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            s.write_all(banner).await.expect("write");
            tokio::time::sleep(Duration::from_secs(5)).await;
        });
        TcpStream::connect(addr).await.expect("connect")
    }

    const BANNER_WAIT: Duration = Duration::from_secs(1);

    #[test]
    fn rekey_limits_follow_the_config_within_russh_s_ceiling() {
        let limits =
            rekey_limits(RekeyLimit { data: Some(64 << 20), interval: Some(Duration::from_secs(600)) });
        assert_eq!((limits.rekey_read_limit, limits.rekey_write_limit), (64 << 20, 64 << 20));
        assert_eq!(limits.rekey_time_limit, Duration::from_secs(600));
        let default = rekey_limits(RekeyLimit::default());
        assert_eq!(default.rekey_read_limit, 1 << 30, "ssh's default is never below 1 GiB");
        assert_eq!(default.rekey_time_limit, Duration::MAX, "no time-based re-key, as in ssh");
        let huge = rekey_limits(RekeyLimit { data: Some(4 << 30), interval: None });
        assert_eq!(huge.rekey_write_limit, 1 << 30, "russh's ceiling");
    }

    #[tokio::test]
    async fn the_banner_times_the_round_trip_and_stays_for_russh() {
        use tokio::io::AsyncReadExt;
        let mut tcp = server(b"SSH-2.0-test\r\n").await;
        assert!(first_byte(&tcp, BANNER_WAIT).await < BANNER_WAIT);
        let mut start = [0u8; 4];
        tcp.read_exact(&mut start).await.expect("read");
        assert_eq!(&start, b"SSH-", "peeking must not consume the identification line");
    }

    #[tokio::test]
    async fn a_server_that_waits_for_us_costs_at_most_the_banner_wait() {
        let tcp = server(b"").await;
        // The server holds the connection for 5 s: only a bounded wait returns in time.
        let waited = tokio::time::timeout(Duration::from_secs(3), first_byte(&tcp, BANNER_WAIT)).await;
        assert_eq!(waited.ok(), Some(BANNER_WAIT));
    }
}
