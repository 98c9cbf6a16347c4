//! Spare first buffers for the user-space copy (`copy.rs`), a few per thread.
//!
//! Why: a direction hands its buffer back whenever it waits with nothing buffered, so a short
//! routed connection allocated its first buffer ([`SIZE`]) four or five times. glibc serves a request
//! that large from its large bins, and consolidates its fast bins first: in the 64-worker rate
//! phase of `bench/routed.sh`, 11 % of kharond's samples were in the allocator, 2 % in
//! `malloc_consolidate` alone. A spare buffer makes that a pop and a push.
//!
//! Bounded: at most [`KEEP`] per thread, [`SIZE`] bytes each: 128 KiB per runtime worker (one per
//! core). A buffer that grew past [`SIZE`] is freed as before, and an idle connection still
//! holds nothing.

use std::cell::RefCell;

use bytes::BytesMut;

/// The size of the buffers kept: the copy's first buffer (`copy::START` is this).
pub const SIZE: usize = 16 * 1024;
/// Spare buffers kept per thread.
pub const KEEP: usize = 8;

thread_local! {
    static SPARE: RefCell<Vec<BytesMut>> = const { RefCell::new(Vec::new()) };
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
        })
        .join()
        .unwrap();
    }
}
