//! The rules both platforms' lookups share, pure: which client a TCP socket is the client end of,
//! and what a process's program is called.

use std::net::SocketAddr;

/// A process holding a client socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// The program as it was started: the file name of its `argv[0]` ("kubectl", even when that
    /// is a link to `kubectl.1.30`, which is what `ps` and `ss -p` would show), else its command
    /// name (Linux `/proc/PID/comm`, macOS `proc_name`).
    pub program: String,
}

/// A TCP socket's two ends as the kernel lists them for the process holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ends {
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// Which of `clients` (the peer addresses kharond's accepted sockets saw) the socket with `ends`
/// is the client end of: its local end is that client's address and its remote end is our
/// listener (`listen`, whose unspecified address stands for every local address). Addresses are
/// compared without their IPv4-mapped spelling (a listener on `[::]` sees `::ffff:127.0.0.1`
/// where the client's socket says `127.0.0.1`). The client comes back as the caller spelled it.
///
/// kharond's own accepted socket never matches: its local end is the listener's port, which no
/// client's address has (a client port equal to the listener's would need the same address too,
/// and that address is taken by the listener).
pub fn client_of(ends: Ends, clients: &[SocketAddr], listen: SocketAddr) -> Option<SocketAddr> {
    let remote = canonical(ends.remote);
    let to_listener = remote.port() == listen.port()
        && (listen.ip().is_unspecified() || remote.ip() == listen.ip().to_canonical());
    if !to_listener {
        return None;
    }
    let local = canonical(ends.local);
    clients.iter().copied().find(|c| canonical(*c) == local)
}

fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// The file name of `argv0`, as `ps` shows a program; `None` when there is none (an empty
/// `argv[0]`, or one ending in `/`).
pub fn program_name(argv0: &[u8]) -> Option<String> {
    let name = argv0.rsplit(|&b| b == b'/').next().unwrap_or_default();
    (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_client_end_is_the_socket_from_a_client_address_to_the_listener() {
        let listen = addr("127.0.0.1:12000");
        let clients = [addr("127.0.0.1:50001"), addr("127.0.0.1:50002")];
        let ends = Ends { local: addr("127.0.0.1:50002"), remote: addr("127.0.0.1:12000") };
        assert_eq!(client_of(ends, &clients, listen), Some(clients[1]));
        // kharond's own accepted socket: the same connection seen from the other side.
        let ours = Ends { local: addr("127.0.0.1:12000"), remote: addr("127.0.0.1:50002") };
        assert_eq!(client_of(ours, &clients, listen), None);
        // Another connection of that process, to another port or another address.
        let elsewhere = Ends { local: addr("127.0.0.1:50002"), remote: addr("127.0.0.1:443") };
        assert_eq!(client_of(elsewhere, &clients, listen), None);
        let other_host = Ends { local: addr("127.0.0.1:50002"), remote: addr("127.0.0.2:12000") };
        assert_eq!(client_of(other_host, &clients, listen), None);
        // A client kharond does not list.
        let stranger = Ends { local: addr("127.0.0.1:50003"), remote: addr("127.0.0.1:12000") };
        assert_eq!(client_of(stranger, &clients, listen), None);
    }

    #[test]
    fn mapped_and_plain_spellings_match_and_an_unspecified_listener_takes_any_address() {
        // A dual-stack listener on [::]: kharond saw the mapped spelling, the client's socket
        // (an IPv4 one) lists the plain address.
        let listen = addr("[::]:12000");
        let mapped = addr("[::ffff:127.0.0.1]:50001");
        let ends = Ends { local: addr("127.0.0.1:50001"), remote: addr("127.0.0.1:12000") };
        assert_eq!(client_of(ends, &[mapped], listen), Some(mapped));
        let v6 = Ends { local: addr("[::1]:50004"), remote: addr("[::1]:12000") };
        assert_eq!(client_of(v6, &[addr("[::1]:50004")], listen), Some(addr("[::1]:50004")));
        // A listener on 127.0.0.1 reached through a dual-stack client socket.
        let listen = addr("127.0.0.1:12000");
        let dual = Ends { local: addr("[::ffff:127.0.0.1]:50005"), remote: addr("[::ffff:127.0.0.1]:12000") };
        assert_eq!(client_of(dual, &[addr("127.0.0.1:50005")], listen), Some(addr("127.0.0.1:50005")));
    }

    #[test]
    fn program_is_the_file_name_of_argv0() {
        assert_eq!(program_name(b"/usr/local/bin/kubectl").as_deref(), Some("kubectl"));
        assert_eq!(program_name(b"curl").as_deref(), Some("curl"));
        assert_eq!(program_name(b""), None);
        assert_eq!(program_name(b"/odd/"), None);
    }
}
