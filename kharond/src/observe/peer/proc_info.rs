//! The macOS records the client lookup reads, and reading them: `struct socket_fdinfo` of
//! `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)` (xnu `bsd/sys/proc_info.h`; `libc` has the call but not
//! this record) and the `KERN_PROCARGS2` buffer a process's `argv[0]` is in.
//!
//! Plain data of fixed-size integers with the header's layout (`repr(C)`, the same on every 64-bit
//! target; the compile-time assertions below pin the sizes and offsets the header gives), so the
//! reading is unit-tested on Linux. Only the calls that fill them are macOS code (`macos.rs`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::matching::Ends;

/// `socket_info.soi_kind` of a TCP socket (its `soi_proto` is a `tcp_sockinfo`).
pub const SOCKINFO_TCP: i32 = 2;
/// `in_sockinfo.insi_vflag` bits: which of the address unions' spellings holds the address.
pub const INI_IPV4: u8 = 0x1;
pub const INI_IPV6: u8 = 0x2;

/// `struct proc_fileinfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ProcFileInfo {
    pub fi_openflags: u32,
    pub fi_status: u32,
    pub fi_offset: i64,
    pub fi_type: i32,
    pub fi_guardflags: u32,
}

/// `struct vinfo_stat`: for a socket, `vst_uid` is the uid of the credential that created it
/// (xnu's `soo_stat`), the owner Linux's sock_diag reports too.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct VinfoStat {
    pub vst_dev: u32,
    pub vst_mode: u16,
    pub vst_nlink: u16,
    pub vst_ino: u64,
    pub vst_uid: u32,
    pub vst_gid: u32,
    /// atime, mtime, ctime, birthtime, each seconds then nanoseconds.
    pub vst_times: [i64; 8],
    pub vst_size: i64,
    pub vst_blocks: i64,
    pub vst_blksize: i32,
    pub vst_flags: u32,
    pub vst_gen: u32,
    pub vst_rdev: u32,
    pub vst_qspare: [i64; 2],
}

/// `struct sockbuf_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SockbufInfo {
    pub sbi_cc: u32,
    pub sbi_hiwat: u32,
    pub sbi_mbcnt: u32,
    pub sbi_mbmax: u32,
    pub sbi_lowat: u32,
    pub sbi_flags: i16,
    pub sbi_timeo: i16,
}

/// The union of `struct in4in6_addr` (an IPv4 address in the last four bytes) and
/// `struct in6_addr`; 4-byte aligned like both.
#[repr(C, align(4))]
#[derive(Debug, Clone, Copy)]
pub struct InAddr46(pub [u8; 16]);

/// The anonymous `insi_v6` struct of `in_sockinfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct InsiV6 {
    pub in6_hlim: u8,
    pub in6_cksum: i32,
    pub in6_ifindex: u16,
    pub in6_hops: i16,
}

/// `struct in_sockinfo`. The ports are the protocol control block's, in network byte order,
/// widened to `int` (what lsof reads with `ntohs`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct InSockInfo {
    pub insi_fport: i32,
    pub insi_lport: i32,
    pub insi_gencnt: u64,
    pub insi_flags: u32,
    pub insi_flow: u32,
    pub insi_vflag: u8,
    pub insi_ip_ttl: u8,
    pub rfu_1: u32,
    pub insi_faddr: InAddr46,
    pub insi_laddr: InAddr46,
    pub insi_v4_tos: u8,
    pub insi_v6: InsiV6,
}

/// `struct tcp_sockinfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct TcpSockInfo {
    pub tcpsi_ini: InSockInfo,
    pub tcpsi_state: i32,
    pub tcpsi_timer: [i32; 4],
    pub tcpsi_mss: i32,
    pub tcpsi_flags: u32,
    pub rfu_1: u32,
    pub tcpsi_tp: u64,
}

/// The `soi_proto` union: only its TCP member is read; the rest pads it to its largest member
/// (`struct un_sockinfo`, 526 bytes, rounded up to the union's 8-byte alignment).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SoiProto {
    pub pri_tcp: TcpSockInfo,
    pub rest: [u8; 528 - 120],
}

/// `struct socket_info`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SocketInfo {
    pub soi_stat: VinfoStat,
    pub soi_so: u64,
    pub soi_pcb: u64,
    pub soi_type: i32,
    pub soi_protocol: i32,
    pub soi_family: i32,
    pub soi_options: i16,
    pub soi_linger: i16,
    pub soi_state: i16,
    pub soi_qlen: i16,
    pub soi_incqlen: i16,
    pub soi_qlimit: i16,
    pub soi_timeo: i16,
    pub soi_error: u16,
    pub soi_oobmark: u32,
    pub soi_rcv: SockbufInfo,
    pub soi_snd: SockbufInfo,
    pub soi_kind: i32,
    pub rfu_1: u32,
    pub soi_proto: SoiProto,
}

/// `struct socket_fdinfo`, what `proc_pidfdinfo(…, PROC_PIDFDSOCKETINFO, …)` fills.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct SocketFdInfo {
    pub pfi: ProcFileInfo,
    pub psi: SocketInfo,
}

// The sizes and offsets of xnu's header on 64-bit targets: a field out of place fails the build
// (on Linux too), not a lookup on a Mac.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<ProcFileInfo>() == 24);
    assert!(size_of::<VinfoStat>() == 136);
    assert!(offset_of!(VinfoStat, vst_uid) == 16);
    assert!(size_of::<SockbufInfo>() == 24);
    assert!(size_of::<InSockInfo>() == 80);
    assert!(offset_of!(InSockInfo, insi_vflag) == 24);
    assert!(offset_of!(InSockInfo, insi_faddr) == 32);
    assert!(offset_of!(InSockInfo, insi_laddr) == 48);
    assert!(offset_of!(InSockInfo, insi_v6) == 68);
    assert!(size_of::<TcpSockInfo>() == 120);
    assert!(size_of::<SoiProto>() == 528);
    assert!(offset_of!(SocketInfo, soi_oobmark) == 180);
    assert!(offset_of!(SocketInfo, soi_kind) == 232);
    assert!(offset_of!(SocketInfo, soi_proto) == 240);
    assert!(size_of::<SocketInfo>() == 768);
    assert!(size_of::<SocketFdInfo>() == 792);
};

impl SocketFdInfo {
    /// An all-zero record for the kernel to fill.
    pub fn zeroed() -> Self {
        // SAFETY: every field is an integer or an array of integers, for which all-zero bytes
        // are a valid value.
        unsafe { std::mem::zeroed() }
    }

    /// The owner of the socket (see [`VinfoStat`]).
    pub fn uid(&self) -> u32 {
        self.psi.soi_stat.vst_uid
    }

    /// The two ends of a TCP socket over IPv4 or IPv6; `None` for any other socket.
    pub fn tcp_ends(&self) -> Option<Ends> {
        if self.psi.soi_kind != SOCKINFO_TCP {
            return None;
        }
        let ini = &self.psi.soi_proto.pri_tcp.tcpsi_ini;
        let ip = |addr: &InAddr46| -> Option<IpAddr> {
            let bytes = addr.0;
            if ini.insi_vflag & INI_IPV4 != 0 {
                Some(IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15])))
            } else if ini.insi_vflag & INI_IPV6 != 0 {
                Some(IpAddr::V6(Ipv6Addr::from(bytes)))
            } else {
                None
            }
        };
        let port = |p: i32| u16::try_from(p).ok().map(u16::from_be);
        Some(Ends {
            local: SocketAddr::new(ip(&ini.insi_laddr)?, port(ini.insi_lport)?),
            remote: SocketAddr::new(ip(&ini.insi_faddr)?, port(ini.insi_fport)?),
        })
    }
}

/// `argv[0]` from a `KERN_PROCARGS2` buffer: `int argc`, the executable's path, NUL padding,
/// then the arguments, each NUL-terminated. `None` when the buffer holds no argument.
pub fn argv0(procargs: &[u8]) -> Option<&[u8]> {
    let argc = i32::from_ne_bytes(procargs.get(..4)?.try_into().ok()?);
    if argc < 1 {
        return None;
    }
    let rest = &procargs[4..];
    let after_path = &rest[rest.iter().position(|&b| b == 0)?..];
    let args = &after_path[after_path.iter().position(|&b| b != 0)?..];
    let end = args.iter().position(|&b| b == 0).unwrap_or(args.len());
    Some(&args[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP socket record as xnu fills it: ports and addresses in network byte order.
    fn tcp(vflag: u8, local: ([u8; 16], u16), remote: ([u8; 16], u16)) -> SocketFdInfo {
        let mut info = SocketFdInfo::zeroed();
        info.psi.soi_kind = SOCKINFO_TCP;
        info.psi.soi_stat.vst_uid = 501;
        let ini = &mut info.psi.soi_proto.pri_tcp.tcpsi_ini;
        ini.insi_vflag = vflag;
        ini.insi_laddr = InAddr46(local.0);
        ini.insi_lport = i32::from(local.1.to_be());
        ini.insi_faddr = InAddr46(remote.0);
        ini.insi_fport = i32::from(remote.1.to_be());
        info
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut out = [0; 16];
        out[12..].copy_from_slice(&a);
        out
    }

    #[test]
    fn a_tcp_socket_record_reads_as_its_two_ends_and_owner() {
        let info = tcp(INI_IPV4, (v4([127, 0, 0, 1]), 50001), (v4([127, 0, 0, 1]), 12000));
        let ends = info.tcp_ends().expect("a TCP socket");
        assert_eq!(ends.local, "127.0.0.1:50001".parse().unwrap());
        assert_eq!(ends.remote, "127.0.0.1:12000".parse().unwrap());
        assert_eq!(info.uid(), 501);

        let one = Ipv6Addr::LOCALHOST.octets();
        let info = tcp(INI_IPV6, (one, 50002), (one, 12000));
        assert_eq!(info.tcp_ends().unwrap().local, "[::1]:50002".parse().unwrap());
    }

    #[test]
    fn other_sockets_and_unknown_address_families_read_as_nothing() {
        let mut unix = tcp(INI_IPV4, (v4([127, 0, 0, 1]), 1), (v4([127, 0, 0, 1]), 2));
        unix.psi.soi_kind = 3; // SOCKINFO_UN
        assert_eq!(unix.tcp_ends(), None);
        let neither = tcp(0, (v4([127, 0, 0, 1]), 1), (v4([127, 0, 0, 1]), 2));
        assert_eq!(neither.tcp_ends(), None);
        // A port field outside 0..=65535 (never written by xnu) is not guessed at.
        let mut odd = tcp(INI_IPV4, (v4([127, 0, 0, 1]), 1), (v4([127, 0, 0, 1]), 2));
        odd.psi.soi_proto.pri_tcp.tcpsi_ini.insi_lport = -1;
        assert_eq!(odd.tcp_ends(), None);
    }

    #[test]
    fn argv0_comes_after_argc_the_executable_path_and_its_padding() {
        let mut buf = 2i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(
            b"/opt/homebrew/Cellar/kubectl/1.30/bin/kubectl\0\0\0\0kubectl\0get\0HOME=/Users/me\0",
        );
        assert_eq!(argv0(&buf), Some(&b"kubectl"[..]));
        // No padding, and argv[0] as the last thing in the buffer.
        let mut buf = 1i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/usr/bin/curl\0/usr/bin/curl");
        assert_eq!(argv0(&buf), Some(&b"/usr/bin/curl"[..]));
        // Truncated or empty buffers, and argc 0, give nothing.
        assert_eq!(argv0(&[1, 0]), None);
        assert_eq!(argv0(&0i32.to_ne_bytes()), None);
        let mut buf = 1i32.to_ne_bytes().to_vec();
        buf.extend_from_slice(b"/usr/bin/curl\0\0\0");
        assert_eq!(argv0(&buf), None);
    }
}
