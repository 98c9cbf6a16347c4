//! `kharon-bench`: measures kharond's direct path against plain loopback in the same run.
//!
//! ```text
//! kharon-bench --socks 127.0.0.1:12000 [--bytes 1073741824] [--runs 5] [--conns 2000]
//! ```
//!
//! It starts its own sink (sends N bytes) and echo (1 byte back) servers on loopback, then:
//! - bulk: one stream of N bytes, direct vs through SOCKS (interleaved runs, median/min/max MiB/s);
//! - conn: sequential connect + SOCKS handshake + 1-byte echo + close, direct vs through SOCKS, by
//!   IP literal and by name (`localhost`, resolved by the proxy), p50/p99 in µs and the added cost.
//!
//! Blocking std I/O with 1 MiB buffers: a scripting-language client caps loopback at a fraction of
//! what the kernel does (targets.md §6), which would hide the proxy's own cost.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const BUF: usize = 1 << 20;

fn main() -> anyhow::Result<()> {
    let mut socks: Option<SocketAddr> = None;
    let (mut bytes, mut runs, mut conns) = (1u64 << 30, 5usize, 2000usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().context("missing value");
        match arg.as_str() {
            "--socks" => socks = Some(value()?.parse()?),
            "--bytes" => bytes = value()?.parse()?,
            "--runs" => runs = value()?.parse()?,
            "--conns" => conns = value()?.parse()?,
            "-h" | "--help" => {
                println!("kharon-bench --socks ADDR [--bytes N] [--runs N] [--conns N]");
                return Ok(());
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let socks = socks.context("--socks ADDR is required")?;
    let sink = spawn_server(move |mut s| {
        let buf = vec![0x5au8; BUF];
        let mut left = bytes;
        while left > 0 {
            let n = left.min(BUF as u64) as usize;
            if s.write_all(&buf[..n]).is_err() {
                return;
            }
            left -= n as u64;
        }
    })?;
    let echo = spawn_server(|mut s| {
        let mut b = [0u8; 1];
        if s.read_exact(&mut b).is_ok() {
            let _ = s.write_all(&b);
        }
    })?;

    println!("# kharon-bench: {} MiB per stream, {runs} interleaved runs, {conns} connections", bytes >> 20);
    let (mut direct, mut proxied) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        direct.push(bulk(None, sink, bytes)?);
        proxied.push(bulk(Some(socks), sink, bytes)?);
    }
    let (d, p) = (median(&mut direct), median(&mut proxied));
    println!(
        "bulk direct loopback   median {d:8.1} MiB/s  (min {:.1}, max {:.1})",
        direct[0],
        direct[runs - 1]
    );
    println!(
        "bulk via kharond       median {p:8.1} MiB/s  (min {:.1}, max {:.1})",
        proxied[0],
        proxied[runs - 1]
    );
    println!("bulk ratio             {:.1} % of loopback", 100.0 * p / d);

    let base = latencies(conns, || echo_once(None, echo, None))?;
    let by_ip = latencies(conns, || echo_once(Some(socks), echo, None))?;
    let by_name = latencies(conns, || echo_once(Some(socks), echo, Some("localhost")))?;
    let (b50, b99) = percentiles(&base);
    let (i50, i99) = percentiles(&by_ip);
    let (n50, n99) = percentiles(&by_name);
    println!("conn direct loopback   p50 {b50:7.1} µs  p99 {b99:7.1} µs");
    println!(
        "conn via kharond (IP)  p50 {i50:7.1} µs  p99 {i99:7.1} µs  added p50 {:+.1} µs, p99 {:+.1} µs",
        i50 - b50,
        i99 - b99
    );
    println!(
        "conn via kharond (name) p50 {n50:6.1} µs  p99 {n99:7.1} µs  added p50 {:+.1} µs, p99 {:+.1} µs",
        n50 - b50,
        n99 - b99
    );
    Ok(())
}

fn spawn_server(handle: impl Fn(TcpStream) + Send + Sync + Copy + 'static) -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || handle(stream));
        }
    });
    Ok(addr)
}

/// Opens a stream to `target`, through SOCKS5 (no auth, CONNECT) when `socks` is given.
fn open(socks: Option<SocketAddr>, target: SocketAddr, name: Option<&str>) -> anyhow::Result<TcpStream> {
    let Some(proxy) = socks else {
        let s = TcpStream::connect(target)?;
        s.set_nodelay(true)?;
        return Ok(s);
    };
    let mut s = TcpStream::connect(proxy)?;
    s.set_nodelay(true)?;
    s.write_all(&[5, 1, 0])?;
    let mut m = [0u8; 2];
    s.read_exact(&mut m)?;
    let host = name.map(str::to_owned).unwrap_or_else(|| target.ip().to_string());
    let mut req = vec![5, 1, 0, 3, host.len() as u8];
    req.extend_from_slice(host.as_bytes());
    req.extend_from_slice(&target.port().to_be_bytes());
    s.write_all(&req)?;
    let mut reply = [0u8; 10];
    s.read_exact(&mut reply)?;
    if reply[1] != 0 {
        bail!("SOCKS reply {}", reply[1]);
    }
    Ok(s)
}

fn bulk(socks: Option<SocketAddr>, sink: SocketAddr, bytes: u64) -> anyhow::Result<f64> {
    let started = Instant::now();
    let mut s = open(socks, sink, None)?;
    let mut buf = vec![0u8; BUF];
    let mut got = 0u64;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got += n as u64;
    }
    if got != bytes {
        bail!("received {got} of {bytes} bytes");
    }
    Ok(bytes as f64 / (1 << 20) as f64 / started.elapsed().as_secs_f64())
}

fn echo_once(socks: Option<SocketAddr>, echo: SocketAddr, name: Option<&str>) -> anyhow::Result<()> {
    let mut s = open(socks, echo, name)?;
    s.write_all(b"x")?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    Ok(())
}

fn latencies(n: usize, mut once: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Vec<Duration>> {
    // Warm up caches and the proxy's allocator before measuring.
    for _ in 0..50 {
        once()?;
    }
    (0..n)
        .map(|_| {
            let t = Instant::now();
            once().map(|()| t.elapsed())
        })
        .collect()
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentiles(v: &[Duration]) -> (f64, f64) {
    let mut us: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() as f64 * q) as usize).min(us.len() - 1)];
    (at(0.50), at(0.99))
}
