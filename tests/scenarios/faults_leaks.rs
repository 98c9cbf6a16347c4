//! 10,000 short connections leave nothing behind (docs/performance.md, item 8): kharond's descriptors
//! and threads return to where they were (± 5) and its open-connection count to 0.
//!
//! Tokio tasks are not visible from outside; each connection is one task that holds the
//! open-connection count (`state::OpenGuard`) until it ends, so that count stands for them.
//! Routed connections: `channel_close::thousands_of_routed_connections_leave_the_daemons_memory_flat`.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, kharonctl, socks, wait_until};

const WORKERS: usize = 8;

fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse().ok()).unwrap_or(0)
}

fn open_connections(env: &Env) -> u64 {
    let status = kharonctl::run(env, &["status", "-o", "json"]).json();
    let c = &status["connections"];
    c["open_direct"].as_u64().unwrap_or(u64::MAX) + c["open_jumphost"].as_u64().unwrap_or(0)
}

/// `total` connections from `WORKERS` threads: handshake (by IP, so no resolver threads), one
/// byte there and back, close. Returns how many failed.
fn burst(daemon: &Kharond, port: u16, total: usize) -> usize {
    let addr = daemon.socks_addr();
    let handles: Vec<_> = (0..WORKERS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut failed = 0;
                for _ in 0..total / WORKERS {
                    let (code, mut s) = socks::connect_by_name(addr, "127.0.0.1", port);
                    let mut b = [0u8; 1];
                    if code != 0 || s.write_all(b"x").is_err() || s.read_exact(&mut b).is_err() {
                        failed += 1;
                    }
                }
                failed
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).sum()
}

#[test]
fn ten_thousand_short_connections_leave_no_descriptor_thread_or_task_behind() {
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    let pid = daemon.pid();
    let echo = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut s in echo.incoming().flatten() {
            let mut b = [0u8; 1];
            if s.read_exact(&mut b).is_ok() {
                let _ = s.write_all(&b);
            }
        }
    });

    // Warm up at the same concurrency, so what kharond keeps on purpose (pooled buffers or pipes,
    // runtime threads) is in the baseline.
    assert_eq!(burst(&daemon, port, 400), 0, "{}", daemon.log());
    assert!(wait_until(Duration::from_secs(10), || open_connections(&env) == 0));
    let (fds_before, threads_before) = (fds(pid), threads(pid));

    let started = Instant::now();
    assert_eq!(burst(&daemon, port, 10_000), 0, "{}", daemon.log());
    eprintln!("10,000 connections in {:?}", started.elapsed());

    let settled = wait_until(Duration::from_secs(20), || {
        open_connections(&env) == 0 && fds(pid) <= fds_before + 5 && threads(pid) <= threads_before + 5
    });
    assert!(
        settled,
        "after 10,000 connections: {} open, {} fds (before {fds_before}), {} threads (before {threads_before})",
        open_connections(&env),
        fds(pid),
        threads(pid)
    );
}
