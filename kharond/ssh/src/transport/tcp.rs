//! The first hop's TCP connection, made as ssh(1) makes it (sshconnect.c `ssh_connect_direct`
//! and `ssh_create_socket`): the host name resolved for the hop's `AddressFamily` only, each
//! address tried in turn, from the source address `BindAddress` or `BindInterface` names.
//!
//! Knows nothing of SSH: `chain` hands the stream to russh. ProxyCommand and later hops never
//! come here (ssh ignores these options for them too).

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::net::{TcpSocket, TcpStream};

use kharon_ssh_config::{AddressFamily, Bind, Hop};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot resolve {host}{}: {why}", family_note(*family))]
    Resolve { host: String, family: AddressFamily, why: String },
    #[error("cannot connect{}", from_note(bind))]
    Connect { bind: Option<String>, source: std::io::Error },
    #[error("{bind} ({origin}): {why}")]
    Source { bind: String, origin: String, why: String },
}

fn family_note(family: AddressFamily) -> String {
    match family {
        AddressFamily::Any => String::new(),
        other => format!(" (AddressFamily {})", other.name()),
    }
}

fn from_note(bind: &Option<String>) -> String {
    bind.as_ref().map(|b| format!(" from {b}")).unwrap_or_default()
}

/// Keeps the kernel from holding more than `lowat` bytes of `stream` that it has not sent yet
/// (`TCP_NOTSENT_LOWAT`, tcp(7); on macOS the same option of xnu's bsd/netinet/tcp.h): the socket
/// takes more only once its unsent bytes fall below it. Without it the kernel takes up to
/// `tcp_wmem`'s maximum (4 MiB on a usual Linux, 640 ms at 50 Mbit/s) of a bulk upload, in front
/// of every other channel's bytes; with it they wait in the session's writer, which serves the
/// channels in turn (sessions/uplink.rs). Bytes sent and not yet acknowledged are not counted, so
/// a fast path stays full. A failure is logged and costs only that fairness.
pub(crate) fn keep_unsent_small(stream: &TcpStream, lowat: u32) {
    #[cfg(target_os = "linux")]
    let set = socket2::SockRef::from(stream).set_tcp_notsent_lowat(lowat);
    #[cfg(target_os = "macos")]
    let set = macos::set_notsent_lowat(stream, lowat);
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    let set: std::io::Result<()> = {
        let _ = (stream, lowat);
        Ok(())
    };
    if let Err(e) = set {
        tracing::debug!(error = %e, "TCP_NOTSENT_LOWAT not set on the first hop's socket");
    }
}

#[cfg(target_os = "macos")]
mod macos {
    use std::os::fd::AsRawFd;

    /// `TCP_NOTSENT_LOWAT` in xnu's bsd/netinet/tcp.h (the libc crate does not define it for
    /// Apple's platforms).
    const TCP_NOTSENT_LOWAT: libc::c_int = 0x201;

    pub(super) fn set_notsent_lowat(stream: &tokio::net::TcpStream, lowat: u32) -> std::io::Result<()> {
        let value = libc::c_int::try_from(lowat).unwrap_or(libc::c_int::MAX);
        // SAFETY: setsockopt reads one c_int we own, of the size given, on a socket we own.
        let status = unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                TCP_NOTSENT_LOWAT,
                (&raw const value).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if status == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    }
}

/// Connects to the first hop; also returns how long the successful connect took (one round
/// trip). Unbounded: the caller times the whole hop.
pub async fn connect(hop: &Hop) -> Result<(TcpStream, Duration), Error> {
    let family = hop.address_family;
    let addrs = resolve(&hop.host_name, hop.port, family).await?;
    let mut last = None;
    for addr in addrs {
        let socket = match socket_for(hop, &addr) {
            Ok(s) => s,
            Err(e) => {
                // ssh skips an address it cannot make a socket for, and says why at the end.
                last = Some(e);
                continue;
            }
        };
        let started = Instant::now();
        match socket.connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok((s, started.elapsed()));
            }
            Err(source) => {
                last = Some(Error::Connect { bind: hop.bind.as_ref().map(|(b, _)| b.to_string()), source })
            }
        }
    }
    Err(last.unwrap_or_else(|| Error::Resolve {
        host: hop.host_name.clone(),
        family,
        why: "no address".to_owned(),
    }))
}

/// getaddrinfo(3) with ssh's hints: the family, stream sockets.
async fn resolve(host: &str, port: u16, family: AddressFamily) -> Result<Vec<SocketAddr>, Error> {
    let name = host.to_owned();
    let looked_up = tokio::task::spawn_blocking(move || {
        let hints = dns_lookup::AddrInfoHints {
            socktype: libc::SOCK_STREAM,
            address: family.libc(),
            ..dns_lookup::AddrInfoHints::default()
        };
        dns_lookup::getaddrinfo(Some(&name), Some(&port.to_string()), Some(hints))
            .map_err(|e| std::io::Error::from(e).to_string())
            .map(|found| found.filter_map(Result::ok).map(|a| a.sockaddr).collect::<Vec<_>>())
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|r| r);
    let resolve = |why| Error::Resolve { host: host.to_owned(), family, why };
    // getaddrinfo was given the family: what it returns is of that family.
    let addrs: Vec<SocketAddr> = looked_up.map_err(resolve)?;
    if addrs.is_empty() {
        return Err(resolve("no address".to_owned()));
    }
    Ok(addrs)
}

/// A socket for `target`, bound to the hop's source address if it names one.
fn socket_for(hop: &Hop, target: &SocketAddr) -> Result<TcpSocket, Error> {
    let socket = if target.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() };
    let socket = socket.map_err(|source| Error::Connect { bind: None, source })?;
    let Some((bind, origin)) = &hop.bind else { return Ok(socket) };
    let failed = |why: String| Error::Source { bind: bind.to_string(), origin: origin.to_string(), why };
    let source = source_address(bind, target).map_err(failed)?;
    socket
        .bind(SocketAddr::new(source, 0))
        .map_err(|e| failed(format!("cannot use {source} as the source address: {e}")))?;
    Ok(socket)
}

/// The address `bind` names for a connection to `target`, of `target`'s family.
fn source_address(bind: &Bind, target: &SocketAddr) -> Result<IpAddr, String> {
    let family = if target.is_ipv4() { "IPv4" } else { "IPv6" };
    let same_family = |ip: &IpAddr| ip.is_ipv4() == target.is_ipv4();
    match bind {
        Bind::Address(address) => {
            // An address or a name, looked up in the target's family (AI_PASSIVE), as ssh does.
            let hints = dns_lookup::AddrInfoHints {
                flags: libc::AI_PASSIVE,
                address: if target.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 },
                socktype: libc::SOCK_STREAM,
                ..dns_lookup::AddrInfoHints::default()
            };
            let found = dns_lookup::getaddrinfo(Some(address), None, Some(hints))
                .map_err(|e| format!("no {family} address: {}", std::io::Error::from(e)))?;
            found
                .filter_map(Result::ok)
                .map(|a| a.sockaddr.ip())
                .find(same_family)
                .ok_or_else(|| format!("no {family} address"))
        }
        Bind::Interface(name) => {
            // ssh's check_ifaddrs: loopback (and IPv6 link-local) addresses only for a target
            // on this machine.
            let local = target.ip().is_loopback();
            let usable = |ip: &IpAddr| match ip {
                IpAddr::V4(v4) => local || !v4.is_loopback(),
                IpAddr::V6(v6) => local || !(v6.is_loopback() || v6.is_unicast_link_local()),
            };
            let interfaces =
                nix::ifaddrs::getifaddrs().map_err(|e| format!("cannot list interfaces: {e}"))?;
            let mut seen = false;
            for interface in interfaces.filter(|i| i.interface_name == *name) {
                seen = true;
                let Some(address) = interface.address else { continue };
                let ip = match (address.as_sockaddr_in(), address.as_sockaddr_in6()) {
                    (Some(v4), _) => IpAddr::V4(v4.ip()),
                    (_, Some(v6)) => IpAddr::V6(v6.ip()),
                    _ => continue,
                };
                if same_family(&ip) && usable(&ip) {
                    return Ok(ip);
                }
            }
            let name = name.escape_debug();
            Err(if seen {
                format!("interface {name} has no usable {family} address")
            } else {
                format!("there is no interface {name}")
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn to(ip: IpAddr) -> SocketAddr {
        SocketAddr::new(ip, 22)
    }

    const V4: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
    const V6: IpAddr = IpAddr::V6(Ipv6Addr::LOCALHOST);

    #[test]
    fn bind_address_is_taken_in_the_targets_family() {
        let bind = Bind::Address("127.0.0.2".into());
        assert_eq!(source_address(&bind, &to(V4)), Ok("127.0.0.2".parse().unwrap()));
        assert!(source_address(&bind, &to(V6)).unwrap_err().starts_with("no IPv6 address"));
        let name = Bind::Address("localhost".into());
        assert!(source_address(&name, &to(V4)).unwrap().is_loopback(), "names are looked up");
    }

    #[test]
    fn bind_interface_takes_its_address_of_the_targets_family() {
        let lo = Bind::Interface("lo".into());
        assert_eq!(source_address(&lo, &to(V4)), Ok(V4), "loopback for a loopback target");
        let err = source_address(&lo, &to("192.0.2.1".parse().unwrap())).unwrap_err();
        assert_eq!(err, "interface lo has no usable IPv4 address", "not for a remote one, as ssh");
        let none = Bind::Interface("nope0".into());
        assert_eq!(source_address(&none, &to(V4)).unwrap_err(), "there is no interface nope0");
        // A name from ssh_config reaches logs and `status` without its control characters.
        let hostile = Bind::Interface("x\u{1b}[2J".into());
        assert_eq!(source_address(&hostile, &to(V4)).unwrap_err(), "there is no interface x\\u{1b}[2J");
        assert_eq!(hostile.to_string(), "BindInterface x\\u{1b}[2J");
    }

    #[tokio::test]
    async fn address_family_filters_what_is_dialled() {
        assert_eq!(resolve("127.0.0.1", 22, AddressFamily::Inet).await.unwrap(), vec![to(V4)]);
        let err = resolve("127.0.0.1", 22, AddressFamily::Inet6).await.unwrap_err().to_string();
        assert!(err.starts_with("cannot resolve 127.0.0.1 (AddressFamily inet6): "), "{err}");
    }
}
