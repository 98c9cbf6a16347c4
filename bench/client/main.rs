//! `kharon-bench`: measures kharond's direct path against plain loopback (and, when given, other
//! SOCKS5 servers) in the same run.
//!
//! ```text
//! kharon-bench --socks 127.0.0.1:12000 [--proxy-pid PID] [--baseline NAME=ADDR]...
//!              [--bytes 1073741824] [--runs 5] [--conns 2000]
//! ```
//!
//! It starts its own sink (sends N bytes) and echo (1 byte back) servers on loopback, then:
//! - bulk: one stream of N bytes, direct vs through each proxy (interleaved runs, median/min/max
//!   MiB/s); with `--proxy-pid`, kharond's own CPU time per GiB moved;
//! - conn: sequential connect + SOCKS handshake + 1-byte echo + close, direct vs through each
//!   proxy, by IP literal and by name (`localhost`, resolved by the proxy), p50/p99 in µs and the
//!   added cost.
//!
//! Blocking std I/O with 1 MiB buffers: a scripting-language client caps loopback at a fraction of
//! what the kernel does (targets.md §6), which would hide the proxy's own cost.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

const BUF: usize = 1 << 20;

/// One path a stream can take: straight to the sink, or through a SOCKS5 server.
struct Path {
    name: String,
    socks: Option<SocketAddr>,
    /// The proxy's process, whose CPU time per GiB is reported.
    pid: Option<u32>,
    /// Bulk speeds of the runs so far, MiB/s.
    speeds: Vec<f64>,
    cpu: Duration,
}

impl Path {
    fn new(name: &str, socks: Option<SocketAddr>) -> Self {
        Path { name: name.to_owned(), socks, pid: None, speeds: Vec::new(), cpu: Duration::ZERO }
    }
}

fn main() -> anyhow::Result<()> {
    let mut kharond: Option<SocketAddr> = None;
    let mut baselines: Vec<Path> = Vec::new();
    let mut proxy_pid: Option<u32> = None;
    let (mut bytes, mut runs, mut conns) = (1u64 << 30, 5usize, 2000usize);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().context("missing value");
        match arg.as_str() {
            "--socks" => kharond = Some(value()?.parse()?),
            "--baseline" => {
                let v = value()?;
                let (name, addr) = v.split_once('=').context("--baseline takes NAME=ADDR")?;
                let addr = addr.parse().with_context(|| format!("--baseline {v}: not IP:PORT"))?;
                baselines.push(Path::new(name, Some(addr)));
            }
            "--proxy-pid" => proxy_pid = Some(value()?.parse()?),
            "--bytes" => bytes = value()?.parse()?,
            "--runs" => runs = value()?.parse()?,
            "--conns" => conns = value()?.parse()?,
            "-h" | "--help" => {
                println!(
                    "kharon-bench --socks ADDR [--proxy-pid PID] [--baseline NAME=ADDR]... \
                     [--bytes N] [--runs N] [--conns N]"
                );
                return Ok(());
            }
            other => bail!("unknown argument {other}"),
        }
    }
    let kharond = kharond.context("--socks ADDR is required")?;
    if runs == 0 || conns == 0 {
        bail!("--runs and --conns must be at least 1");
    }
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

    let mut paths = vec![Path::new("direct loopback", None), Path::new("kharond", Some(kharond))];
    paths[1].pid = proxy_pid;
    paths.extend(baselines);
    println!("# kharon-bench: {} MiB per stream, {runs} interleaved runs, {conns} connections", bytes >> 20);

    for _ in 0..runs {
        for path in &mut paths {
            let before = path.pid.map(cpu_time).transpose()?;
            let speed =
                bulk(path.socks, sink, bytes).with_context(|| format!("bulk stream via {}", path.name))?;
            path.speeds.push(speed);
            if let (Some(pid), Some(before)) = (path.pid, before) {
                path.cpu += cpu_time(pid)?.saturating_sub(before);
            }
        }
    }
    let gib = (bytes * runs as u64) as f64 / (1u64 << 30) as f64;
    let loopback = median(&mut paths[0].speeds);
    for path in &mut paths {
        let m = median(&mut path.speeds);
        let cpu = match path.pid {
            Some(_) => format!("  {:.3} s CPU per GiB", path.cpu.as_secs_f64() / gib),
            None => String::new(),
        };
        println!(
            "bulk {:<18} median {m:8.1} MiB/s  (min {:.1}, max {:.1})  {:5.1} % of loopback{cpu}",
            path.name,
            path.speeds[0],
            path.speeds[runs - 1],
            100.0 * m / loopback
        );
    }

    let base = latencies(conns, || echo_once(None, echo, None)).context("connections direct")?;
    let (b50, b99) = percentiles(&base);
    println!("conn {:<29} p50 {b50:7.1} µs  p99 {b99:7.1} µs", "direct loopback");
    for path in &paths[1..] {
        for (how, name) in [("IP", None), ("name", Some("localhost"))] {
            let v = latencies(conns, || echo_once(path.socks, echo, name))
                .with_context(|| format!("connections via {} by {how}", path.name))?;
            let (p50, p99) = percentiles(&v);
            println!(
                "conn {:<29} p50 {p50:7.1} µs  p99 {p99:7.1} µs  added p50 {:+.1} µs, p99 {:+.1} µs",
                format!("{} ({how})", path.name),
                p50 - b50,
                p99 - b99
            );
        }
    }
    Ok(())
}

/// User + system CPU time of a process so far (Linux /proc).
fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let path = format!("/proc/{pid}/stat");
    let stat =
        std::fs::read_to_string(&path).with_context(|| format!("reading {path} (has the proxy exited?)"))?;
    // Fields after the parenthesised command name, which may itself contain spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("malformed /proc stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> { Ok(fields.get(i).context("short /proc stat")?.parse()?) };
    // utime and stime are fields 14 and 15 of stat(5); `rest` starts at field 3.
    Ok(Duration::from_secs_f64((ticks(11)? + ticks(12)?) as f64 / clock_ticks_per_second()))
}

#[cfg(target_os = "linux")]
fn clock_ticks_per_second() -> f64 {
    // SAFETY: sysconf only reads a system constant.
    match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as f64,
        _ => 100.0,
    }
}

#[cfg(not(target_os = "linux"))]
fn clock_ticks_per_second() -> f64 {
    100.0
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
