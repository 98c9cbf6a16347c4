//! The unit a channel's data arrives in, and how a reader takes it: what a tunnel (tunnel.rs) and
//! a nested hop's transport (carrier.rs) both do with russh's queue of packets. How large a
//! packet a session's jump host may send is the path's choice ([`super::Dial`]).

use std::task::{Context, Poll, ready};

use bytes::Bytes;
use kharon_relay::ChunkQueue;
use tokio::sync::mpsc;

/// How many packets of up to `largest` bytes make up `bytes`: a buffer's bound in bytes, whatever
/// the packet size of the session it takes from (at least one).
pub(crate) fn within(bytes: usize, largest: u32) -> usize {
    (bytes / largest as usize).max(1)
}

/// Packets that fit a reader's buffer of `remaining` bytes (at least one): packets left on the
/// queue are how its producer sees a reader that stalled. Counted in `packet`s (OpenSSH's 32 KiB,
/// `FlowSettings::packet`), what OpenSSH sends even when allowed more (it packs what one 32 KiB
/// read brought, unless a backlog waits): a far hop's batch may hold up to twice the buffer, and
/// the rest waits in the reader's queue.
pub(crate) fn fitting(remaining: usize, packet: u32) -> usize {
    remaining.div_ceil(packet as usize).max(1)
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

    const PACKET: u32 = 32 * 1024;
    const LARGE_PACKET: u32 = 65_535;

    #[test]
    fn a_reader_takes_whole_packets_and_at_least_one() {
        assert_eq!(fitting(0, PACKET), 1);
        assert_eq!(fitting(1, PACKET), 1);
        assert_eq!(fitting(PACKET as usize, PACKET), 1);
        assert_eq!(fitting(PACKET as usize + 1, PACKET), 2);
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
