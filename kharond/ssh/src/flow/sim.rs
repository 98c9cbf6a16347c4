//! A simulated path in virtual time, for the window rule's tests: the real [`Flow`] (its rule and
//! its meter, pinging as it does on a session) in front of a model of a jump-host chain with one
//! bottleneck link, on tokio's paused clock.
//!
//! The model, per millisecond tick:
//! - **The far side** (the last sshd) sends whatever its channel window allows while a transfer
//!   runs, at once: sshd reads from its target as fast as the window lets it.
//! - **The queue**: everything sent and not yet through the bottleneck waits in one FIFO, the
//!   sshds' channel buffers, the socket buffers and the link's own buffer alike. A deep buffer is
//!   a queue that nothing drops; TCP under SSH turns the link's own drops into waits anyway.
//! - **The bottleneck** serves the FIFO at the link's rate of the moment ([`Rate`]), then the
//!   bytes travel `down` to kharond. A lost packet (`loss`, per 1,448-byte segment) arrives one
//!   link round trip late, and TCP holds everything served after it until then (head-of-line
//!   blocking): bytes arrive in a burst, and a ping's answer waits with them.
//! - **kharond** counts what arrives (the meter's `moved`), kicks the meter, and re-opens the
//!   channel's window to the rule's window as the vendored russh does ([`crate::flow::Dial`]'s
//!   reopen rule): a WINDOW_ADJUST travels `up` to the far side.
//! - **A ping** travels `up`, and its answer joins the FIFO behind every byte already in it.
//!
//! A small request beside a transfer is modelled as two pings of the user's own, one after the
//! other ([`Sim::request`]): a new connection's channel-open confirmation, then its response,
//! each waits behind every byte queued on the path.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::flow::{Flow, Probe};
use crate::settings::FlowSettings;

/// The model's time step.
const TICK: Duration = Duration::from_millis(1);
/// A TCP segment's payload on a 1,500-byte MTU path.
const SEGMENT: f64 = 1448.0;

/// The bottleneck's rate, in bytes per second: fixed, or a schedule that repeats from the
/// path's start (as `link-emu --rate 50mbit/3s,25mbit/2s` does).
#[derive(Debug, Clone)]
pub(crate) enum Rate {
    Fixed(f64),
    Schedule(Vec<(f64, Duration)>),
}

impl Rate {
    fn at(&self, t: Duration) -> f64 {
        match self {
            Rate::Fixed(rate) => *rate,
            Rate::Schedule(steps) => {
                let cycle: Duration = steps.iter().map(|(_, d)| *d).sum();
                let mut into = Duration::from_nanos((t.as_nanos() % cycle.as_nanos().max(1)) as u64);
                for (rate, span) in steps {
                    if into < *span {
                        return *rate;
                    }
                    into -= *span;
                }
                steps.last().map_or(0.0, |(rate, _)| *rate)
            }
        }
    }
}

/// A path: one bottleneck between kharond and the last jump host.
#[derive(Debug, Clone)]
pub(crate) struct Path {
    pub rate: Rate,
    /// One-way delay from kharond to the far end, and back.
    pub up: Duration,
    pub down: Duration,
    /// The chance that a segment is lost on the link.
    pub loss: f64,
    /// The round trip the last hop's dial measured: more than the path's own, since it counts
    /// sshd's start and a forwarder's connect (twice the path's is typical, `bench/shaped.sh`).
    pub dial_rtt: Duration,
    /// At most this long, uniformly drawn, each answer waits for a busy CPU at one end or the
    /// other (a loaded 2-core machine: the jump hosts' sshds, the emulator and kharond share it).
    pub busy_cpu: Duration,
    /// How much longer than the path the session's first ping takes: the last sshd answers it
    /// only once its own start after the login is done (41-65 ms on a 20 ms path,
    /// `bench/shaped.sh` traced).
    pub first_answer: Duration,
}

impl Path {
    pub(crate) fn base_rtt(&self) -> Duration {
        self.up + self.down
    }
}

/// Bytes (or a ping's answer, `marker`) in the FIFO or on their way down.
#[derive(Debug)]
struct Chunk {
    bytes: f64,
    marker: Option<u64>,
}

#[derive(Debug)]
struct State {
    now: Duration,
    /// What the far side may still send on the open channel.
    far_window: f64,
    /// A transfer runs: the far side has data.
    sending: bool,
    fifo: VecDeque<Chunk>,
    /// (arrival at kharond, chunk), in arrival order.
    down: VecDeque<(Duration, Chunk)>,
    /// (arrival at the far side, WINDOW_ADJUST amount).
    adjusts: VecDeque<(Duration, f64)>,
    /// (arrival at the far side, ping id).
    pings_up: VecDeque<(Duration, u64)>,
    /// Until when TCP holds what it received behind a lost segment.
    held_until: Duration,
    /// Bytes delivered to kharond.
    delivered: u64,
    /// kharond's view of the far side's window, and what arrived since it last re-opened it.
    local_window: f64,
    since_reopen: f64,
    answers: HashMap<u64, oneshot::Sender<()>>,
    next_ping: u64,
    rng: u64,
}

impl State {
    /// xorshift64*: a seeded, reproducible stream for the loss draws.
    fn uniform(&mut self) -> f64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The path, its flow and their shared state.
pub(crate) struct Sim {
    pub path: Path,
    pub flow: Arc<Flow>,
    state: Arc<Mutex<State>>,
    reopen_at_least: f64,
    reopen_divisor: f64,
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Sim {
    /// A path with a flow of `settings`, its last hop dialled (the dial's round trip is the
    /// path's own) and its session followed; the model runs from now on. Needs tokio's clock
    /// paused.
    pub(crate) fn start(path: Path, settings: FlowSettings) -> Arc<Sim> {
        let settings = Arc::new(settings);
        let state = Arc::new(Mutex::new(State {
            now: Duration::ZERO,
            far_window: 0.0,
            sending: false,
            fifo: VecDeque::new(),
            down: VecDeque::new(),
            adjusts: VecDeque::new(),
            pings_up: VecDeque::new(),
            held_until: Duration::ZERO,
            delivered: 0,
            local_window: 0.0,
            since_reopen: 0.0,
            answers: HashMap::new(),
            next_ping: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
        }));
        let counted = state.clone();
        let flow = Arc::new(Flow::new(settings.clone(), Box::new(move || lock(&counted).delivered)));
        flow.dial(Some(path.dial_rtt), true);
        let sim = Arc::new(Sim {
            path,
            flow,
            state,
            reopen_at_least: f64::from(settings.reopen_after),
            reopen_divisor: f64::from(settings.reopen_share),
        });
        let probe: Arc<dyn Probe> = sim.clone();
        sim.flow.follow(Arc::downgrade(&probe));
        // The session lives as long as the simulation: the meter holds it weakly.
        std::mem::forget(probe);
        let ticking = sim.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(TICK);
            loop {
                ticks.tick().await;
                ticking.tick();
            }
        });
        sim
    }

    /// The path's window as the rule has it now.
    fn window(&self) -> f64 {
        f64::from(self.flow.window().unwrap_or(0))
    }

    /// A transfer starts on a new channel, opened with the rule's window.
    pub(crate) fn begin_transfer(&self) {
        let window = self.window();
        let mut s = lock(&self.state);
        s.sending = true;
        s.far_window = window;
        s.local_window = window;
        s.since_reopen = 0.0;
    }

    /// The transfer's channel closes: the far side sends nothing more (what it sent still
    /// arrives).
    pub(crate) fn end_transfer(&self) {
        let mut s = lock(&self.state);
        s.sending = false;
        s.far_window = 0.0;
        s.adjusts.clear();
    }

    /// Bytes delivered to kharond so far.
    pub(crate) fn delivered(&self) -> u64 {
        lock(&self.state).delivered
    }

    /// A small request on a new connection: the channel's open, then the request itself.
    pub(crate) async fn request(&self) -> Duration {
        let started = Instant::now();
        self.round_trip().await;
        self.round_trip().await;
        started.elapsed()
    }

    /// One round trip through the path: the answer waits behind every byte queued on it.
    async fn round_trip(&self) -> Duration {
        let started = Instant::now();
        let (first, answered) = {
            let mut s = lock(&self.state);
            let id = s.next_ping;
            s.next_ping += 1;
            let at = s.now + self.path.up;
            s.pings_up.push_back((at, id));
            let (tx, rx) = oneshot::channel();
            s.answers.insert(id, tx);
            (id == 0, rx)
        };
        let _ = answered.await;
        if first {
            tokio::time::sleep(self.path.first_answer).await;
        }
        if self.path.busy_cpu > Duration::ZERO {
            let wait = self.path.busy_cpu.mul_f64(lock(&self.state).uniform());
            tokio::time::sleep(wait).await;
        }
        started.elapsed()
    }

    fn tick(&self) {
        let window = self.window();
        let mut kick = false;
        {
            let mut s = lock(&self.state);
            s.now += TICK;
            let now = s.now;
            while s.adjusts.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, amount)) = s.adjusts.pop_front() {
                    s.far_window += amount;
                }
            }
            while s.pings_up.front().is_some_and(|(at, _)| *at <= now) {
                if let Some((_, id)) = s.pings_up.pop_front() {
                    s.fifo.push_back(Chunk { bytes: 0.0, marker: Some(id) });
                }
            }
            if s.sending && s.far_window > 0.0 {
                let bytes = s.far_window;
                s.far_window = 0.0;
                s.fifo.push_back(Chunk { bytes, marker: None });
            }
            self.serve(&mut s, now);
            while s.down.front().is_some_and(|(at, _)| *at <= now) {
                let Some((_, chunk)) = s.down.pop_front() else { break };
                if let Some(id) = chunk.marker {
                    if let Some(answer) = s.answers.remove(&id) {
                        let _ = answer.send(());
                    }
                    continue;
                }
                s.delivered += chunk.bytes as u64;
                kick = true;
                s.local_window -= chunk.bytes;
                s.since_reopen += chunk.bytes;
                // The vendored russh re-opens once a share of the window arrived since it last
                // did, or less than half the window is left (a window that grew, or one held
                // small by a drain and set free again), to the handler's window of the moment.
                let threshold = self.reopen_at_least.max(window / self.reopen_divisor);
                let due = s.since_reopen >= threshold || s.local_window < window / 2.0;
                if s.sending && due && window > s.local_window {
                    let amount = window - s.local_window;
                    s.local_window = window;
                    s.since_reopen = 0.0;
                    s.adjusts.push_back((now + self.path.up, amount));
                }
            }
        }
        if kick {
            self.flow.kick();
        }
    }

    /// One tick of the bottleneck: the FIFO's front at the rate of the moment, with losses.
    fn serve(&self, s: &mut State, now: Duration) {
        let mut capacity = self.path.rate.at(now) * TICK.as_secs_f64();
        while let Some(front) = s.fifo.front_mut() {
            if front.marker.is_none() && front.bytes > capacity {
                front.bytes -= capacity;
                let served = capacity;
                self.send_down(s, now, served, None);
                break;
            }
            let Some(chunk) = s.fifo.pop_front() else { break };
            capacity -= chunk.bytes;
            self.send_down(s, now, chunk.bytes, chunk.marker);
        }
    }

    fn send_down(&self, s: &mut State, now: Duration, bytes: f64, marker: Option<u64>) {
        if self.path.loss > 0.0 {
            let segments = (bytes / SEGMENT).ceil() as u64;
            for _ in 0..segments {
                if s.uniform() < self.path.loss {
                    // Retransmitted after a round trip of the link; TCP holds what follows.
                    let late = now + self.path.base_rtt();
                    s.held_until = s.held_until.max(late);
                }
            }
        }
        let arrives = (now + self.path.down).max(s.held_until + self.path.down);
        s.down.push_back((arrives, Chunk { bytes, marker }));
    }
}

impl Probe for Sim {
    fn ping(&self, limit: Duration) -> Pin<Box<dyn Future<Output = Option<Duration>> + Send + '_>> {
        Box::pin(async move { Some(tokio::time::timeout(limit, self.round_trip()).await.unwrap_or(limit)) })
    }
}

/// What a transfer of `span` showed: the mean delivery rate, and the round trips of small
/// requests sent one after another beside it (from `settle` into it on).
#[derive(Debug)]
pub(crate) struct Transfer {
    pub rate: f64,
    pub requests: Vec<Duration>,
}

impl Transfer {
    pub(crate) fn p50(&self) -> Duration {
        let mut sorted = self.requests.clone();
        sorted.sort_unstable();
        sorted.get(sorted.len() / 2).copied().unwrap_or(Duration::MAX)
    }
}

impl Sim {
    /// A bulk download of `span`, with small requests beside it from `settle` on.
    pub(crate) async fn transfer(self: &Arc<Self>, span: Duration, settle: Duration) -> Transfer {
        let started = Instant::now();
        let before = self.delivered();
        self.begin_transfer();
        let mut requests = Vec::new();
        tokio::time::sleep(settle).await;
        while started.elapsed() < span {
            requests.push(self.request().await);
        }
        let rate = (self.delivered() - before) as f64 / started.elapsed().as_secs_f64();
        self.end_transfer();
        Transfer { rate, requests }
    }
}

mod scenarios;
