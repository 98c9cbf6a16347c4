//! `thin-socks`: the least a SOCKS5 server can do per connection, as the ceiling of
//! bench/direct.sh's rate phase (connections per second), where `thin-relay` is the ceiling of
//! its bulk phases.
//!
//! A short connection costs every proxy the same kernel work: two TCP handshakes, the SOCKS
//! messages, a byte each way, four FINs, and a wake-up of whoever waits for each of them. What a
//! proxy adds is its own system calls and user space around that. This one adds as little as we
//! could: no routing, no auth, no limits, no log, no async runtime, SOCKS5 CONNECT only, each
//! message read in one call, a host name resolved blocking (the conn phase asks for localhost).
//! Whatever it reaches on a machine is roughly the most any proxy gets there. Linux only; not for
//! real use.
//!
//! Two ways to wait, as `thin-relay` has:
//! - default: a fixed pool of threads (`POOL`), each blocking in `accept` on the shared
//!   listener and then serving its connection with blocking calls, both directions in one
//!   `poll(2)`: no thread created per connection (microsocks creates one) and no epoll
//!   registration; a pool cannot hold more connections than threads, so no server that must hold
//!   thousands can be built this way.
//! - `--epoll`: one thread per core, each with its own listener (`SO_REUSEPORT`) and epoll
//!   instance, every socket non-blocking and registered once (edge-triggered, reading and
//!   writing; a destination without room holds the rest until it has): what an event loop such
//!   as kharond's must do at least.
//!
//! ```text
//! thin-socks [--epoll] 127.0.0.1:PORT
//! ```

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("thin-socks needs Linux");
    std::process::exit(2);
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{Read, Write};
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
    use std::os::fd::AsRawFd;

    use anyhow::{Context, bail};

    /// Threads of the default mode: more than the rate phase's 64 workers.
    pub const POOL: usize = 128;
    /// Each thread's relay buffer, allocated once: as large as kharond's copy grows to.
    pub const BUF: usize = 256 * 1024;
    /// The success reply: bound address 0.0.0.0:0, as microsocks answers.
    pub const SUCCESS: [u8; 10] = [5, 0, 0, 1, 0, 0, 0, 0, 0, 0];
    pub const FAILURE: [u8; 10] = [5, 1, 0, 1, 0, 0, 0, 0, 0, 0];

    pub fn main() -> anyhow::Result<()> {
        const USAGE: &str = "usage: thin-socks [--epoll] ADDR:PORT";
        let mut args: Vec<String> = std::env::args().skip(1).collect();
        let epoll = args.first().is_some_and(|a| a == "--epoll");
        if epoll {
            args.remove(0);
        }
        let addr: SocketAddr = args.first().context(USAGE)?.parse().context(USAGE)?;
        if epoll {
            return super::event_loop::main(addr);
        }
        let listener = std::sync::Arc::new(TcpListener::bind(addr)?);
        // Accepted sockets inherit TCP_NODELAY from the listener on Linux.
        socket2::SockRef::from(&*listener).set_tcp_nodelay(true)?;
        let threads: Vec<_> = (0..POOL)
            .map(|_| {
                let listener = std::sync::Arc::clone(&listener);
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; BUF];
                    while let Ok((client, _)) = listener.accept() {
                        if let Err(e) = serve(client, &mut buf) {
                            eprintln!("thin-socks: {e:#}");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    /// Parses a whole CONNECT request (`VER CMD RSV ATYP ADDR PORT`) into its target.
    pub fn target(req: &[u8]) -> anyhow::Result<SocketAddr> {
        let (ip, at) = match req.get(3) {
            Some(1) if req.len() >= 10 => (IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&req[4..8])?)), 8),
            Some(4) if req.len() >= 22 => {
                (IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&req[4..20])?)), 20)
            }
            Some(3) if req.len() >= 5 && req.len() >= 7 + usize::from(req[4]) => {
                let end = 5 + usize::from(req[4]);
                let host = std::str::from_utf8(&req[5..end])?;
                let ip = match host.parse::<IpAddr>() {
                    Ok(ip) => ip,
                    Err(_) => (host, 0).to_socket_addrs()?.next().context("no address")?.ip(),
                };
                (ip, end)
            }
            _ => bail!("not a whole CONNECT request"),
        };
        Ok(SocketAddr::new(ip, u16::from_be_bytes([req[at], req[at + 1]])))
    }

    fn serve(mut client: TcpStream, buf: &mut [u8]) -> anyhow::Result<()> {
        let n = client.read(buf)?;
        if n == 0 {
            // A port probe.
            return Ok(());
        }
        if n < 3 || buf[0] != 5 {
            bail!("not a SOCKS5 greeting");
        }
        client.write_all(&[5, 0])?;
        let n = client.read(buf)?;
        let upstream = match TcpStream::connect(target(&buf[..n])?) {
            Ok(upstream) => upstream,
            Err(e) => {
                let _ = client.write_all(&FAILURE);
                return Err(e.into());
            }
        };
        upstream.set_nodelay(true)?;
        client.write_all(&SUCCESS)?;
        relay(&mut client, upstream, buf)
    }

    /// Both directions in one `poll`, until both ended.
    fn relay(client: &mut TcpStream, mut upstream: TcpStream, buf: &mut [u8]) -> anyhow::Result<()> {
        let mut open = [true, true];
        while open[0] || open[1] {
            let mut fds = [client.as_raw_fd(), upstream.as_raw_fd()].map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            });
            for (fd, open) in fds.iter_mut().zip(open) {
                if !open {
                    fd.fd = -1;
                }
            }
            // SAFETY: `fds` is ours and its length is passed.
            if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
                return Err(std::io::Error::last_os_error().into());
            }
            for (k, fd) in fds.iter().enumerate() {
                if fd.fd < 0 || fd.revents == 0 {
                    continue;
                }
                let (from, to): (&mut TcpStream, &mut TcpStream) =
                    if k == 0 { (client, &mut upstream) } else { (&mut upstream, client) };
                let n = from.read(buf)?;
                if n == 0 {
                    open[k] = false;
                    // The last direction to end leaves its FIN to the close.
                    if open[1 - k] {
                        let _ = to.shutdown(Shutdown::Write);
                    }
                } else {
                    to.write_all(&buf[..n])?;
                }
            }
        }
        Ok(())
    }
}

/// `--epoll` (module doc).
#[cfg(target_os = "linux")]
mod event_loop {
    use std::collections::HashMap;
    use std::io::{ErrorKind, Read, Write};
    use std::net::{Shutdown, SocketAddr, TcpStream};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use socket2::{Domain, Socket, Type};

    pub fn main(addr: SocketAddr) -> anyhow::Result<()> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut listeners = Vec::new();
        for _ in 0..cores {
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM.nonblocking(), None)?;
            socket.set_reuse_port(true)?;
            socket.set_reuse_address(true)?;
            // Inherited by every accepted socket on Linux.
            socket.set_tcp_nodelay(true)?;
            socket.bind(&addr.into())?;
            socket.listen(1024)?;
            listeners.push(socket);
        }
        let threads: Vec<_> = listeners
            .into_iter()
            .map(|listener| {
                std::thread::spawn(move || {
                    if let Err(e) = run(&listener) {
                        eprintln!("thin-socks: {e:#}");
                    }
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    /// Where a connection is.
    enum Stage {
        Greeting,
        Request,
        Connecting,
        /// Per direction (0: client → upstream): whether its source is still open, and what it
        /// read that its destination has not taken yet.
        Relaying {
            open: [bool; 2],
            pending: [Vec<u8>; 2],
        },
    }

    struct Conn {
        client: TcpStream,
        upstream: Option<TcpStream>,
        stage: Stage,
    }

    /// The epoll key of a socket: its connection's id, and which end (0 client, 1 upstream).
    fn key(id: u64, end: u64) -> u64 {
        (id << 1) | end
    }

    const LISTENER: u64 = u64::MAX;
    /// Both ends, for their whole life: readable, writable (a full socket's room, the upstream's
    /// connect), and the peer's end of stream; edge-triggered.
    const EVENTS: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32;
    const READABLE: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;

    fn add(ep: RawFd, fd: RawFd, events: u32, key: u64) -> std::io::Result<()> {
        let mut event = libc::epoll_event { events, u64: key };
        // SAFETY: `fd` outlives its registration: closing it removes it.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut event) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// A connection from the listener, non-blocking from the start; `None` when none waits.
    fn accept(listener: &Socket) -> Option<TcpStream> {
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        // SAFETY: no address is asked for; the descriptor returned is new and ours.
        let fd =
            unsafe { libc::accept4(listener.as_raw_fd(), std::ptr::null_mut(), std::ptr::null_mut(), flags) };
        // SAFETY: a fresh descriptor owned by nobody else.
        (fd >= 0).then(|| unsafe { TcpStream::from_raw_fd(fd) })
    }

    fn run(listener: &Socket) -> anyhow::Result<()> {
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: the descriptor was just created and is owned by nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        add(ep.as_raw_fd(), listener.as_raw_fd(), libc::EPOLLIN as u32, LISTENER)?;
        let mut conns: HashMap<u64, Conn> = HashMap::new();
        let mut next = 0u64;
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 256];
        let mut buf = vec![0u8; super::linux::BUF];
        loop {
            // SAFETY: `events` is ours and its length is passed.
            let n = unsafe { libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, -1) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(e.into());
            }
            for event in &events[..n as usize] {
                let (key, flags) = (event.u64, event.events);
                if key == LISTENER {
                    while let Some(client) = accept(listener) {
                        next += 1;
                        add(ep.as_raw_fd(), client.as_raw_fd(), EVENTS, self::key(next, 0))?;
                        conns.insert(next, Conn { client, upstream: None, stage: Stage::Greeting });
                    }
                    continue;
                }
                let id = key >> 1;
                let Some(conn) = conns.get_mut(&id) else { continue };
                let end = (key & 1) as usize;
                if !matches!(step(conn, ep.as_raw_fd(), id, end, flags, &mut buf), Ok(true)) {
                    // Closing both removes them from the epoll instance.
                    conns.remove(&id);
                }
            }
        }
    }

    /// Moves `conn` on after `flags` on its `end` (0 client, 1 upstream); false once it is done.
    fn step(
        conn: &mut Conn,
        ep: RawFd,
        id: u64,
        end: usize,
        flags: u32,
        buf: &mut [u8],
    ) -> std::io::Result<bool> {
        let readable = flags & READABLE != 0;
        match &mut conn.stage {
            Stage::Greeting if readable => match conn.client.read(buf) {
                Ok(n) if n >= 3 && buf[0] == 5 => {
                    conn.client.write_all(&[5, 0])?;
                    conn.stage = Stage::Request;
                    Ok(true)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(true),
                _ => Ok(false),
            },
            Stage::Request if readable => match conn.client.read(buf) {
                Ok(0) => Ok(false),
                Ok(n) => {
                    let target = super::linux::target(&buf[..n]).map_err(std::io::Error::other)?;
                    let socket = Socket::new(Domain::for_address(target), Type::STREAM.nonblocking(), None)?;
                    match socket.connect(&target.into()) {
                        Ok(()) => {}
                        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                        Err(e) => return Err(e),
                    }
                    let upstream: TcpStream = socket.into();
                    add(ep, upstream.as_raw_fd(), EVENTS, key(id, 1))?;
                    conn.upstream = Some(upstream);
                    conn.stage = Stage::Connecting;
                    Ok(true)
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(true),
                Err(e) => Err(e),
            },
            // Only the upstream's first event says the connect finished.
            Stage::Connecting if end == 1 => {
                let Some(upstream) = &conn.upstream else { return Ok(false) };
                if let Some(e) = upstream.take_error()? {
                    let _ = conn.client.write_all(&super::linux::FAILURE);
                    return Err(e);
                }
                upstream.set_nodelay(true)?;
                conn.client.write_all(&super::linux::SUCCESS)?;
                conn.stage = Stage::Relaying { open: [true, true], pending: [Vec::new(), Vec::new()] };
                // Whatever the client sent meanwhile came with an event of its own.
                Ok(true)
            }
            Stage::Greeting | Stage::Request | Stage::Connecting => Ok(true),
            Stage::Relaying { open, pending } => {
                let Some(upstream) = &mut conn.upstream else { return Ok(false) };
                let client = &mut conn.client;
                let writable = flags & libc::EPOLLOUT as u32 != 0;
                // `end` has room: what waits for it goes on, and its source is read again.
                if writable && !pending[1 - end].is_empty() {
                    let (from, to) = if end == 0 {
                        (&mut *upstream, &mut *client)
                    } else {
                        (&mut *client, &mut *upstream)
                    };
                    let other_open = open[end];
                    pump(from, to, &mut pending[1 - end], &mut open[1 - end], other_open, true, buf)?;
                }
                if readable {
                    let (from, to) = if end == 0 {
                        (&mut *client, &mut *upstream)
                    } else {
                        (&mut *upstream, &mut *client)
                    };
                    let hangup = flags & (libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0;
                    let other_open = open[1 - end];
                    pump(from, to, &mut pending[end], &mut open[end], other_open, hangup, buf)?;
                }
                Ok(open.iter().any(|o| *o) || pending.iter().any(|p| !p.is_empty()))
            }
        }
    }

    /// One direction: writes what `pending` holds, then reads `from` and writes to `to` until
    /// `from` has nothing, `to` has no room (the rest waits in `pending`), or `from` ended (then
    /// `to`'s writing half is shut, unless the other direction has ended too: the close sends that
    /// FIN). A read shorter than `buf` emptied the socket (edge-triggered: what arrives later is
    /// another event), unless the peer closed its end too (`hangup`: read on to the end).
    fn pump(
        from: &mut TcpStream,
        to: &mut TcpStream,
        pending: &mut Vec<u8>,
        open: &mut bool,
        other_open: bool,
        hangup: bool,
        buf: &mut [u8],
    ) -> std::io::Result<()> {
        loop {
            while !pending.is_empty() {
                match to.write(pending) {
                    Ok(n) => {
                        pending.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            if !*open {
                return Ok(());
            }
            let n = match from.read(buf) {
                Ok(0) => {
                    *open = false;
                    if other_open {
                        let _ = to.shutdown(Shutdown::Write);
                    }
                    return Ok(());
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            };
            match to.write(&buf[..n]) {
                Ok(w) => pending.extend_from_slice(&buf[w..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => pending.extend_from_slice(&buf[..n]),
                Err(e) => return Err(e),
            }
            if n < buf.len() && !hangup && pending.is_empty() {
                return Ok(());
            }
        }
    }
}
