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

/// Every hop's sshd may send us packets of up to 65,535 bytes, twice what it reads from a
/// forwarded socket at a time, so that a backlog in its channel buffer drains instead of being
/// carried along (docs/ssh-engine.md, "At 1 Gbit/s"). The sshd itself says what it was told: at
/// LogLevel DEBUG1 it logs each channel open's window and maximum packet (serverloop.c,
/// `server_input_channel_open`).
#[test]
fn every_hop_s_sshd_is_told_it_may_send_packets_of_up_to_65535_bytes() {
    let mut lab =
        Lab::new(LabOptions { hops: 2, sshd_options: vec!["LogLevel DEBUG1".into()], ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    for (i, hop) in lab.hops.iter().enumerate() {
        let log = hop.log();
        // "… ctype direct-tcpip rchan 0 win 2097152 max 65535"
        let packets: Vec<u32> = log
            .lines()
            .filter(|line| line.contains("ctype direct-tcpip"))
            .filter_map(|line| line.rsplit_once(" max ").and_then(|(_, max)| max.trim().parse().ok()))
            .collect();
        assert!(!packets.is_empty(), "hop {} logged no direct-tcpip channel open:\n{log}", i + 1);
        assert!(packets.iter().all(|&max| max == 65_535), "hop {}: {packets:?}", i + 1);
    }
}
