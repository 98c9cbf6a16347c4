//! `link-emu`: a packet-level link between two network namespaces, in user space, for benchmarks
//! on kernels without netem. Real kernel TCP runs at both ends and meets real queueing delay and
//! real loss: the emulator moves IP packets between a TUN device in each namespace and, per
//! direction, puts them through a drop-tail buffer, a bottleneck of a given (or scheduled) rate,
//! random loss and a one-way delay (`shaper.rs`). `bench/shaped.sh` makes the namespaces and
//! runs it; `link-check` measures that it does what it says; docs/performance.md ("The emulated
//! link") says what it emulates and what it does not.
//!
//! A thread per direction waits in ppoll(2) for a packet or the next one due, reads what has
//! arrived, and writes what is due (`pump.rs`). Each direction holds at most its buffer and
//! what its rate puts on the wire within one delay; the start refuses a link that would hold more
//! than [`MOST_HELD`].

#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod pump;
mod shaper;
mod spec;
#[cfg(target_os = "linux")]
mod tun;

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::Value;

use crate::spec::{Direction, QueueSpec, Schedule};

/// The largest packet a TUN device carries.
const MAX_MTU: usize = 65_535;
/// The most memory the two directions may hold between them (buffers and packets on the wire).
const MOST_HELD: u64 = 1 << 30;

/// Emulates a link between two network namespaces: one-way delay, a bottleneck rate (fixed or
/// on a schedule), a drop-tail buffer in front of it and random loss, per direction. "up" is near
/// to far, "down" far to near; the options without up/down set both.
///
/// Example: 25 ms each way, 50 Mbit/s, a buffer of 1,000 packets (242 ms at that rate), 0.5 %
/// loss:
///
///   link-emu --near khs-near:emu0 --far khs-far:emu0 --delay 25ms --rate 50mbit --queue 1000p --loss 0.5%
///
/// Each end is a persistent TUN device in a namespace (`ip netns exec khs-near ip tuntap add dev
/// emu0 mode tun`), with its address, route and MTU set by whoever made it. SIGTERM or SIGINT
/// ends the emulator; it then writes its counters to --stats.
#[derive(Parser, Debug)]
#[command(name = "link-emu", verbatim_doc_comment)]
struct Cli {
    /// The near end: NETNS:IFACE (NETNS an `ip netns` name or a path such as /proc/PID/ns/net).
    #[arg(long, value_name = "NETNS:IFACE")]
    near: String,
    /// The far end: NETNS:IFACE.
    #[arg(long, value_name = "NETNS:IFACE")]
    far: String,
    /// One-way delay of each direction (half the round trip), e.g. 25ms.
    #[arg(long, default_value = "0", value_parser = spec::duration)]
    delay: Duration,
    /// Bottleneck rate, e.g. 50mbit; or a schedule of RATE/DURATION steps, repeated from the
    /// emulator's start, e.g. 50mbit/3s,25mbit/2s (Wi-Fi that halves for 2 s in every 5).
    #[arg(long, value_parser = Schedule::parse)]
    rate: Schedule,
    /// Drop-tail buffer in front of the bottleneck: bandwidth-delay products (0.5bdp, 1bdp), the
    /// time it takes to drain at the first rate (250ms), packets (1000p) or bytes (64KiB, 1MB).
    /// A BDP is the first rate times the round trip of both delays.
    #[arg(long, default_value = "1bdp", value_parser = QueueSpec::parse)]
    queue: QueueSpec,
    /// Random loss of each packet on the wire, e.g. 0.5% or 0.005.
    #[arg(long, default_value = "0", value_parser = spec::loss)]
    loss: f64,
    #[arg(long, value_parser = spec::duration, help = "One-way delay near → far, instead of --delay")]
    up_delay: Option<Duration>,
    #[arg(long, value_parser = spec::duration, help = "One-way delay far → near, instead of --delay")]
    down_delay: Option<Duration>,
    #[arg(long, value_parser = Schedule::parse, help = "Rate near → far, instead of --rate")]
    up_rate: Option<Schedule>,
    #[arg(long, value_parser = Schedule::parse, help = "Rate far → near, instead of --rate")]
    down_rate: Option<Schedule>,
    #[arg(long, value_parser = QueueSpec::parse, help = "Buffer near → far, instead of --queue")]
    up_queue: Option<QueueSpec>,
    #[arg(long, value_parser = QueueSpec::parse, help = "Buffer far → near, instead of --queue")]
    down_queue: Option<QueueSpec>,
    #[arg(long, value_parser = spec::loss, help = "Loss near → far, instead of --loss")]
    up_loss: Option<f64>,
    #[arg(long, value_parser = spec::loss, help = "Loss far → near, instead of --loss")]
    down_loss: Option<f64>,
    /// Seed of the random loss (far → near uses the next one): the same seed loses the same
    /// packets of the same sequence.
    #[arg(long, default_value_t = 53)]
    seed: u64,
    /// The largest packet the TUN devices carry (their MTU): sizes a buffer given in packets
    /// when bounding memory, and is recorded with the link.
    #[arg(long, default_value_t = 1500)]
    mtu: usize,
    /// Writes the link as resolved here (JSON) at the start, and again with the counters of each
    /// direction (packets, drops, losses, deepest buffer, how late packets were delivered) and
    /// the emulator's CPU time when it stops.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
}

struct Link {
    up: Direction,
    down: Direction,
}

impl Cli {
    fn link(&self) -> anyhow::Result<Link> {
        if !(68..=MAX_MTU).contains(&self.mtu) {
            bail!("--mtu {}: between 68 and {MAX_MTU}", self.mtu);
        }
        let up_delay = self.up_delay.unwrap_or(self.delay);
        let down_delay = self.down_delay.unwrap_or(self.delay);
        let rtt = up_delay + down_delay;
        let direction = |delay, rate: &Option<Schedule>, queue: Option<QueueSpec>, loss: Option<f64>| {
            let schedule = rate.clone().unwrap_or_else(|| self.rate.clone());
            let queue = queue.unwrap_or(self.queue).resolve(schedule.base(), rtt);
            Direction { delay, schedule, queue, loss: loss.unwrap_or(self.loss) }
        };
        let link = Link {
            up: direction(up_delay, &self.up_rate, self.up_queue, self.up_loss),
            down: direction(down_delay, &self.down_rate, self.down_queue, self.down_loss),
        };
        let held = |d: &Direction| {
            d.queue.max_bytes(self.mtu) + d.schedule.max() / 8 * d.delay.as_millis() as u64 / 1000
        };
        let most = held(&link.up) + held(&link.down);
        if most > MOST_HELD {
            bail!(
                "this link would hold up to {} MiB in buffers and on the wire; the emulator holds at most {} MiB \
                 (a shorter delay, a lower rate or a smaller --queue)",
                most >> 20,
                MOST_HELD >> 20
            );
        }
        Ok(link)
    }
}

fn split_end(end: &str) -> anyhow::Result<(&str, &str)> {
    end.rsplit_once(':')
        .filter(|(ns, iface)| !ns.is_empty() && !iface.is_empty())
        .with_context(|| format!("{end:?}: not NETNS:IFACE"))
}

/// Writes `value` to `path` whole (a temporary file renamed over it), so a reader never sees half.
fn write_json(path: &PathBuf, value: &Value) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("writing {}", tmp.display()))?;
    writeln!(f, "{value}")?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    use std::time::Instant;

    use serde_json::json;

    use crate::pump::Way;
    use crate::shaper::Shaper;

    let cli = Cli::parse();
    let link = cli.link()?;
    let (near_ns, near_if) = split_end(&cli.near)?;
    let (far_ns, far_if) = split_end(&cli.far)?;
    let near = tun::open(near_ns, near_if)?;
    let far = tun::open(far_ns, far_if)?;
    pump::stop_on_signals()?;
    netns::precise_sleeps();
    let rtt = link.up.delay + link.down.delay;
    let started = Instant::now();
    let mut report = json!({
        "near": cli.near, "far": cli.far, "seed": cli.seed, "mtu": cli.mtu,
        // CLOCK_MONOTONIC at the start: the rate schedule's time zero, for link-check.
        "started_monotonic_ns": netns::monotonic_ns(),
        "rtt_ms": rtt.as_secs_f64() * 1e3,
        "up": link.up.to_json(rtt, cli.mtu), "down": link.down.to_json(rtt, cli.mtu),
    });
    eprintln!("link-emu: {report}");
    if let Some(path) = &cli.stats {
        write_json(path, &report)?;
    }
    let mut ways = [
        Way { from: near.try_clone()?, to: far.try_clone()?, shaper: Shaper::new(link.up, cli.seed) },
        Way { from: far, to: near, shaper: Shaper::new(link.down, cli.seed.wrapping_add(1)) },
    ];
    let result = pump::run(&mut ways, started);
    let counters =
        json!({"up": ways[0].shaper.counters.to_json(), "down": ways[1].shaper.counters.to_json()});
    eprintln!("link-emu: stopped: {counters}");
    report["counters"] = counters;
    report["cpu_s"] = json!(pump::cpu_seconds());
    report["seconds"] = json!(started.elapsed().as_secs_f64());
    if let Some(path) = &cli.stats {
        write_json(path, &report)?;
    }
    result
}

#[cfg(not(target_os = "linux"))]
fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    cli.link()?;
    bail!("link-emu needs Linux (network namespaces and TUN devices)")
}
