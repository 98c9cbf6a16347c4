//! The receive window that follows the measured path (issue 43, docs/ssh-engine.md "Windows that
//! follow the path"), end to end through two real sshd: while a bulk download runs, kharond pings
//! the last hop and counts bytes to size its windows, and the download's bytes still arrive
//! intact, in order, while small requests on other channels of the same session complete.

use std::io::{Read, Write};
use std::time::Duration;

use kharon_e2e::servers::pattern;
use kharon_e2e::wait_until;

use super::jumphost::{Lab, LabOptions};

#[test]
fn a_bulk_download_through_two_hops_arrives_intact_while_small_requests_complete_beside_it() {
    let mut lab = Lab::new(LabOptions { hops: 2, ..Default::default() });
    lab.start_daemon();
    let len: u64 = 256 << 20;
    let (code, _, mut s) = lab.socks_connect(lab.target.port());
    assert_eq!(code, 0);
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET /bytes/{len} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        s.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    let period = pattern((1 << 20) + 251);
    // Small requests at 16, 64 and 128 MiB into the download: each must complete meanwhile.
    let mut beside = vec![128u64 << 20, 64 << 20, 16 << 20];
    while got < len {
        let n = s.read(&mut buf[..((len - got).min(1 << 20)) as usize]).unwrap();
        assert!(n > 0, "stream ended after {got} of {len} bytes");
        let off = (got % 251) as usize;
        assert!(buf[..n] == period[off..off + n], "payload differs near byte {got}");
        got += n as u64;
        if beside.last().is_some_and(|&at| got >= at) {
            beside.pop();
            assert_eq!(
                lab.hello().unwrap(),
                "hello from target",
                "a small request beside the download at {got} bytes"
            );
        }
    }
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
