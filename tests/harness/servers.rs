//! Targets on loopback: a small HTTP/1.1 server (one thread per connection) that serves
//! deterministic payloads of any size, so transfers can be checked byte for byte.
//!
//! - `GET /hello` → `hello from NAME` (text/plain)
//! - `GET /bytes/N` → N bytes of [`pattern`]
//! - `GET /hold/N/S` → N bytes of [`pattern`] without a length, then the connection stays open S
//!   seconds before the server closes it (the body ends there): a client that is still
//!   transferring, whose byte counts are final while it waits
//! - `GET /paced/N/MS` → N bytes of [`pattern`], 64 KiB at a time with MS milliseconds between
//!   chunks: a download that keeps a link busy for a while without filling it
//! - `POST /sink/N` → reads an N-byte body and checks it against [`pattern`]: `received N`, or
//!   400 with the first offset that differs (an upload checked byte for byte)
//! - `GET /page` → the HTML given to [`HttpServer::with_page`] (a web site a browser visits)
//! - anything else → 404

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The payloads' period: not a power of two, so offset errors show.
pub const PERIOD: u64 = 251;

/// Byte `i` of every payload.
pub fn pattern_byte(i: u64) -> u8 {
    (i % PERIOD) as u8
}

pub fn pattern(len: usize) -> Vec<u8> {
    (0..len as u64).map(pattern_byte).collect()
}

pub struct HttpServer {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl HttpServer {
    pub fn start(name: &str) -> Self {
        Self::bind(name, "127.0.0.1:0")
    }

    pub fn bind(name: &str, addr: &str) -> Self {
        Self::with_page(name, addr, "")
    }

    /// A server on `addr` that also serves `html` as `text/html` at `/page`.
    pub fn with_page(name: &str, addr: &str, html: &str) -> Self {
        let page: Arc<str> = Arc::from(html);
        let listener = TcpListener::bind(addr).expect("bind http server");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (name, counter, stopping) = (name.to_owned(), Arc::clone(&requests), Arc::clone(&stop));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (name, counter, page) = (name.clone(), Arc::clone(&counter), Arc::clone(&page));
                std::thread::spawn(move || serve(stream, &name, &page, &counter));
            }
        });
        Self { addr, requests, stop }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(stream: TcpStream, name: &str, page: &str, counter: &AtomicUsize) {
    let Ok(read_half) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        // Skip headers, but honour `Connection: close`: then the server closes first, as
        // HTTP/1.0 servers and many APIs do.
        let mut close = false;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            close |= line.to_ascii_lowercase().replace(' ', "").starts_with("connection:close");
        }
        counter.fetch_add(1, Ordering::Relaxed);
        let path = request_line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let ok = if path == "/hello" {
            let body = format!("hello from {name}");
            // text/plain, so a browser shows it rather than downloading it.
            write_typed(&mut out, 200, "text/plain", body.len() as u64, |w| w.write_all(body.as_bytes()))
        } else if path == "/page" && !page.is_empty() {
            write_typed(&mut out, 200, "text/html", page.len() as u64, |w| w.write_all(page.as_bytes()))
        } else if let Some((n, secs)) = path.strip_prefix("/hold/").and_then(|rest| {
            let (n, secs) = rest.split_once('/')?;
            Some((n.parse::<usize>().ok()?, secs.parse::<u64>().ok()?))
        }) {
            let head =
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n";
            let _ = out.write_all(head.as_bytes()).and_then(|()| out.write_all(&pattern(n)));
            let _ = out.flush();
            std::thread::sleep(std::time::Duration::from_secs(secs));
            return;
        } else if let Some((n, pause)) = path.strip_prefix("/paced/").and_then(|rest| {
            let (n, ms) = rest.split_once('/')?;
            Some((n.parse::<u64>().ok()?, std::time::Duration::from_millis(ms.parse().ok()?)))
        }) {
            write_response(&mut out, 200, n, |w| {
                write_pattern(w, n, |sent| {
                    if sent < n {
                        std::thread::sleep(pause);
                    }
                })
            })
        } else if let Some(n) = path.strip_prefix("/sink/").and_then(|n| n.parse::<u64>().ok()) {
            let body = match check_body(&mut reader, n) {
                Ok(()) => format!("received {n}"),
                Err(why) => {
                    let _ = write_typed(&mut out, 400, "text/plain", why.len() as u64, |w| {
                        w.write_all(why.as_bytes())
                    });
                    return;
                }
            };
            write_typed(&mut out, 200, "text/plain", body.len() as u64, |w| w.write_all(body.as_bytes()))
        } else if let Some(n) = path.strip_prefix("/bytes/").and_then(|n| n.parse::<u64>().ok()) {
            write_response(&mut out, 200, n, |w| write_pattern(w, n, |_| {}))
        } else {
            write_response(&mut out, 404, 9, |w| w.write_all(b"not found"))
        };
        if ok.is_err() || close {
            return;
        }
    }
}

/// Bytes written at a time by [`write_pattern`], read at a time by [`check_body`].
const CHUNK: usize = 64 * 1024;

/// Writes `n` bytes of [`pattern`] in [`CHUNK`]s, calling `after` with the count so far after
/// each. The test binary is unoptimised: a division per byte made this loop, not kharond, the
/// bottleneck of a 2 GiB transfer; one chunk plus a period holds every window of the pattern.
fn write_pattern(w: &mut TcpStream, n: u64, mut after: impl FnMut(u64)) -> std::io::Result<()> {
    let period = pattern(CHUNK + PERIOD as usize);
    let mut sent = 0u64;
    while sent < n {
        let len = (n - sent).min(CHUNK as u64) as usize;
        let off = (sent % PERIOD) as usize;
        w.write_all(&period[off..off + len])?;
        sent += len as u64;
        after(sent);
    }
    Ok(())
}

/// Reads an `n`-byte body and checks it against [`pattern`]; the error names where it differs or
/// ended.
fn check_body(reader: &mut impl Read, n: u64) -> Result<(), String> {
    let period = pattern(CHUNK + PERIOD as usize);
    let mut buf = vec![0u8; CHUNK];
    let mut got = 0u64;
    while got < n {
        let want = (n - got).min(CHUNK as u64) as usize;
        let read =
            reader.read(&mut buf[..want]).map_err(|e| format!("body ended after {got} of {n} bytes: {e}"))?;
        if read == 0 {
            return Err(format!("body ended after {got} of {n} bytes"));
        }
        let off = (got % PERIOD) as usize;
        if buf[..read] != period[off..off + read] {
            return Err(format!("body differs from the pattern near byte {got}"));
        }
        got += read as u64;
    }
    Ok(())
}

fn write_response(
    out: &mut TcpStream,
    status: u16,
    len: u64,
    body: impl FnOnce(&mut TcpStream) -> std::io::Result<()>,
) -> std::io::Result<()> {
    write_typed(out, status, "application/octet-stream", len, body)
}

fn write_typed(
    out: &mut TcpStream,
    status: u16,
    content_type: &str,
    len: u64,
    body: impl FnOnce(&mut TcpStream) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        _ => "Not Found",
    };
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Length: {len}\r\nContent-Type: {content_type}\r\n\r\n"
    )?;
    body(out)?;
    out.flush()
}
