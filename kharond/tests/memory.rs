//! What `Status` reports of the daemon's memory follows real allocations. A test binary of its
//! own: the heap counts are the whole process's, and in the library's unit tests other test
//! threads allocate and free meanwhile (this failed there when one freed a few MiB mid-test).

#[cfg(any(all(target_os = "linux", target_env = "gnu"), target_os = "macos"))]
#[test]
fn live_allocations_show_in_the_heap_and_leave_it_when_freed() {
    use kharond::process::memory::now;
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
