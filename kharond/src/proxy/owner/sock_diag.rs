//! Linux: which uid owns a client's socket, from the kernel, for exactly one connection.
//!
//! One NETLINK_SOCK_DIAG request (`SOCK_DIAG_BY_FAMILY`, inet_diag) names the client's socket by
//! its 4-tuple, client address and port as the socket's source, ours as its destination, and no
//! cookie; the kernel looks it up in its hash of established sockets and answers with an
//! `inet_diag_msg` holding `idiag_uid`, or ENOENT. Not a scan of /proc/net/tcp: one hash lookup,
//! whatever the number of sockets, answered before `send` returns (so the `recv` never waits and is
//! made non-blocking to be sure). One netlink socket ([`Kernel`]), opened at start and kept, so a
//! connection costs a `sendto` and a `recvfrom`, and only the answer's fixed header is read: about
//! 3 µs in all (`bench/owner_check.sh` measures it on the connection setup). One socket rather than
//! one per worker thread: kharond's descriptors stay what they were at start (two per client).

use std::io;
use std::net::{IpAddr, SocketAddr};

use netlink_packet_core::{
    DecodeError, ErrorBuffer, NLM_F_REQUEST, NLMSG_ERROR, NetlinkBuffer, NetlinkHeader, NetlinkMessage,
    Parseable,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP, SOCK_DIAG_BY_FAMILY};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, InetResponseHeader, SocketId, StateFlags};
use netlink_sys::protocols::NETLINK_SOCK_DIAG;
use netlink_sys::{Socket, SocketAddr as NetlinkAddr};

/// Linux tells, for every TCP connection on this network namespace.
pub const CHECKS: bool = true;

/// `INET_DIAG_NOCOOKIE`: look the socket up by its addresses alone.
const NO_COOKIE: [u8; 8] = [0xff; 8];
/// Room for one answer: an `inet_diag_msg` and the attributes the kernel adds unasked.
const ANSWER: usize = 4096;

/// The netlink socket the kernel is asked on, the sequence number of the last request, and the
/// buffers of both directions.
pub struct Kernel {
    socket: Socket,
    sequence: u32,
    request: Vec<u8>,
    answer: Vec<u8>,
}

impl Kernel {
    pub fn open() -> Result<Self, String> {
        let open = || -> io::Result<Self> {
            let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
            socket.bind_auto()?;
            socket.connect(&NetlinkAddr::new(0, 0))?;
            Ok(Kernel { socket, sequence: 0, request: Vec::with_capacity(128), answer: vec![0; ANSWER] })
        };
        open().map_err(|e| format!("cannot open a NETLINK_SOCK_DIAG socket: {e}"))
    }

    /// The uid owning the socket whose local end is `client` and whose remote end is `server`;
    /// `None` when the kernel has no such socket.
    pub fn client_uid(&mut self, client: SocketAddr, server: SocketAddr) -> Result<Option<u32>, String> {
        self.lookup(client, server).map_err(|e| format!("sock_diag lookup: {e}"))
    }

    /// The uid of the socket whose local end is `client` and remote end `server`; `None` when the
    /// kernel has no such socket.
    fn lookup(&mut self, client: SocketAddr, server: SocketAddr) -> io::Result<Option<u32>> {
        // A v4 client of a dual-stack listener shows as ::ffff:a.b.c.d; its own socket is IPv4.
        let (client_ip, server_ip) = (client.ip().to_canonical(), server.ip().to_canonical());
        let family = match (client_ip, server_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) => AF_INET,
            (IpAddr::V6(_), IpAddr::V6(_)) => AF_INET6,
            _ => return Ok(None),
        };
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST;
        header.sequence_number = self.sequence;
        let request = InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::all(),
            socket_id: SocketId {
                source_port: client.port(),
                destination_port: server.port(),
                source_address: client_ip,
                destination_address: server_ip,
                interface_id: 0,
                cookie: NO_COOKIE,
            },
        };
        let mut message = NetlinkMessage::new(header, SockDiagMessage::InetRequest(request).into());
        message.finalize();
        self.request.clear();
        self.request.resize(message.buffer_len(), 0);
        message.serialize(&mut self.request);
        self.socket.send(&self.request, 0)?;
        loop {
            let mut room = &mut self.answer[..];
            let n = self.socket.recv(&mut room, libc::MSG_DONTWAIT)?;
            let invalid = |e: DecodeError| io::Error::new(io::ErrorKind::InvalidData, e.to_string());
            let answer = NetlinkBuffer::new_checked(&self.answer[..n]).map_err(invalid)?;
            if answer.sequence_number() != self.sequence {
                // The answer to an earlier request that was given up on: skip it.
                continue;
            }
            // Only the fixed header is read (the uid), not the attributes the kernel adds.
            return match answer.message_type() {
                SOCK_DIAG_BY_FAMILY => {
                    let header = InetResponseHeader::parse(answer.payload()).map_err(invalid)?;
                    Ok(Some(header.uid))
                }
                NLMSG_ERROR => {
                    let error = ErrorBuffer::new_checked(answer.payload()).map_err(invalid)?;
                    match error.code() {
                        Some(code) if code.get() == -libc::ENOENT => Ok(None),
                        Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                        None => {
                            Err(io::Error::new(io::ErrorKind::InvalidData, "an ACK instead of an answer"))
                        }
                    }
                }
                other => Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("unexpected answer of type {other}"),
                )),
            };
        }
    }
}
