//! The memory a burst of connections leaves in the heaps goes back to the system once the burst
//! is over (`process::trim`). A test binary of its own: the resident set is the whole process's,
//! and no other test may allocate or free beside this one.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[tokio::test]
async fn the_pages_a_burst_leaves_go_back_once_it_is_over() {
    use std::time::Duration;

    use kharond::process::memory::now;
    use kharond::process::trim::{IdleTrim, TrimSettings};

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
    assert!(
        freed.resident > before.resident + 12 * MIB,
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
