//! Linux: the client's socket is the one in /proc/net/tcp (or tcp6) that [`client_of`] picks; its
//! process is the one with that socket's inode among its descriptors (/proc/PID/fd, readable for
//! our own user's processes, all of them for root).

use std::collections::HashMap;
use std::net::SocketAddr;

use procfs::process::FDTarget;

use super::matching::{Ends, Process, client_of, program_name};

/// See [`super::find`].
pub fn find(clients: &[SocketAddr], listen: SocketAddr) -> HashMap<SocketAddr, Process> {
    let mut by_inode: HashMap<u64, SocketAddr> = HashMap::new();
    let tables = [procfs::net::tcp(), procfs::net::tcp6()];
    for entry in tables.into_iter().flatten().flatten() {
        let ends = Ends { local: entry.local_address, remote: entry.remote_address };
        if entry.inode == 0 {
            continue;
        }
        if let Some(client) = client_of(ends, clients, listen) {
            by_inode.insert(entry.inode, client);
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
            let pid = u32::try_from(process.pid).unwrap_or(0);
            found.insert(client, Process { pid, program: program(&process) });
        }
        if by_inode.is_empty() {
            break;
        }
    }
    found
}

/// See [`Process::program`].
fn program(process: &procfs::process::Process) -> String {
    let argv0 = process.cmdline().ok().and_then(|argv| argv.into_iter().next()).unwrap_or_default();
    program_name(argv0.as_bytes())
        .unwrap_or_else(|| process.stat().map(|s| s.comm).unwrap_or_else(|_| "unknown".to_owned()))
}
