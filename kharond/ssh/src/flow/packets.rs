//! The unit a channel's data arrives in, and how a reader takes it: what a tunnel (tunnel.rs) and
//! a nested hop's transport (carrier.rs) both do with russh's queue of packets.

use std::task::{Context, Poll, ready};

use bytes::Bytes;
use kharon_relay::ChunkQueue;
use tokio::sync::mpsc;

use crate::flow::window;

/// OpenSSH's packet size (`CHAN_TCP_PACKET_DEFAULT`, channels.h), what its sshd reads from a
/// forwarded socket per pass (`CHANNEL_MAX_READ`), what we send per packet, and the largest a
/// near jump host may send us: the unit a reader's batch is counted in.
pub(crate) const PACKET: u32 = 32 * 1024;

/// The largest data packet a far jump host may send us: about two [`PACKET`]s, so that an sshd
/// which reads 32 KiB per pass and sends one packet per pass can drain a backlog in its channel
/// buffer instead of carrying it along, at the cost of a copy of the whole buffer per read while
/// it grows (docs/ssh-engine.md, "At 1 Gbit/s"). Not 64 KiB: russh logs an error above 65,535.
pub(crate) const LARGE_PACKET: u32 = 65_535;

/// Sessions dialled with a larger window than this get [`LARGE_PACKET`]s: twice OpenSSH's own
/// window ([`window::ASSUMED_FLOOR`], what `ssh -D` allows), a backlog whose cost is at most four
/// times what OpenSSH users pay. Not OpenSSH's window itself: a hop's round trip as dialled
/// includes its sshd's start-up (`chain::first_byte`), 13 ms on loopback with sshd logging at
/// DEBUG1, which lifts a near hop's window a little past 2 MiB. This one takes about 26 ms at the
/// assumed 1 Gbit/s (`window::assumed`).
pub(crate) const LARGE_PACKETS_ABOVE: u32 = 2 * window::ASSUMED_FLOOR;

/// The largest packet a session dialled with `window` lets its jump host send
/// (`client::Config::maximum_packet_size`; russh opens every channel of the session with it).
/// A backlog in an sshd's channel buffer can grow to what our window lets it take in, and where
/// that is no more than [`LARGE_PACKETS_ABOVE`], [`PACKET`] keeps both ends' CPU per byte lowest:
/// on loopback, [`LARGE_PACKET`]s cost the sshd and kharond a quarter more of it. Only a session
/// with a larger window, a far hop or one behind a `ProxyCommand`, gets [`LARGE_PACKET`]s.
pub(crate) fn largest_received(window: u32) -> u32 {
    if window > LARGE_PACKETS_ABOVE { LARGE_PACKET } else { PACKET }
}

/// How many packets of up to `largest` bytes make up `bytes`: a buffer's bound in bytes, whatever
/// the packet size of the session it takes from (at least one).
pub(crate) fn within(bytes: usize, largest: u32) -> usize {
    (bytes / largest as usize).max(1)
}

/// Packets that fit a reader's buffer of `remaining` bytes (at least one): packets left on the
/// queue are how its producer sees a reader that stalled. Counted in [`PACKET`]s, what OpenSSH
/// sends even when allowed more (it packs what one 32 KiB read brought, unless a backlog waits):
/// a far hop's batch may hold up to twice the buffer, and the rest waits in the reader's queue.
pub(crate) fn fitting(remaining: usize) -> usize {
    remaining.div_ceil(PACKET as usize).max(1)
}

/// Queues a packet from `inbound` unless one is queued, then every packet already waiting, up to
/// `most` in all: the caller then writes (and wakes its client) once per batch instead of once
/// per 32 KiB packet. `Ready(false)`: `inbound` has ended and nothing is queued.
pub(crate) fn fill(
    queued: &mut ChunkQueue,
    inbound: &mut mpsc::Receiver<Bytes>,
    cx: &mut Context<'_>,
    most: usize,
) -> Poll<bool> {
    // A loop: an empty data packet is legal and queues nothing, and an empty queue offered to
    // the relay would read as the end of the stream.
    while queued.is_empty() {
        match ready!(inbound.poll_recv(cx)) {
            Some(data) => queued.push(data),
            None => return Poll::Ready(false),
        }
    }
    while queued.len() < most {
        match inbound.try_recv() {
            Ok(next) => queued.push(next),
            Err(_) => break,
        }
    }
    Poll::Ready(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_takes_whole_packets_and_at_least_one() {
        assert_eq!(fitting(0), 1);
        assert_eq!(fitting(1), 1);
        assert_eq!(fitting(PACKET as usize), 1);
        assert_eq!(fitting(PACKET as usize + 1), 2);
    }

    #[test]
    fn only_a_session_dialled_with_more_than_openssh_s_window_gets_large_packets() {
        use std::time::Duration;
        let near = window::assumed(Some(Duration::from_micros(200)));
        assert_eq!(near, window::ASSUMED_FLOOR, "a loopback hop is dialled with OpenSSH's window");
        assert_eq!(largest_received(near), PACKET);
        let slow_start = window::assumed(Some(Duration::from_millis(13)));
        assert!(slow_start > window::ASSUMED_FLOOR, "{slow_start}");
        assert_eq!(largest_received(slow_start), PACKET, "a near hop whose sshd took 13 ms to answer");
        assert_eq!(largest_received(window::FLOOR), PACKET, "a slow path's measured window");
        let far = window::assumed(Some(Duration::from_millis(50)));
        assert!(far > window::ASSUMED_FLOOR, "{far}");
        assert_eq!(largest_received(far), LARGE_PACKET);
        assert_eq!(largest_received(window::assumed(None)), LARGE_PACKET, "behind a ProxyCommand");
        assert_eq!(largest_received(LARGE_PACKETS_ABOVE), PACKET);
        assert_eq!(largest_received(LARGE_PACKETS_ABOVE + 1), LARGE_PACKET);
    }

    #[test]
    fn a_buffer_holds_the_same_bytes_whatever_the_packet_size() {
        let bytes = 32 << 20;
        assert_eq!(within(bytes, PACKET), 1024);
        assert_eq!(within(bytes, LARGE_PACKET), 512);
        assert!(within(bytes, LARGE_PACKET) * LARGE_PACKET as usize <= bytes);
        assert_eq!(within(0, PACKET), 1, "a buffer holds at least one packet");
    }

    #[test]
    fn an_empty_packet_is_skipped_not_taken_for_the_end_and_a_batch_stops_at_most() {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (tx, mut inbound) = mpsc::channel(8);
        for packet in [&b""[..], b"one", b"", b"two", b"three"] {
            tx.try_send(Bytes::copy_from_slice(packet)).unwrap();
        }
        let mut queued = ChunkQueue::default();
        assert_eq!(fill(&mut queued, &mut inbound, &mut cx, 2), Poll::Ready(true));
        assert_eq!(queued.len(), 2, "one, two: the empty packets queue nothing");
        queued.consume(6);
        assert_eq!(fill(&mut queued, &mut inbound, &mut cx, 2), Poll::Ready(true));
        assert_eq!(queued.len(), 1);
        queued.consume(5);
        assert!(fill(&mut queued, &mut inbound, &mut cx, 2).is_pending(), "nothing waiting yet");
        tx.try_send(Bytes::new()).unwrap();
        drop(tx);
        assert_eq!(
            fill(&mut queued, &mut inbound, &mut cx, 2),
            Poll::Ready(false),
            "the end, after an empty packet"
        );
    }
}
