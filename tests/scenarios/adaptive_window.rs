//! The receive window that follows the measured path (docs/ssh-engine.md "Windows that
//! follow the path"), end to end through two real sshd: while a bulk download runs, kharond pings
//! the last hop and counts bytes to size its windows, and the download's bytes still arrive
//! intact, in order, while small requests on other channels of the same session complete.

use std::time::Duration;

use kharon_e2e::wait_until;

use super::jumphost::{Form, Lab, LabOptions, download_checked};

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

/// The largest data packet each direct-tcpip channel open let the hop's sshd send us, as the sshd
/// itself logs it at LogLevel DEBUG1 (serverloop.c, `server_input_channel_open`:
/// "… ctype direct-tcpip rchan 0 win 2097152 max 32768").
fn packet_sizes_told(log: &str) -> Vec<u32> {
    log.lines()
        .filter(|line| line.contains("ctype direct-tcpip"))
        .filter_map(|line| line.rsplit_once(" max ").and_then(|(_, max)| max.trim().parse().ok()))
        .collect()
}

/// Near hops (loopback here) are dialled with OpenSSH's own 2 MiB window, and keep OpenSSH's
/// 32 KiB packets: larger ones cost both ends a quarter more CPU per byte on a fast path
/// (docs/ssh-engine.md, "At 1 Gbit/s").
#[test]
fn the_sshd_of_every_near_hop_is_told_openssh_s_packet_size() {
    let mut lab =
        Lab::new(LabOptions { hops: 2, sshd_options: vec!["LogLevel DEBUG1".into()], ..Default::default() });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    for (i, hop) in lab.hops.iter().enumerate() {
        let log = hop.log();
        let told = packet_sizes_told(&log);
        assert!(!told.is_empty(), "hop {} logged no direct-tcpip channel open:\n{log}", i + 1);
        assert!(told.iter().all(|&max| max == 32_768), "hop {}: {told:?}", i + 1);
    }
}

/// A hop behind a `ProxyCommand` has an unknown round trip and is dialled with the largest
/// window, where a backlog in its sshd's channel buffer can grow far past OpenSSH's 2 MiB: its
/// sshd may send packets of up to 65,535 bytes, twice what it reads from the target at a time, so
/// that such a backlog drains instead of being carried along (docs/ssh-engine.md, "At 1 Gbit/s").
/// The first hop is the child `ssh`'s, which keeps its own 32 KiB.
#[test]
fn the_sshd_of_a_hop_behind_a_proxy_command_may_send_packets_of_up_to_65535_bytes() {
    let mut lab = Lab::new(LabOptions {
        hops: 2,
        form: Form::Command,
        sshd_options: vec!["LogLevel DEBUG1".into()],
        ..Default::default()
    });
    lab.start_daemon();
    assert_eq!(lab.hello().unwrap(), "hello from target");
    let told: Vec<Vec<u32>> = lab.hops.iter().map(|hop| packet_sizes_told(&hop.log())).collect();
    assert_eq!(told[0], [32_768], "the child ssh's channel to the second hop");
    assert!(!told[1].is_empty(), "{}", lab.hops[1].log());
    assert!(told[1].iter().all(|&max| max == 65_535), "kharond's channels at the second hop: {told:?}");
}
