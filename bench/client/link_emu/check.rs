//! `link-check`: measures what a running `link-emu` emulates, from the outside, and says where it
//! is off. It reads the link as the emulator resolved it (its `--stats` file, written at its
//! start), sends traffic through it between the two namespaces (`probe.rs`) and compares:
//!
//! - round trip: small UDP probes on the idle link take both delays and nothing more;
//! - rate and buffer, per direction: a UDP stream above the link's rate (1.5 times; 1.15 above
//!   300 Mbit/s) keeps the bottleneck busy, so what arrives per 100 ms is the rate (per step of a
//!   schedule), and once the buffer is full every datagram waits for a full buffer: the one-way
//!   delay levels out at the delay plus the buffer's depth at that rate;
//! - loss, per direction: a sparse UDP stream (no queue) loses the configured fraction, within
//!   four standard deviations of the binomial;
//! - TCP, per direction: one kernel TCP transfer's goodput against the rate less its headers,
//!   and the round trip beside it, which may not exceed an idle one plus a full buffer.
//!
//! Exit code 1 when a check is off. Not a test: it measures time on a shared machine, and its
//! figures say how well the emulator held up there (`bench/link_check.sh` runs it per profile).

#[cfg(target_os = "linux")]
mod netns;
#[cfg(target_os = "linux")]
mod probe;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use serde_json::{Value, json};

/// Measures a running link-emu between two network namespaces against what it was told to be:
/// round trip, rate and buffer depth per direction (a UDP stream above the rate), random
/// loss (a sparse UDP stream), and one TCP transfer each way. Prints expected and measured side
/// by side; exits with 1 when one is off.
#[derive(Parser, Debug)]
#[command(name = "link-check")]
struct Cli {
    /// The emulator's --stats file (it describes the link there as it starts).
    #[arg(long, value_name = "FILE")]
    link: PathBuf,
    /// The near namespace (an `ip netns` name or a path).
    #[arg(long)]
    near: String,
    /// The far namespace.
    #[arg(long)]
    far: String,
    /// The near end's address on the link.
    #[arg(long, default_value = "198.18.0.1")]
    near_addr: std::net::Ipv4Addr,
    /// The far end's address on the link.
    #[arg(long, default_value = "198.18.0.2")]
    far_addr: std::net::Ipv4Addr,
    /// Seconds of each stream and transfer (the buffer check runs longer when the buffer needs
    /// it to fill).
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// A name for this link in the output (e.g. the profile's).
    #[arg(long, default_value = "link")]
    name: String,
    /// Appends one JSON object per check to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// One direction of the link, as link-emu described it.
#[derive(Debug, Clone)]
struct Side {
    delay: Duration,
    /// (bit/s, seconds; 0 for a constant rate).
    steps: Vec<(f64, f64)>,
    /// Bytes a full buffer holds with packets of `mtu` bytes.
    queue_bytes: f64,
    loss: f64,
}

impl Side {
    fn from_json(v: &Value, mtu: usize) -> anyhow::Result<Side> {
        let num = |key: &str| v[key].as_f64().with_context(|| format!("no {key} in the link's description"));
        let steps = v["rate"]
            .as_array()
            .context("no rate in the link's description")?
            .iter()
            .map(|s| {
                Ok((
                    s["bit_s"].as_f64().context("a rate step without bit_s")?,
                    s["seconds"].as_f64().unwrap_or(0.0),
                ))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        // A byte limit holds whole packets only.
        let queue_bytes = match (v["queue_bytes"].as_f64(), v["queue_packets"].as_f64()) {
            (Some(b), _) => (b / mtu as f64).floor() * mtu as f64,
            (None, Some(p)) => p * mtu as f64,
            _ => anyhow::bail!("no buffer depth in the link's description"),
        };
        Ok(Side {
            delay: Duration::from_secs_f64(num("delay_ms")? / 1e3),
            steps,
            queue_bytes,
            loss: num("loss")?,
        })
    }

    fn rate_at(&self, t: f64) -> f64 {
        let period: f64 = self.steps.iter().map(|s| s.1).sum();
        if period <= 0.0 {
            return self.steps[0].0;
        }
        let mut into = t.rem_euclid(period);
        for &(rate, length) in &self.steps {
            if into < length {
                return rate;
            }
            into -= length;
        }
        self.steps[self.steps.len() - 1].0
    }

    fn constant(&self) -> bool {
        self.steps.len() == 1
    }

    fn max_rate(&self) -> f64 {
        self.steps.iter().map(|s| s.0).fold(0.0, f64::max)
    }

    fn min_rate(&self) -> f64 {
        self.steps.iter().map(|s| s.0).fold(f64::INFINITY, f64::min)
    }

    /// Seconds `bytes` take to cross at `rate`.
    fn crossing(bytes: f64, rate: f64) -> f64 {
        bytes * 8.0 / rate
    }
}

struct Link {
    started_ns: u64,
    mtu: usize,
    up: Side,
    down: Side,
}

impl Link {
    fn read(path: &PathBuf) -> anyhow::Result<Link> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let v: Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not link-emu's JSON", path.display()))?;
        let mtu = v["mtu"].as_u64().context("no mtu in the link's description")? as usize;
        Ok(Link {
            started_ns: v["started_monotonic_ns"].as_u64().context("no started_monotonic_ns")?,
            mtu,
            up: Side::from_json(&v["up"], mtu)?,
            down: Side::from_json(&v["down"], mtu)?,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Verdict {
    Ok,
    Off,
    Reported,
}

struct Check {
    what: String,
    expected: String,
    measured: String,
    verdict: Verdict,
    note: String,
}

impl Check {
    fn new(
        what: impl Into<String>,
        expected: String,
        measured: String,
        verdict: Verdict,
        note: String,
    ) -> Check {
        Check { what: what.into(), expected, measured, verdict, note }
    }

    fn to_json(&self, name: &str) -> Value {
        let verdict = match self.verdict {
            Verdict::Ok => "ok",
            Verdict::Off => "off",
            Verdict::Reported => "reported",
        };
        json!({"phase": "link_check", "link": name, "check": self.what, "expected": self.expected,
               "measured": self.measured, "verdict": verdict, "note": self.note})
    }
}

fn within(measured: f64, expected: f64, tolerance: f64) -> Verdict {
    if (measured - expected).abs() <= tolerance { Verdict::Ok } else { Verdict::Off }
}

fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn mbit(bits: f64) -> String {
    format!("{:.2} Mbit/s", bits / 1e6)
}

#[cfg(target_os = "linux")]
mod measure;

#[cfg(target_os = "linux")]
fn main() -> anyhow::Result<()> {
    use std::io::Write as _;

    let cli = Cli::parse();
    let link = Link::read(&cli.link)?;
    let ends = probe::Ends { near_ns: &cli.near, far_ns: &cli.far, near: cli.near_addr, far: cli.far_addr };
    let seconds = Duration::from_secs_f64(cli.seconds.clamp(0.5, 60.0));
    let mut checks = Vec::new();
    let idle = measure::round_trip(&link, ends, &mut checks)?;
    for up in [true, false] {
        measure::rate_and_buffer(&link, ends, up, seconds, &mut checks)?;
    }
    measure::loss(&link, ends, seconds, &mut checks)?;
    for down in [true, false] {
        measure::tcp(&link, ends, down, seconds, idle, &mut checks)?;
    }
    println!("{:<44} {:<26} {:<30} verdict", format!("{}: check", cli.name), "expected", "measured");
    for c in &checks {
        let verdict = match c.verdict {
            Verdict::Ok => "ok",
            Verdict::Off => "OFF",
            Verdict::Reported => "-",
        };
        println!("{:<44} {:<26} {:<30} {verdict}  {}", c.what, c.expected, c.measured, c.note);
    }
    if let Some(path) = &cli.json {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        for c in &checks {
            writeln!(f, "{}", c.to_json(&cli.name))?;
        }
    }
    let off = checks.iter().filter(|c| c.verdict == Verdict::Off).count();
    if off > 0 {
        eprintln!("link-check: {off} of {} checks off for {}", checks.len(), cli.name);
        std::process::exit(1);
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn main() -> anyhow::Result<()> {
    let _ = Cli::parse();
    anyhow::bail!("link-check needs Linux (network namespaces)")
}
