//! `slow-link`: a TCP forwarder that behaves like a long, narrow link with a router buffer in
//! front of it, for benchmarks that need a round trip where the kernel offers no netem (`tc qdisc
//! … netem` needs a module that this kernel and many containers lack).
//!
//! ```text
//! slow-link LISTEN_ADDR TARGET_ADDR RTT_MS MBIT [QUEUE_KIB]
//! ```
//!
//! What it emulates: one bottleneck link per direction, shared by every connection through the
//! forwarder (as a real link to a jump host is shared by every TCP connection to it), carrying
//! MBIT with half the round trip as one-way delay, behind a FIFO buffer of a fixed size, the
//! drop-tail queue of the router in front of it: QUEUE_KIB, by default one bandwidth-delay product
//! of the link (the classic rule for sizing router buffers, Villamizar and Song, 1994), at least
//! 64 KiB. A byte waits in that buffer for the bytes of *every* connection ahead of it.
//!
//! What it cannot emulate is the drop: it ends TCP on both sides, so when the buffer is full it
//! stops reading and the sender's TCP feels back-pressure where a real one would lose a segment
//! and back off. Either way the excess waits in the sender's own socket buffer, not in the
//! router. So that it does not wait in *this* forwarder's socket buffers instead (on loopback the
//! kernel would grow them to megabytes: a hidden second queue), they are kept small
//! ([`SOCKET_BUFFER`]).
//!
//! Both ends talk to it over loopback, so TCP's own window never limits a transfer; what the link
//! does limit is any window kept *above* TCP, such as an SSH channel's, which is what the routed
//! benchmarks show, and how many bytes such a window parks in the buffer in front of other
//! connections' bytes (`bench/shaped.sh`).

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// What one read takes off a socket: a burst of segments.
const CHUNK: usize = 16 * 1024;
/// The receive buffer of each of the forwarder's sockets (the kernel doubles it).
const SOCKET_BUFFER: usize = 64 * 1024;
/// Chunks on their way to one connection's receiver (in flight on the wire, not queued).
const IN_FLIGHT: usize = 64 * 1024;

#[derive(Clone, Copy)]
struct Shape {
    one_way: Duration,
    bytes_per_sec: f64,
    /// The router buffer, in bytes.
    queue: usize,
}

/// A chunk in the buffer, with where it goes once it has crossed the link (`None`: the sender
/// closed, the receiver's side is shut once the bytes before it are delivered).
struct Packet {
    arrived: Instant,
    data: Option<Vec<u8>>,
    out: SyncSender<(Instant, Option<Vec<u8>>)>,
}

/// One direction of the link: the buffer's fill (bytes) and the wire that empties it.
struct Link {
    queued: Mutex<usize>,
    room: Condvar,
    wire: Mutex<Sender<Packet>>,
    shape: Shape,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, target, rtt_ms, mbit, queue_kib) = match args.as_slice() {
        [l, t, r, m] => (l, t, r, m, None),
        [l, t, r, m, q] => (l, t, r, m, Some(q)),
        _ => bail!("usage: slow-link LISTEN_ADDR TARGET_ADDR RTT_MS MBIT [QUEUE_KIB]"),
    };
    let listen: SocketAddr = listen.parse().with_context(|| format!("LISTEN_ADDR {listen}: not IP:PORT"))?;
    let target: SocketAddr = target.parse().with_context(|| format!("TARGET_ADDR {target}: not IP:PORT"))?;
    let rtt =
        Duration::from_millis(rtt_ms.parse().with_context(|| format!("RTT_MS {rtt_ms}: not a number"))?);
    let rate: f64 = mbit.parse().with_context(|| format!("MBIT {mbit}: not a number"))?;
    if !rate.is_finite() || rate <= 0.0 {
        bail!("MBIT {mbit}: must be a number above 0");
    }
    let bytes_per_sec = rate * 1e6 / 8.0;
    let queue = match queue_kib {
        Some(q) => q.parse::<usize>().with_context(|| format!("QUEUE_KIB {q}: not a number"))? * 1024,
        None => ((bytes_per_sec * rtt.as_secs_f64()) as usize).max(64 * 1024),
    };
    let shape = Shape { one_way: rtt / 2, bytes_per_sec, queue };
    eprintln!(
        "slow-link: {rtt:?} round trip, {rate} Mbit/s, a shared buffer of {} KiB per direction",
        queue / 1024
    );
    let up = link(shape);
    let down = link(shape);
    let listener = TcpListener::bind(listen).with_context(|| format!("listening on {listen}"))?;
    small_buffer(&listener);
    for client in listener.incoming() {
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                eprintln!("slow-link: accept: {e}");
                continue;
            }
        };
        let (up, down) = (up.clone(), down.clone());
        std::thread::spawn(move || {
            if let Err(e) = serve(client, target, &up, &down) {
                eprintln!("slow-link: {e:#}");
            }
        });
    }
    Ok(())
}

/// One direction of the link, with its wire thread.
fn link(shape: Shape) -> Arc<Link> {
    let (tx, rx) = channel();
    let link = Arc::new(Link { queued: Mutex::new(0), room: Condvar::new(), wire: Mutex::new(tx), shape });
    let l = link.clone();
    std::thread::spawn(move || wire(&l, rx));
    link
}

/// Keeps `socket`'s receive buffer at [`SOCKET_BUFFER`] (module doc: no hidden second queue). A
/// kernel that refuses leaves the default; the log says so.
fn small_buffer(socket: &impl std::os::fd::AsFd) {
    if let Err(e) = socket2::SockRef::from(socket).set_recv_buffer_size(SOCKET_BUFFER) {
        eprintln!("slow-link: SO_RCVBUF {SOCKET_BUFFER}: {e}");
    }
}

fn serve(client: TcpStream, target: SocketAddr, up: &Arc<Link>, down: &Arc<Link>) -> anyhow::Result<()> {
    // The kernel completed the client's connect at once; hold the far end back instead, so its
    // first bytes (sshd's banner) arrive a round trip later, as over the real link.
    std::thread::sleep(up.shape.one_way);
    let server = TcpStream::connect(target).with_context(|| format!("connecting to {target}"))?;
    small_buffer(&server);
    for s in [&client, &server] {
        s.set_nodelay(true)?;
    }
    let a = direction(client.try_clone()?, server.try_clone()?, up.clone());
    let b = direction(server, client, down.clone());
    for handle in [a, b] {
        // A direction that failed has already shut its sockets down; the other one ends with it.
        let _ = handle.join();
    }
    Ok(())
}

/// Forwards `from` → `to` across `link`: a reader that queues what arrives in the link's buffer
/// (waiting for room), and a receiver side that delivers each chunk when it has crossed.
fn direction(mut from: TcpStream, mut to: TcpStream, link: Arc<Link>) -> std::thread::JoinHandle<()> {
    let (out, arrivals) = sync_channel::<(Instant, Option<Vec<u8>>)>(IN_FLIGHT);
    std::thread::spawn(move || {
        let receiver = std::thread::spawn(move || deliver(arrivals, &mut to));
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf) {
                // EOF (or an error, which ends the stream the same way): the receiver half-closes.
                Ok(0) | Err(_) => 0,
                Ok(n) => n,
            };
            let data = (n > 0).then(|| buf[..n].to_vec());
            if n > 0 {
                let mut queued = link.queued.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                // Drop-tail, as back-pressure: a chunk that does not fit waits for room.
                while *queued > 0 && *queued + n > link.shape.queue {
                    queued = link.room.wait(queued).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                *queued += n;
            }
            let packet = Packet { arrived: Instant::now(), data, out: out.clone() };
            let sent = link.wire.lock().map(|w| w.send(packet).is_ok()).unwrap_or(false);
            if n == 0 || !sent {
                let _ = from.shutdown(Shutdown::Read);
                break;
            }
        }
        drop(out);
        let _ = receiver.join();
    })
}

/// The wire: takes chunks off the buffer in arrival order, one at a time at the link's rate, and
/// hands each to its connection's receiver with the time it arrives there.
fn wire(link: &Link, rx: Receiver<Packet>) {
    let mut free_at = Instant::now();
    for packet in rx {
        let len = packet.data.as_ref().map_or(0, Vec::len);
        let start = free_at.max(packet.arrived);
        free_at = start + Duration::from_secs_f64(len as f64 / link.shape.bytes_per_sec);
        if let Some(wait) = free_at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        {
            let mut queued = link.queued.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *queued = queued.saturating_sub(len);
        }
        link.room.notify_all();
        // A receiver that is gone (its connection failed) takes nothing more.
        let _ = packet.out.send((free_at + link.shape.one_way, packet.data));
    }
}

fn deliver(arrivals: Receiver<(Instant, Option<Vec<u8>>)>, to: &mut TcpStream) {
    for (due, data) in arrivals {
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let Some(data) = data else { break };
        if to.write_all(&data).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
