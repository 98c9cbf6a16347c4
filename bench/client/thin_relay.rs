//! `thin-relay`: the thinnest SOCKS5 relay we could write, as a ceiling for bench/direct.sh.
//!
//! No routing, no auth, no async runtime, no limits: one OS thread per direction doing blocking
//! splice(2) through a 1 MiB pipe. Whatever it reaches on a machine is roughly the most any
//! userspace relay can get there, so kharond's figure can be read against it and not only
//! against plain loopback (which has no relay at all). Linux only; not for real use.
//!
//! `--epoll` relays each connection the way an event loop must (tokio, and so kharond): one
//! thread moves both directions, its sockets non-blocking and registered in an epoll instance for
//! the connection's whole life, edge-triggered for reading and writing, and it waits in
//! epoll_wait when neither direction can move. The same splice calls as the blocking mode; what
//! differs is the epoll entry on each socket's wait queue, which the kernel visits on every packet
//! and acknowledgement, in whichever process delivers them. Its CPU per GiB is the floor for a
//! relay that cannot afford a thread per direction (kharond holds up to 16,384 connections).
//!
//! ```text
//! thin-relay [--epoll] 127.0.0.1:PORT
//! ```

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    linux::main()
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("thin-relay needs Linux (splice)");
    std::process::exit(2);
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::{Read, Write};
    use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

    use anyhow::{Context, bail};

    pub fn main() -> anyhow::Result<()> {
        const USAGE: &str = "usage: thin-relay [--epoll] ADDR:PORT";
        let mut args: Vec<String> = std::env::args().skip(1).collect();
        let epoll = args.first().is_some_and(|a| a == "--epoll");
        if epoll {
            args.remove(0);
        }
        let addr: SocketAddr = args.first().context(USAGE)?.parse().context(USAGE)?;
        let listener = TcpListener::bind(addr)?;
        for client in listener.incoming().flatten() {
            std::thread::spawn(move || {
                if let Err(e) = serve(client, epoll) {
                    eprintln!("thin-relay: {e:#}");
                }
            });
        }
        Ok(())
    }

    fn serve(mut client: TcpStream, epoll: bool) -> anyhow::Result<()> {
        client.set_nodelay(true)?;
        let mut head = [0u8; 2];
        client.read_exact(&mut head)?;
        let mut methods = vec![0u8; usize::from(head[1])];
        client.read_exact(&mut methods)?;
        client.write_all(&[5, 0])?;
        let mut req = [0u8; 4];
        client.read_exact(&mut req)?;
        let ip = match req[3] {
            1 => {
                let mut a = [0u8; 4];
                client.read_exact(&mut a)?;
                IpAddr::V4(Ipv4Addr::from(a))
            }
            3 => {
                let mut len = [0u8; 1];
                client.read_exact(&mut len)?;
                let mut name = vec![0u8; usize::from(len[0])];
                client.read_exact(&mut name)?;
                let name = String::from_utf8(name)?;
                (name.as_str(), 0).to_socket_addrs()?.next().context("no address")?.ip()
            }
            other => bail!("address type {other} not supported"),
        };
        let mut port = [0u8; 2];
        client.read_exact(&mut port)?;
        let upstream = match TcpStream::connect((ip, u16::from_be_bytes(port))) {
            Ok(upstream) => upstream,
            Err(e) => {
                // General failure, so the bench reports a SOCKS error rather than a short read.
                let _ = client.write_all(&[5, 1, 0, 1, 0, 0, 0, 0, 0, 0]);
                return Err(e.into());
            }
        };
        upstream.set_nodelay(true)?;
        client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0])?;
        if epoll {
            return by_readiness(&client, &upstream);
        }
        let (c2, u2) = (client.try_clone()?, upstream.try_clone()?);
        let up = std::thread::spawn(move || pump(&c2, &u2));
        pump(&upstream, &client)?;
        up.join().map_err(|_| anyhow::anyhow!("pump thread panicked"))??;
        Ok(())
    }

    /// `from` → `to` until end of stream, then half-closes `to`.
    fn pump(from: &TcpStream, to: &TcpStream) -> anyhow::Result<()> {
        let (rd, wr) = pipe(0)?;
        loop {
            let n = splice(from.as_raw_fd(), wr.as_raw_fd(), 1 << 20)?;
            if n == 0 {
                break;
            }
            let mut left = n;
            while left > 0 {
                left -= splice(rd.as_raw_fd(), to.as_raw_fd(), left)?;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
        Ok(())
    }

    fn splice(from: RawFd, to: RawFd, len: usize) -> std::io::Result<usize> {
        splice_with(from, to, len, libc::SPLICE_F_MOVE)
    }

    fn splice_with(from: RawFd, to: RawFd, len: usize, flags: libc::c_uint) -> std::io::Result<usize> {
        // SAFETY: plain syscall on descriptors that outlive it; null offsets mean stream I/O.
        let n = unsafe { libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len, flags) };
        if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
    }

    fn pipe(flags: libc::c_int) -> std::io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills the two-element array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), flags | libc::O_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors are fresh and owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own; failure keeps the default size.
        unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
        Ok((rd, wr))
    }

    /// `--epoll`: both directions on this thread, waiting in epoll_wait (see the module doc).
    fn by_readiness(client: &TcpStream, upstream: &TcpStream) -> anyhow::Result<()> {
        client.set_nonblocking(true)?;
        upstream.set_nonblocking(true)?;
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: the descriptor was just created and is owned by nobody else.
        let ep = unsafe { OwnedFd::from_raw_fd(ep) };
        for socket in [client, upstream] {
            let events = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
            let mut event = libc::epoll_event { events: events as u32, u64: socket.as_raw_fd() as u64 };
            // SAFETY: both descriptors outlive the registration (closing them removes it).
            if unsafe { libc::epoll_ctl(ep.as_raw_fd(), libc::EPOLL_CTL_ADD, socket.as_raw_fd(), &mut event) }
                < 0
            {
                return Err(std::io::Error::last_os_error().into());
            }
        }
        let mut up = Way::new(client, upstream)?;
        let mut down = Way::new(upstream, client)?;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // Edge-triggered: each direction moves until it would block before the thread waits.
        while !(up.step()? & down.step()?) {
            // SAFETY: `events` is ours and its length is passed.
            if unsafe { libc::epoll_wait(ep.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, -1) } < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// One direction of `--epoll`: its own non-blocking pipe and what it still holds.
    struct Way<'a> {
        from: &'a TcpStream,
        to: &'a TcpStream,
        rd: OwnedFd,
        wr: OwnedFd,
        in_pipe: usize,
        ended: bool,
    }

    impl<'a> Way<'a> {
        fn new(from: &'a TcpStream, to: &'a TcpStream) -> std::io::Result<Self> {
            let (rd, wr) = pipe(libc::O_NONBLOCK)?;
            Ok(Way { from, to, rd, wr, in_pipe: 0, ended: false })
        }

        /// Moves what can move now; true once `from` ended and everything reached `to`.
        fn step(&mut self) -> std::io::Result<bool> {
            let flags = libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK;
            loop {
                let moved = if self.in_pipe > 0 {
                    splice_with(self.rd.as_raw_fd(), self.to.as_raw_fd(), self.in_pipe, flags)
                        .map(|n| self.in_pipe -= n)
                } else if self.ended {
                    return Ok(true);
                } else {
                    splice_with(self.from.as_raw_fd(), self.wr.as_raw_fd(), 1 << 20, flags).map(|n| {
                        self.in_pipe = n;
                        if n == 0 {
                            self.ended = true;
                            let _ = self.to.shutdown(Shutdown::Write);
                        }
                    })
                };
                match moved {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                    Err(e) => return Err(e),
                }
            }
        }
    }
}
