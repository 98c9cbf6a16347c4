//! Socket activation: listeners handed to us by systemd (`LISTEN_FDS`, sd_listen_fds(3)) or any
//! manager that speaks the same protocol. kharonctl's socket units name them `socks` and
//! `control`; unnamed descriptors are told apart by their address family, so a hand-written unit
//! works too.

use std::os::fd::{FromRawFd, RawFd};

#[derive(Debug, Default)]
pub struct Activated {
    pub socks: Option<std::net::TcpListener>,
    pub control: Option<std::os::unix::net::UnixListener>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("socket activation: {0}")]
    Env(std::io::Error),
    #[error("socket activation: descriptor {fd} ({name}) is neither a TCP nor a Unix listener")]
    Unknown { fd: RawFd, name: String },
    #[error("socket activation: more than one {0} listener was passed")]
    Duplicate(&'static str),
}

fn family(fd: RawFd) -> Option<libc::sa_family_t> {
    // SAFETY: getsockname writes at most `len` bytes into the zeroed storage we own.
    unsafe {
        let mut addr: libc::sockaddr_storage = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        (libc::getsockname(fd, (&raw mut addr).cast(), &mut len) == 0).then_some(addr.ss_family)
    }
}

/// Takes the descriptors passed to this process, if any. Call once, early in `main`.
pub fn take() -> Result<Activated, Error> {
    let mut activated = Activated::default();
    for (fd, name) in sd_notify::listen_fds_with_names().map_err(Error::Env)? {
        let family = family(fd).map(i32::from);
        let is_unix = name == "control" || family == Some(libc::AF_UNIX);
        let is_inet = name == "socks" || matches!(family, Some(libc::AF_INET | libc::AF_INET6));
        if is_unix && name != "socks" {
            if activated.control.is_some() {
                return Err(Error::Duplicate("control"));
            }
            // SAFETY: the manager passed this descriptor to us to own; nothing else uses it.
            let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
            listener.set_nonblocking(true).map_err(Error::Env)?;
            activated.control = Some(listener);
        } else if is_inet {
            if activated.socks.is_some() {
                return Err(Error::Duplicate("socks"));
            }
            // SAFETY: as above.
            let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
            listener.set_nonblocking(true).map_err(Error::Env)?;
            activated.socks = Some(listener);
        } else {
            return Err(Error::Unknown { fd, name });
        }
    }
    Ok(activated)
}
