//! The connection to a target that requests are forwarded over: hyper's HTTP/1.1 client on the
//! stream the route dialled (direct TCP or an SSH channel), one at a time. hyper writes each
//! request's framing (a `Content-Length`, or chunks) and reads the target's responses, 1xx
//! interim answers and their framing rules included; its connection task lives as long as the
//! [`Link`].

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

use super::body::Outgoing;
use crate::routing::dial::Upstream;
use crate::routing::target::Target;

/// An HTTP/1.1 connection to one target.
pub struct Link {
    target: Target,
    sender: http1::SendRequest<Outgoing>,
    /// Reads and writes the connection; stopped with the link.
    driver: JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// What became of a request sent over a link.
pub enum Sent {
    Answered(Response<Incoming>),
    /// The link had closed before the request went out (a target that ends idle connections):
    /// the request comes back untouched, for a fresh link.
    Unsent(Request<Outgoing>, hyper::Error),
    Failed(hyper::Error),
}

impl Link {
    /// The HTTP/1.1 handshake (nothing is sent yet) on a stream dialled to `target`.
    pub async fn open(target: Target, upstream: Upstream) -> Result<Link, hyper::Error> {
        match upstream {
            Upstream::Tcp(tcp) => Link::over(target, tcp).await,
            Upstream::Tunnel(tunnel) => Link::over(target, tunnel).await,
        }
    }

    async fn over<S>(target: Target, stream: S) -> Result<Link, hyper::Error>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (sender, connection) =
            http1::Builder::new().title_case_headers(true).handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Link { target, sender, driver })
    }

    /// Whether a request for `target` can go over this link.
    pub fn serves(&self, target: &Target) -> bool {
        self.target == *target && !self.sender.is_closed()
    }

    /// Sends `request` and waits for the head of its response.
    pub async fn send(&mut self, request: Request<Outgoing>) -> Sent {
        if let Err(e) = self.sender.ready().await {
            return Sent::Unsent(request, e);
        }
        match self.sender.try_send_request(request).await {
            Ok(response) => Sent::Answered(response),
            Err(mut e) => match e.take_message() {
                Some(request) => Sent::Unsent(request, e.into_error()),
                None => Sent::Failed(e.into_error()),
            },
        }
    }
}
