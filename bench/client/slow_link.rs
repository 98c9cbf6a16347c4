//! `slow-link`: a TCP forwarder that behaves like a long, narrow link, for benchmarks that need a
//! round-trip time where the machine offers no netem (`tc qdisc … netem` needs a kernel module
//! that containers often lack).
//!
//! ```text
//! slow-link LISTEN_ADDR TARGET_ADDR RTT_MS MBIT
//! ```
//!
//! Each direction of each accepted connection gets half the round-trip time as one-way delay and
//! the given rate, with a queue of two bandwidth-delay products in front of the "wire": when that
//! is full, the forwarder stops reading and TCP pushes back on the sender. Both ends talk to it
//! over loopback, so TCP's own window never limits a transfer; what the link does limit is any
//! window kept *above* TCP, such as an SSH channel's, which is what the routed benchmark shows.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const CHUNK: usize = 64 * 1024;

#[derive(Clone, Copy)]
struct Link {
    one_way: Duration,
    bytes_per_sec: f64,
    /// Chunks that may wait in front of the wire.
    queue: usize,
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, target, rtt_ms, mbit] = args.as_slice() else {
        bail!("usage: slow-link LISTEN_ADDR TARGET_ADDR RTT_MS MBIT");
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
    let bdp = bytes_per_sec * rtt.as_secs_f64();
    let link = Link { one_way: rtt / 2, bytes_per_sec, queue: ((2.0 * bdp) as usize / CHUNK).max(16) };
    let listener = TcpListener::bind(listen).with_context(|| format!("listening on {listen}"))?;
    for client in listener.incoming() {
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                eprintln!("slow-link: accept: {e}");
                continue;
            }
        };
        std::thread::spawn(move || {
            if let Err(e) = serve(client, target, link) {
                eprintln!("slow-link: {e:#}");
            }
        });
    }
    Ok(())
}

fn serve(client: TcpStream, target: SocketAddr, link: Link) -> anyhow::Result<()> {
    // The kernel completed the client's connect at once; hold the far end back instead, so its
    // first bytes (sshd's banner) arrive a round trip later, as over the real link.
    std::thread::sleep(link.one_way);
    let server = TcpStream::connect(target).with_context(|| format!("connecting to {target}"))?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
    }
    let up = direction(client.try_clone()?, server.try_clone()?, link);
    let down = direction(server, client, link);
    for handle in [up, down] {
        // A direction that failed has already shut its sockets down; the other one ends with it.
        let _ = handle.join();
    }
    Ok(())
}

/// Forwards `from` → `to` through the emulated link: a reader that queues what arrives with its
/// arrival time, and a wire that delivers each chunk once the link is free and the delay passed.
fn direction(from: TcpStream, to: TcpStream, link: Link) -> std::thread::JoinHandle<()> {
    let (tx, rx) = sync_channel::<(Instant, Vec<u8>)>(link.queue);
    std::thread::spawn(move || {
        let wire = std::thread::spawn(move || wire(rx, to, link));
        read(from, tx);
        let _ = wire.join();
    })
}

fn read(mut from: TcpStream, tx: SyncSender<(Instant, Vec<u8>)>) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match from.read(&mut buf) {
            // EOF (or an error, which ends the stream the same way): the wire half-closes `to`.
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    let _ = from.shutdown(Shutdown::Both);
                    return;
                }
            }
        }
    }
}

fn wire(rx: Receiver<(Instant, Vec<u8>)>, mut to: TcpStream, link: Link) {
    let mut free_at = Instant::now();
    for (arrived, data) in rx {
        let start = free_at.max(arrived);
        free_at = start + Duration::from_secs_f64(data.len() as f64 / link.bytes_per_sec);
        let due = free_at + link.one_way;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if to.write_all(&data).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
