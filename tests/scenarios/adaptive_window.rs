//! The receive window that follows the measured path (issue 43, docs/ssh-engine.md "Windows that
//! follow the path"), end to end through two real sshd: while a bulk download runs, kharond pings
//! the last hop and counts bytes to size its windows, and the download's bytes still arrive
//! intact, in order, while small requests on other channels of the same session complete.

use std::time::Duration;

use kharon_e2e::wait_until;

use super::jumphost::{Lab, LabOptions, download_checked};

#[test]
fn a_bulk_download_through_two_hops_arrives_intact_while_small_requests_complete_beside_it() {
    let mut lab = Lab::new(LabOptions { hops: 2, ..Default::default() });
    lab.start_daemon();
    let len: u64 = 256 << 20;
    // Small requests at 16, 64 and 128 MiB into the download: each must complete meanwhile.
    let mut beside = vec![128u64 << 20, 64 << 20, 16 << 20];
    let s = download_checked(&lab, len, &mut |got| {
        if beside.last().is_some_and(|&at| got >= at) {
            beside.pop();
            assert_eq!(
                lab.hello().unwrap(),
                "hello from target",
                "a small request beside the download at {got} bytes"
            );
        }
    });
    assert!(beside.is_empty());
    drop(s);
    // The chain is still good for the next connection, on whichever session the pool holds now.
    assert_eq!(lab.hello().unwrap(), "hello from target");
    assert!(
        wait_until(Duration::from_secs(5), || lab.chain_status()["open_channels"] == 0),
        "{}",
        lab.chain_status()
    );
    let chain = lab.chain_status();
    assert!(chain["bytes_down"].as_u64().unwrap_or(0) >= len, "{chain}");
}
