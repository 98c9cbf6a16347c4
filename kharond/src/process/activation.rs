//! Socket activation: listeners handed to us by systemd (`LISTEN_FDS`, sd_listen_fds(3)) or any
//! manager that speaks the same protocol. kharonctl's socket units name them `socks` and
//! `control`; unnamed descriptors are told apart by their address family, so a hand-written unit
//! works too.
//!
//! A descriptor is used only if it is what its role needs: a listening stream socket, TCP for
//! `socks` and Unix for `control`. A name that contradicts the family (a TCP socket named
//! `control`) is an error rather than a guess, since the control API trusts the peer credentials
//! only a Unix socket carries. Whether the SOCKS address may be served without a password is
//! decided by the caller with the same rule as `--listen`.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{self, AddressFamily, SockType, SockaddrLike, SockaddrStorage, sockopt};

#[derive(Debug, Default)]
pub struct Activated {
    pub socks: Option<std::net::TcpListener>,
    pub control: Option<std::os::unix::net::UnixListener>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("socket activation: {0}")]
    Env(std::io::Error),
    #[error(
        "socket activation: descriptor {fd} ({name}) is neither a TCP nor a Unix socket; \
         the socket unit must use ListenStream= with an IP:PORT (socks) or a path (control)"
    )]
    Unknown { fd: RawFd, name: String },
    #[error(
        "socket activation: descriptor {fd} is named {name:?} but is a {found} socket; \
         `socks` must be a TCP address (ListenStream=127.0.0.1:12000) and `control` a Unix socket \
         path (ListenStream=%t/kharon/kharond.sock)"
    )]
    WrongFamily { fd: RawFd, name: String, found: &'static str },
    #[error(
        "socket activation: descriptor {fd} ({name}) is not a listening stream socket; \
         the socket unit must use ListenStream= and Accept=no"
    )]
    NotListening { fd: RawFd, name: String },
    #[error("socket activation: more than one {0} listener was passed")]
    Duplicate(&'static str),
}

/// The address family of the socket `fd`; `None` when `fd` is no open socket.
fn family(fd: RawFd) -> Option<AddressFamily> {
    socket::getsockname::<SockaddrStorage>(fd).ok()?.family()
}

/// A stream socket that listen(2) was called on: what accept needs. A connected socket from
/// `Accept=yes` or a datagram socket would make every accept fail.
fn is_stream_listener(fd: BorrowedFd<'_>) -> bool {
    socket::getsockopt(&fd, sockopt::SockType) == Ok(SockType::Stream)
        && socket::getsockopt(&fd, sockopt::AcceptConn) == Ok(true)
}

enum Role {
    Socks,
    Control,
}

/// What `fd` is for: its family decides, and a name must agree with it.
fn role(fd: BorrowedFd<'_>, name: &str) -> Result<Role, Error> {
    let raw = fd.as_raw_fd();
    let (role, found) = match family(raw) {
        Some(AddressFamily::Unix) => (Role::Control, "Unix"),
        Some(AddressFamily::Inet | AddressFamily::Inet6) => (Role::Socks, "TCP/IP"),
        _ => return Err(Error::Unknown { fd: raw, name: name.to_owned() }),
    };
    let agrees = match (name, &role) {
        ("socks", Role::Socks) | ("control", Role::Control) => true,
        ("socks" | "control", _) => false,
        // Unnamed ("unknown") or named otherwise: the family alone decides.
        _ => true,
    };
    if !agrees {
        return Err(Error::WrongFamily { fd: raw, name: name.to_owned(), found });
    }
    if !is_stream_listener(fd) {
        return Err(Error::NotListening { fd: raw, name: name.to_owned() });
    }
    Ok(role)
}

/// Takes the descriptors passed to this process, if any. Call once, early in `main`.
pub fn take() -> Result<Activated, Error> {
    let mut activated = Activated::default();
    for (fd, name) in sd_notify::listen_fds_with_names().map_err(Error::Env)? {
        // A number that is no open socket is refused before anything owns it (closing it would
        // close what is not ours, or nothing).
        if family(fd).is_none() {
            return Err(Error::Unknown { fd, name });
        }
        // SAFETY: sd_listen_fds(3): the descriptors LISTEN_FDS counts from 3 are passed to this
        // process to own. sd_notify yields each number once and `take` runs once, so this is
        // the descriptor's only owner; getsockname has just answered for it, so it is open.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        match role(fd.as_fd(), &name)? {
            Role::Control => {
                if activated.control.is_some() {
                    return Err(Error::Duplicate("control"));
                }
                let listener = std::os::unix::net::UnixListener::from(fd);
                listener.set_nonblocking(true).map_err(Error::Env)?;
                activated.control = Some(listener);
            }
            Role::Socks => {
                if activated.socks.is_some() {
                    return Err(Error::Duplicate("socks"));
                }
                let listener = std::net::TcpListener::from(fd);
                listener.set_nonblocking(true).map_err(Error::Env)?;
                activated.socks = Some(listener);
            }
        }
    }
    Ok(activated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcp_socket_named_control_is_refused() {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let err = role(tcp.as_fd(), "control").err().expect("refused").to_string();
        assert!(err.contains("named \"control\" but is a TCP/IP socket"), "{err}");
        assert!(matches!(role(tcp.as_fd(), "socks"), Ok(Role::Socks)));
        assert!(matches!(role(tcp.as_fd(), "unknown"), Ok(Role::Socks)));
    }

    #[test]
    fn a_unix_socket_named_socks_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let unix = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
        let err = role(unix.as_fd(), "socks").err().expect("refused").to_string();
        assert!(err.contains("named \"socks\" but is a Unix socket"), "{err}");
        assert!(matches!(role(unix.as_fd(), "control"), Ok(Role::Control)));
    }

    #[test]
    fn a_connected_or_datagram_socket_is_not_a_listener() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let connected = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let err = role(connected.as_fd(), "socks").err().expect("refused").to_string();
        assert!(err.contains("Accept=no"), "{err}");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(matches!(role(udp.as_fd(), "socks"), Err(Error::NotListening { .. })));
        let file = tempfile::tempfile().unwrap();
        assert!(matches!(role(file.as_fd(), "socks"), Err(Error::Unknown { .. })));
    }
}
