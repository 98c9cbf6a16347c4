//! macOS: there is no table of sockets to read, so the lookup walks the processes
//! (`proc_listpids`), each one's descriptors (`proc_pidinfo(PROC_PIDLISTFDS)`) and each socket's
//! record (`proc_pidfdinfo(PROC_PIDFDSOCKETINFO)`), through the libproc crate, and keeps the
//! sockets [`client_of`] picks (the record read in `proc_info.rs`). The program is the file name
//! of `argv[0]` (`KERN_PROCARGS2`), else the process name (`proc_name`).
//!
//! What it can see: the processes of kharond's own user (all of them when kharond runs as root).
//! Another user's process answers `proc_pidinfo` with EPERM and is skipped, so its sockets are
//! never found. The cost is a few system calls per process and per socket it holds, paid on every
//! lookup: fine for `kharonctl connections`, too much to pay on every accepted connection.

use std::collections::HashMap;
use std::mem::{offset_of, size_of};
use std::net::SocketAddr;

use libproc::bsd_info::BSDInfo;
use libproc::file_info::{ListFDs, ProcFDType, pidfdinfo};
use libproc::net_info::{
    InSIAddr, InSockInfo, SocketFDInfo, SocketInfo, SocketInfoKind, TcpSockInfo, VInfoStat,
};
use libproc::proc_pid::{listpidinfo, pidinfo};
use libproc::processes::{ProcFilter, pids_by_type};

use super::matching::{Process, client_of, program_name};
use super::proc_info::{SOCKINFO_TCP, SocketRecord, argv0};

// libproc's records are written by hand, not generated from the SDK's header: these are the sizes
// and offsets of xnu's `bsd/sys/proc_info.h` on 64-bit Macs, so a field out of place fails the
// build (the macOS check in CI) rather than a lookup on a Mac.
const _: () = {
    assert!(size_of::<VInfoStat>() == 136);
    assert!(offset_of!(VInfoStat, vst_uid) == 16);
    assert!(size_of::<InSockInfo>() == 80);
    assert!(offset_of!(InSockInfo, insi_vflag) == 24);
    assert!(offset_of!(InSockInfo, insi_faddr) == 32);
    assert!(offset_of!(InSockInfo, insi_laddr) == 48);
    assert!(size_of::<TcpSockInfo>() == 120);
    assert!(offset_of!(SocketInfo, soi_kind) == 232);
    assert!(offset_of!(SocketInfo, soi_proto) == 240);
    assert!(size_of::<SocketInfo>() == 768);
    assert!(size_of::<SocketFDInfo>() == 792);
    assert!(SocketInfoKind::Tcp as i32 == SOCKINFO_TCP);
};

/// Who holds a client socket: the process, and the uid that owns the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// The socket's owner ([`SocketRecord::uid`]), what sock_diag reports on Linux.
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

/// Every process id, as far as `proc_listpids` lists them now (xnu leaves room for 20 more
/// processes started between its size query and the list: `proc_listpids` in
/// `bsd/kern/proc_info.c`).
fn pids() -> Vec<libc::pid_t> {
    let pids = pids_by_type(ProcFilter::All).unwrap_or_default();
    pids.into_iter().filter_map(|pid| libc::pid_t::try_from(pid).ok()).filter(|&pid| pid > 0).collect()
}

/// The descriptors of `pid` that are sockets; none when the process is gone or not ours to see.
fn socket_fds(pid: libc::pid_t) -> Vec<i32> {
    // The size of its descriptor table, and room for 20 descriptors opened meanwhile: what
    // `proc_pidinfo(PROC_PIDLISTFDS)` itself answers a size query with (xnu `proc_pidfdlist`).
    let Ok(bsd) = pidinfo::<BSDInfo>(pid, 0) else { return Vec::new() };
    let room = usize::try_from(bsd.pbi_nfiles).unwrap_or(0).saturating_add(20);
    let Ok(fds) = listpidinfo::<ListFDs>(pid, room) else { return Vec::new() };
    fds.into_iter()
        .filter(|fd| matches!(ProcFDType::from(fd.proc_fdtype), ProcFDType::Socket))
        .map(|fd| fd.proc_fd)
        .collect()
}

/// What the lookup reads of the record of descriptor `fd` of `pid`, if it is still there and a
/// TCP socket.
fn socket_info(pid: libc::pid_t, fd: i32) -> Option<SocketRecord> {
    let info = pidfdinfo::<SocketFDInfo>(pid, fd).ok()?;
    let kind = info.psi.soi_kind;
    if !matches!(SocketInfoKind::from(kind), SocketInfoKind::Tcp) {
        return None;
    }
    // SAFETY: `soi_kind` says `pri_tcp` is the member of the `soi_proto` union the kernel filled
    // (xnu `fill_socketinfo`); the whole record was copied out after being zeroed (`pid_socketinfo`
    // in `bsd/kern/proc_info.c`), and every field of it is an integer.
    let ini = unsafe { info.psi.soi_proto.pri_tcp }.tcpsi_ini;
    // SAFETY: both members of the address union are 16 bytes of plain data (`in6_addr`,
    // `in4in6_addr`); which one holds the address is `insi_vflag`'s to say, read by `tcp_ends`.
    let bytes = |addr: InSIAddr| unsafe { addr.ina_6 }.s6_addr;
    Some(SocketRecord {
        kind,
        uid: info.psi.soi_stat.vst_uid,
        vflag: ini.insi_vflag,
        local: (bytes(ini.insi_laddr), ini.insi_lport),
        remote: (bytes(ini.insi_faddr), ini.insi_fport),
    })
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
/// Not libproc's `proc_pid::name`: it refuses a name that is not UTF-8, and the 32-byte cut can
/// split a character, which [`program_name`] keeps (lossily) instead.
fn name(pid: libc::pid_t) -> Option<String> {
    let mut buf = [0u8; 2 * libc::MAXCOMLEN + 1];
    let size = u32::try_from(buf.len()).ok()?;
    // SAFETY: proc_name writes at most `size` bytes into `buf`, which is that large.
    let written = unsafe { libc::proc_name(pid, buf.as_mut_ptr().cast(), size) };
    let written = usize::try_from(written).ok().filter(|&n| n > 0)?;
    program_name(buf.get(..written)?)
}
