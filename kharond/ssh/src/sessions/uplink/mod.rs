//! [`Uplink`]: what a chain's tunnels send, served channel by channel.
//!
//! # Why
//! Every connection through a jump host shares its chain's last SSH session and, below it, one
//! TCP connection to the first hop. What a client sends passes three queues on its way to the
//! link that serve every channel in arrival order: russh's queue of channel messages (one per
//! session), the transports' buffers (the first hop's gathered writes, each later hop's queue
//! into the hop before it: transport/backlog.rs) and the kernel's send buffer of the first hop's
//! socket. A bulk upload (`oc cp`, an image push) fills all three, and a new request's bytes wait
//! behind it: through a 50 Mbit/s link the kernel's 4 MiB alone is 640 ms.
//!
//! So a tunnel hands its bytes to a lane of its own here ([`Lane`], at most `lane_bytes` at a
//! time), and one writer task per chain takes them from the lanes in turn, a packet at a time,
//! only while the transports hold less than `uplink_backlog` bytes, and only after russh has
//! written the previous packet out (so russh's own queue stays empty). The kernel holds little
//! unsent either (`TCP_NOTSENT_LOWAT`, transport/tcp.rs). A request's bytes then wait behind one
//! packet of each busy lane and that small backlog, not behind megabytes of someone's upload.
//! A lane whose channel has no window left (the server has not taken what it was sent) is passed
//! over until the session's handler hears of a window adjust; the others are served meanwhile.
//!
//! A lane's end of stream (EOF) goes out after its last byte; a lane that fails (its channel or
//! session ended) fails its tunnel's next write.
//!
//! # A teardown goes out with the next open
//! A channel whose server already sent EOF ends when we send ours; nobody waits for it: the
//! client has closed, the server has said all it will. The last hop's sshd answers that EOF at
//! once with its CLOSE, one small packet, and the first hop's sshd, which keeps Nagle on, holds
//! the next small packet it passes to us behind it until our ACK comes back (docs/ssh-engine.md,
//! "The round trips of a small request"). When the next packet is the open confirmation of a
//! connection that a client made right after closing the previous one (a script, a browser,
//! `kubectl` run in a loop), the new connection waits a round trip for that. So such an EOF is
//! held (`SessionSettings::teardown_hold` at most) and goes out with the chain's next open
//! ([`Uplink::release_held`]): the server reads both at once and answers both in one write, as
//! it does for `ssh -D`, whose one loop writes them together. An EOF the server still waits for
//! (the client shut down writing and awaits the answer) is never held.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use russh::ChannelWriteHalf;
use russh::client::Msg;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::transport::backlog::Backlog;

/// How long the writer waits for russh to write a packet out before it moves on anyway: russh
/// takes a message off its queue within a turn of its loop, and a turn that waits for the
/// socket is what the backlog bounds.
const WRITTEN_WAIT: Duration = Duration::from_millis(20);
/// How long the writer waits at most for the transports' backlog to fall before it looks at its
/// lanes again.
const BACKLOG_WAIT: Duration = Duration::from_secs(1);
/// How long the writer waits for a window adjust when every lane with bytes is out of window,
/// before it looks again (a missed wake-up costs at most this).
const WINDOW_WAIT: Duration = Duration::from_millis(50);

/// What the writer reads and the lanes share.
struct Shared {
    state: Mutex<State>,
    /// A lane got bytes, an end of stream, or went away.
    work: Notify,
    /// The last hop's session heard of a window adjust (chain.rs, `Handler::window_adjusted`).
    window: Arc<Notify>,
    backlog: Backlog,
    /// `SessionSettings::uplink_backlog`.
    budget: usize,
    /// `SessionSettings::lane_bytes`.
    lane_bytes: usize,
    /// The largest chunk handed to russh at once (`FlowSettings::packet`).
    packet: usize,
}

#[derive(Default)]
struct State {
    lanes: BTreeMap<u64, LaneState>,
    next_id: u64,
    /// The lane served last: the next turn starts after it.
    last_served: u64,
    /// Lanes whose EOF is held for the chain's next open ([`End::Asked`] with a time): what
    /// [`Uplink::release_held`] looks at, so that an open costs nothing for the other lanes.
    held: BTreeSet<u64>,
    /// Set when the chain is gone: the writer ends once no lane is left.
    closed: bool,
}

struct LaneState {
    write: Arc<ChannelWriteHalf<Msg>>,
    queue: VecDeque<Bytes>,
    bytes: usize,
    end: End,
    /// The channel failed: every write fails with this.
    failed: Option<String>,
    /// The tunnel waiting for room, for the queue to empty, or for the EOF to go out.
    waker: Option<Waker>,
}

/// Where a lane's end of stream (EOF) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// The tunnel still writes.
    Open,
    /// The tunnel shut down writing: EOF goes out after the queue; with `held_until`, not before
    /// that instant unless the chain opens a channel first (see "A teardown goes out with the
    /// next open").
    Asked {
        held_until: Option<Instant>,
    },
    /// Handed to russh, by the writer or by an open that released it.
    Taken,
    Sent,
}

impl LaneState {
    /// The EOF, when it is the lane's next message: `Some(held_until)`.
    fn next_eof(&self) -> Option<Option<Instant>> {
        match self.end {
            End::Asked { held_until } if self.failed.is_none() && self.bytes == 0 => Some(held_until),
            _ => None,
        }
    }

    /// Whether the EOF is the lane's next message and its hold, if any, has passed at `now`.
    fn eof_due(&self, now: Instant) -> bool {
        self.next_eof().is_some_and(|held_until| held_until.is_none_or(|until| until <= now))
    }

    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

/// One chain's writer (see the module doc). Dropping it lets the writer task end once its lanes
/// are gone.
pub(crate) struct Uplink {
    shared: Arc<Shared>,
}

impl Uplink {
    /// The writer of a chain whose transports are `backlog` and whose last session's handler
    /// notifies `window` at every window adjust; spawns its task.
    pub(crate) fn new(
        backlog: Backlog,
        window: Arc<Notify>,
        budget: usize,
        lane_bytes: usize,
        packet: u32,
    ) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            work: Notify::new(),
            window,
            backlog,
            budget,
            lane_bytes: lane_bytes.max(1),
            packet: (packet as usize).max(1),
        });
        tokio::spawn(write(shared.clone()));
        Uplink { shared }
    }

    /// A lane for the channel `write` sends on.
    pub(crate) fn lane(&self, write: Arc<ChannelWriteHalf<Msg>>) -> Lane {
        let mut state = lock(&self.shared.state);
        let id = state.next_id;
        state.next_id += 1;
        state.lanes.insert(
            id,
            LaneState { write, queue: VecDeque::new(), bytes: 0, end: End::Open, failed: None, waker: None },
        );
        Lane { id, shared: self.shared.clone() }
    }

    /// Hands russh every held EOF whose lane has nothing else left to send, before the chain
    /// opens a channel: they leave in the same write as the open (see "A teardown goes out with
    /// the next open").
    pub(crate) async fn release_held(&self) {
        let held: Vec<(u64, Arc<ChannelWriteHalf<Msg>>)> = {
            let mut state = lock(&self.shared.state);
            let State { lanes, held, .. } = &mut *state;
            let mut released = Vec::new();
            held.retain(|id| {
                // A lane that still has bytes keeps its hold: its EOF goes after them.
                let Some(lane) = lanes.get_mut(id).filter(|lane| lane.next_eof().is_some()) else {
                    return lanes.contains_key(id);
                };
                lane.end = End::Taken;
                released.push((*id, lane.write.clone()));
                false
            });
            released
        };
        for (id, write) in held {
            settle(&self.shared, id, write.eof().await.map(|()| true));
        }
    }
}

impl Drop for Uplink {
    fn drop(&mut self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_one();
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    // Plain data: a panic elsewhere leaves nothing half-written that matters.
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One tunnel's place in its chain's [`Uplink`]; removed (with what it still holds) when dropped.
pub(crate) struct Lane {
    id: u64,
    shared: Arc<Shared>,
}

impl Lane {
    /// Queues what fits of `buf` (up to `lane_bytes` held); waits while the lane is full.
    pub(crate) fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut state = lock(&self.shared.state);
        let Some(lane) = state.lanes.get_mut(&self.id) else { return Poll::Ready(Err(gone())) };
        if let Some(why) = &lane.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, why.clone())));
        }
        if lane.end != End::Open {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, "written after its end")));
        }
        let room = self.shared.lane_bytes.saturating_sub(lane.bytes);
        if room == 0 {
            lane.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = room.min(buf.len());
        if n > 0 {
            lane.queue.push_back(Bytes::copy_from_slice(&buf[..n]));
            lane.bytes += n;
            drop(state);
            self.shared.work.notify_one();
        }
        Poll::Ready(Ok(n))
    }

    /// Ready once everything queued was handed to russh.
    pub(crate) fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut state = lock(&self.shared.state);
        let Some(lane) = state.lanes.get_mut(&self.id) else { return Poll::Ready(Err(gone())) };
        if let Some(why) = &lane.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, why.clone())));
        }
        if lane.bytes == 0 {
            return Poll::Ready(Ok(()));
        }
        lane.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Asks for EOF after what is queued; ready once it went out. With `hold`, the EOF is a
    /// teardown nobody waits for: it goes out with the chain's next open, or `hold` after it was
    /// asked for (see "A teardown goes out with the next open").
    pub(crate) fn poll_shutdown(&self, cx: &mut Context<'_>, hold: Option<Duration>) -> Poll<io::Result<()>> {
        let mut state = lock(&self.shared.state);
        let Some(lane) = state.lanes.get_mut(&self.id) else { return Poll::Ready(Err(gone())) };
        if let Some(why) = &lane.failed {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::BrokenPipe, why.clone())));
        }
        if lane.end == End::Sent {
            return Poll::Ready(Ok(()));
        }
        let asked = lane.end == End::Open;
        if asked {
            lane.end = End::Asked { held_until: hold.map(|hold| Instant::now() + hold) };
        }
        lane.waker = Some(cx.waker().clone());
        if asked && hold.is_some() {
            state.held.insert(self.id);
        }
        drop(state);
        if asked {
            self.shared.work.notify_one();
        }
        Poll::Pending
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        let mut state = lock(&self.shared.state);
        state.lanes.remove(&self.id);
        state.held.remove(&self.id);
        drop(state);
        self.shared.work.notify_one();
    }
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, "the SSH session's writer is gone")
}

/// What the writer does next for one lane.
enum Job {
    Send { id: u64, write: Arc<ChannelWriteHalf<Msg>>, chunk: Bytes },
    Eof { id: u64, write: Arc<ChannelWriteHalf<Msg>> },
}

/// The writer task: lanes in turn, a packet at a time (see the module doc).
async fn write(shared: Arc<Shared>) {
    // Lanes found out of window since the last window adjust: passed over until then.
    let mut blocked: HashSet<u64> = HashSet::new();
    loop {
        let work = shared.work.notified();
        let window = shared.window.notified();
        tokio::pin!(work, window);
        work.as_mut().enable();
        window.as_mut().enable();
        let next = match next_lane(&shared, &blocked) {
            Next::Ended => return,
            Next::Idle { held } => {
                tokio::select! {
                    () = &mut work => {}
                    () = &mut window => blocked.clear(),
                    () = until(held) => {}
                }
                continue;
            }
            Next::OnlyBlocked { held } => {
                tokio::select! {
                    () = &mut work => {}
                    () = &mut window => blocked.clear(),
                    () = tokio::time::sleep(WINDOW_WAIT) => blocked.clear(),
                    () = until(held) => {}
                }
                continue;
            }
            Next::Lane(id, write) => (id, write),
        };
        // A transport that died holds its bytes for good: look again now and then, so that the
        // task ends with its chain rather than wait for it.
        if tokio::time::timeout(BACKLOG_WAIT, shared.backlog.below(shared.budget)).await.is_err() {
            continue;
        }
        let (id, write) = next;
        let writable = write.writable_packet_size().await;
        let Some(job) = take(&shared, id, write, writable) else {
            blocked.insert(id);
            continue;
        };
        let before = shared.backlog.last_appended();
        let (id, sent) = match job {
            Job::Send { id, write, chunk } => (id, write.data_bytes(chunk).await.map(|()| false)),
            Job::Eof { id, write } => (id, write.eof().await.map(|()| true)),
        };
        settle(&shared, id, sent);
        // russh writes the packet out within a turn of its loop: waiting for that keeps its
        // queue of messages, which serves every channel in arrival order, empty.
        let _ = tokio::time::timeout(WRITTEN_WAIT, shared.backlog.appended_past(before)).await;
    }
}

/// Records how sending for lane `id` went (`Ok(true)`: its EOF went out) and wakes its tunnel.
fn settle(shared: &Shared, id: u64, sent: Result<bool, russh::Error>) {
    let mut state = lock(&shared.state);
    if let Some(lane) = state.lanes.get_mut(&id) {
        match sent {
            Ok(true) => lane.end = End::Sent,
            Ok(false) => {}
            Err(e) => lane.failed = Some(format!("the SSH channel cannot take more: {e}")),
        }
        lane.wake();
    }
}

/// Sleeps until `at`; forever without it.
async fn until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

enum Next {
    /// The chain is gone and so are its lanes.
    Ended,
    /// No lane has anything to send now; `held`: when the first held EOF falls due.
    Idle {
        held: Option<Instant>,
    },
    /// Every lane with bytes is out of window; `held` as for `Idle`.
    OnlyBlocked {
        held: Option<Instant>,
    },
    Lane(u64, Arc<ChannelWriteHalf<Msg>>),
}

/// The lane after the one served last that has bytes or an EOF to send, passing over `blocked`.
fn next_lane(shared: &Shared, blocked: &HashSet<u64>) -> Next {
    let state = lock(&shared.state);
    if state.closed && state.lanes.is_empty() {
        return Next::Ended;
    }
    let now = Instant::now();
    let after = state.lanes.range(state.last_served + 1..);
    let from_start = state.lanes.range(..=state.last_served);
    let mut any_blocked = false;
    for (&id, lane) in after.chain(from_start) {
        if !((lane.failed.is_none() && lane.bytes > 0) || lane.eof_due(now)) {
            continue;
        }
        // An EOF needs no window.
        if blocked.contains(&id) && lane.bytes > 0 {
            any_blocked = true;
            continue;
        }
        return Next::Lane(id, lane.write.clone());
    }
    // When the first held EOF falls due: the writer wakes for it.
    let held = state.held.iter().filter_map(|id| state.lanes.get(id)?.next_eof().flatten()).min();
    if any_blocked { Next::OnlyBlocked { held } } else { Next::Idle { held } }
}

/// Takes the next packet of lane `id` (at most `writable` bytes, what its channel's window
/// allows), or its EOF once its bytes are out; `None` when it has bytes but no window.
fn take(shared: &Shared, id: u64, write: Arc<ChannelWriteHalf<Msg>>, writable: usize) -> Option<Job> {
    let mut state = lock(&shared.state);
    state.last_served = id;
    let lane = state.lanes.get_mut(&id)?;
    if lane.bytes == 0 {
        if !lane.eof_due(Instant::now()) {
            return None;
        }
        lane.end = End::Taken;
        state.held.remove(&id);
        return Some(Job::Eof { id, write });
    }
    let mut want = writable.min(shared.packet);
    if want == 0 {
        return None;
    }
    let mut parts = Vec::new();
    while want > 0 {
        let Some(front) = lane.queue.front_mut() else { break };
        let part = if front.len() <= want {
            lane.queue.pop_front().unwrap_or_default()
        } else {
            front.split_to(want)
        };
        want -= part.len();
        lane.bytes -= part.len();
        parts.push(part);
    }
    if lane.bytes < shared.lane_bytes {
        lane.wake();
    }
    let chunk = match parts.len() {
        1 => parts.pop().unwrap_or_default(),
        _ => Bytes::from(parts.concat()),
    };
    Some(Job::Send { id, write, chunk })
}

#[cfg(test)]
mod tests;
