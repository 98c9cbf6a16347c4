//! Spare buffers, a few per thread: first buffers for the user-space copy (`copy.rs`), and the
//! buffers through which the direct path copies what it does not splice (`splice.rs`).
//!
//! Why: a direction hands its buffer back whenever it waits with nothing buffered, so a short
//! routed connection takes its first buffer ([`SIZE`]) four or five times. glibc serves a request
//! that large from its large bins, and consolidates its fast bins first: without spares, `perf` on
//! the 64-worker rate phase of `bench/routed.sh` puts about a tenth of kharond's samples in the
//! allocator, a fiftieth in `malloc_consolidate` alone. A spare buffer makes that a pop and a
//! push. The direct path's buffers ([`take_small`]) are plain initialised bytes, read into with a
//! safe `read`; zeroed once, when first made.
//!
//! Bounded: at most [`KEEP`] of each kind per thread, [`SIZE`] bytes each: 256 KiB per runtime
//! worker (one per core). A buffer that grew past [`SIZE`] is freed, not kept, and an idle
//! connection still holds nothing.

use std::cell::RefCell;

use bytes::BytesMut;

/// The size of the buffers kept: the copy's first buffer (`copy::START` is this).
pub const SIZE: usize = 16 * 1024;
/// Spare buffers kept per thread.
pub const KEEP: usize = 8;

/// The size of the direct path's copy buffers ([`take_small`]).
#[cfg(target_os = "linux")]
pub const SMALL: usize = SIZE;

thread_local! {
    static SPARE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
    #[cfg(target_os = "linux")]
    static SPARE_SMALL: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// A buffer of [`SMALL`] initialised bytes: a spare one if this thread has one.
#[cfg(target_os = "linux")]
pub fn take_small() -> Vec<u8> {
    SPARE_SMALL.try_with(|spare| spare.borrow_mut().pop()).ok().flatten().unwrap_or_else(|| vec![0; SMALL])
}

/// Keeps `buffer` (from [`take_small`]) for the next one on this thread, if there is room.
#[cfg(target_os = "linux")]
pub fn give_small(buffer: Vec<u8>) {
    if buffer.len() != SMALL {
        return;
    }
    let _ = SPARE_SMALL.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < KEEP {
            spare.push(buffer);
        }
    });
}

/// An empty buffer of [`SIZE`] bytes: a spare one if this thread has one.
pub fn take() -> BytesMut {
    SPARE
        .try_with(|spare| spare.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_else(|| BytesMut::with_capacity(SIZE))
}

/// Keeps `buffer` for the next [`take`] on this thread, if it is a first buffer and there is room.
pub fn give(mut buffer: BytesMut) {
    buffer.clear();
    // Rewinds to the start of its allocation (no allocation: it is empty).
    buffer.reserve(SIZE);
    if buffer.capacity() >= 2 * SIZE {
        return;
    }
    let _ = SPARE.try_with(|spare| {
        let mut spare = spare.borrow_mut();
        if spare.len() < KEEP {
            spare.push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Buf;

    #[test]
    fn a_first_buffer_given_back_is_taken_again_and_the_spares_are_bounded() {
        std::thread::spawn(|| {
            // Used as copy.rs uses it: filled, then partly written out.
            let mut first = take();
            let base = first.as_ptr();
            first.extend_from_slice(b"used");
            first.advance(2);
            give(first);
            let again = take();
            assert!(again.is_empty() && again.capacity() >= SIZE);
            assert_eq!(again.as_ptr(), base, "not the same allocation, rewound");

            // A grown buffer is not kept; nor is one past KEEP.
            give(BytesMut::with_capacity(4 * SIZE));
            assert_eq!(SPARE.with(|s| s.borrow().len()), 0);
            for _ in 0..KEEP + 3 {
                give(BytesMut::with_capacity(SIZE));
            }
            assert_eq!(SPARE.with(|s| s.borrow().len()), KEEP);

            #[cfg(target_os = "linux")]
            {
                let small = take_small();
                assert_eq!(small.len(), SMALL);
                let base = small.as_ptr();
                give_small(small);
                let again = take_small();
                assert_eq!(again.as_ptr(), base, "the spare is taken again");
                drop(again);
                give_small(vec![0; 3]);
                for _ in 0..KEEP + 3 {
                    give_small(vec![0; SMALL]);
                }
                assert_eq!(SPARE_SMALL.with(|s| s.borrow().len()), KEEP);
            }
        })
        .join()
        .unwrap();
    }
}
