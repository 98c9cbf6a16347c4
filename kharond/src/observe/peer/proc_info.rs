//! What the client lookup reads of the macOS records, pure so that it is unit-tested on Linux: a
//! TCP socket's two ends and owner from `struct socket_fdinfo` (what
//! `proc_pidfdinfo(PROC_PIDFDSOCKETINFO)` fills, xnu `bsd/sys/proc_info.h`), and a process's
//! `argv[0]` from its `KERN_PROCARGS2` buffer.
//!
//! The record itself is libproc's `SocketFDInfo`, which exists only on macOS; `macos.rs` copies the
//! few fields read here out of it (and out of its unions) into a [`SocketRecord`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::matching::Ends;

/// `socket_info.soi_kind` of a TCP socket (its `soi_proto` is a `tcp_sockinfo`).
pub const SOCKINFO_TCP: i32 = 2;
/// `in_sockinfo.insi_vflag` bits: which of the address unions' spellings holds the address.
pub const INI_IPV4: u8 = 0x1;
pub const INI_IPV6: u8 = 0x2;

/// The fields of a `socket_fdinfo` the lookup reads, as xnu fills them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketRecord {
    /// `psi.soi_kind`: [`SOCKINFO_TCP`] for a TCP socket.
    pub kind: i32,
    /// `psi.soi_stat.vst_uid`: the uid of the credential that created the socket (xnu's
    /// `soo_stat`), the owner Linux's sock_diag reports too.
    pub uid: u32,
    /// `insi_vflag` of the TCP record's `in_sockinfo`: [`INI_IPV4`] or [`INI_IPV6`].
    pub vflag: u8,
    /// `insi_laddr` and `insi_lport`: the address union's 16 bytes (`struct in6_addr`, or
    /// `struct in4in6_addr` with the IPv4 address in the last four), and the protocol control
    /// block's port in network byte order, widened to `int` (what lsof reads with `ntohs`).
    pub local: ([u8; 16], i32),
    /// `insi_faddr` and `insi_fport`, the same way.
    pub remote: ([u8; 16], i32),
}

impl SocketRecord {
    /// The owner of the socket (see [`SocketRecord::uid`]).
    pub fn uid(&self) -> u32 {
        self.uid
    }

    /// The two ends of a TCP socket over IPv4 or IPv6; `None` for any other socket.
    pub fn tcp_ends(&self) -> Option<Ends> {
        if self.kind != SOCKINFO_TCP {
            return None;
        }
        let ip = |bytes: [u8; 16]| -> Option<IpAddr> {
            if self.vflag & INI_IPV4 != 0 {
                Some(IpAddr::V4(Ipv4Addr::new(bytes[12], bytes[13], bytes[14], bytes[15])))
            } else if self.vflag & INI_IPV6 != 0 {
                Some(IpAddr::V6(Ipv6Addr::from(bytes)))
            } else {
                None
            }
        };
        let port = |p: i32| u16::try_from(p).ok().map(u16::from_be);
        Some(Ends {
            local: SocketAddr::new(ip(self.local.0)?, port(self.local.1)?),
            remote: SocketAddr::new(ip(self.remote.0)?, port(self.remote.1)?),
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
    fn tcp(vflag: u8, local: ([u8; 16], u16), remote: ([u8; 16], u16)) -> SocketRecord {
        SocketRecord {
            kind: SOCKINFO_TCP,
            uid: 501,
            vflag,
            local: (local.0, i32::from(local.1.to_be())),
            remote: (remote.0, i32::from(remote.1.to_be())),
        }
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
        unix.kind = 3; // SOCKINFO_UN
        assert_eq!(unix.tcp_ends(), None);
        let neither = tcp(0, (v4([127, 0, 0, 1]), 1), (v4([127, 0, 0, 1]), 2));
        assert_eq!(neither.tcp_ends(), None);
        // A port field outside 0..=65535 (never written by xnu) is not guessed at.
        let mut odd = tcp(INI_IPV4, (v4([127, 0, 0, 1]), 1), (v4([127, 0, 0, 1]), 2));
        odd.local.1 = -1;
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
