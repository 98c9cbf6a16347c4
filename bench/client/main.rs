//! `kharon-bench`: measures a SOCKS5 proxy (kharond) against plain loopback and, when given,
//! other SOCKS5 servers, in the same run, runs interleaved (ABAB…, never AAA BBB).
//!
//! ```text
//! kharon-bench --socks 127.0.0.1:12000 [--proxy-name kharond] [--proxy-pid PID]
//!              [--baseline NAME=ADDR[/PID]]... [--phases bulk,conn,rate,link,idle]
//!              [--bytes 1073741824] [--runs 5] [--conns 2000] [--streams 1,8]
//!              [--rate-workers 64] [--rate-conns 10000] [--link 20,1000] [--link-bytes N]
//!              [--idle 1000,10000] [--pages 60] [--name localhost] [--no-direct] [--json FILE]
//!              [--cpu-of NAME=PID[,PID]...]
//! ```
//!
//! It starts its own sink (sends the N bytes asked for), echo (1 byte back) and holder (keeps
//! connections open) servers on loopback, then, per phase:
//! - bulk: `--bytes` over 1 stream, or split over N parallel streams, direct vs through each
//!   proxy; with `--proxy-pid`, the proxy's own CPU time per GiB moved; for every path, the whole
//!   machine's CPU time per GiB (this client and the sink included, the same for every path);
//! - conn: sequential connect + SOCKS handshake + 1-byte echo + close, by IP literal and by name
//!   (resolved by the proxy), p50/p99 and the cost added to the direct connection;
//! - rate: connections per second with `--rate-workers` threads doing the same, and each
//!   connection's time; the CPU per connection of the proxy (user and system, with its PID),
//!   of each `--cpu-of` process tree (sshd), of this client and of its echo server, and how idle
//!   the machine was: on 2 cores the rate is what these add up to;
//! - link: one stream through `slow-link` (an emulated RTT and bandwidth, started here), with
//!   and without the proxy in front of it;
//! - idle: N connections held open through the proxy, and N held directly; the proxy's VmRSS and
//!   the kernel's Slab and TCP memory, before, while held and after the close;
//! - page: a browser loading a page such as an OpenShift console: [`PAGE_CONNECTIONS`] new
//!   keep-alive connections fetch [`PAGE_OBJECTS`] small objects between them; `--pages` page
//!   loads per path, interleaved, p50/p95 of the whole page's time.
//!
//! `--no-direct` leaves out the direct path, for a target only the proxies can reach (a name
//! resolved by a jump host): then only by-name connections are measured. `--json` appends one
//! JSON object per figure to FILE, for `bench/report.py`.
//!
//! Blocking std I/O with 1 MiB buffers: a scripting-language client caps loopback at a fraction of
//! what the kernel does (docs/performance.md, "How we measure"), which would hide the proxy's own cost.

mod net;
mod sys;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// One path a connection can take: straight to the server, or through a SOCKS5 proxy.
struct Path {
    name: String,
    socks: Option<SocketAddr>,
    /// The proxy's process, whose CPU time (and, for kharond, memory) is reported.
    pid: Option<u32>,
    /// Plain loopback or kharond: the link and idle phases measure only these (a baseline such
    /// as thin-relay holds a thread and a pipe per connection and cannot hold 9,000 here).
    measured: bool,
}

struct Options {
    paths: Vec<Path>,
    phases: Vec<String>,
    bytes: u64,
    runs: usize,
    conns: usize,
    streams: Vec<usize>,
    rate_workers: usize,
    rate_conns: usize,
    link: (u64, f64),
    link_bytes: u64,
    idle: Vec<usize>,
    pages: usize,
    name: String,
    direct: bool,
    json: Option<std::fs::File>,
    /// Further process trees whose CPU the rate phase reports (e.g. sshd, which serves the proxy).
    cpu_of: Vec<(String, Vec<u32>)>,
}

impl Options {
    /// The options from the command line, over [`Options::defaults`].
    fn parse() -> anyhow::Result<Options> {
        let mut proxy: Option<SocketAddr> = None;
        let mut proxy_name = "kharond".to_owned();
        let mut proxy_pid = None;
        let mut baselines = Vec::new();
        let mut o = Options::defaults();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg}: missing value"));
            match arg.as_str() {
                "--socks" => proxy = Some(value()?.parse()?),
                "--proxy-name" => proxy_name = value()?,
                "--proxy-pid" => proxy_pid = Some(value()?.parse()?),
                "--baseline" => baselines.push(baseline(&value()?)?),
                "--phases" => o.phases = value()?.split(',').map(str::to_owned).collect(),
                "--bytes" => o.bytes = value()?.parse()?,
                "--runs" => o.runs = value()?.parse()?,
                "--conns" => o.conns = value()?.parse()?,
                "--streams" => o.streams = numbers(&value()?)?,
                "--rate-workers" => o.rate_workers = value()?.parse()?,
                "--rate-conns" => o.rate_conns = value()?.parse()?,
                "--link" => {
                    let v = value()?;
                    let (rtt, mbit) = v.split_once(',').context("--link takes RTT_MS,MBIT")?;
                    o.link = (rtt.parse()?, mbit.parse()?);
                }
                "--link-bytes" => o.link_bytes = value()?.parse()?,
                "--idle" => o.idle = numbers(&value()?)?,
                "--pages" => o.pages = value()?.parse()?,
                "--name" => o.name = value()?,
                "--no-direct" => o.direct = false,
                "--cpu-of" => o.cpu_of.push(cpu_of(&value()?)?),
                "--json" => {
                    let path = value()?;
                    o.json = Some(
                        std::fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(&path)
                            .with_context(|| format!("opening {path}"))?,
                    );
                }
                "-h" | "--help" => {
                    println!("see the top of bench/client/main.rs");
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other}"),
            }
        }
        let proxy = proxy.context("--socks ADDR is required")?;
        if o.runs == 0 || o.conns == 0 || o.streams.contains(&0) || o.rate_workers == 0 || o.pages == 0 {
            bail!("--runs, --conns, --streams, --rate-workers and --pages must be at least 1");
        }
        if o.direct {
            o.paths.push(Path { name: "direct loopback".into(), socks: None, pid: None, measured: true });
        }
        o.paths.push(Path { name: proxy_name, socks: Some(proxy), pid: proxy_pid, measured: true });
        o.paths.extend(baselines);
        Ok(o)
    }

    /// The options of a run without arguments: no path yet, the bulk and conn phases.
    fn defaults() -> Options {
        Options {
            paths: Vec::new(),
            phases: vec!["bulk".into(), "conn".into()],
            bytes: 1 << 30,
            runs: 5,
            conns: 2000,
            streams: vec![1],
            rate_workers: 64,
            rate_conns: 10_000,
            link: (20, 1000.0),
            link_bytes: 256 << 20,
            idle: vec![1000],
            pages: 60,
            name: "localhost".into(),
            direct: true,
            json: None,
            cpu_of: Vec::new(),
        }
    }

    fn emit(&self, record: Value) -> anyhow::Result<()> {
        if let Some(mut f) = self.json.as_ref() {
            writeln!(f, "{record}")?;
        }
        Ok(())
    }

    /// The name to ask the proxy for: the IP literal of the server unless by name.
    fn host(&self, by_name: bool) -> Option<&str> {
        (by_name || !self.direct).then_some(self.name.as_str())
    }
}

/// A comma-separated list of numbers, such as `--streams 1,8`.
fn numbers(v: &str) -> anyhow::Result<Vec<usize>> {
    v.split(',').map(|n| n.trim().parse().with_context(|| format!("{v}: not a list of numbers"))).collect()
}

/// The path of `--baseline NAME=ADDR[/PID]`: another SOCKS5 server, measured beside the proxy.
fn baseline(v: &str) -> anyhow::Result<Path> {
    let (name, rest) = v.split_once('=').context("--baseline takes NAME=ADDR[/PID]")?;
    // With /PID, its CPU per GiB is measured as kharond's is.
    let (addr, pid) = match rest.split_once('/') {
        Some((addr, pid)) => {
            (addr, Some(pid.parse().with_context(|| format!("--baseline {v}: PID not a number"))?))
        }
        None => (rest, None),
    };
    let addr = addr.parse().with_context(|| format!("--baseline {v}: not IP:PORT"))?;
    Ok(Path { name: name.to_owned(), socks: Some(addr), pid, measured: false })
}

/// The process tree of `--cpu-of NAME=PID[,PID]`: its name and PIDs.
fn cpu_of(v: &str) -> anyhow::Result<(String, Vec<u32>)> {
    let (name, pids) = v.split_once('=').context("--cpu-of takes NAME=PID[,PID]")?;
    let pids = pids
        .split(',')
        .map(|p| p.trim().parse().with_context(|| format!("--cpu-of {v}: {p} is not a PID")))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    Ok((name.to_owned(), pids))
}

fn main() -> anyhow::Result<()> {
    let mut o = Options::parse()?;
    println!(
        "# kharon-bench: {} MiB per bulk run, {} interleaved runs, {} connections; phases {}",
        o.bytes >> 20,
        o.runs,
        o.conns,
        o.phases.join(",")
    );
    let phases = o.phases.clone();
    for phase in &phases {
        match phase.as_str() {
            "bulk" => bulk(&mut o)?,
            "conn" => conn(&mut o)?,
            "rate" => rate(&mut o)?,
            "link" => link(&mut o)?,
            "idle" => idle(&mut o)?,
            "page" => page(&mut o)?,
            other => bail!("unknown phase {other} (bulk, conn, rate, link, idle, page)"),
        }
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n.is_multiple_of(2) { (v[n / 2 - 1] + v[n / 2]) / 2.0 } else { v[n / 2] }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)))
}

fn mib_per_sec(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / elapsed.as_secs_f64()
}

/// `bytes` split over `streams` parallel downloads; aggregate MiB/s.
fn parallel_download(
    o: &Options,
    socks: Option<SocketAddr>,
    sink: SocketAddr,
    streams: usize,
) -> anyhow::Result<f64> {
    let each = o.bytes / streams as u64;
    let host = o.host(false).map(str::to_owned);
    let started = Instant::now();
    let handles: Vec<_> = (0..streams)
        .map(|_| {
            let host = host.clone();
            std::thread::spawn(move || net::download(socks, sink, host.as_deref(), each))
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("download thread panicked"))??;
    }
    Ok(mib_per_sec(each * streams as u64, started.elapsed()))
}

fn bulk(o: &mut Options) -> anyhow::Result<()> {
    let sink = net::sink()?;
    for streams in o.streams.clone() {
        let mut speeds = vec![Vec::new(); o.paths.len()];
        let mut cpu = vec![Duration::ZERO; o.paths.len()];
        // Each run's CPU per GiB too, so a ratio of two relays' CPU has a run-pair spread.
        let mut cpu_runs = vec![Vec::new(); o.paths.len()];
        // The whole machine's CPU per GiB of each run: the proxy's process figure counts the
        // kernel's TCP work for whichever socket it ran in (on loopback a send also delivers), so
        // two relays can split the same work differently; this figure cannot be split.
        let mut machine_runs = vec![Vec::new(); o.paths.len()];
        let run_gib = o.bytes as f64 / (1u64 << 30) as f64;
        for _ in 0..o.runs {
            for (i, path) in o.paths.iter().enumerate() {
                let before = path.pid.map(sys::cpu_time).transpose()?;
                let machine_before = sys::machine_busy_seconds();
                let speed = parallel_download(o, path.socks, sink, streams)
                    .with_context(|| format!("bulk, {streams} stream(s), via {}", path.name))?;
                machine_runs[i].push((sys::machine_busy_seconds() - machine_before) / run_gib);
                speeds[i].push(speed);
                if let (Some(pid), Some(before)) = (path.pid, before) {
                    let spent = sys::cpu_time(pid)?.saturating_sub(before);
                    cpu[i] += spent;
                    cpu_runs[i].push(spent.as_secs_f64() / run_gib);
                }
            }
        }
        let gib = (o.bytes * o.runs as u64) as f64 / (1u64 << 30) as f64;
        let first = median(&speeds[0]);
        for (i, path) in o.paths.iter().enumerate() {
            let m = median(&speeds[i]);
            let (lo, hi) = min_max(&speeds[i]);
            let cpu_per_gib = path.pid.map(|_| cpu[i].as_secs_f64() / gib);
            let cpu_text = cpu_per_gib.map(|c| format!("  {c:.3} s CPU per GiB")).unwrap_or_default();
            let machine = median(&machine_runs[i]);
            println!(
                "bulk x{streams} {:<18} median {m:8.1} MiB/s  (min {lo:.1}, max {hi:.1})  {:5.1} % of {}{cpu_text}  \
                 machine {machine:.3} s per GiB",
                path.name,
                100.0 * m / first,
                o.paths[0].name
            );
            let record = json!({"phase": "bulk", "streams": streams, "path": path.name,
                "mib_s": speeds[i], "cpu_s_per_gib": cpu_per_gib, "cpu_s_per_gib_runs": cpu_runs[i],
                "machine_s_per_gib_runs": machine_runs[i]});
            o.emit(record)?;
        }
    }
    Ok(())
}

/// `n` timed calls of `once`, in µs.
fn latencies(n: usize, mut once: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Vec<f64>> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            once().map(|()| t.elapsed().as_secs_f64() * 1e6)
        })
        .collect()
}

fn percentiles(us: &[f64]) -> (f64, f64) {
    let mut us = us.to_vec();
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() as f64 * q) as usize).min(us.len() - 1)];
    (at(0.50), at(0.99))
}

fn conn(o: &mut Options) -> anyhow::Result<()> {
    let echo = net::echo()?;
    // (path index, by name?) for every series measured.
    let mut series: Vec<(usize, bool)> = Vec::new();
    for (i, path) in o.paths.iter().enumerate() {
        match path.socks {
            None => series.push((i, false)),
            Some(_) if o.direct => series.extend([(i, false), (i, true)]),
            Some(_) => series.push((i, true)),
        }
    }
    for &(i, by_name) in &series {
        let path = &o.paths[i];
        for _ in 0..50 {
            net::echo_once(path.socks, echo, o.host(by_name))
                .with_context(|| format!("warm-up via {}", path.name))?;
        }
    }
    // Rounds of a block per series, so drift on the machine hits every series alike.
    let rounds = o.conns.clamp(1, 10);
    let mut samples = vec![Vec::new(); series.len()];
    for _ in 0..rounds {
        for (k, &(i, by_name)) in series.iter().enumerate() {
            let path = &o.paths[i];
            let v = latencies(o.conns / rounds, || net::echo_once(path.socks, echo, o.host(by_name)))
                .with_context(|| format!("connections via {}", path.name))?;
            samples[k].extend(v);
        }
    }
    let base = o.direct.then(|| percentiles(&samples[0]));
    for (k, &(i, by_name)) in series.iter().enumerate() {
        let (p50, p99) = percentiles(&samples[k]);
        let how = if by_name { "name" } else { "IP" };
        let label = match o.paths[i].socks {
            None => o.paths[i].name.clone(),
            Some(_) => format!("{} ({how})", o.paths[i].name),
        };
        let added = base.filter(|_| o.paths[i].socks.is_some()).map(|(b50, b99)| (p50 - b50, p99 - b99));
        let added_text =
            added.map(|(a50, a99)| format!("  added p50 {a50:+.1} µs, p99 {a99:+.1} µs")).unwrap_or_default();
        println!("conn {label:<29} p50 {p50:8.1} µs  p99 {p99:8.1} µs{added_text}");
        let record = json!({"phase": "conn", "path": o.paths[i].name, "how": how, "p50_us": p50, "p99_us": p99,
            "added_p50_us": added.map(|a| a.0), "added_p99_us": added.map(|a| a.1), "n": samples[k].len()});
        o.emit(record)?;
    }
    Ok(())
}

/// Connections per second with `workers` threads until `total` connections are done; also each
/// connection's time (µs), from connect to the echoed byte.
fn rate_once(o: &Options, socks: Option<SocketAddr>, echo: SocketAddr) -> (f64, usize, Vec<f64>) {
    let next = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let total = o.rate_conns;
    let host = o.host(false).map(str::to_owned);
    let started = Instant::now();
    let handles: Vec<_> = (0..o.rate_workers)
        .map(|_| {
            let (next, errors, host) = (Arc::clone(&next), Arc::clone(&errors), host.clone());
            std::thread::spawn(move || {
                let mut times = Vec::new();
                while next.fetch_add(1, Ordering::Relaxed) < total {
                    let t = Instant::now();
                    match net::echo_once(socks, echo, host.as_deref()) {
                        Ok(()) => times.push(t.elapsed().as_secs_f64() * 1e6),
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                times
            })
        })
        .collect();
    let mut times = Vec::with_capacity(total);
    for h in handles {
        times.extend(h.join().unwrap_or_default());
    }
    (total as f64 / started.elapsed().as_secs_f64(), errors.load(Ordering::Relaxed), times)
}

/// CPU spent during a path's rate runs, in seconds, and the machine's idle and total ticks.
#[derive(Default, Clone)]
struct RateCpu {
    proxy: sys::Cpu,
    /// One per `--cpu-of` tree.
    others: Vec<f64>,
    /// This process less its echo threads: the workers that open the connections.
    client: f64,
    echo: f64,
    idle_ticks: u64,
    all_ticks: u64,
}

struct CpuSample {
    proxy: sys::Cpu,
    others: Vec<f64>,
    own: sys::Cpu,
    echo: f64,
    machine: (u64, u64),
}

impl CpuSample {
    fn take(o: &Options, pid: Option<u32>) -> CpuSample {
        let tree = |pids: &[u32]| pids.iter().map(|&p| sys::tree_cpu(p).total()).sum::<f64>();
        CpuSample {
            proxy: pid.map(sys::tree_cpu).unwrap_or_default(),
            others: o.cpu_of.iter().map(|(_, pids)| tree(pids)).collect(),
            own: sys::own_cpu(),
            echo: sys::threads_cpu(net::ECHO_THREAD),
            machine: sys::machine_ticks(),
        }
    }
}

impl RateCpu {
    fn add(&mut self, before: &CpuSample, after: &CpuSample) {
        let p = after.proxy.since(before.proxy);
        self.proxy.user += p.user;
        self.proxy.system += p.system;
        self.others.resize(after.others.len(), 0.0);
        for (k, (a, b)) in after.others.iter().zip(&before.others).enumerate() {
            self.others[k] += (a - b).max(0.0);
        }
        let echo = (after.echo - before.echo).max(0.0);
        self.echo += echo;
        self.client += (after.own.since(before.own).total() - echo).max(0.0);
        self.idle_ticks += after.machine.0.saturating_sub(before.machine.0);
        self.all_ticks += after.machine.1.saturating_sub(before.machine.1);
    }
}

fn rate(o: &mut Options) -> anyhow::Result<()> {
    let echo = net::echo()?;
    let mut rates = vec![Vec::new(); o.paths.len()];
    let mut errors = vec![0usize; o.paths.len()];
    let mut times = vec![Vec::new(); o.paths.len()];
    let mut cpu = vec![RateCpu::default(); o.paths.len()];
    for _ in 0..o.runs {
        for (i, path) in o.paths.iter().enumerate() {
            let before = CpuSample::take(o, path.pid);
            let (r, e, t) = rate_once(o, path.socks, echo);
            cpu[i].add(&before, &CpuSample::take(o, path.pid));
            rates[i].push(r);
            errors[i] += e;
            times[i].extend(t);
        }
    }
    let conns = (o.rate_conns * o.runs) as f64;
    for (i, path) in o.paths.iter().enumerate() {
        let (lo, hi) = min_max(&rates[i]);
        // A connection stalled behind a delayed ACK (~40 ms) leaves its worker idle: the count
        // over 20 ms tells such stalls from a proxy that is merely slow.
        let (p50, p99) = if times[i].is_empty() { (0.0, 0.0) } else { percentiles(&times[i]) };
        let slow = times[i].iter().filter(|&&t| t > 20_000.0).count();
        println!(
            "rate {:<18} {} workers: median {:8.0} conn/s (min {lo:.0}, max {hi:.0}), {} failed; \
             per connection p50 {:.2} ms, p99 {:.2} ms, over 20 ms {slow}",
            path.name,
            o.rate_workers,
            median(&rates[i]),
            errors[i],
            p50 / 1e3,
            p99 / 1e3,
        );
        let c = &cpu[i];
        let us = |seconds: f64| seconds * 1e6 / conns;
        let idle = if c.all_ticks > 0 { c.idle_ticks as f64 / c.all_ticks as f64 } else { 0.0 };
        let mut cpu_us = serde_json::Map::new();
        let mut text = String::new();
        if path.pid.is_some() {
            let (user, system) = (us(c.proxy.user), us(c.proxy.system));
            text += &format!("{} {:.0} (system {system:.0}), ", path.name, user + system);
            cpu_us.insert("proxy".into(), json!(user + system));
            cpu_us.insert("proxy_system".into(), json!(system));
        }
        for ((name, _), seconds) in o.cpu_of.iter().zip(&c.others) {
            text += &format!("{name} {:.0}, ", us(*seconds));
            cpu_us.insert(name.clone(), json!(us(*seconds)));
        }
        cpu_us.insert("client".into(), json!(us(c.client)));
        cpu_us.insert("echo".into(), json!(us(c.echo)));
        println!(
            "     CPU per connection: {text}client {:.0}, echo server {:.0} µs; machine {:.0} % idle",
            us(c.client),
            us(c.echo),
            idle * 100.0
        );
        let record = json!({"phase": "rate", "path": path.name, "workers": o.rate_workers,
            "conn_s": rates[i], "errors": errors[i], "p50_ms": p50 / 1e3, "p99_ms": p99 / 1e3, "slow": slow,
            "cpu_us_per_conn": cpu_us, "machine_idle": idle});
        o.emit(record)?;
    }
    Ok(())
}

fn link(o: &mut Options) -> anyhow::Result<()> {
    let sink = net::sink()?;
    let (rtt_ms, mbit) = o.link;
    let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let exe = std::env::current_exe()?.with_file_name("slow-link");
    let mut child = std::process::Command::new(&exe)
        .args([listen.to_string(), sink.to_string(), rtt_ms.to_string(), mbit.to_string()])
        .spawn()
        .with_context(|| format!("starting {}", exe.display()))?;
    let ready = (0..200).any(|_| {
        std::thread::sleep(Duration::from_millis(25));
        std::net::TcpStream::connect(listen).is_ok()
    });
    let result = (|| {
        if !ready {
            bail!("slow-link did not listen on {listen}");
        }
        // The link's own throughput, then the same link behind each proxy.
        let paths: Vec<&Path> = o.paths.iter().filter(|p| p.measured).collect();
        let mut speeds = vec![Vec::new(); paths.len()];
        for _ in 0..o.runs {
            for (i, path) in paths.iter().enumerate() {
                let started = Instant::now();
                net::download(path.socks, listen, None, o.link_bytes)
                    .with_context(|| format!("over the link via {}", path.name))?;
                speeds[i].push(mib_per_sec(o.link_bytes, started.elapsed()));
            }
        }
        Ok((paths.iter().map(|p| p.name.clone()).collect::<Vec<_>>(), speeds))
    })();
    let _ = child.kill();
    let _ = child.wait();
    let (names, speeds) = result?;
    for (name, v) in names.iter().zip(&speeds) {
        let (lo, hi) = min_max(v);
        println!(
            "link {rtt_ms} ms {mbit} Mbit/s {name:<18} median {:8.1} MiB/s (min {lo:.1}, max {hi:.1})",
            median(v)
        );
        let record = json!({"phase": "link", "path": name, "rtt_ms": rtt_ms, "mbit": mbit, "mib_s": v});
        o.emit(record)?;
    }
    Ok(())
}

fn idle(o: &mut Options) -> anyhow::Result<()> {
    let holder = net::Holder::start()?;
    let measured: Vec<usize> =
        o.paths.iter().enumerate().filter(|(_, p)| p.measured).map(|(i, _)| i).collect();
    for n in o.idle.clone() {
        for &i in &measured {
            let (socks, pid, name) = (o.paths[i].socks, o.paths[i].pid, o.paths[i].name.clone());
            let before = sys::Memory::sample(pid)?;
            let mut open = Vec::with_capacity(n);
            for k in 0..n {
                let s = net::open(socks, holder.addr, o.host(false))
                    .with_context(|| format!("idle connection {k} of {n} via {name}"))?;
                open.push(s);
            }
            let all_held = (0..400).any(|_| {
                std::thread::sleep(Duration::from_millis(25));
                holder.held() >= n
            });
            if !all_held {
                bail!("the holder got {} of {n} connections via {name}", holder.held());
            }
            // Let the proxy settle (tasks parked, buffers returned) before sampling.
            std::thread::sleep(Duration::from_secs(1));
            let held = sys::Memory::sample(pid)?;
            drop(open);
            holder.release();
            std::thread::sleep(Duration::from_secs(2));
            let after = sys::Memory::sample(pid)?;
            let per = |a: u64, b: u64| (a as f64 - b as f64) * 1024.0 / n as f64;
            println!(
                "idle {n:>6} via {name:<18} user {:8.0} B/conn (RSS {} → {} → {} KiB)  kernel: slab {:8.0} + tcp {:6.0} B/conn",
                per(held.rss_kib, before.rss_kib),
                before.rss_kib,
                held.rss_kib,
                after.rss_kib,
                per(held.slab_kib, before.slab_kib),
                per(held.tcp_mem_kib, before.tcp_mem_kib),
            );
            let record = json!({"phase": "idle", "n": n, "path": name,
                "rss_kib": [before.rss_kib, held.rss_kib, after.rss_kib],
                "slab_kib": [before.slab_kib, held.slab_kib, after.slab_kib],
                "tcp_mem_kib": [before.tcp_mem_kib, held.tcp_mem_kib, after.tcp_mem_kib]});
            o.emit(record)?;
        }
    }
    Ok(())
}

/// Connections a browser opens to one host (HTTP/1.1), and the objects a console page loads.
const PAGE_CONNECTIONS: usize = 6;
const PAGE_OBJECTS: usize = 100;

/// The size of a page's object `k`: 1 to 32 KiB, scripts, styles and API answers alike.
fn object_size(k: usize) -> u32 {
    1024 * (1 + (k * 7) % 32) as u32
}

/// One page load: [`PAGE_CONNECTIONS`] new connections share [`PAGE_OBJECTS`] requests, each
/// connection asking for the next object as soon as it has the previous one.
fn page_once(socks: Option<SocketAddr>, server: SocketAddr, name: Option<&str>) -> anyhow::Result<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let handles: Vec<_> = (0..PAGE_CONNECTIONS)
        .map(|_| {
            let (next, name) = (Arc::clone(&next), name.map(str::to_owned));
            std::thread::spawn(move || -> anyhow::Result<()> {
                let mut s = net::open(socks, server, name.as_deref())?;
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= PAGE_OBJECTS {
                        return Ok(());
                    }
                    net::fetch_object(&mut s, object_size(k))?;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().map_err(|_| anyhow::anyhow!("page thread panicked"))??;
    }
    Ok(started.elapsed())
}

fn page(o: &mut Options) -> anyhow::Result<()> {
    let server = net::objects()?;
    let mut times = vec![Vec::new(); o.paths.len()];
    // Interleaved page by page, so drift on the machine hits every path alike.
    for _ in 0..o.pages {
        for (i, path) in o.paths.iter().enumerate() {
            let t = page_once(path.socks, server, o.host(false))
                .with_context(|| format!("page load via {}", path.name))?;
            times[i].push(t.as_secs_f64() * 1e3);
        }
    }
    let p = |v: &[f64], q: f64| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
    };
    for (i, path) in o.paths.iter().enumerate() {
        let (p50, p95) = (p(&times[i], 0.50), p(&times[i], 0.95));
        println!(
            "page {PAGE_CONNECTIONS} conns, {PAGE_OBJECTS} objects via {:<18} p50 {p50:7.2} ms  p95 {p95:7.2} ms",
            path.name
        );
        let record = json!({"phase": "page", "path": path.name, "connections": PAGE_CONNECTIONS,
            "objects": PAGE_OBJECTS, "p50_ms": p50, "p95_ms": p95, "n": times[i].len()});
        o.emit(record)?;
    }
    Ok(())
}
