//! The unit a channel's data arrives in, and how a reader takes it: what a tunnel (tunnel.rs) and
//! a nested hop's transport (carrier.rs) both do with russh's queue of packets.

use std::task::{Context, Poll, ready};

use bytes::Bytes;
use kharon_relay::ChunkQueue;
use tokio::sync::mpsc;

/// OpenSSH's packet size; russh logs an error above 65535 (docs/ssh-engine.md, "Window and packet size").
pub(super) const PACKET: u32 = 32 * 1024;

/// Packets that fit a reader's buffer of `remaining` bytes (at least one): packets left on the
/// queue are how its producer sees a reader that stalled.
pub(super) fn fitting(remaining: usize) -> usize {
    remaining.div_ceil(PACKET as usize).max(1)
}

/// Queues a packet from `inbound` unless one is queued, then every packet already waiting, up to
/// `most` in all: the caller then writes (and wakes its client) once per batch instead of once
/// per 32 KiB packet. `Ready(false)`: `inbound` has ended and nothing is queued.
pub(super) fn fill(
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
