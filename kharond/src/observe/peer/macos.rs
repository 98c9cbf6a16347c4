//! macOS: there is no table of sockets to read, so the lookup walks the processes (libproc's
//! `proc_listpids`), each one's descriptors (`proc_pidinfo(PROC_PIDLISTFDS)`) and each socket's
//! record (`proc_pidfdinfo(PROC_PIDFDSOCKETINFO)`, read in `proc_info.rs`), and keeps the sockets
//! [`client_of`] picks. The program is the file name of `argv[0]` (`KERN_PROCARGS2`), else the
//! process name (`proc_name`).
//!
//! What it can see: the processes of kharond's own user (all of them when kharond runs as root).
//! Another user's process answers `proc_pidinfo` with EPERM and is skipped, so its sockets are
//! never found. The cost is a few system calls per process and per socket it holds, paid on every
//! lookup: fine for `kharonctl connections`, too much to pay on every accepted connection.

use std::collections::HashMap;
use std::mem::size_of;
use std::net::SocketAddr;

use super::matching::{Process, client_of, program_name};
use super::proc_info::{SocketFdInfo, argv0};

/// `proc_listpids` type: every process (`sys/proc_info.h`; not in `libc`).
const PROC_ALL_PIDS: u32 = 1;
/// `proc_pidfdinfo` flavor: a socket's `socket_fdinfo` (`sys/proc_info.h`; not in `libc`).
const PROC_PIDFDSOCKETINFO: i32 = 3;

/// Who holds a client socket: the process, and the uid that owns the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// The socket's owner ([`SocketFdInfo::uid`]), what sock_diag reports on Linux.
    pub uid: u32,
}

/// See [`super::find`].
pub fn find(clients: &[SocketAddr], listen: SocketAddr) -> HashMap<SocketAddr, Process> {
    scan(clients, listen)
        .into_iter()
        .map(|(client, holder)| (client, Process { pid: holder.pid, program: program(holder.pid) }))
        .collect()
}

/// Who holds the client end of kharond's connection from `client` to `listen`, when it is a
/// process kharond may inspect (see the module doc: one of its own user's, unless it is root).
/// `None` proves nothing about who it is, only that kharond cannot see it.
#[allow(
    dead_code,
    reason = "kept for an owner-only check on macOS; proxy/owner/elsewhere.rs says why none uses it yet"
)]
pub fn holder(client: SocketAddr, listen: SocketAddr) -> Option<Holder> {
    scan(&[client], listen).into_iter().next().map(|(_, holder)| holder)
}

/// The holders of as many of `clients` as can be found; stops once all are.
fn scan(clients: &[SocketAddr], listen: SocketAddr) -> Vec<(SocketAddr, Holder)> {
    let mut found: Vec<(SocketAddr, Holder)> = Vec::new();
    for pid in pids() {
        for fd in socket_fds(pid) {
            let Some(info) = socket_info(pid, fd) else { continue };
            let Some(client) = info.tcp_ends().and_then(|ends| client_of(ends, clients, listen)) else {
                continue;
            };
            if found.iter().all(|(c, _)| *c != client) {
                let pid = u32::try_from(pid).unwrap_or(0);
                found.push((client, Holder { pid, uid: info.uid() }));
            }
            if found.len() == clients.len() {
                return found;
            }
        }
    }
    found
}

/// Every process id, as far as `proc_listpids` lists them now.
fn pids() -> Vec<libc::pid_t> {
    // SAFETY: a null buffer asks only for the size the list needs.
    let bytes = unsafe { libc::proc_listpids(PROC_ALL_PIDS, 0, std::ptr::null_mut(), 0) };
    let Ok(bytes) = usize::try_from(bytes) else { return Vec::new() };
    // Room for processes started since the size was asked.
    let mut pids: Vec<libc::pid_t> = vec![0; bytes / size_of::<libc::pid_t>() + 64];
    let capacity = libc::c_int::try_from(pids.len() * size_of::<libc::pid_t>()).unwrap_or(libc::c_int::MAX);
    // SAFETY: the buffer holds `capacity` bytes, and proc_listpids writes at most that many.
    let bytes = unsafe { libc::proc_listpids(PROC_ALL_PIDS, 0, pids.as_mut_ptr().cast(), capacity) };
    pids.truncate(usize::try_from(bytes).unwrap_or(0) / size_of::<libc::pid_t>());
    pids.retain(|&pid| pid > 0);
    pids
}

/// The descriptors of `pid` that are sockets; none when the process is gone or not ours to see.
fn socket_fds(pid: libc::pid_t) -> Vec<i32> {
    const FDINFO: usize = size_of::<libc::proc_fdinfo>();
    // SAFETY: a null buffer asks only for the size the list needs.
    let bytes = unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, std::ptr::null_mut(), 0) };
    let Ok(bytes) = usize::try_from(bytes) else { return Vec::new() };
    // Room for descriptors opened since the size was asked.
    let mut fds = vec![libc::proc_fdinfo { proc_fd: 0, proc_fdtype: 0 }; bytes / FDINFO + 16];
    let capacity = libc::c_int::try_from(fds.len() * FDINFO).unwrap_or(libc::c_int::MAX);
    // SAFETY: the buffer holds `capacity` bytes of proc_fdinfo records, and proc_pidinfo writes
    // at most that many.
    let bytes =
        unsafe { libc::proc_pidinfo(pid, libc::PROC_PIDLISTFDS, 0, fds.as_mut_ptr().cast(), capacity) };
    fds.truncate(usize::try_from(bytes).unwrap_or(0) / FDINFO);
    let socket = u32::try_from(libc::PROX_FDTYPE_SOCKET).unwrap_or(u32::MAX);
    fds.into_iter().filter(|fd| fd.proc_fdtype == socket).map(|fd| fd.proc_fd).collect()
}

/// The socket record of descriptor `fd` of `pid`, if it is still there.
fn socket_info(pid: libc::pid_t, fd: i32) -> Option<SocketFdInfo> {
    let mut info = SocketFdInfo::zeroed();
    let size = libc::c_int::try_from(size_of::<SocketFdInfo>()).ok()?;
    // SAFETY: `info` is `size` bytes with the layout of struct socket_fdinfo (proc_info.rs pins
    // it), and proc_pidfdinfo writes at most `size` bytes.
    let written =
        unsafe { libc::proc_pidfdinfo(pid, fd, PROC_PIDFDSOCKETINFO, (&raw mut info).cast(), size) };
    (written == size).then_some(info)
}

/// See [`Process::program`].
fn program(pid: u32) -> String {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return "unknown".to_owned() };
    procargs(pid)
        .and_then(|buf| program_name(argv0(&buf)?))
        .or_else(|| name(pid))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The `KERN_PROCARGS2` buffer of `pid` (ours to read only for our own processes).
fn procargs(pid: libc::pid_t) -> Option<Vec<u8>> {
    let mut argmax: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>();
    let mut mib = [libc::CTL_KERN, libc::KERN_ARGMAX];
    // SAFETY: reads one int into `argmax`, `len` bytes large; sets nothing.
    let rc = unsafe {
        libc::sysctl(mib.as_mut_ptr(), 2, (&raw mut argmax).cast(), &mut len, std::ptr::null_mut(), 0)
    };
    let size = usize::try_from(argmax).ok().filter(|&n| rc == 0 && n > 0)?;
    let mut buf = vec![0u8; size];
    let mut len = buf.len();
    let mut mib = [libc::CTL_KERN, libc::KERN_PROCARGS2, pid];
    // SAFETY: the kernel writes at most `len` bytes into `buf`, which is that large; sets nothing.
    let rc = unsafe {
        libc::sysctl(mib.as_mut_ptr(), 3, buf.as_mut_ptr().cast(), &mut len, std::ptr::null_mut(), 0)
    };
    if rc != 0 {
        return None;
    }
    buf.truncate(len);
    Some(buf)
}

/// The process name the kernel keeps (`proc_name`: up to 32 bytes of the executable's name).
fn name(pid: libc::pid_t) -> Option<String> {
    let mut buf = [0u8; 2 * libc::MAXCOMLEN + 1];
    let size = u32::try_from(buf.len()).ok()?;
    // SAFETY: proc_name writes at most `size` bytes into `buf`, which is that large.
    let written = unsafe { libc::proc_name(pid, buf.as_mut_ptr().cast(), size) };
    let written = usize::try_from(written).ok().filter(|&n| n > 0)?;
    program_name(buf.get(..written)?)
}
