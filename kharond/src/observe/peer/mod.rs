//! Which local process holds a client's socket, for `kharonctl connections`.
//!
//! The client's socket is the one whose local end is the client's address and whose remote end is
//! our listener (`matching::client_of`, the same rule on every platform); its process is the one
//! holding it. Linux reads /proc (`linux.rs`); macOS asks libproc (`macos.rs`, reading records laid
//! out in `proc_info.rs`). Elsewhere, or when the socket or the process cannot be seen (another
//! user's, another network namespace, a client on another machine), nothing is known.
//!
//! Only run when someone lists the connections, never on the connection path, and off the async
//! threads: it reads /proc or walks every process.
//!
//! # What macOS shows of a client's owner (for the owner-only check of password-less kharond)
//! Linux answers "who owns the socket with this 4-tuple" in one sock_diag request. macOS has no such
//! query; `macos::holder` walks the processes instead and returns the socket's owner uid
//! (the uid of the credential that created it, as sock_diag reports) and the pid holding it. It can
//! see only processes kharond may inspect: those of its own user, all of them as root. For an
//! owner-only check that is enough in one direction: found means "ours", proven. Not found means
//! only "not provably ours" (another user's process, a process that closed the socket meanwhile,
//! a client on another machine), which such a check refuses anyway. It costs a few system calls per
//! process and per socket each holds, on every call (milliseconds on a desktop, not measured on a
//! Mac); the one-call alternative, the `net.inet.tcp.pcblist_n` sysctl `netstat` reads, returns
//! records Apple keeps out of the public SDK, so it is not used.
//!
//! Owns: those lookups. Must not know: the connections themselves (the registry) or who asks.

#[cfg(target_os = "linux")]
mod linux;
/// Public for the owner-only check's seam: `macos::holder`.
#[cfg(target_os = "macos")]
pub mod macos;
mod matching;
#[cfg(any(target_os = "macos", test))]
mod proc_info;

use std::collections::HashMap;
use std::net::SocketAddr;

pub use matching::Process;

/// The processes holding the client ends of `clients`, connected to our listener at `listen`;
/// clients whose process cannot be found are left out. Keys are the addresses as given.
pub fn find(clients: &[SocketAddr], listen: SocketAddr) -> HashMap<SocketAddr, Process> {
    #[cfg(target_os = "linux")]
    {
        linux::find(clients, listen)
    }
    #[cfg(target_os = "macos")]
    {
        macos::find(clients, listen)
    }
    #[cfg(not(any(target_os = "linux", target_os = "macos")))]
    {
        let _ = (clients, listen);
        HashMap::new()
    }
}

#[cfg(test)]
mod tests {
    #[cfg(any(target_os = "linux", target_os = "macos"))]
    #[test]
    fn the_process_holding_a_client_socket_is_found_and_a_stranger_is_not() {
        use super::*;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let listen = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(listen).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // An address no socket has.
        let stranger: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let found = find(&[peer, stranger], listen);
        let me = found.get(&peer).expect("our own client socket");
        assert_eq!(me.pid, std::process::id());
        // As started: this test binary's argv[0], without its directory.
        let argv0 = std::env::args().next().unwrap();
        assert_eq!(me.program, argv0.rsplit('/').next().unwrap());
        assert!(!found.contains_key(&stranger));
        // A v4-mapped spelling of the same address (a listener on [::]) finds it too.
        let mapped = SocketAddr::new(
            std::net::IpAddr::V6(std::net::Ipv4Addr::LOCALHOST.to_ipv6_mapped()),
            peer.port(),
        );
        assert_eq!(find(&[mapped], listen).get(&mapped).map(|p| p.pid), Some(std::process::id()));
        // Our listener is on 127.0.0.1: a socket to the same port elsewhere is not its client.
        let elsewhere = SocketAddr::new("127.0.0.2".parse().unwrap(), listen.port());
        assert!(find(&[peer], elsewhere).is_empty());
    }
}
