//! The gRPC client on kharond's control socket, and the only file here that touches tonic.
//! A missing socket, or a stale one a killed kharond left (it refuses connections), becomes
//! "kharond is not running …; start it with …" instead of a transport error dump. [`reload_outcome`]: what a reload left out, told the same
//! way by `reload` and `update`.
//!
//! Only a daemon of our own user is talked to: the socket's directory must still be ours and
//! private, as kharond made sure at start (someone who took it over since could have swapped the
//! socket), the path must be a socket we own (both checked before connecting; a socket in another
//! user's directory is named with its owner), and the process listening on it must run as us
//! (checked on the connected socket, before any request is sent). Another user's daemon could
//! answer with lies or collect what we send it.

pub mod reload_outcome;

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use kharon_proto::v1 as pb;
use kharon_proto::v1::control_client::ControlClient;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

/// How long connecting to the control socket may take; it is local, so this only trips on a
/// daemon that is frozen or overloaded.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Upper bound for one control call (a reload compiles the whole inventory).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest reply taken from kharond: `Clusters` sends the whole inventory, which for
/// thousands of clusters with their facts is several MiB.
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Nothing answers: no socket file at all, or (`stale`) one left by a kharond that did not
    /// end cleanly (killed, crashed), which nothing listens on any more.
    #[error("{}", not_running(path, *stale))]
    NotRunning { path: PathBuf, stale: bool },
    #[error("cannot reach kharond at {}", path.display())]
    Connect { path: PathBuf, source: tonic::transport::Error },
    /// Not a socket, or another user's.
    #[error(transparent)]
    Untrusted(#[from] kharon_common::paths::Error),
    #[error(
        "control socket {} is served by a process of uid {}, not by us (uid {}); refusing to talk \
         to it. Pass the socket of your own kharond with --control-socket",
        path.display(), listener.peer, listener.uid
    )]
    ForeignListener { path: PathBuf, listener: ForeignListener },
    #[error("kharond: {}", kharon_common::text::Escaped(status.message()))]
    Call { status: tonic::Status },
}

impl Error {
    /// kharond refused the request itself as malformed (a host that is not one, say): the
    /// command line's fault, exit code 2.
    pub fn is_bad_request(&self) -> bool {
        matches!(self, Error::Call { status } if status.code() == tonic::Code::InvalidArgument)
    }

    /// kharond refused the call for the state it is in, not for the call: an answered or
    /// expired question, say.
    pub fn is_stale(&self) -> bool {
        matches!(self, Error::Call { status } if status.code() == tonic::Code::FailedPrecondition)
    }
}

fn not_running(path: &Path, stale: bool) -> String {
    if stale {
        format!(
            "kharond is not running: the control socket {} is stale, left by a kharond that ended \
             without removing it (killed or crashed), and nothing answers on it; start kharond again \
             with `kharond` (or `systemctl --user restart kharond` when installed as a service), which \
             replaces it",
            path.display()
        )
    } else {
        format!(
            "kharond is not running (no control socket at {}); start it with `kharond` (or \
             `systemctl --user start kharond` once installed as a service)",
            path.display()
        )
    }
}

/// The process at the other end of the control socket runs as another user.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the control socket's listener runs as uid {peer}, not {uid}")]
pub struct ForeignListener {
    peer: u32,
    uid: u32,
}

/// The socket file can be ours while another user's process listens on it (it was bound before
/// we took the directory over); the peer credentials of the connection say who answers.
fn listener_is_us(stream: &UnixStream) -> std::io::Result<()> {
    let uid = kharon_common::paths::uid();
    let peer = stream.peer_cred()?.uid();
    if peer != uid {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, ForeignListener { peer, uid }));
    }
    Ok(())
}

/// Turns a failed connect into advice: not running (nothing listens) or not ours.
fn connect_failure(path: &Path, source: tonic::transport::Error) -> Error {
    let mut cause = std::error::Error::source(&source);
    while let Some(error) = cause {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if let Some(listener) = io.get_ref().and_then(|e| e.downcast_ref::<ForeignListener>()) {
                return Error::ForeignListener { path: path.to_owned(), listener: *listener };
            }
            // A stale socket file (daemon killed or crashed) refuses connections.
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return Error::NotRunning { path: path.to_owned(), stale: true };
            }
        }
        if error.to_string().contains("refused") {
            return Error::NotRunning { path: path.to_owned(), stale: true };
        }
        cause = error.source();
    }
    Error::Connect { path: path.to_owned(), source }
}

/// A connected control client.
pub struct Daemon {
    client: ControlClient<Channel>,
}

impl Daemon {
    pub async fn connect(path: &Path) -> Result<Self, Error> {
        if !kharon_common::paths::check_own_socket(path)? {
            return Err(Error::NotRunning { path: path.to_owned(), stale: false });
        }
        // After the socket's own check: another user's socket in that user's directory is named
        // as theirs, while a socket of ours in a directory no longer ours is this check's.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            kharon_common::paths::check_socket_dir(dir)?;
        }
        let socket = path.to_owned();
        // The URI is ignored by the connector; it must be http:// or tonic would try TLS.
        let endpoint = Endpoint::from_static("http://kharond.sock")
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT);
        let channel = endpoint
            .connect_with_connector(tower::service_fn(move |_| {
                let socket = socket.clone();
                async move {
                    let stream = UnixStream::connect(socket).await?;
                    listener_is_us(&stream)?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
            .await
            .map_err(|source| connect_failure(path, source))?;
        // The cluster list of a large inventory is one message: allow more than tonic's 4 MiB.
        Ok(Self { client: ControlClient::new(channel).max_decoding_message_size(MAX_MESSAGE) })
    }

    pub async fn status(&mut self) -> Result<pb::StatusResponse, Error> {
        let reply =
            self.client.status(pb::StatusRequest {}).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    pub async fn reload(&mut self) -> Result<pb::ReloadResponse, Error> {
        let reply =
            self.client.reload(pb::ReloadRequest {}).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// Starts the daemon's endpoint checks; events arrive as each check finishes.
    pub async fn test(&mut self, clusters: Vec<String>) -> Result<tonic::Streaming<pb::TestEvent>, Error> {
        let reply =
            self.client.test(pb::TestRequest { clusters }).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// The next event of a `test` stream, or `None` at its end.
    pub async fn next_event(
        stream: &mut tonic::Streaming<pb::TestEvent>,
    ) -> Result<Option<pb::TestEvent>, Error> {
        stream.message().await.map_err(|status| Error::Call { status })
    }

    /// Has the daemon download one S3 object through its own routing (emergency credentials).
    pub async fn fetch_object(
        &mut self,
        request: pb::FetchObjectRequest,
    ) -> Result<pb::FetchObjectResponse, Error> {
        let reply = self.client.fetch_object(request).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// Every connection kharond holds now.
    pub async fn connections(&mut self) -> Result<pb::ConnectionsResponse, Error> {
        let reply = self
            .client
            .connections(pb::ConnectionsRequest {})
            .await
            .map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// Arms a trace for the next connection to `host` (`port` 0: any); its steps arrive as they
    /// happen, the first one ("armed") at once.
    pub async fn trace(
        &mut self,
        host: &str,
        port: u16,
        timeout: Duration,
    ) -> Result<tonic::Streaming<pb::TraceEvent>, Error> {
        let request = pb::TraceRequest {
            host: host.to_owned(),
            port: u32::from(port),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        let reply = self.client.trace(request).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// The next event of a `trace` stream, or `None` at its end.
    pub async fn next_trace_event(
        stream: &mut tonic::Streaming<pb::TraceEvent>,
    ) -> Result<Option<pb::TraceEvent>, Error> {
        stream.message().await.map_err(|status| Error::Call { status })
    }

    /// The clusters of kharond's table in force (a Lieutenant `/clusters` JSON) and where it read them.
    pub async fn clusters(&mut self) -> Result<pb::ClustersResponse, Error> {
        let reply =
            self.client.clusters(pb::ClustersRequest {}).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// Logs in to `jumphost` for a person: the question a hop asks now, or a dial's first step.
    pub async fn jump_login(&mut self, jumphost: &str) -> Result<pb::JumpLoginStep, Error> {
        let request = pb::JumpLoginRequest { jumphost: jumphost.to_owned() };
        let reply = self.client.jump_login(request).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    /// Answers question `id` of `jumphost`; what follows. The request's copy of the answers is
    /// tonic's once sent (freed, not wiped); ours stay [`Secret`](kharon_common::secret::Secret)s.
    pub async fn jump_answer(
        &mut self,
        jumphost: &str,
        id: u64,
        answers: &[kharon_common::secret::Secret],
    ) -> Result<pb::JumpLoginStep, Error> {
        let request = pb::JumpAnswerRequest {
            jumphost: jumphost.to_owned(),
            question_id: id,
            answers: answers.iter().map(|a| a.as_str().to_owned()).collect(),
        };
        let reply = self.client.jump_answer(request).await.map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }

    pub async fn route(&mut self, host: &str) -> Result<pb::RouteResponse, Error> {
        let reply = self
            .client
            .route(pb::RouteRequest { host: host.to_owned() })
            .await
            .map_err(|status| Error::Call { status })?;
        Ok(reply.into_inner())
    }
}
