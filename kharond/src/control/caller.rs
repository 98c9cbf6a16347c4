//! Who may call the control API: only the user the daemon runs as. One check, wrapped around the
//! whole service ([`OnlyOurUser`]), so no RPC can be added without it.
//!
//! The socket is 0600 in a 0700 directory already; this also holds if someone loosens those modes
//! (OpenSSH's agent checks its client the same way: `getpeereid` in ssh-agent.c,
//! `handle_socket_read`). It fails closed: a call whose peer cannot be named (no Unix socket
//! under it, or no peer credentials from the kernel) is refused, never trusted.
//!
//! # Why a service and not a tonic interceptor
//! An interceptor answers before the request's body is read. The HTTP/2 stream is then closed
//! with the client still sending, and a client may see the reset before the answer: curl reported
//! "Stream error in the HTTP/2 framing layer" instead of PERMISSION_DENIED in most runs on a busy
//! machine. So a refused call's body (a few bytes of a unary request, at most `DRAIN_LIMIT`,
//! within `DRAIN_WAIT`) is read to its end first, as the RPC itself would have, then answered.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::BodyExt as _;
use tonic::Status;
use tonic::body::Body;
use tonic::server::NamedService;
use tonic::transport::server::UdsConnectInfo;

/// The most of a refused request's body read before answering (control requests are small).
const DRAIN_LIMIT: usize = 64 * 1024;
/// How long a refused request's body may take to arrive.
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Why a caller may not call, if it may not: `None` only for a Unix peer running as `me`.
pub fn refusal(info: Option<&UdsConnectInfo>, me: u32) -> Option<Status> {
    match info.and_then(|info| info.peer_cred).map(|cred| cred.uid()) {
        Some(uid) if uid == me => None,
        Some(uid) => {
            Some(Status::permission_denied(format!("uid {uid} may not control this kharond (uid {me})")))
        }
        None => Some(Status::permission_denied("cannot tell which user is calling; refused")),
    }
}

/// The control service, every call checked first (module doc).
#[derive(Debug, Clone)]
pub struct OnlyOurUser<S> {
    inner: S,
    me: u32,
}

impl<S> OnlyOurUser<S> {
    pub fn new(inner: S) -> Self {
        OnlyOurUser { inner, me: kharon_common::paths::uid() }
    }
}

impl<S: NamedService> NamedService for OnlyOurUser<S> {
    const NAME: &'static str = S::NAME;
}

type Answer = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

impl<S> tower::Service<http::Request<Body>> for OnlyOurUser<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        match refusal(request.extensions().get::<UdsConnectInfo>(), self.me) {
            None => Box::pin(self.inner.call(request)),
            Some(status) => Box::pin(async move {
                let body = http_body_util::Limited::new(request.into_body(), DRAIN_LIMIT);
                // Whatever the body does (too long, too slow, broken), the answer is the same.
                let _ = tokio::time::timeout(DRAIN_WAIT, body.collect()).await;
                Ok(status.into_http())
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::transport::server::Connected as _;

    #[tokio::test]
    async fn only_a_unix_peer_of_our_own_uid_gets_through() {
        let (ours, _other_end) = tokio::net::UnixStream::pair().unwrap();
        let info = ours.connect_info();
        let me = kharon_common::paths::uid();
        assert!(refusal(Some(&info), me).is_none());

        let refused = refusal(Some(&info), me.wrapping_add(1)).expect("another uid");
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(refused.message().contains(&format!("uid {me} may not control")), "{}", refused.message());

        // Called without a socket under it (in-process, or a transport without peer credentials).
        let unknown = refusal(None, me).expect("refused");
        assert_eq!(unknown.code(), tonic::Code::PermissionDenied);
        assert_eq!(unknown.message(), "cannot tell which user is calling; refused");
    }

    #[tokio::test]
    async fn a_refused_call_is_answered_after_its_body_is_read_and_never_reaches_the_service() {
        let reached = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = std::sync::Arc::clone(&reached);
        let inner = tower::service_fn(move |_: http::Request<Body>| {
            seen.store(true, std::sync::atomic::Ordering::Relaxed);
            async { Ok::<_, Infallible>(http::Response::new(Body::empty())) }
        });
        let mut service = OnlyOurUser::new(inner);
        let request =
            http::Request::new(Body::new(http_body_util::Full::new(bytes::Bytes::from_static(&[0; 5]))));
        let answer = tower::Service::call(&mut service, request).await.unwrap();
        assert_eq!(answer.headers().get("grpc-status").map(|v| v.as_bytes()), Some(&b"7"[..]));
        assert!(
            !reached.load(std::sync::atomic::Ordering::Relaxed),
            "a call without peer credentials got through"
        );
    }
}
