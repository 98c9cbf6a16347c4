//! What the `Connections` and `Trace` RPCs answer: the registry's open connections with the
//! processes that hold their client sockets (looked up now, `peer.rs`) and their clusters, and a
//! trace's event stream (armed here, disarmed when the stream is dropped, however it ends).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kharon_proto::v1 as pb;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::Status;

use crate::observe::peer;
use crate::observe::registry::{Entry, Phase};
use crate::observe::trace::Step;
use crate::proxy::protocol::Protocol;
use crate::routing::target::Target;
use crate::state::State;
use kharon_routing::table::Route;

/// How long a trace waits when the caller names no timeout.
pub const TRACE_DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The longest a trace may wait for its connection.
pub const TRACE_MAX_WAIT: Duration = Duration::from_secs(3600);

/// Every open connection, oldest first.
pub async fn connections(state: &State) -> pb::ConnectionsResponse {
    let entries = state.registry.snapshot();
    let clients: Vec<SocketAddr> = entries.iter().map(|e| e.client).collect();
    let listen = state.listen;
    // Reading /proc (walking every process on macOS) blocks: off the async threads. A failed
    // lookup only leaves processes unknown.
    let processes =
        tokio::task::spawn_blocking(move || peer::find(&clients, listen)).await.unwrap_or_default();
    let generation = state.routes.current();
    let table = generation.table();
    let connections = entries
        .iter()
        .map(|entry| {
            let process = processes.get(&entry.client);
            let cluster = match (entry.target(), entry.route()) {
                (Some(Target::Name(host, _)), Some(Route::Jumphost(_))) => {
                    table.explain(host).cluster.unwrap_or_default()
                }
                _ => String::new(),
            };
            connection(entry, process, cluster)
        })
        .collect();
    pb::ConnectionsResponse { connections }
}

fn connection(entry: &Entry, process: Option<&peer::Process>, cluster: String) -> pb::Connection {
    let (bytes_up, bytes_down) = entry.bytes();
    let state = match entry.phase() {
        Phase::Handshake => pb::ConnectionState::Handshake,
        Phase::Dialing => pb::ConnectionState::Dialing,
        Phase::Open => pb::ConnectionState::Open,
        Phase::HalfClosed => pb::ConnectionState::HalfClosed,
    };
    pb::Connection {
        id: entry.id,
        client: entry.client.to_string(),
        pid: process.map_or(0, |p| p.pid),
        program: process.map(|p| p.program.clone()).unwrap_or_default(),
        protocol: entry.protocol().map_or("unknown", Protocol::as_str).to_owned(),
        destination: entry.target().map(ToString::to_string).unwrap_or_default(),
        route: entry.route().map(|route| route.label().to_owned()).unwrap_or_default(),
        cluster,
        state: state.into(),
        bytes_up,
        bytes_down,
        age_ms: u64::try_from(entry.accepted.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

/// The stream of one trace: "armed" at once, then the steps of the next connection to `host`
/// (and `port`, unless 0) as they happen, ending with its last step. No connection within `wait`:
/// DEADLINE_EXCEEDED. A host that is no DNS name or IP: INVALID_ARGUMENT, before anything is armed.
pub fn trace(
    state: Arc<State>,
    host: &str,
    port: u32,
    wait: Duration,
) -> Result<impl Stream<Item = Result<pb::TraceEvent, Status>> + Send + 'static, Status> {
    let port = u16::try_from(port).map_err(|_| {
        Status::invalid_argument(format!("port {port} is out of range (1-65535, or 0 for any)"))
    })?;
    // Spelled as the connection's target will be: case, a trailing dot, brackets do not matter.
    let wanted = Target::from_host(host.as_bytes(), port.max(1))
        .map_err(|e| Status::invalid_argument(format!("cannot trace {e}")))?;
    let shown = if port == 0 { wanted.host() } else { wanted.to_string() };
    let wait = if wait.is_zero() { TRACE_DEFAULT_WAIT } else { wait.min(TRACE_MAX_WAIT) };
    let (id, steps) = state.registry.traces.arm(wanted.host(), (port != 0).then_some(port));
    let following = Following {
        state,
        id,
        steps,
        deadline: Some(Instant::now() + wait),
        wait,
        shown,
        stage: Stage::Armed,
    };
    Ok(futures::stream::unfold(following, Following::next))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// "armed" is still to be sent.
    Armed,
    Waiting,
    Done,
}

/// One armed trace; disarmed when dropped (the stream ended, or the caller went away).
struct Following {
    state: Arc<State>,
    id: u64,
    steps: mpsc::UnboundedReceiver<Step>,
    /// Until a connection has taken the trace.
    deadline: Option<Instant>,
    wait: Duration,
    shown: String,
    stage: Stage,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.state.registry.traces.disarm(self.id);
    }
}

impl Following {
    async fn next(mut self) -> Option<(Result<pb::TraceEvent, Status>, Self)> {
        match self.stage {
            Stage::Done => return None,
            Stage::Armed => {
                self.stage = Stage::Waiting;
                let detail =
                    format!("waiting up to {:?} for the next connection to {}", self.wait, self.shown);
                let armed = pb::TraceEvent { step: "armed".to_owned(), detail, ..Default::default() };
                return Some((Ok(armed), self));
            }
            Stage::Waiting => {}
        }
        let step = match self.deadline {
            Some(deadline) => match tokio::time::timeout_at(deadline, self.steps.recv()).await {
                Ok(step) => step,
                Err(_) => {
                    self.stage = Stage::Done;
                    let why = format!(
                        "no connection to {} came within {:?}; was the client pointed at kharond?",
                        self.shown, self.wait
                    );
                    return Some((Err(Status::deadline_exceeded(why)), self));
                }
            },
            // Taken: every step after it is bounded by the connection's own timeouts.
            None => self.steps.recv().await,
        }?;
        self.deadline = None;
        if step.is_last() {
            self.stage = Stage::Done;
        }
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let event = pb::TraceEvent {
            step: step.kind.to_owned(),
            at_us: micros(step.at),
            took_us: step.took.map_or(0, micros),
            detail: step.detail,
        };
        Some((Ok(event), self))
    }
}
