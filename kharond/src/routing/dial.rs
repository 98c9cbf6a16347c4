//! From a target to an upstream in one step ([`Routed`]): its route by the generation in force,
//! and the dial along that route through the same generation's chains, so a reload between the
//! two changes nothing for it. The two ways to reach a target: [`direct`] (resolve here, connect
//! over TCP) and [`via_jumphost`] (a direct-tcpip channel from the chain's last hop, which
//! resolves the name). Client connections take the step in two halves (route, then say the route
//! to their observers, then dial); kharond's own requests (`Test`, `FetchObject`) in one
//! ([`routed`]), so that each takes the path a SOCKS client's connection would take.
//!
//! Knows nothing of SOCKS: a failure carries an [`std::io::ErrorKind`] the caller maps to a reply.
//!
//! # Loopback is for this machine's clients
//! kharond may listen on a non-loopback address (with a password). A client on another machine
//! must not reach, through the direct path, what listens only on the engineer's loopback (a local
//! database, a port-forward, another proxy): a direct dial for a [`Client::Remote`] refuses every
//! loopback and unspecified address a name resolves to, and an address given as such, with
//! [`ErrorKind::PermissionDenied`] ("not allowed").

use std::fmt;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::Duration;

use std::sync::Arc;

use kharon_routing::table::{Route, RoutingTable};
use tokio::net::TcpStream;

use crate::routing::in_force::{Generation, InForce};
use crate::routing::target::Target;
use kharon_ssh as ssh;

/// A deadline that never comes in practice, for a timeout too large to add to `now`.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365);

/// An open connection to the target.
pub enum Upstream {
    Tcp(TcpStream),
    Tunnel(ssh::Tunnel),
}

/// Who a dial is for. A client's connection through a jump host whose chain asks a person (a
/// one-time password) waits for the answer; kharond's own requests report the question instead,
/// to the person who asked for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// A client on this machine (a loopback peer).
    Local,
    /// A client on another machine: no loopback target (module doc).
    Remote,
    /// kharond itself (`Test`, `FetchObject`), for a person running kharonctl: reaches what a
    /// local client reaches.
    Daemon,
}

impl Client {
    /// Which of the two a client at `peer` is.
    pub fn of(peer: SocketAddr) -> Self {
        if peer.ip().to_canonical().is_loopback() { Client::Local } else { Client::Remote }
    }
}

/// An address that reaches this machine only: loopback, or unspecified (connecting to 0.0.0.0 or
/// :: reaches the local host).
fn local_only(addr: &SocketAddr) -> bool {
    let ip = addr.ip().to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{target} is this machine's loopback (or resolves only to it); a client on another machine may \
         not reach it through kharond"
    )]
    Loopback { target: String },
    #[error("cannot resolve {host}")]
    Resolve { host: String, source: std::io::Error },
    #[error("{host} has no address")]
    NoAddress { host: String },
    #[error("connecting to {addr} timed out after {timeout:?}")]
    Timeout { addr: String, timeout: Duration },
    #[error("connecting to {addr}")]
    Connect { addr: SocketAddr, source: std::io::Error },
    /// The SSH engine's errors already name the jump host (or the ssh_config file:line).
    #[error(transparent)]
    Jumphost(ssh::Error),
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Resolve { .. } | Error::NoAddress { .. } => ErrorKind::NotFound,
            Error::Loopback { .. } => ErrorKind::PermissionDenied,
            Error::Timeout { .. } => ErrorKind::TimedOut,
            Error::Connect { source, .. } => source.kind(),
            Error::Jumphost(source) => source.io_kind(),
        }
    }
}

/// A dial that failed, and the route it took; shown as "via jump host J: why" or "directly: why",
/// `why` with every cause.
#[derive(Debug)]
pub struct Failed {
    pub route: Route,
    pub error: Error,
}

impl fmt::Display for Failed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.route, kharon_common::errors::Chain(&self.error))
    }
}

/// A target's route, read from the generation in force, held with that generation: the dial
/// ([`Routed::dial`]) goes through the very chains the route was read with, and lets the
/// generation go as soon as it is done, before any relaying.
pub struct Routed {
    generation: Arc<Generation>,
    route: Route,
}

impl Routed {
    /// The route the generation in force gives `target`.
    pub fn by(routes: &InForce, target: &Target) -> Self {
        let generation = routes.current();
        let route = route_of(generation.table(), target);
        Routed { generation, route }
    }

    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The table the route was read from: what explains it (a trace's decision).
    pub fn table(&self) -> &RoutingTable {
        self.generation.table()
    }

    /// Dials `target` along the route through the same generation's chains, within `timeout`,
    /// for `client` (a remote one never reaches loopback directly: [`direct`]).
    pub async fn dial(
        self,
        target: &Target,
        client: Client,
        timeout: Duration,
    ) -> Result<(Route, Upstream), Failed> {
        let Routed { generation, route } = self;
        let dialled = along(&generation.pool, &route, target, client, timeout).await;
        drop(generation);
        match dialled {
            Ok(upstream) => Ok((route, upstream)),
            Err(error) => Err(Failed { route, error }),
        }
    }
}

/// The route `table` gives `target`: an address the client resolved goes direct (there is no
/// name to match), a name by its suffixes.
fn route_of(table: &RoutingTable, target: &Target) -> Route {
    match target {
        Target::Ip(_) => Route::Direct,
        Target::Name(name, _) => table.lookup(name),
    }
}

/// Routes `target` by the generation in force and dials it along that route, within the connect
/// timeout: directly, or a channel from the jump host chain's last hop. For kharond's own
/// requests (`Test`, `FetchObject`).
pub async fn routed(
    routes: &InForce,
    target: &Target,
    timeout: Duration,
) -> Result<(Route, Upstream), Failed> {
    Routed::by(routes, target).dial(target, Client::Daemon, timeout).await
}

/// Dials `target` along `route` through `pool`, within `timeout`, for `client`.
async fn along(
    pool: &ssh::Pool,
    route: &Route,
    target: &Target,
    client: Client,
    timeout: Duration,
) -> Result<Upstream, Error> {
    match route {
        Route::Direct => direct(target, timeout, client).await,
        Route::Jumphost(jumphost) => {
            let patience = match client {
                Client::Local | Client::Remote => ssh::Patience::Wait,
                Client::Daemon => ssh::Patience::Report,
            };
            via_jumphost(pool, jumphost, target, patience).await
        }
    }
}

/// Resolves the target here and connects to the first address that answers, all within `timeout`;
/// for a [`Client::Remote`], never to a loopback address (module doc).
pub async fn direct(target: &Target, timeout: Duration, client: Client) -> Result<Upstream, Error> {
    // Config bounds the timeout; an unrepresentable deadline still must not panic a connection.
    let now = tokio::time::Instant::now();
    let deadline = now.checked_add(timeout).unwrap_or_else(|| now + FAR_FUTURE);
    let addrs: Vec<SocketAddr> = match target {
        Target::Ip(addr) => vec![*addr],
        Target::Name(host, port) => {
            let lookup = tokio::net::lookup_host((host.as_str(), *port));
            match tokio::time::timeout_at(deadline, lookup).await {
                Err(_) => return Err(Error::Timeout { addr: target.to_string(), timeout }),
                Ok(Err(source)) => return Err(Error::Resolve { host: host.clone(), source }),
                Ok(Ok(addrs)) => addrs.collect(),
            }
        }
    };
    let addrs = match client {
        Client::Local | Client::Daemon => addrs,
        Client::Remote => {
            let reachable: Vec<SocketAddr> = addrs.iter().filter(|a| !local_only(a)).copied().collect();
            if reachable.is_empty() && !addrs.is_empty() {
                return Err(Error::Loopback { target: target.to_string() });
            }
            reachable
        }
    };
    let mut last = None;
    for addr in addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => return Err(Error::Timeout { addr: target.to_string(), timeout }),
            Ok(Ok(stream)) => {
                // Interactive protocols (kubectl exec, TLS handshakes) suffer from Nagle + delayed ACK.
                let _ = stream.set_nodelay(true);
                return Ok(Upstream::Tcp(stream));
            }
            Ok(Err(source)) => last = Some(Error::Connect { addr, source }),
        }
    }
    Err(last.unwrap_or(Error::NoAddress { host: target.host() }))
}

/// Opens a channel through `jumphost`'s chain; the last hop resolves the name. The engine bounds
/// it by the connect timeout (the same setting `timeout` comes from), and with
/// [`ssh::Patience::Wait`] by the time a person has to answer a hop's question: a bound here
/// would cut that wait short.
pub async fn via_jumphost(
    pool: &ssh::Pool,
    jumphost: &str,
    target: &Target,
    patience: ssh::Patience,
) -> Result<Upstream, Error> {
    let host = target.host();
    match pool.connect(jumphost, &host, target.port(), patience).await {
        Err(source) => Err(Error::Jumphost(source)),
        Ok(tunnel) => Ok(Upstream::Tunnel(tunnel)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_table_and_addresses_go_direct() {
        let cluster: kharon_routing::inventory::Cluster = serde_json::from_str(
            r#"{"id": "c-a", "facts": {"jumphost": "jump-a", "jumphostDomains": "a.example"}}"#,
        )
        .unwrap();
        let table = RoutingTable::compile(&[cluster]);
        let routed = route_of(&table, &Target::Name("api.a.example".into(), 443));
        assert_eq!(routed, Route::Jumphost("jump-a".into()));
        assert_eq!(route_of(&table, &Target::Name("example.org".into(), 443)), Route::Direct);
        // Even an address inside a routed range: the client resolved it, there is no name to route.
        assert_eq!(route_of(&table, &Target::Ip("10.0.0.1:443".parse().unwrap())), Route::Direct);
    }

    #[tokio::test]
    async fn a_timeout_too_large_for_a_deadline_still_connects() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let target = Target::Ip(listener.local_addr().unwrap());
        assert!(direct(&target, Duration::MAX, Client::Local).await.is_ok());
    }

    #[tokio::test]
    async fn a_remote_client_never_reaches_loopback() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let timeout = Duration::from_secs(5);
        for target in [
            Target::Ip(listener.local_addr().unwrap()),
            Target::Name("localhost".into(), port),
            Target::Ip(SocketAddr::from(([0, 0, 0, 0], port))),
            Target::Ip(SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped().into(), port)),
            Target::Ip(SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, port))),
        ] {
            let Err(e) = direct(&target, timeout, Client::Remote).await else { panic!("{target} reached") };
            assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{target}: {e}");
            assert!(e.to_string().contains("may not reach it through kharond"), "{e}");
        }
        assert!(direct(&Target::Name("localhost".into(), port), timeout, Client::Local).await.is_ok());
        assert_eq!(Client::of("127.0.0.5:1".parse().unwrap()), Client::Local);
        assert_eq!(Client::of("[::ffff:127.0.0.1]:1".parse().unwrap()), Client::Local);
        assert_eq!(Client::of("[::1]:1".parse().unwrap()), Client::Local);
        assert_eq!(Client::of("10.0.0.1:1".parse().unwrap()), Client::Remote);
    }
}
