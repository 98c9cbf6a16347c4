//! What one direction of the emulated link is, and the command-line words for it: durations
//! (`25ms`), rates (`50mbit`), rate schedules (`50mbit/3s,25mbit/2s`), buffer depths (`1bdp`,
//! `250ms`, `1000p`, `64KiB`) and loss (`0.5%`).
//!
//! Rates are decimal, as `tc` writes them (1 mbit = 1,000,000 bit/s); a buffer given in time or in
//! bandwidth-delay products is turned into bytes at the schedule's first rate.

use std::time::Duration;

use serde_json::{Value, json};
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum SpecError {
    #[error("{0:?}: not a duration (a number with us, ms or s, e.g. 25ms)")]
    Duration(String),
    #[error("{0:?}: not a rate (a number with bit, kbit, mbit or gbit, e.g. 50mbit)")]
    Rate(String),
    #[error(
        "{0:?}: not a rate schedule (RATE, or RATE/DURATION steps joined by commas, e.g. 50mbit/3s,25mbit/2s)"
    )]
    Schedule(String),
    #[error(
        "{0:?}: not a buffer depth (bandwidth-delay products 1bdp, a time at the link's rate 250ms, packets 1000p, or bytes 64KiB)"
    )]
    Queue(String),
    #[error("{0:?}: not a loss rate (a percentage 0.5% or a fraction 0.005, below 1)")]
    Loss(String),
}

/// Splits `text` into its number and its unit ("25ms" → (25.0, "ms")).
fn number_and_unit(text: &str) -> Option<(f64, String)> {
    let text = text.trim();
    let at = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let n: f64 = text[..at].parse().ok()?;
    n.is_finite().then(|| (n, text[at..].to_ascii_lowercase()))
}

pub fn duration(text: &str) -> Result<Duration, SpecError> {
    let err = || SpecError::Duration(text.to_owned());
    let (n, unit) = number_and_unit(text).ok_or_else(err)?;
    let seconds = match unit.as_str() {
        "us" | "µs" => n / 1e6,
        "ms" => n / 1e3,
        "s" => n,
        "" if n == 0.0 => 0.0,
        _ => return Err(err()),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| err())
}

/// Bits per second, above 0.
pub fn rate(text: &str) -> Result<u64, SpecError> {
    let err = || SpecError::Rate(text.to_owned());
    let (n, unit) = number_and_unit(text).ok_or_else(err)?;
    let scale = match unit.as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => return Err(err()),
    };
    let bits = (n * scale).round();
    if !(1.0..=1e12).contains(&bits) {
        return Err(err());
    }
    Ok(bits as u64)
}

/// The bottleneck's rate over time: steps of (bit/s, how long), repeated from the emulator's
/// start for as long as it runs. One step with no length is a constant rate.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    steps: Vec<(u64, Duration)>,
    period: Duration,
}

impl Schedule {
    pub fn constant(bits_per_second: u64) -> Schedule {
        Schedule { steps: vec![(bits_per_second, Duration::ZERO)], period: Duration::ZERO }
    }

    pub fn parse(text: &str) -> Result<Schedule, SpecError> {
        let err = || SpecError::Schedule(text.to_owned());
        let parts: Vec<&str> = text.split(',').map(str::trim).collect();
        if let [only] = parts.as_slice()
            && !only.contains('/')
        {
            return Ok(Schedule::constant(rate(only)?));
        }
        let mut steps = Vec::with_capacity(parts.len());
        for part in parts {
            let (r, d) = part.split_once('/').ok_or_else(err)?;
            let d = duration(d)?;
            if d.is_zero() {
                return Err(err());
            }
            steps.push((rate(r)?, d));
        }
        let period = steps.iter().map(|s| s.1).sum();
        Ok(Schedule { steps, period })
    }

    /// The rate (bit/s) `since_start` after the emulator started.
    pub fn rate_at(&self, since_start: Duration) -> u64 {
        if self.period.is_zero() {
            return self.steps[0].0;
        }
        let mut into = Duration::from_nanos((since_start.as_nanos() % self.period.as_nanos()) as u64);
        for &(rate, length) in &self.steps {
            if into < length {
                return rate;
            }
            into -= length;
        }
        self.steps[self.steps.len() - 1].0
    }

    /// The first step's rate: what a buffer depth in time or in BDPs is measured at.
    pub fn base(&self) -> u64 {
        self.steps[0].0
    }

    pub fn max(&self) -> u64 {
        self.steps.iter().map(|s| s.0).max().unwrap_or(0)
    }

    pub fn to_json(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|&(r, d)| json!({"bit_s": r, "seconds": (!d.is_zero()).then_some(d.as_secs_f64())}))
            .collect();
        json!(steps)
    }
}

/// A buffer depth as written, before the link it belongs to is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueSpec {
    /// Bandwidth-delay products (of the first rate and the round trip of both delays).
    Bdp(f64),
    /// The time the buffer takes to drain at the first rate.
    Time(Duration),
    Packets(u32),
    Bytes(u64),
}

impl QueueSpec {
    pub fn parse(text: &str) -> Result<QueueSpec, SpecError> {
        let err = || SpecError::Queue(text.to_owned());
        let (n, unit) = number_and_unit(text).ok_or_else(err)?;
        let whole = |n: f64| (n >= 1.0 && n.fract() == 0.0 && n <= 1e10).then_some(n as u64);
        let spec = match unit.as_str() {
            "bdp" if n > 0.0 && n <= 100.0 => QueueSpec::Bdp(n),
            "p" => QueueSpec::Packets(whole(n).and_then(|p| u32::try_from(p).ok()).ok_or_else(err)?),
            "b" => QueueSpec::Bytes(whole(n).ok_or_else(err)?),
            "kb" => QueueSpec::Bytes(whole(n * 1e3).ok_or_else(err)?),
            "kib" => QueueSpec::Bytes(whole(n * 1024.0).ok_or_else(err)?),
            "mb" => QueueSpec::Bytes(whole(n * 1e6).ok_or_else(err)?),
            "mib" => QueueSpec::Bytes(whole(n * 1024.0 * 1024.0).ok_or_else(err)?),
            _ => match duration(text) {
                Ok(d) if !d.is_zero() => QueueSpec::Time(d),
                _ => return Err(err()),
            },
        };
        Ok(spec)
    }

    /// The limit for a link of `base` bit/s whose round trip (both delays) is `rtt`.
    pub fn resolve(self, base: u64, rtt: Duration) -> QueueLimit {
        let bytes_in = |d: Duration| ((base as f64 / 8.0) * d.as_secs_f64()).round() as u64;
        match self {
            QueueSpec::Bdp(n) => QueueLimit::Bytes(((bytes_in(rtt) as f64) * n).round() as u64),
            QueueSpec::Time(d) => QueueLimit::Bytes(bytes_in(d)),
            QueueSpec::Packets(p) => QueueLimit::Packets(p),
            QueueSpec::Bytes(b) => QueueLimit::Bytes(b),
        }
    }
}

/// How much the drop-tail buffer holds, in bytes (as `bfifo`) or in packets (as `pfifo` and a
/// device's `txqueuelen`). A packet that would exceed it is dropped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueLimit {
    Bytes(u64),
    Packets(u32),
}

impl QueueLimit {
    /// The most bytes it can hold with packets of up to `mtu` bytes.
    pub fn max_bytes(self, mtu: usize) -> u64 {
        match self {
            QueueLimit::Bytes(b) => b,
            QueueLimit::Packets(p) => p as u64 * mtu as u64,
        }
    }
}

/// A probability in [0, 1).
pub fn loss(text: &str) -> Result<f64, SpecError> {
    let err = || SpecError::Loss(text.to_owned());
    let t = text.trim();
    let p = match t.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map_err(|_| err())? / 100.0,
        None => t.parse::<f64>().map_err(|_| err())?,
    };
    if !(0.0..1.0).contains(&p) {
        return Err(err());
    }
    Ok(p)
}

/// One direction of the link, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Direction {
    pub delay: Duration,
    pub schedule: Schedule,
    pub queue: QueueLimit,
    pub loss: f64,
}

impl Direction {
    pub fn to_json(&self, rtt: Duration, mtu: usize) -> Value {
        let base = self.schedule.base() as f64;
        let bdp = base / 8.0 * rtt.as_secs_f64();
        let (bytes, packets) = match self.queue {
            QueueLimit::Bytes(b) => (Some(b), None),
            QueueLimit::Packets(p) => (None, Some(p)),
        };
        let most = self.queue.max_bytes(mtu) as f64;
        json!({
            "delay_ms": self.delay.as_secs_f64() * 1e3,
            "rate": self.schedule.to_json(),
            "queue_bytes": bytes,
            "queue_packets": packets,
            // What a full buffer adds to the delay at the first rate, and its size in BDPs.
            "queue_ms": most * 8.0 / base * 1e3,
            "queue_bdp": if bdp > 0.0 { Some(most / bdp) } else { None },
            "bdp_bytes": bdp.round(),
            "loss": self.loss,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_rates_and_loss_parse_with_their_units() {
        assert_eq!(duration("25ms"), Ok(Duration::from_millis(25)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        assert_eq!(duration("25"), Err(SpecError::Duration("25".into())));
        assert_eq!(rate("50mbit"), Ok(50_000_000));
        assert_eq!(rate("1Gbit"), Ok(1_000_000_000));
        assert_eq!(rate("0.5mbit"), Ok(500_000));
        assert!(rate("50mb").is_err(), "bytes per second are not a rate here");
        assert!(rate("0mbit").is_err());
        assert_eq!(loss("0.5%"), Ok(0.005));
        assert_eq!(loss("0.01"), Ok(0.01));
        assert!(loss("100%").is_err());
        assert!(loss("-1%").is_err());
    }

    #[test]
    fn a_schedule_repeats_its_steps_from_the_start() {
        let s = Schedule::parse("50mbit/3s,25mbit/2s").unwrap();
        assert_eq!(s.rate_at(Duration::ZERO), 50_000_000);
        assert_eq!(s.rate_at(Duration::from_millis(2999)), 50_000_000);
        assert_eq!(s.rate_at(Duration::from_millis(3000)), 25_000_000);
        assert_eq!(s.rate_at(Duration::from_millis(4999)), 25_000_000);
        assert_eq!(s.rate_at(Duration::from_millis(5000)), 50_000_000, "the cycle starts again");
        assert_eq!(s.rate_at(Duration::from_millis(13_500)), 25_000_000);
        assert_eq!((s.base(), s.max()), (50_000_000, 50_000_000));
        let c = Schedule::parse("200mbit").unwrap();
        assert_eq!(c.rate_at(Duration::from_secs(1000)), 200_000_000);
        assert!(Schedule::parse("50mbit/0s").is_err());
        assert!(Schedule::parse("50mbit,25mbit/2s").is_err());
    }

    #[test]
    fn buffer_depths_resolve_against_the_link() {
        // 50 Mbit/s and 50 ms: one BDP is 312,500 bytes.
        let rtt = Duration::from_millis(50);
        let at = |t: &str| QueueSpec::parse(t).unwrap().resolve(50_000_000, rtt);
        assert_eq!(at("1bdp"), QueueLimit::Bytes(312_500));
        assert_eq!(at("0.5bdp"), QueueLimit::Bytes(156_250));
        assert_eq!(at("250ms"), QueueLimit::Bytes(1_562_500));
        assert_eq!(at("1000p"), QueueLimit::Packets(1000));
        assert_eq!(at("64KiB"), QueueLimit::Bytes(65_536));
        assert_eq!(at("64kB"), QueueLimit::Bytes(64_000));
        assert_eq!(QueueLimit::Packets(1000).max_bytes(1500), 1_500_000);
        for bad in ["0bdp", "1.5p", "lots", "0ms", "-3p"] {
            assert!(QueueSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
