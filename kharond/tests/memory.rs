//! The daemon's memory as the process sees it: what `Status` reports follows real allocations,
//! and the memory a burst of connections leaves in the heaps goes back to the system once it is
//! over (`process::trim`). A test binary of its own: the heap counts and the resident set are the
//! whole process's, and in the library's unit tests other test threads allocate and free
//! meanwhile (this failed there when one freed a few MiB mid-test). Its two tests take turns.

/// Held by each test for its whole run: they must not allocate beside each other.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[cfg(any(all(target_os = "linux", target_env = "gnu"), target_os = "macos"))]
#[test]
fn live_allocations_show_in_the_heap_and_leave_it_when_freed() {
    use kharond::process::memory::now;
    let _alone = ALONE.blocking_lock();
    let before = now();
    assert!(before.resident > 0 && before.heap_in_use > 0, "{before:?}");
    assert!(before.heap >= before.heap_in_use, "{before:?}");
    // 16 MiB in small blocks (below the mmap threshold), touched so they are resident too.
    // Other test threads allocate and free meanwhile, hence the 4 MiB of slack.
    const HELD: u64 = 16 << 20;
    const SLACK: u64 = 4 << 20;
    let blocks: Vec<Vec<u8>> = (0..HELD / 1024).map(|i| vec![i as u8; 1024]).collect();
    let held = now();
    assert!(held.heap_in_use + SLACK >= before.heap_in_use + HELD, "{before:?} → {held:?}");
    assert!(held.resident + SLACK >= before.resident + HELD, "{before:?} → {held:?}");
    drop(blocks);
    let after = now();
    assert!(after.heap_in_use + HELD <= held.heap_in_use + SLACK, "{held:?} → {after:?}");
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test]
async fn the_pages_a_burst_leaves_go_back_once_it_is_over() {
    use std::time::Duration;

    use kharond::process::memory::now;
    use kharond::process::trim::{IdleTrim, TrimSettings};
    let _alone = ALONE.lock().await;

    const MIB: u64 = 1 << 20;
    const CONNECTIONS: usize = 300;
    /// Per connection: 128 blocks of 512 bytes (64 KiB), as its task, buffers and entries are.
    const BLOCKS: usize = 128;
    let trim = IdleTrim::new(TrimSettings { burst: 256, settle: Duration::from_millis(200) });
    let trimmer = tokio::spawn(std::sync::Arc::clone(&trim).run());
    let before = now();

    // The burst: every connection's blocks, written so they are resident, and every 64th block
    // outliving its connection (what stays: a session, the next connection's allocations), which
    // keeps the free pages between them in the heap.
    let mut open = Vec::with_capacity(CONNECTIONS);
    let mut blocks = Vec::with_capacity(CONNECTIONS * BLOCKS);
    for i in 0..CONNECTIONS {
        open.push(trim.open());
        blocks.extend((0..BLOCKS).map(|k| vec![(i + k) as u8; 512]));
    }
    let held = now();
    let kept: Vec<Vec<u8>> = blocks.into_iter().step_by(64).collect();
    let freed = now();
    // The heap keeps what was freed (the other test's blocks may have been reused by the burst):
    // freeing gave nothing back by itself.
    assert!(
        freed.heap.saturating_sub(freed.heap_in_use) > 12 * MIB && freed.resident + 2 * MIB > held.resident,
        "freeing the burst's blocks gave their pages back by itself, nothing to trim: {before:?} → {held:?} → {freed:?}"
    );

    // The burst ends: the trim gives the free pages back.
    drop(open);
    let mut trimmed = now();
    for _ in 0..50 {
        if trimmed.resident + 10 * MIB < freed.resident {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        trimmed = now();
    }
    assert!(
        trimmed.resident + 10 * MIB < freed.resident,
        "the resident set stayed: {before:?} → {held:?} → {freed:?} → {trimmed:?}"
    );
    assert_eq!(kept.len(), CONNECTIONS * BLOCKS / 64, "the outliving blocks are still there");
    trimmer.abort();
}
