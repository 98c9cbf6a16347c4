//! The bench client's sockets: the servers it measures against (sink, echo, holder) and one
//! SOCKS5 CONNECT.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use anyhow::bail;

pub const BUF: usize = 1 << 20;

fn spawn_server(handle: impl Fn(TcpStream) + Send + Sync + Copy + 'static) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || handle(stream));
        }
    });
    Ok(addr)
}

/// Reads an 8-byte big-endian count, then sends that many bytes.
pub fn sink() -> anyhow::Result<SocketAddr> {
    spawn_server(|mut s| {
        let mut len = [0u8; 8];
        if s.read_exact(&mut len).is_err() {
            return;
        }
        let buf = vec![0x5au8; BUF];
        let mut left = u64::from_be_bytes(len);
        while left > 0 {
            let n = left.min(BUF as u64) as usize;
            if s.write_all(&buf[..n]).is_err() {
                return;
            }
            left -= n as u64;
        }
    })
}

/// Threads of the echo server, each accepting and serving one connection at a time: more than
/// the rate phase's workers, so none waits for a free one.
const ECHO_THREADS: usize = 128;
/// The echo server's thread name: the rate phase tells its CPU from the client's by it.
pub const ECHO_THREAD: &str = "echo";

/// Sends one byte back. Served by a fixed set of threads rather than a thread per connection:
/// spawning one per connection cost the machine more CPU per connection than kharond itself in
/// the rate phase (2 cores shared by client, server, proxy and sshd), which diluted the ratio
/// between the proxies it is meant to show.
pub fn echo() -> anyhow::Result<SocketAddr> {
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0")?);
    let addr = listener.local_addr()?;
    for _ in 0..ECHO_THREADS {
        let listener = Arc::clone(&listener);
        std::thread::Builder::new().name(ECHO_THREAD.into()).spawn(move || {
            while let Ok((mut s, _)) = listener.accept() {
                let mut b = [0u8; 1];
                if s.read_exact(&mut b).is_ok() {
                    let _ = s.write_all(&b);
                }
            }
        })?;
    }
    Ok(addr)
}

/// Answers requests on a kept-alive connection: each a 4-byte big-endian size, answered with that
/// many bytes (the page phase's web server).
pub fn objects() -> anyhow::Result<SocketAddr> {
    spawn_server(|mut s| {
        let body = vec![0x42u8; 64 * 1024];
        let mut size = [0u8; 4];
        while s.read_exact(&mut size).is_ok() {
            let n = (u32::from_be_bytes(size) as usize).min(body.len());
            if s.write_all(&body[..n]).is_err() {
                return;
            }
        }
    })
}

/// Asks for one object of `size` bytes on `s` and reads it whole.
pub fn fetch_object(s: &mut TcpStream, size: u32) -> anyhow::Result<()> {
    s.write_all(&size.to_be_bytes())?;
    let mut left = size as usize;
    let mut buf = [0u8; 16 * 1024];
    while left > 0 {
        let want = left.min(buf.len());
        let n = s.read(&mut buf[..want])?;
        if n == 0 {
            bail!("the server closed after {} of {size} bytes", size as usize - left);
        }
        left -= n;
    }
    Ok(())
}

/// Accepts connections and keeps them open, without a thread each, until [`Holder::release`].
pub struct Holder {
    pub addr: SocketAddr,
    held: Arc<Mutex<Vec<TcpStream>>>,
}

impl Holder {
    pub fn start() -> anyhow::Result<Holder> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let into = Arc::clone(&held);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Ok(mut v) = into.lock() {
                    v.push(stream);
                }
            }
        });
        Ok(Holder { addr, held })
    }

    pub fn held(&self) -> usize {
        self.held.lock().map(|v| v.len()).unwrap_or(0)
    }

    pub fn release(&self) {
        if let Ok(mut v) = self.held.lock() {
            v.clear();
        }
    }
}

/// Opens a stream to `target`, through SOCKS5 (no auth, CONNECT) when `socks` is given, naming
/// the target `name` (resolved by the proxy) or by its IP.
pub fn open(socks: Option<SocketAddr>, target: SocketAddr, name: Option<&str>) -> anyhow::Result<TcpStream> {
    let Some(proxy) = socks else {
        let s = TcpStream::connect(target)?;
        s.set_nodelay(true)?;
        return Ok(s);
    };
    let mut s = TcpStream::connect(proxy)?;
    s.set_nodelay(true)?;
    s.write_all(&[5, 1, 0])?;
    let mut m = [0u8; 2];
    s.read_exact(&mut m)?;
    let host = name.map(str::to_owned).unwrap_or_else(|| target.ip().to_string());
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&target.port().to_be_bytes());
    s.write_all(&req)?;
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply)?;
    if reply[1] != 0 {
        bail!("SOCKS reply {}", reply[1]);
    }
    Ok(s)
}

/// Connect, handshake, one byte there and back, close.
pub fn echo_once(socks: Option<SocketAddr>, echo: SocketAddr, name: Option<&str>) -> anyhow::Result<()> {
    let mut s = open(socks, echo, name)?;
    s.write_all(b"x")?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    Ok(())
}

/// Asks the sink for `bytes` and reads them all.
pub fn download(
    socks: Option<SocketAddr>,
    sink: SocketAddr,
    name: Option<&str>,
    bytes: u64,
) -> anyhow::Result<()> {
    let mut s = open(socks, sink, name)?;
    s.write_all(&bytes.to_be_bytes())?;
    let mut buf = vec![0u8; BUF];
    let mut got = 0u64;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    if got != bytes {
        bail!("received {got} of {bytes} bytes");
    }
    Ok(())
}
