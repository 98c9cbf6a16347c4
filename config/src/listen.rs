//! A `listen` value: `IP:PORT` as it is, or `NAME:PORT` resolved to the one address to listen on
//! ([`ListenName`]).

use std::net::{SocketAddr, ToSocketAddrs};

use crate::error::Error;
use crate::source::Source;

/// A listen value written as `NAME:PORT` (e.g. `localhost:12000`) and what the name resolved to
/// when the settings were loaded.
///
/// Only one address is listened on (kharond has one SOCKS listener, and `Status`, the PAC and
/// kubeconfigs name one address): the first IPv4 address, else the first. IPv4 first because the
/// default, the docs and kubeconfigs say 127.0.0.1, and because `localhost` is often listed as
/// `::1` too on machines where IPv6 is off; clients that resolve the name themselves (curl, Go,
/// Java, browsers) try each of its addresses, so they reach the one we picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenName {
    /// The value as written, `NAME:PORT`.
    pub name: String,
    /// Every address the name resolved to, in the resolver's order.
    pub resolved: Vec<SocketAddr>,
}

/// Resolves a host name and port to addresses; [`resolve_system`] outside tests.
pub(crate) type Resolver = dyn Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>;

/// The system resolver (getaddrinfo: /etc/hosts, then DNS).
pub(crate) fn resolve_system(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// A `listen` value: `IP:PORT` as it is, or `NAME:PORT` resolved with `resolve` to the address to
/// listen on (see [`ListenName`] for which one) plus what the name resolved to.
pub(crate) fn parse_listen(
    value: &str,
    origin: &Source,
    resolve: &Resolver,
) -> Result<(SocketAddr, Option<ListenName>), Error> {
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok((addr, None));
    }
    let bad = || Error::BadAddress { setting: "listen", origin: origin.clone(), value: value.to_owned() };
    let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    // A bare IPv6 address without brackets, or `:PORT` alone, is not a name.
    if host.is_empty() || host.contains(':') || host.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let unresolvable = |reason: String| Error::Unresolvable {
        setting: "listen",
        origin: origin.clone(),
        value: value.to_owned(),
        reason,
    };
    let resolved = resolve(host, port).map_err(|e| unresolvable(e.to_string()))?;
    let chosen = resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| resolved.first())
        .copied()
        .ok_or_else(|| unresolvable("it has no address".to_owned()))?;
    Ok((chosen, Some(ListenName { name: value.to_owned(), resolved })))
}
