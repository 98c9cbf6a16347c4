//! One direction of the emulated link, in virtual time: a drop-tail buffer in front of a
//! bottleneck that sends one packet at a time at the scheduled rate, random loss on the wire,
//! and the propagation delay after it. Nothing here sleeps or reads a clock: the caller says what
//! time it is (nanoseconds since the emulator started), offers each packet as it arrives and takes
//! each one off the far end once it is due.
//!
//! A packet that arrives at `t` starts crossing the bottleneck when the one before it has left
//! (`free_at`), takes its length in bits over the rate at that moment to cross, and reaches the far
//! end one delay later. Until it starts crossing it sits in the buffer; a packet that would
//! overfill the buffer is dropped on arrival (drop-tail). The packet being sent is no longer in
//! the buffer, as with a router's queue and the interface it feeds. A packet lost at random has
//! crossed the bottleneck (it took its time on the wire) and never arrives.
//!
//! Memory is bounded: the buffer by its limit, the wire by what the rate can put on it within
//! one delay.

use std::collections::VecDeque;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{Value, json};

use crate::spec::{Direction, QueueLimit};

/// What became of an offered packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// In the buffer or on the wire; it arrives when due.
    Sent,
    /// The buffer was full.
    Dropped,
    /// It crossed the bottleneck and was lost on the wire.
    Lost,
}

/// How late packets reached the far end, against when they were due: the emulator's own error.
const LATE_BOUNDS_US: [u64; 8] = [50, 100, 250, 500, 1_000, 2_000, 5_000, 10_000];

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub offered: u64,
    pub offered_bytes: u64,
    pub delivered: u64,
    pub delivered_bytes: u64,
    pub dropped: u64,
    pub lost: u64,
    pub write_errors: u64,
    pub max_queue_bytes: u64,
    pub max_queue_packets: u64,
    /// Deliveries per lateness bucket: below each of [`LATE_BOUNDS_US`], and above the last.
    late: [u64; LATE_BOUNDS_US.len() + 1],
    pub max_late_us: u64,
}

impl Counters {
    pub fn record_late(&mut self, late_ns: u64) {
        let us = late_ns / 1_000;
        let bucket = LATE_BOUNDS_US.iter().position(|&b| us < b).unwrap_or(LATE_BOUNDS_US.len());
        self.late[bucket] += 1;
        self.max_late_us = self.max_late_us.max(us);
    }

    /// The bucket bound under which a fraction `q` of the deliveries were (µs; past the last
    /// bound, the latest delivery's lateness plus one). `None` before any delivery.
    pub fn late_quantile_us(&self, q: f64) -> Option<u64> {
        let total: u64 = self.late.iter().sum();
        let want = (total as f64 * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.late.iter().enumerate() {
            seen += n;
            if seen >= want {
                return Some(LATE_BOUNDS_US.get(i).copied().unwrap_or(self.max_late_us + 1));
            }
        }
        None
    }

    pub fn to_json(&self) -> Value {
        let buckets: Vec<Value> = self
            .late
            .iter()
            .enumerate()
            .map(|(i, n)| json!({"below_us": LATE_BOUNDS_US.get(i), "packets": n}))
            .collect();
        json!({
            "offered": self.offered, "offered_bytes": self.offered_bytes,
            "delivered": self.delivered, "delivered_bytes": self.delivered_bytes,
            "dropped_full": self.dropped, "lost": self.lost, "write_errors": self.write_errors,
            "max_queue_bytes": self.max_queue_bytes, "max_queue_packets": self.max_queue_packets,
            "late_p50_below_us": self.late_quantile_us(0.5), "late_p99_below_us": self.late_quantile_us(0.99),
            "late_max_us": self.max_late_us, "late": buckets,
        })
    }
}

struct OnWire {
    due: u64,
    packet: Vec<u8>,
}

pub struct Shaper {
    link: Direction,
    /// Packets in the buffer: when each starts crossing, and its length.
    waiting: VecDeque<(u64, u64)>,
    waiting_bytes: u64,
    /// When the bottleneck has sent everything admitted so far.
    free_at: u64,
    wire: VecDeque<OnWire>,
    rng: StdRng,
    pub counters: Counters,
}

impl Shaper {
    pub fn new(link: Direction, seed: u64) -> Shaper {
        Shaper {
            link,
            waiting: VecDeque::new(),
            waiting_bytes: 0,
            free_at: 0,
            wire: VecDeque::new(),
            rng: StdRng::seed_from_u64(seed),
            counters: Counters::default(),
        }
    }

    /// A packet that arrived at `now`.
    pub fn offer(&mut self, now: u64, packet: Vec<u8>) -> Fate {
        let len = packet.len() as u64;
        self.counters.offered += 1;
        self.counters.offered_bytes += len;
        // Whatever has started crossing by now has left the buffer.
        while let Some(&(start, l)) = self.waiting.front() {
            if start > now {
                break;
            }
            self.waiting.pop_front();
            self.waiting_bytes -= l;
        }
        // A packet that finds the bottleneck idle crosses at once and never waits in the buffer.
        let start = self.free_at.max(now);
        if start > now {
            let full = match self.link.queue {
                QueueLimit::Bytes(limit) => self.waiting_bytes + len > limit,
                QueueLimit::Packets(limit) => self.waiting.len() as u64 >= limit as u64,
            };
            if full {
                self.counters.dropped += 1;
                return Fate::Dropped;
            }
            self.waiting.push_back((start, len));
            self.waiting_bytes += len;
            self.counters.max_queue_bytes = self.counters.max_queue_bytes.max(self.waiting_bytes);
            self.counters.max_queue_packets = self.counters.max_queue_packets.max(self.waiting.len() as u64);
        }
        let rate = self.link.schedule.rate_at(Duration::from_nanos(start));
        let crossing = (len as u128 * 8 * 1_000_000_000).div_ceil(rate as u128) as u64;
        self.free_at = start + crossing;
        if self.link.loss > 0.0 && self.rng.random_bool(self.link.loss) {
            self.counters.lost += 1;
            return Fate::Lost;
        }
        let due = self.free_at + self.link.delay.as_nanos() as u64;
        self.wire.push_back(OnWire { due, packet });
        Fate::Sent
    }

    /// When the next packet reaches the far end.
    pub fn next_due(&self) -> Option<u64> {
        self.wire.front().map(|p| p.due)
    }

    /// The next packet that has reached the far end by `now`, with when it was due.
    pub fn take_due(&mut self, now: u64) -> Option<(u64, Vec<u8>)> {
        if self.wire.front()?.due > now {
            return None;
        }
        self.wire.pop_front().map(|p| (p.due, p.packet))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{QueueLimit, Schedule};

    const MS: u64 = 1_000_000;

    fn link(rate: &str, delay_ms: u64, queue: QueueLimit, loss: f64) -> Direction {
        Direction {
            delay: Duration::from_millis(delay_ms),
            schedule: Schedule::parse(rate).unwrap(),
            queue,
            loss,
        }
    }

    /// Offers `n` packets of `len` bytes at once at `now`; the fates.
    fn burst(s: &mut Shaper, now: u64, n: usize, len: usize) -> Vec<Fate> {
        (0..n).map(|_| s.offer(now, vec![0; len])).collect()
    }

    fn drain(s: &mut Shaper) -> Vec<u64> {
        let mut dues = Vec::new();
        while let Some(due) = s.next_due() {
            dues.push(s.take_due(due).unwrap().0);
        }
        dues
    }

    #[test]
    fn a_packet_takes_its_serialisation_plus_the_delay() {
        // 1500 bytes at 12 Mbit/s: 1 ms on the wire, then 10 ms of delay.
        let mut s = Shaper::new(link("12mbit", 10, QueueLimit::Packets(10), 0.0), 1);
        assert_eq!(s.offer(0, vec![0; 1500]), Fate::Sent);
        assert_eq!(s.next_due(), Some(11 * MS));
        assert!(s.take_due(11 * MS - 1).is_none(), "not before it is due");
        let (due, packet) = s.take_due(11 * MS).unwrap();
        assert_eq!((due, packet.len()), (11 * MS, 1500));
        // Back to back, each waits for the one before it.
        burst(&mut s, 20 * MS, 3, 1500);
        assert_eq!(drain(&mut s), vec![31 * MS, 32 * MS, 33 * MS]);
    }

    #[test]
    fn a_full_buffer_drops_what_arrives_and_counts_it() {
        // The first packet goes straight onto the wire; four fit in the buffer behind it.
        let mut s = Shaper::new(link("12mbit", 0, QueueLimit::Packets(4), 0.0), 1);
        let fates = burst(&mut s, 0, 7, 1500);
        assert_eq!(fates.iter().filter(|f| **f == Fate::Sent).count(), 5);
        assert_eq!(fates[5..], [Fate::Dropped, Fate::Dropped]);
        assert_eq!((s.counters.dropped, s.counters.max_queue_packets), (2, 4));
        // Once two have been sent, two more fit.
        let fates = burst(&mut s, 2 * MS, 3, 1500);
        assert_eq!(fates, [Fate::Sent, Fate::Sent, Fate::Dropped]);
        assert_eq!(drain(&mut s).len(), 7);
    }

    #[test]
    fn a_byte_limit_counts_bytes_so_small_packets_fit_where_large_ones_do_not() {
        let mut s = Shaper::new(link("12mbit", 0, QueueLimit::Bytes(3100), 0.0), 1);
        // One on the wire, two (3,000 bytes) in the buffer.
        let fates = burst(&mut s, 0, 4, 1500);
        assert_eq!(fates, [Fate::Sent, Fate::Sent, Fate::Sent, Fate::Dropped]);
        // An ACK-sized packet still fits in the 100 bytes left.
        assert_eq!(s.offer(0, vec![0; 52]), Fate::Sent);
        assert_eq!(s.offer(0, vec![0; 52]), Fate::Dropped);
        assert_eq!(s.counters.max_queue_bytes, 3052);
    }

    #[test]
    fn the_rate_follows_the_schedule_when_a_packet_starts_crossing() {
        // 12 Mbit/s for 10 ms, then 6 Mbit/s for 10 ms: 1 ms per full packet, then 2 ms.
        let mut s = Shaper::new(link("12mbit/10ms,6mbit/10ms", 0, QueueLimit::Packets(100), 0.0), 1);
        burst(&mut s, 0, 12, 1500);
        let dues = drain(&mut s);
        assert_eq!(dues[..10], (1..=10).map(|k| k * MS).collect::<Vec<_>>()[..]);
        assert_eq!(dues[10..], [12 * MS, 14 * MS]);
        // And back at 12 Mbit/s in the next cycle.
        s.offer(20 * MS, vec![0; 1500]);
        assert_eq!(drain(&mut s), vec![21 * MS]);
    }

    #[test]
    fn random_loss_is_seeded_and_near_its_rate() {
        let lost = |seed| {
            let mut s = Shaper::new(link("1gbit", 0, QueueLimit::Packets(1_000_000), 0.01), seed);
            let fates = burst(&mut s, 0, 100_000, 100);
            let lost = fates.iter().filter(|f| **f == Fate::Lost).count();
            assert_eq!(s.counters.lost, lost as u64);
            assert_eq!(drain(&mut s).len(), 100_000 - lost, "a lost packet never arrives");
            lost
        };
        let (a, b, c) = (lost(7), lost(7), lost(8));
        assert_eq!(a, b, "the same seed loses the same packets");
        assert_ne!(a, c);
        // 1 % of 100,000: the binomial's standard deviation is 31.
        assert!((850..=1150).contains(&a), "{a} lost");
    }

    #[test]
    fn lateness_quantiles_name_their_bucket() {
        let mut c = Counters::default();
        for _ in 0..98 {
            c.record_late(20_000);
        }
        c.record_late(700_000);
        c.record_late(30_000_000);
        assert_eq!(c.late_quantile_us(0.5), Some(50));
        assert_eq!(c.late_quantile_us(0.99), Some(1_000));
        assert_eq!(c.late_quantile_us(1.0), Some(30_001), "past the last bound: the latest one");
        assert_eq!(c.max_late_us, 30_000);
        assert_eq!(Counters::default().late_quantile_us(0.5), None);
    }
}
