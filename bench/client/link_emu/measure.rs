//! link-check's checks: each sends its traffic (`probe.rs`), works out what the link as described
//! should have done to it, and adds a [`Check`] per figure.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::probe::{self, Arrival, Ends, UDP_OVERHEAD};
use crate::{Check, Link, Side, Verdict, mbit, quantile, within};

/// The width of the bins a stream's arrivals are counted in to give a rate.
const BIN: f64 = 0.1;
/// How far a measured rate may be from the configured one.
const RATE_TOLERANCE: f64 = 0.03;
/// IPv4 and TCP headers with timestamps: what TCP takes of each packet of the MTU.
const TCP_HEADERS: usize = 52;

fn direction(up: bool) -> &'static str {
    if up { "up (near → far)" } else { "down (far → near)" }
}

/// Small UDP probes on the idle link: the round trip is both delays and two tiny crossings.
/// Returns the p50 (ms), which the TCP checks compare with.
pub fn round_trip(link: &Link, ends: Ends, checks: &mut Vec<Check>) -> anyhow::Result<f64> {
    const PROBES: usize = 40;
    let rtts = probe::round_trips(ends, Duration::from_millis(25), PROBES, &AtomicBool::new(false))?;
    let probe_bytes = (UDP_OVERHEAD + 8) as f64;
    let expected = (link.up.delay + link.down.delay).as_secs_f64() * 1e3
        + (Side::crossing(probe_bytes, link.up.max_rate())
            + Side::crossing(probe_bytes, link.down.max_rate()))
            * 1e3;
    let (min, p50) = (quantile(&rtts, 0.0), quantile(&rtts, 0.5));
    let tolerance = (expected * 0.05).max(1.0);
    let (verdict, note) = if rtts.len() < PROBES / 2 {
        (Verdict::Off, format!("only {} of {PROBES} probes answered", rtts.len()))
    } else if min < expected - 0.05 {
        (Verdict::Off, "faster than the delays allow".to_owned())
    } else if p50 > expected + tolerance {
        (Verdict::Off, format!("more than {tolerance:.1} ms above"))
    } else {
        (Verdict::Ok, format!("{} of {PROBES} probes, tolerance +{tolerance:.1} ms", rtts.len()))
    };
    checks.push(Check::new(
        "idle round trip p50",
        format!("{expected:.2} ms"),
        format!("{p50:.2} ms (min {min:.2})"),
        verdict,
        note,
    ));
    Ok(p50)
}

/// How far above the rate the rate-and-buffer stream sends: enough to fill a deep buffer within
/// seconds, not so much that at 1 Gbit/s the sender takes the CPU the emulator needs.
fn overload(rate: f64) -> f64 {
    if rate <= 300e6 { 1.5 } else { 1.15 }
}

/// A UDP stream above the rate ([`overload`]): the rate per step of the schedule, and the
/// one-way delay once the buffer is full.
pub fn rate_and_buffer(
    link: &Link,
    ends: Ends,
    up: bool,
    seconds: Duration,
    checks: &mut Vec<Check>,
) -> anyhow::Result<()> {
    let side = if up { &link.up } else { &link.down };
    let size = link.mtu;
    let factor = overload(side.max_rate());
    let offered = factor * side.max_rate();
    let every = Duration::from_secs_f64(Side::crossing(size as f64, offered));
    // The buffer fills in its drain time over the excess; the last 30 % of the stream must find
    // it full.
    let drain = Side::crossing(side.queue_bytes, side.min_rate());
    let length = seconds.max(Duration::from_secs_f64(((drain / (factor - 1.0) + 0.2) / 0.7).min(30.0)));
    let s = probe::stream(ends, up, size, every, length)?;
    let dir = direction(up);
    let sent_rate = s.sent as f64 * size as f64 * 8.0 / length.as_secs_f64();
    let mut note = format!(
        "offered {}, {} sent ({} refused by the sender's kernel), {} arrived",
        mbit(sent_rate),
        s.sent,
        s.refused,
        s.arrivals.len()
    );
    // Either end starved of CPU measures the machine, not the link: then the figures are shown
    // without a verdict.
    let starved = if s.receiver_dropped > 0 {
        Some(format!(
            "the receiver's buffer overflowed ({} datagrams): it did not get the CPU",
            s.receiver_dropped
        ))
    } else if sent_rate < 1.02 * side.max_rate() {
        Some("the sender could not offer more than the rate: it did not get the CPU".to_owned())
    } else {
        None
    };
    if let Some(why) = &starved {
        note = format!("{why}; {note}");
    }
    let judge = |v: Verdict| if starved.is_some() { Verdict::Reported } else { v };
    if s.arrivals.len() < 100 {
        checks.push(Check::new(
            format!("{dir} rate"),
            mbit(side.max_rate()),
            "nothing".into(),
            Verdict::Off,
            note,
        ));
        return Ok(());
    }
    let mut arrivals = s.arrivals;
    arrivals.sort_by_key(|a| a.arrived_ns);
    for (rate, measured) in rates_per_step(link, side, &arrivals, size) {
        let expected = rate * (1.0 - side.loss);
        let what = if side.constant() {
            format!("{dir} rate")
        } else {
            format!("{dir} rate in {} steps", mbit(rate))
        };
        checks.push(Check::new(
            what,
            mbit(expected),
            format!("{} ({:.3}×)", mbit(measured), measured / expected),
            judge(within(measured, expected, expected * RATE_TOLERANCE)),
            note.clone(),
        ));
    }
    checks.push(buffer_delay(side, dir, size, &arrivals, judge));
    Ok(())
}

/// The one-way delay of what was sent in the last 30 % of the stream (the buffer was full when
/// it arrived there): the delay plus the buffer's depth at the rate, for a constant rate.
fn buffer_delay(
    side: &Side,
    dir: &str,
    size: usize,
    arrivals: &[Arrival],
    judge: impl Fn(Verdict) -> Verdict,
) -> Check {
    let (first_sent, last_sent) = (
        arrivals.iter().map(|a| a.sent_ns).min().unwrap_or(0),
        arrivals.iter().map(|a| a.sent_ns).max().unwrap_or(0),
    );
    let late = first_sent + (last_sent - first_sent) * 7 / 10;
    let one_way: Vec<f64> = arrivals
        .iter()
        .filter(|a| a.sent_ns >= late)
        .map(|a| a.arrived_ns.saturating_sub(a.sent_ns) as f64 / 1e6)
        .collect();
    let measured = quantile(&one_way, 0.5);
    if !side.constant() {
        return Check::new(
            format!("{dir} delay with a full buffer"),
            "(the rate changes)".into(),
            format!("{measured:.1} ms (max {:.1})", quantile(&one_way, 1.0)),
            Verdict::Reported,
            format!("{:.0} bytes of buffer", side.queue_bytes),
        );
    }
    let rate = side.max_rate();
    let expected = side.delay.as_secs_f64() * 1e3
        + (Side::crossing(side.queue_bytes, rate) + Side::crossing(size as f64, rate)) * 1e3;
    let tolerance = expected * 0.02 + 0.5;
    Check::new(
        format!("{dir} delay with a full buffer"),
        format!("{expected:.1} ms"),
        format!("{measured:.1} ms (p99 {:.1})", quantile(&one_way, 0.99)),
        judge(within(measured, expected, tolerance)),
        format!(
            "the delay plus {:.0} bytes of buffer at {}; tolerance ±{tolerance:.1} ms",
            side.queue_bytes,
            mbit(rate)
        ),
    )
}

/// (configured rate, mean measured rate) per distinct rate of the schedule, from the arrivals
/// counted in [`BIN`]-wide bins of the emulator's time (an arrival left the bottleneck one delay
/// earlier). Bins that straddle a change of rate, and the first and last, are left out.
fn rates_per_step(link: &Link, side: &Side, arrivals: &[Arrival], size: usize) -> Vec<(f64, f64)> {
    let left = |a: &Arrival| (a.arrived_ns as f64 - link.started_ns as f64) / 1e9 - side.delay.as_secs_f64();
    let (Some(first), Some(last)) = (arrivals.first(), arrivals.last()) else { return Vec::new() };
    let (from, to) = (left(first) + BIN, left(last) - BIN);
    let bins = ((to - from) / BIN).floor().max(0.0) as usize;
    let mut counts = vec![0u64; bins];
    for a in arrivals {
        let k = ((left(a) - from) / BIN).floor();
        if k >= 0.0 && (k as usize) < bins {
            counts[k as usize] += 1;
        }
    }
    let mut by_rate: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for (k, n) in counts.iter().enumerate() {
        let start = from + k as f64 * BIN;
        let rate = side.rate_at(start);
        if side.rate_at(start + BIN - 1e-6) == rate {
            by_rate.entry(rate as u64).or_default().push(*n as f64 * size as f64 * 8.0 / BIN);
        }
    }
    by_rate.into_iter().rev().map(|(rate, v)| (rate as f64, v.iter().sum::<f64>() / v.len() as f64)).collect()
}

/// A sparse UDP stream each way at once (no queue forms): the fraction lost is the configured
/// loss, within four standard deviations of the binomial (and one datagram).
pub fn loss(link: &Link, ends: Ends, seconds: Duration, checks: &mut Vec<Check>) -> anyhow::Result<()> {
    const SIZE: usize = 128;
    let length = seconds.max(Duration::from_secs(2));
    let every = |side: &Side| {
        let pps = (0.3 * side.min_rate() / (SIZE as f64 * 8.0)).min(5000.0);
        Duration::from_secs_f64(1.0 / pps)
    };
    let (up, down) = std::thread::scope(|s| {
        let up = s.spawn(|| probe::stream(ends, true, SIZE, every(&link.up), length));
        let down = probe::stream(ends, false, SIZE, every(&link.down), length);
        (up.join().map_err(|_| anyhow::anyhow!("a probe thread panicked")), down)
    });
    for (is_up, stream, side) in [(true, up??, &link.up), (false, down?, &link.down)] {
        let arrived: HashSet<u64> = stream.arrivals.iter().map(|a| a.seq).collect();
        let n = stream.sent.saturating_sub(stream.refused).max(1);
        let lost = n.saturating_sub(arrived.len() as u64);
        let measured = lost as f64 / n as f64;
        let p = side.loss;
        let tolerance = 4.0 * (p * (1.0 - p) / n as f64).sqrt() + 1.0 / n as f64;
        checks.push(Check::new(
            format!("{} loss, sparse", direction(is_up)),
            format!("{:.2} %", p * 100.0),
            format!("{:.2} % ({lost} of {n})", measured * 100.0),
            within(measured, p, tolerance),
            format!("tolerance ±{:.2} %", tolerance * 100.0),
        ));
    }
    Ok(())
}

/// One kernel TCP transfer: its goodput against the rate less the headers (for a link that
/// loses nothing), and the round trip beside it, which a full buffer each way bounds.
pub fn tcp(
    link: &Link,
    ends: Ends,
    down: bool,
    seconds: Duration,
    idle_rtt_ms: f64,
    checks: &mut Vec<Check>,
) -> anyhow::Result<()> {
    let (side, other) = if down { (&link.down, &link.up) } else { (&link.up, &link.down) };
    let stop = AtomicBool::new(false);
    let (bulk, rtts) = std::thread::scope(|s| {
        let rtts = s.spawn(|| probe::round_trips(ends, Duration::from_millis(50), 100_000, &stop));
        let bulk = probe::bulk(ends, down, seconds);
        stop.store(true, Ordering::Relaxed);
        (bulk, rtts.join().map_err(|_| anyhow::anyhow!("a probe thread panicked")))
    });
    let (bulk, rtts) = (bulk?, rtts??);
    let dir = if down { "TCP down" } else { "TCP up" };
    let steady_from = (seconds.as_secs_f64() / 3.0).min(1.0);
    let start = bulk.progress.iter().find(|p| p.0 as f64 / 1e9 >= steady_from).copied();
    let (Some((ta, ba)), Some(&(tb, bb))) = (start, bulk.progress.last()) else {
        checks.push(Check::new(
            format!("{dir} goodput"),
            "-".into(),
            "nothing".into(),
            Verdict::Off,
            String::new(),
        ));
        return Ok(());
    };
    let goodput = if tb > ta { (bb - ba) as f64 * 8.0 / ((tb - ta) as f64 / 1e9) } else { 0.0 };
    // The rate the bottleneck had while what was counted crossed it (one delay before it arrived).
    let first = (bulk.first_byte_ns as f64 - link.started_ns as f64) / 1e9 - side.delay.as_secs_f64();
    let (from, to) = (first + ta as f64 / 1e9, first + tb as f64 / 1e9);
    let samples = 100;
    let mean_rate =
        (0..samples).map(|k| side.rate_at(from + (to - from) * k as f64 / samples as f64)).sum::<f64>()
            / samples as f64;
    let expected = mean_rate * (link.mtu - TCP_HEADERS) as f64 / link.mtu as f64;
    // What the sender's send buffer can keep in flight: about half its maximum is payload.
    let rtt = (link.up.delay + link.down.delay).as_secs_f64();
    let bdp = mean_rate / 8.0 * rtt;
    let window_bound = bulk.send_buffer_max as f64 / 2.0 < bdp;
    let (verdict, why) = if side.loss > 0.0 {
        (Verdict::Reported, "random loss: what TCP makes of it".to_owned())
    } else if !side.constant() {
        (Verdict::Reported, "the rate changes: how fast TCP follows it".to_owned())
    } else if window_bound {
        let why = format!(
            "the sender's tcp_wmem maximum ({:.1} MiB) holds less than twice the link's BDP ({:.1} MB): one \
             connection is capped near half of it per round trip",
            bulk.send_buffer_max as f64 / 1048576.0,
            bdp / 1e6
        );
        (Verdict::Reported, why)
    } else if goodput >= expected * 0.85 && goodput <= expected * 1.03 {
        (Verdict::Ok, format!("at least 0.85× the rate less {TCP_HEADERS} bytes of headers per packet"))
    } else {
        (Verdict::Off, format!("at least 0.85× the rate less {TCP_HEADERS} bytes of headers per packet"))
    };
    checks.push(Check::new(
        format!("{dir} goodput"),
        mbit(expected),
        format!("{} ({:.3}×)", mbit(goodput), goodput / expected),
        verdict,
        format!("{}, after its first {steady_from:.1} s; {why}", bulk.congestion_control),
    ));
    let bound = idle_rtt_ms
        + (Side::crossing(side.queue_bytes, side.min_rate())
            + Side::crossing(other.queue_bytes, other.min_rate()))
            * 1e3
        + 5.0;
    let worst = quantile(&rtts, 0.95);
    checks.push(Check::new(
        format!("{dir}: round trip beside it p95"),
        format!("at most {bound:.0} ms"),
        format!("{worst:.1} ms (p50 {:.1})", quantile(&rtts, 0.5)),
        if rtts.is_empty() {
            Verdict::Off
        } else if worst <= bound {
            Verdict::Ok
        } else {
            Verdict::Off
        },
        format!("{} probes; idle plus a full buffer each way", rtts.len()),
    ));
    Ok(())
}
