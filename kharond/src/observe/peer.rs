//! Which local process holds a client's socket, for `kharonctl connections`.
//!
//! On Linux: the client's socket is the one in /proc/net/tcp (or tcp6) whose local end is the
//! client's address and whose remote end is our listener's port; its process is the one with that
//! socket's inode among its descriptors (/proc/PID/fd, readable for our own user's processes, all
//! of them for root). Elsewhere, or when the socket or the process cannot be seen (another user's,
//! another network namespace, a client on another machine), nothing is known.
//!
//! Only run when someone lists the connections, never on the connection path, and off the async
//! threads: it reads /proc.

use std::collections::HashMap;
use std::net::SocketAddr;

/// A process holding a client socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// The program as it was started: the file name of its `argv[0]` ("kubectl", even when that
    /// is a link to `kubectl.1.30`, which is what `ps` and `ss -p` would show), else its command
    /// name (`/proc/PID/comm`).
    pub program: String,
}

/// The processes holding the client ends of `clients`, connected to our listener on
/// `listen_port`; clients whose process cannot be found are left out.
#[cfg(target_os = "linux")]
pub fn find(clients: &[SocketAddr], listen_port: u16) -> HashMap<SocketAddr, Process> {
    use procfs::process::FDTarget;

    let canonical = |a: SocketAddr| SocketAddr::new(a.ip().to_canonical(), a.port());
    let wanted: Vec<SocketAddr> = clients.iter().copied().map(canonical).collect();
    let mut by_inode: HashMap<u64, SocketAddr> = HashMap::new();
    let tables = [procfs::net::tcp(), procfs::net::tcp6()];
    for entry in tables.into_iter().flatten().flatten() {
        let local = canonical(entry.local_address);
        if entry.remote_address.port() == listen_port && entry.inode != 0 && wanted.contains(&local) {
            by_inode.insert(entry.inode, local);
        }
    }
    let mut found = HashMap::new();
    if by_inode.is_empty() {
        return found;
    }
    let Ok(processes) = procfs::process::all_processes() else { return found };
    for process in processes.flatten() {
        // Processes come and go while we look; one that went away is simply not found.
        let Ok(fds) = process.fd() else { continue };
        for fd in fds.flatten() {
            let FDTarget::Socket(inode) = fd.target else { continue };
            let Some(client) = by_inode.remove(&inode) else { continue };
            let program = program_name(&process);
            let pid = u32::try_from(process.pid).unwrap_or(0);
            found.insert(client, Process { pid, program });
        }
        if by_inode.is_empty() {
            break;
        }
    }
    // Callers look up the addresses as they gave them.
    clients.iter().filter_map(|c| found.get(&canonical(*c)).map(|p| (*c, p.clone()))).collect()
}

/// See [`Process::program`].
#[cfg(target_os = "linux")]
fn program_name(process: &procfs::process::Process) -> String {
    let argv0 = process.cmdline().ok().and_then(|argv| argv.into_iter().next()).unwrap_or_default();
    let name = argv0.rsplit('/').next().unwrap_or_default();
    if !name.is_empty() {
        return name.to_owned();
    }
    process.stat().map(|s| s.comm).unwrap_or_else(|_| "unknown".to_owned())
}

#[cfg(not(target_os = "linux"))]
pub fn find(_clients: &[SocketAddr], _listen_port: u16) -> HashMap<SocketAddr, Process> {
    HashMap::new()
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_holding_a_client_socket_is_found_and_a_stranger_is_not() {
        use super::*;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        // An address no socket has.
        let stranger: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let found = find(&[peer, stranger], port);
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
        assert_eq!(find(&[mapped], port).get(&mapped).map(|p| p.pid), Some(std::process::id()));
    }
}
