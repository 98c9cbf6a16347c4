//! [`map`]: one pure function over a large slice, split across the machine's cores; [`both`]: two
//! jobs side by side.
//!
//! For the one job of kharon that is both large and on a user's clock: compiling a routing table
//! of tens of thousands of clusters while kharond starts (50,000 clusters within a second, on a
//! 2-core laptop: `bench/inventory.sh`). Scoped threads (`std::thread::scope`) rather than a pool such as
//! rayon's: a pool's threads outlive the work and stay in a daemon that is idle for hours, while
//! these end with it, and one split per call is all this job needs.

use std::num::NonZeroUsize;

/// Below this many items a call runs on the caller's thread: starting a thread (tens of
/// microseconds) would cost more than the work.
pub const MIN_PER_THREAD: usize = 2_048;

/// `items.iter().map(f).collect()`, in the same order, split across the cores as [`chunks`].
pub fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let parts = chunks(items, |_, part| part.iter().map(&f).collect::<Vec<R>>());
    let mut out = Vec::with_capacity(items.len());
    for part in parts {
        out.extend(part);
    }
    out
}

/// `f` on contiguous parts of `items`, one part per core (the caller's thread takes the first),
/// with the index of each part's first item; the answers in the order of the parts. A thread the
/// system refuses to start leaves its part to the caller's thread; a panic in `f` is resumed in
/// the caller, as it would be without threads.
pub fn chunks<T: Sync, R: Send>(items: &[T], f: impl Fn(usize, &[T]) -> R + Sync) -> Vec<R> {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let threads = cores.min(items.len() / MIN_PER_THREAD).max(1);
    if threads == 1 {
        return vec![f(0, items)];
    }
    let per_thread = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let mut parts = items.chunks(per_thread).enumerate();
        let first = parts.next().map_or(&[][..], |(_, part)| part);
        let others: Vec<_> = parts
            .map(|(n, part)| {
                let offset = n * per_thread;
                let spawned = std::thread::Builder::new()
                    .name("kharon-compile".into())
                    .spawn_scoped(scope, move || f(offset, part));
                (offset, part, spawned.ok())
            })
            .collect();
        let mut out = Vec::with_capacity(threads);
        out.push(f(0, first));
        for (offset, part, handle) in others {
            match handle.map(std::thread::ScopedJoinHandle::join) {
                Some(Ok(done)) => out.push(done),
                Some(Err(panic)) => std::panic::resume_unwind(panic),
                None => out.push(f(offset, part)),
            }
        }
        out
    })
}

/// `(a(), b())`, `b` on a thread of its own while `a` runs on the caller's. A thread the system
/// refuses to start leaves `b` to the caller's thread, after `a`; a panic in `b` is resumed in
/// the caller.
pub fn both<A, B: Send>(a: impl FnOnce() -> A, b: impl Fn() -> B + Sync) -> (A, B) {
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new().name("kharon-both".into()).spawn_scoped(scope, &b);
        let a = a();
        let b = match spawned {
            Ok(handle) => match handle.join() {
                Ok(b) => b,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => b(),
        };
        (a, b)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_is_the_sequential_map_in_order_for_every_size() {
        for len in [0, 1, MIN_PER_THREAD - 1, MIN_PER_THREAD * 2, MIN_PER_THREAD * 5 + 3] {
            let items: Vec<usize> = (0..len).collect();
            let sequential: Vec<String> = items.iter().map(|i| format!("#{i}")).collect();
            assert_eq!(map(&items, |i| format!("#{i}")), sequential, "{len} items");
        }
    }

    #[test]
    fn each_part_knows_where_it_starts() {
        let items: Vec<usize> = (0..MIN_PER_THREAD * 3 + 1).collect();
        let parts = chunks(&items, |offset, part| (offset, part.to_vec()));
        let mut next = 0;
        for (offset, part) in parts {
            assert_eq!(offset, next);
            assert_eq!(part.first(), Some(&offset));
            next += part.len();
        }
        assert_eq!(next, items.len());
    }

    #[test]
    fn both_answers_both_in_order() {
        let (a, b) = both(|| "a".repeat(2), || "b".repeat(3));
        assert_eq!((a.as_str(), b.as_str()), ("aa", "bbb"));
        let caught = std::panic::catch_unwind(|| both(|| 1, || panic!("b fails")));
        assert!(caught.is_err());
    }

    #[test]
    fn a_panic_in_the_function_reaches_the_caller() {
        let items: Vec<usize> = (0..MIN_PER_THREAD * 4).collect();
        let caught =
            std::panic::catch_unwind(|| map(&items, |&i| assert!(i != items.len() - 1, "last item")));
        assert!(caught.is_err());
    }
}
