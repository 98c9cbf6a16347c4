//! `thin-relay`: the thinnest SOCKS5 relay we could write, as a ceiling for bench/direct.sh.
//!
//! No routing, no auth, no async runtime, no limits: one OS thread per direction doing blocking
//! splice(2) through a 1 MiB pipe. Whatever it reaches on a machine is roughly the most any
//! userspace relay can get there, so kharond's figure can be read against it and not only
//! against plain loopback (which has no relay at all). Linux only; not for real use.
//!
//! ```text
//! thin-relay 127.0.0.1:PORT
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
        let addr: SocketAddr = std::env::args().nth(1).context("usage: thin-relay ADDR:PORT")?.parse()?;
        let listener = TcpListener::bind(addr)?;
        for client in listener.incoming().flatten() {
            std::thread::spawn(move || {
                if let Err(e) = serve(client) {
                    eprintln!("thin-relay: {e:#}");
                }
            });
        }
        Ok(())
    }

    fn serve(mut client: TcpStream) -> anyhow::Result<()> {
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
        let (c2, u2) = (client.try_clone()?, upstream.try_clone()?);
        let up = std::thread::spawn(move || pump(&c2, &u2));
        pump(&upstream, &client)?;
        up.join().map_err(|_| anyhow::anyhow!("pump thread panicked"))??;
        Ok(())
    }

    /// `from` → `to` until end of stream, then half-closes `to`.
    fn pump(from: &TcpStream, to: &TcpStream) -> anyhow::Result<()> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: pipe2 fills the two-element array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: both descriptors are fresh and owned by nobody else.
        let (rd, wr) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on a descriptor we own; failure keeps the default size.
        unsafe { libc::fcntl(wr.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
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
        // SAFETY: plain syscall on descriptors that outlive it; null offsets mean stream I/O.
        let n = unsafe {
            libc::splice(from, std::ptr::null_mut(), to, std::ptr::null_mut(), len, libc::SPLICE_F_MOVE)
        };
        if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(n as usize) }
    }
}
