//! The traffic `link-check` sends through the emulated link, and what it records of it: UDP
//! round trips, one-way UDP streams (each datagram carries its sequence number and the monotonic
//! time it was sent, which both namespaces share), and one TCP bulk transfer. Each end runs on a
//! thread of its own inside its namespace; every wait is bounded.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::netns::{self, monotonic_ns};

const ECHO_PORT: u16 = 7001;
const STREAM_PORT: u16 = 7002;
const TCP_PORT: u16 = 7003;
/// IPv4 and UDP headers: what a datagram adds to its payload on the wire.
pub const UDP_OVERHEAD: usize = 28;
/// A receiver ends once its sender has finished and nothing has arrived for this long.
const QUIET: Duration = Duration::from_secs(1);
/// How often a waiting socket looks at its stop flag.
const TICK: Duration = Duration::from_millis(50);

/// The two namespaces and the address of each end.
#[derive(Clone, Copy)]
pub struct Ends<'a> {
    pub near_ns: &'a str,
    pub far_ns: &'a str,
    pub near: Ipv4Addr,
    pub far: Ipv4Addr,
}

/// Runs `f` on a thread inside `netns`.
fn in_ns<'s, T: Send + 's>(
    scope: &'s Scope<'s, '_>,
    netns: &'s str,
    f: impl FnOnce() -> anyhow::Result<T> + Send + 's,
) -> ScopedJoinHandle<'s, anyhow::Result<T>> {
    scope.spawn(move || {
        netns::enter(netns)?;
        netns::precise_sleeps();
        f()
    })
}

fn joined<T>(h: ScopedJoinHandle<'_, anyhow::Result<T>>) -> anyhow::Result<T> {
    h.join().map_err(|_| anyhow::anyhow!("a probe thread panicked"))?
}

/// Round trips (ms) of small UDP probes from near to far and back, one every `gap`, until `stop`
/// is set (or `count` have been sent). A probe without an answer within a second is not counted.
pub fn round_trips(ends: Ends, gap: Duration, count: usize, stop: &AtomicBool) -> anyhow::Result<Vec<f64>> {
    let done = &AtomicBool::new(false);
    std::thread::scope(|s| {
        let (ready, bound) = mpsc::channel();
        let server = in_ns(s, ends.far_ns, move || {
            let sock = UdpSocket::bind((ends.far, ECHO_PORT)).context("binding the echo server")?;
            sock.set_read_timeout(Some(TICK))?;
            let _ = ready.send(());
            let mut buf = [0u8; 64];
            while !done.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
            Ok(())
        });
        let client = in_ns(s, ends.near_ns, move || {
            bound.recv_timeout(Duration::from_secs(5)).context("the echo server did not start")?;
            let sock = UdpSocket::bind((ends.near, 0))?;
            sock.connect((ends.far, ECHO_PORT))?;
            sock.set_read_timeout(Some(Duration::from_secs(1)))?;
            let mut rtts = Vec::new();
            let mut buf = [0u8; 64];
            for seq in 0..count as u64 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let sent = Instant::now();
                sock.send(&seq.to_be_bytes())?;
                // An answer to an earlier probe that came late is skipped.
                while let Ok(n) = sock.recv(&mut buf) {
                    if n == 8 && buf[..8] == seq.to_be_bytes() {
                        rtts.push(sent.elapsed().as_secs_f64() * 1e3);
                        break;
                    }
                }
                std::thread::sleep(gap.saturating_sub(sent.elapsed()));
            }
            Ok(rtts)
        });
        let rtts = joined(client);
        done.store(true, Ordering::Relaxed);
        joined(server)?;
        rtts
    })
}

/// One datagram as it arrived.
#[derive(Clone, Copy)]
pub struct Arrival {
    pub seq: u64,
    pub sent_ns: u64,
    pub arrived_ns: u64,
}

pub struct Stream {
    /// Datagrams the sender handed to its kernel, and those the kernel refused (a full queue
    /// of its own, in front of the emulator).
    pub sent: u64,
    pub refused: u64,
    pub arrivals: Vec<Arrival>,
    /// Datagrams the receiving namespace's kernel dropped because a socket's buffer was full
    /// (its receiver did not get the CPU to read them in time), while the stream lasted.
    pub receiver_dropped: u64,
}

/// Sends datagrams of `size` bytes on the wire (IP header included) from one end to the other,
/// one every `every` on average (in bursts a quarter of a millisecond apart), for `length`;
/// records every arrival.
pub fn stream(
    ends: Ends,
    up: bool,
    size: usize,
    every: Duration,
    length: Duration,
) -> anyhow::Result<Stream> {
    let (from_ns, from, to_ns, to) = if up {
        (ends.near_ns, ends.near, ends.far_ns, ends.far)
    } else {
        (ends.far_ns, ends.far, ends.near_ns, ends.near)
    };
    if size < UDP_OVERHEAD + 16 {
        bail!("datagrams of {size} bytes cannot carry a sequence number and a time");
    }
    let sender_done = &AtomicBool::new(false);
    std::thread::scope(|s| {
        let (ready, bound) = mpsc::channel();
        let receiver = in_ns(s, to_ns, move || {
            let sock = UdpSocket::bind((to, STREAM_PORT)).context("binding the stream's receiver")?;
            large_receive_buffer(&sock);
            sock.set_read_timeout(Some(TICK))?;
            let dropped_before = udp_receive_buffer_errors();
            let _ = ready.send(());
            let mut arrivals = Vec::new();
            let mut buf = vec![0u8; 65_536];
            let mut last = Instant::now();
            loop {
                match sock.recv(&mut buf) {
                    Ok(n) if n >= 16 => {
                        let word =
                            |i: usize| u64::from_be_bytes(buf[i..i + 8].try_into().unwrap_or_default());
                        arrivals.push(Arrival { seq: word(0), sent_ns: word(8), arrived_ns: monotonic_ns() });
                        last = Instant::now();
                    }
                    _ if sender_done.load(Ordering::Relaxed) && last.elapsed() > QUIET => break,
                    _ => {}
                }
            }
            Ok((arrivals, udp_receive_buffer_errors().saturating_sub(dropped_before)))
        });
        let sender = in_ns(s, from_ns, move || {
            bound.recv_timeout(Duration::from_secs(5)).context("the stream's receiver did not start")?;
            let sock = UdpSocket::bind((from, 0))?;
            sock.connect(SocketAddr::from((to, STREAM_PORT)))?;
            let result = pace(&sock, size - UDP_OVERHEAD, every, length);
            sender_done.store(true, Ordering::Relaxed);
            result
        });
        let sent = joined(sender);
        // The receiver stops on its own once the sender is done, even if the sender failed.
        sender_done.store(true, Ordering::Relaxed);
        let (arrivals, receiver_dropped) = joined(receiver)?;
        let (sent, refused) = sent?;
        Ok(Stream { sent, refused, arrivals, receiver_dropped })
    })
}

/// A 32 MiB receive buffer (SO_RCVBUFFORCE, as root, past net.core.rmem_max), so that a receiver
/// kept off the CPU for a while loses nothing; the default if refused.
fn large_receive_buffer(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 32 << 20;
    // SAFETY: setsockopt reads the int we pass, of its size, for a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let _ = socket2::SockRef::from(sock).set_recv_buffer_size(size as usize);
    }
}

/// `Udp: RcvbufErrors` of /proc/net/snmp in the calling thread's namespace (0 if unreadable).
fn udp_receive_buffer_errors() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/net/snmp") else { return 0 };
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (Some(names), Some(values)) = (lines.next(), lines.next()) else { return 0 };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// Sends `payload`-byte datagrams on `sock`, one per `every`, for `length`: (sent, refused).
fn pace(sock: &UdpSocket, payload: usize, every: Duration, length: Duration) -> anyhow::Result<(u64, u64)> {
    let mut datagram = vec![0u8; payload];
    let start = Instant::now();
    let (mut seq, mut refused) = (0u64, 0u64);
    while start.elapsed() < length {
        let due = (start.elapsed().as_nanos() / every.as_nanos().max(1)) as u64;
        while seq < due {
            datagram[..8].copy_from_slice(&seq.to_be_bytes());
            datagram[8..16].copy_from_slice(&monotonic_ns().to_be_bytes());
            match sock.send(&datagram) {
                Ok(_) => {}
                Err(e)
                    if matches!(e.kind(), ErrorKind::WouldBlock)
                        || e.raw_os_error() == Some(libc::ENOBUFS) =>
                {
                    refused += 1
                }
                Err(e) => return Err(e).context("sending a datagram"),
            }
            seq += 1;
        }
        std::thread::sleep(Duration::from_micros(250));
    }
    Ok((seq, refused))
}

/// What the receiving end of one TCP bulk transfer saw.
pub struct Bulk {
    /// The congestion control of the sending socket.
    pub congestion_control: String,
    /// The most a send buffer may grow to in the sender's namespace (tcp_wmem's third value).
    pub send_buffer_max: u64,
    /// (ns since the first byte, bytes so far), about every 100 ms.
    pub progress: Vec<(u64, u64)>,
    /// When the first byte arrived (CLOCK_MONOTONIC ns).
    pub first_byte_ns: u64,
}

/// One TCP transfer far → near (`down`) or near → far for `length`, measured where it arrives.
pub fn bulk(ends: Ends, down: bool, length: Duration) -> anyhow::Result<Bulk> {
    std::thread::scope(|s| {
        let (ready, bound) = mpsc::channel();
        let server = in_ns(s, ends.far_ns, move || {
            let listener = TcpListener::bind((ends.far, TCP_PORT)).context("binding the TCP server")?;
            let _ = ready.send(());
            let stream = accept_within(&listener, Duration::from_secs(10))?;
            serve_end(stream, down, length)
        });
        let wmem = in_ns(s, if down { ends.far_ns } else { ends.near_ns }, send_buffer_max);
        let client = in_ns(s, ends.near_ns, move || {
            bound.recv_timeout(Duration::from_secs(5)).context("the TCP server did not start")?;
            let stream =
                TcpStream::connect_timeout(&SocketAddr::from((ends.far, TCP_PORT)), Duration::from_secs(5))
                    .context("connecting through the link")?;
            serve_end(stream, !down, length)
        });
        let (a, b) = (joined(client)?, joined(server)?);
        let ((cc, _), (_, received)) = if down { (b, a) } else { (a, b) };
        Ok(Bulk {
            congestion_control: cc,
            send_buffer_max: joined(wmem)?,
            progress: received.progress,
            first_byte_ns: received.first_byte_ns,
        })
    })
}

/// One end of the transfer: the sender's congestion control, or what the receiver saw.
fn serve_end(stream: TcpStream, sends: bool, length: Duration) -> anyhow::Result<(String, Received)> {
    if sends {
        send_for(stream, length).map(|cc| (cc, Received::default()))
    } else {
        receive(stream, length).map(|r| (String::new(), r))
    }
}

/// The first connection to `listener`, if one comes within `wait`.
fn accept_within(listener: &TcpListener, wait: Duration) -> anyhow::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let start = Instant::now();
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && start.elapsed() < wait => std::thread::sleep(TICK),
            Err(e) => return Err(e).context("waiting for the bulk transfer's connection"),
        }
    }
}

/// Writes zeros to `stream` for `length`; the socket's congestion control.
fn send_for(mut stream: TcpStream, length: Duration) -> anyhow::Result<String> {
    let cc = congestion_control(&stream);
    stream.set_write_timeout(Some(TICK))?;
    let chunk = vec![0u8; 256 << 10];
    let start = Instant::now();
    while start.elapsed() < length {
        match stream.write(&chunk) {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e).context("sending the bulk transfer"),
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(cc)
}

/// What [`receive`] saw: [`Bulk::progress`] and [`Bulk::first_byte_ns`].
#[derive(Default)]
struct Received {
    progress: Vec<(u64, u64)>,
    first_byte_ns: u64,
}

/// Reads `stream` until it ends or `length` has passed since the first byte.
fn receive(mut stream: TcpStream, length: Duration) -> anyhow::Result<Received> {
    stream.set_read_timeout(Some(TICK))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut first: Option<Instant> = None;
    let mut first_byte_ns = 0;
    let (mut total, mut progress, mut next_mark) = (0u64, Vec::new(), 0u64);
    let started = Instant::now();
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e).context("receiving the bulk transfer"),
        }
        let since = *first.get_or_insert_with(|| {
            first_byte_ns = monotonic_ns();
            Instant::now()
        });
        let ns = since.elapsed().as_nanos() as u64;
        if ns >= next_mark {
            progress.push((ns, total));
            next_mark = ns + 100_000_000;
        }
        if since.elapsed() > length || started.elapsed() > length + Duration::from_secs(10) {
            break;
        }
    }
    if let Some(since) = first {
        progress.push((since.elapsed().as_nanos() as u64, total));
    }
    Ok(Received { progress, first_byte_ns })
}

/// The third value of net.ipv4.tcp_wmem in the calling thread's namespace.
fn send_buffer_max() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").context("reading tcp_wmem")?;
    text.split_whitespace().nth(2).and_then(|v| v.parse().ok()).context("tcp_wmem without a maximum")
}

/// TCP_CONGESTION of a socket ("bbr", "cubic"), or "?".
fn congestion_control(stream: &TcpStream) -> String {
    use std::os::fd::AsRawFd;
    let mut name = [0u8; 16];
    let mut len = name.len() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the buffer we own.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return "?".into();
    }
    let end = name.iter().position(|&b| b == 0).unwrap_or(len as usize);
    String::from_utf8_lossy(&name[..end]).into_owned()
}
