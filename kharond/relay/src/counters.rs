//! A relay's live byte counts ([`Counters`]): what both relay shapes add to, once per chunk they
//! already handle, and what the connection registry reads while the relay runs.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use tokio::sync::Notify;

/// A relay's bytes so far, each way, readable while it runs. Relaxed: statistics, not
/// synchronisation.
#[derive(Debug, Default)]
pub struct Counters {
    /// Client → target.
    pub up: AtomicU64,
    /// Target → client.
    pub down: AtomicU64,
    /// Which directions have ended (their source closed, the other side's writing half is shut).
    ended: AtomicU8,
    /// Woken once, when the first bytes from the target have been passed on.
    pub first_down: Notify,
}

/// One direction of a relay: which way the bytes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    Up,
    Down,
}

impl Way {
    /// The other direction.
    pub fn reverse(self) -> Way {
        match self {
            Way::Up => Way::Down,
            Way::Down => Way::Up,
        }
    }
}

impl Counters {
    /// Counts `n` bytes passed on `way`. Called once per chunk.
    pub fn add(&self, way: Way, n: u64) {
        match way {
            Way::Up => {
                self.up.fetch_add(n, Ordering::Relaxed);
            }
            Way::Down => {
                if self.down.fetch_add(n, Ordering::Relaxed) == 0 && n > 0 {
                    self.first_down.notify_one();
                }
            }
        }
    }

    /// Notes that `way` has ended (half-close).
    pub fn end(&self, way: Way) {
        self.ended.fetch_or(Self::bit(way), Ordering::Relaxed);
    }

    /// Whether `way` has ended.
    pub fn ended(&self, way: Way) -> bool {
        self.ended.load(Ordering::Relaxed) & Self::bit(way) != 0
    }

    fn bit(way: Way) -> u8 {
        match way {
            Way::Up => 1,
            Way::Down => 2,
        }
    }
}
