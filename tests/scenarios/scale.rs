//! 10,000 concurrent idle direct connections under the machine's default descriptor limits
//! ("Must show"), or as many as those limits fit when that is fewer (a hard limit of
//! 20,000 that kharond may not raise fits 9,808: two descriptors each plus its reserve). Every
//! SOCKS CONNECT succeeds and relays bytes both ways while all are
//! open, kharond holds about two descriptors per connection (kharond/src/fd_limit.rs, the pipe
//! pool in kharond/relay/src/pipes.rs), and it is back to its baseline once they close.
//!
//! The echo target runs in a child process (tests/fixtures/echo_server.py), so this process holds
//! only the client ends. Memory per connection is printed, not asserted: kharond's VmRSS, and the
//! kernel's slab and TCP buffer memory, which are system-wide and so include the client's and the
//! target's sockets too (four sockets per relayed connection).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kharon_e2e::echo::EchoProcess;
use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, inventory, procfs, socks, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONNECTIONS: usize = 10_000;
/// The least this test runs with when kharond's descriptor limit fits fewer than [`CONNECTIONS`]:
/// a hard limit of 20,000 (common default) fits 9,808.
const MIN_CONNECTIONS: usize = 9_500;
/// Measured (printed) on the way up, too.
const FIRST_STEP: usize = 1_000;
/// Handshakes in flight at once: enough to keep two cores busy, well under the listen backlog.
const BATCH: usize = 200;
/// The whole scenario must finish within this, far beyond what it needs (~20 s on 2 cores).
const BUDGET: Duration = Duration::from_secs(100);

/// A point to compare memory against.
struct Sample {
    rss_kib: u64,
    slab_kib: u64,
    tcp_kib: u64,
}

impl Sample {
    fn take(pid: u32) -> Self {
        Self {
            rss_kib: procfs::rss_kib(pid),
            slab_kib: procfs::slab_kib(),
            tcp_kib: procfs::tcp_buffers_kib(),
        }
    }

    fn report(&self, base: &Sample, n: usize, fds: usize, fd_base: usize) {
        let per = |now: u64, then: u64| (now as f64 - then as f64) * 1024.0 / n as f64;
        eprintln!(
            "scale: {n} open connections: kharond {fds} fds ({:.2}/connection over {fd_base}), \
             VmRSS +{:.0} B/connection; kernel (system-wide, 4 sockets/connection): slab +{:.0} B, \
             TCP buffers +{:.0} B per connection",
            (fds as f64 - fd_base as f64) / n as f64,
            per(self.rss_kib, base.rss_kib),
            per(self.slab_kib, base.slab_kib),
            per(self.tcp_kib, base.tcp_kib),
        );
    }
}

/// One SOCKS CONNECT by IP, no authentication; the stream once the success reply is in.
async fn connect(socks: SocketAddr, target: SocketAddr) -> std::io::Result<TcpStream> {
    let mut s = TcpStream::connect(socks).await?;
    s.write_all(&[5, 1, 0]).await?;
    let mut method = [0u8; 2];
    s.read_exact(&mut method).await?;
    s.write_all(&socks::request_ip(target)).await?;
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply).await?;
    if method != [5, 0] || reply[1] != 0 {
        return Err(std::io::Error::other(format!("refused: method {method:?}, reply {reply:?}")));
    }
    Ok(s)
}

/// Opens `count` more connections, [`BATCH`] at a time.
async fn open_more(socks: SocketAddr, target: SocketAddr, count: usize, into: &mut Vec<TcpStream>) {
    let mut left = count;
    while left > 0 {
        let batch = left.min(BATCH);
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..batch {
            tasks.spawn(connect(socks, target));
        }
        while let Some(done) = tasks.join_next().await {
            let stream = done
                .expect("connect task")
                .unwrap_or_else(|e| panic!("SOCKS CONNECT number {} failed: {e}", into.len() + 1));
            into.push(stream);
        }
        left -= batch;
    }
}

/// Every connection sends its own few bytes and reads them back, all of them open meanwhile.
async fn echo_all(streams: &mut [TcpStream]) {
    let message = |n: usize| format!("#{n:05}").into_bytes();
    for (c, chunk) in streams.chunks_mut(BATCH).enumerate() {
        for (i, s) in chunk.iter_mut().enumerate() {
            let n = c * BATCH + i;
            s.write_all(&message(n)).await.unwrap_or_else(|e| panic!("connection {n}: send failed: {e}"));
        }
        for (i, s) in chunk.iter_mut().enumerate() {
            let n = c * BATCH + i;
            let mut got = [0u8; 6];
            s.read_exact(&mut got).await.unwrap_or_else(|e| panic!("connection {n}: no echo: {e}"));
            assert_eq!(got[..], message(n)[..], "connection {n}: wrong bytes back");
        }
    }
}

#[test]
fn ten_thousand_idle_direct_connections_cost_two_descriptors_each() {
    // This process holds the 10,000 client ends (the echo child the other ends): lift only its
    // own soft limit, up to its hard limit, if that is what it takes.
    let (soft, hard) = procfs::raise_own_nofile(CONNECTIONS as u64 + 2_000);
    assert!(
        soft >= CONNECTIONS as u64 + 1_000,
        "this test process may open only {soft} descriptors (hard limit {hard}); it needs about \
         {} for its own client sockets: raise the hard limit (`ulimit -Hn`) before cargo test",
        CONNECTIONS + 1_000
    );
    let env = Env::new();
    let inv =
        env.write("inventory.json", &inventory::to_json(&[inventory::routed("c-a", "jump-a", "a.example")]));
    let echo = EchoProcess::start();
    let daemon = Kharond::start(&env, &["--inventory", inv.to_str().unwrap()]);
    let pid = daemon.pid();
    // kharond says at start when its descriptor limit fits fewer connections, and why.
    wait_until(Duration::from_secs(5), || daemon.log().contains("kharond ready"));
    // kharond says at start when its descriptor limit fits fewer connections, and why. Where even
    // its hard limit is too low (here: 20,000, not raisable without CAP_SYS_RESOURCE, while 10,000
    // connections need 20,000 plus kharond's reserve), the test runs at that ceiling instead, and
    // says so; a ceiling far below 10,000 is a machine this test cannot speak for, and fails.
    let log = daemon.log();
    let fit = log
        .lines()
        .filter_map(|l| l.split("fits only ").nth(1)?.split(' ').next()?.parse::<usize>().ok())
        .next();
    let count = fit.map_or(CONNECTIONS, |fit| fit.min(CONNECTIONS));
    let (soft, hard) = procfs::nofile_limit(pid);
    assert!(
        count >= MIN_CONNECTIONS,
        "kharond fits only {count} connections under this machine's limits (soft {soft}, hard \
         {hard}); at least {MIN_CONNECTIONS} are needed for this test. kharond raises its hard limit \
         only with CAP_SYS_RESOURCE; run the suite with a higher hard limit (`ulimit -Hn 65536`)."
    );
    if count < CONNECTIONS {
        eprintln!(
            "scale: {count} of {CONNECTIONS} connections: kharond's descriptor limit (soft {soft}, \
             hard {hard}) fits no more at two descriptors each plus its reserve"
        );
    }

    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let scenario = async {
        let socks = daemon.socks_addr();
        // Warm up: the relay's pipe pool keeps the few pipes its worker threads leased at once
        // (at most 32, relay/pipes.rs); the baseline is taken with them in it.
        let fd_start = procfs::open_fds(pid);
        let mut warm = Vec::new();
        open_more(socks, echo.addr(), 10, &mut warm).await;
        echo_all(&mut warm).await;
        drop(warm);
        // Closed once kharond's count is that low and has stayed put for 200 ms.
        let mut last = (usize::MAX, 0);
        let settled = tokio::task::block_in_place(|| {
            wait_until(Duration::from_secs(10), || {
                let now = procfs::open_fds(pid);
                last = if now == last.0 { (now, last.1 + 1) } else { (now, 0) };
                now <= fd_start + 64 && last.1 >= 10
            })
        });
        assert!(
            settled,
            "kharond's descriptors did not settle after the warm-up: {last:?}, {fd_start} before"
        );
        let fd_base = procfs::open_fds(pid);
        let base = Sample::take(pid);

        let mut streams = Vec::with_capacity(count);
        open_more(socks, echo.addr(), FIRST_STEP, &mut streams).await;
        echo_all(&mut streams).await;
        Sample::take(pid).report(&base, FIRST_STEP, procfs::open_fds(pid), fd_base);

        open_more(socks, echo.addr(), count - FIRST_STEP, &mut streams).await;
        echo_all(&mut streams).await;
        let fds = procfs::open_fds(pid);
        Sample::take(pid).report(&base, count, fds, fd_base);
        let per_connection = fds.saturating_sub(fd_base);
        assert!(
            per_connection.abs_diff(2 * count) <= 10,
            "kharond holds {fds} descriptors with {count} idle connections open, {fd_base} \
             before: expected two per connection"
        );

        drop(streams);
        let back = tokio::task::block_in_place(|| {
            wait_until(Duration::from_secs(30), || procfs::open_fds(pid).abs_diff(fd_base) <= 5)
        });
        assert!(
            back,
            "kharond holds {} descriptors 30 s after all connections closed, {fd_base} before",
            procfs::open_fds(pid)
        );
    };
    let within_budget = runtime.block_on(async { tokio::time::timeout(BUDGET, scenario).await });
    assert!(
        within_budget.is_ok(),
        "the scenario took over {BUDGET:?}\n{}",
        daemon.log().lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
    eprintln!("scale: whole scenario {:?}", started.elapsed());
    assert!(daemon.log().lines().all(|l| !l.contains("accept failed")), "kharond ran out of descriptors");
}
