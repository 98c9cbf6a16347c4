//! The window rule on a simulated path: a bottleneck link of a given rate and base round trip,
//! with a queue in front of it that holds whatever the window lets in beyond one BDP. The same
//! scenarios run against a window fixed at dial (`assumed`), which must fail the shrinking one.

use super::*;

fn settings() -> AdaptiveSettings {
    AdaptiveSettings::default()
}

/// The ping gap of `meter` (a sample every round trip plus this).
const GAP: Duration = Duration::from_millis(100);
/// Samples per scenario: 40 round trips and more, as in a download of a few seconds.
const STEPS: usize = 40;

/// A link of `rate` bytes per second and `base` round trip with a queue that takes the excess.
#[derive(Clone, Copy)]
struct Link {
    rate: f64,
    base: Duration,
}

/// What the path does with `window`: (round trip, delivery rate). The vendored russh re-opens
/// the window every three packets (an eighth of a larger window), so all of it but that much is
/// in flight.
impl Link {
    fn carry(self, window: u32) -> (Duration, f64) {
        let unopened = (3.0 * 32.0 * 1024.0_f64).max(f64::from(window) / 8.0);
        let in_flight = (f64::from(window) - unopened).max(0.0);
        let bdp = self.rate * self.base.as_secs_f64();
        let queue = (in_flight - bdp).max(0.0);
        let rtt = self.base + Duration::from_secs_f64(queue / self.rate);
        let throughput = (in_flight / self.base.as_secs_f64()).min(self.rate);
        (rtt, throughput)
    }
}

/// Something that decides the window from samples.
trait Rule {
    fn window(&self) -> u32;
    fn observe(&mut self, now: Duration, rtt: Duration, delivered: u64);
}

impl Rule for PathWindow {
    fn window(&self) -> u32 {
        PathWindow::window(self)
    }
    fn observe(&mut self, now: Duration, rtt: Duration, delivered: u64) {
        PathWindow::observe(self, now, rtt, delivered);
    }
}

/// A window fixed at dial: the one `assumed` chose from the dial's round trip, for good.
struct AtDial(u32);

impl Rule for AtDial {
    fn window(&self) -> u32 {
        self.0
    }
    fn observe(&mut self, _: Duration, _: Duration, _: u64) {}
}

/// What the path looked like at the end of a bulk transfer: (window, round trip, rate).
fn bulk(link: Link, rule: &mut dyn Rule) -> (u32, Duration, f64) {
    let mut now = Duration::ZERO;
    let mut last = (link.base, 0.0);
    for _ in 0..STEPS {
        let (rtt, rate) = link.carry(rule.window());
        let interval = rtt + GAP;
        now += interval;
        rule.observe(now, rtt, (rate * interval.as_secs_f64()) as u64);
        last = (rtt, rate);
    }
    (rule.window(), last.0, last.1)
}

/// A slow path: 25 ms each way, 50 Mbit/s.
const SLOW: Link = Link { rate: 50e6 / 8.0, base: Duration::from_millis(50) };
/// The page's fastest shaped path: 50 ms, 1 Gbit/s.
const FAST: Link = Link { rate: 1e9 / 8.0, base: Duration::from_millis(50) };

#[test]
fn near_hops_get_openssh_s_window_far_ones_the_rule_s_own_for_1_gbit_up_to_the_ceiling() {
    assert_eq!(assumed(&settings(), Some(Duration::from_micros(60))), settings().assumed_floor, "loopback");
    assert_eq!(assumed(&settings(), Some(Duration::from_millis(5))), settings().assumed_floor, "LAN");
    // 1.25 × 125 MB/s × 50 ms, and the slack.
    assert_eq!(
        assumed(&settings(), Some(Duration::from_millis(50))),
        7_812_500 + 131_072,
        "1 Gbit/s at 50 ms"
    );
    assert_eq!(assumed(&settings(), Some(Duration::from_secs(1))), settings().ceiling, "capped");
    assert_eq!(assumed(&settings(), None), settings().ceiling, "unknown: a ProxyCommand");
}

/// A bulk download over a slow link: the queue the window built must go, the link stay full.
fn shrinks_under_queueing(rule: &mut dyn Rule) -> Result<(), String> {
    let start = rule.window();
    let (window, rtt, rate) = bulk(SLOW, rule);
    let bdp = SLOW.rate * SLOW.base.as_secs_f64();
    let queued = rtt.saturating_sub(SLOW.base);
    if f64::from(window) > settings().gain * bdp + 2.0 * settings().slack || window >= start {
        return Err(format!("window {window} B after a bulk transfer (was {start}), BDP {bdp:.0} B"));
    }
    if queued > SLOW.base {
        return Err(format!("{queued:?} of queue left in front of every other channel"));
    }
    if rate < 0.95 * SLOW.rate {
        return Err(format!("the link is no longer full: {rate:.0} B/s of {:.0}", SLOW.rate));
    }
    Ok(())
}

#[test]
fn a_window_that_queues_on_a_slow_link_shrinks_to_about_one_bdp_and_keeps_the_link_full() {
    let mut rule = PathWindow::new(settings(), assumed(&settings(), Some(SLOW.base)));
    // The dial measured the path unloaded, as `chain` seeds it.
    rule.seed(Duration::ZERO, SLOW.base);
    assert_eq!(shrinks_under_queueing(&mut rule), Ok(()));
}

#[test]
fn a_window_fixed_at_dial_fails_the_same_path_it_never_shrinks() {
    let mut at_dial = AtDial(assumed(&settings(), Some(SLOW.base)));
    let verdict = shrinks_under_queueing(&mut at_dial);
    assert!(verdict.is_err(), "a window fixed at dial passed: {verdict:?}");
}

#[test]
fn an_empty_fast_path_grows_the_window_until_the_link_is_full() {
    // A session dialled with OpenSSH's 2 MiB on a path that carries six times that per round trip.
    let mut rule = PathWindow::new(settings(), 2 * 1024 * 1024);
    rule.seed(Duration::ZERO, FAST.base);
    let (window, rtt, rate) = bulk(FAST, &mut rule);
    let bdp = FAST.rate * FAST.base.as_secs_f64();
    assert!(f64::from(window) >= settings().gain * bdp * 0.9, "window {window} B, BDP {bdp:.0} B");
    assert!(rate >= 0.95 * FAST.rate, "{rate:.0} B/s of {:.0}", FAST.rate);
    assert!(rtt.saturating_sub(FAST.base) <= allowance(&settings(), FAST.base), "queued {rtt:?}");
    // A window fixed at dial also fills this link, from its assumption of 1 Gbit/s.
    let (_, _, at_dial) = bulk(FAST, &mut AtDial(assumed(&settings(), Some(FAST.base))));
    assert!(at_dial >= 0.95 * FAST.rate);
}

#[test]
fn one_late_ping_on_a_loopback_path_is_not_a_queue() {
    let lo = Link { rate: 1.6e9, base: Duration::from_micros(100) };
    let mut rule = PathWindow::new(settings(), 2 * 1024 * 1024);
    rule.seed(Duration::ZERO, lo.base);
    let mut now = Duration::ZERO;
    let mut after_startup = None;
    for i in 0..STEPS {
        let (rtt, rate) = lo.carry(rule.window());
        // Every tenth ping waited 200 ms for a CPU: more than any allowance, once.
        let rtt = if i % 10 == 5 { rtt + Duration::from_millis(200) } else { rtt };
        now += rtt + GAP;
        rule.observe(now, rtt, (rate * (rtt + GAP).as_secs_f64()) as u64);
        if i == 4 {
            assert!(!rule.starting(), "a rate that stopped growing did not end the startup");
            after_startup = Some(rule.window());
        }
    }
    let after_startup = after_startup.unwrap_or_default();
    assert_eq!(after_startup, 2 * 1024 * 1024, "a doubling that bought no rate was kept");
    assert_eq!(rule.window(), after_startup, "neither shrunk for the late pings nor grown");
}

#[test]
fn a_rate_that_collapses_under_a_standing_queue_never_takes_the_window_below_the_floor() {
    let mut rule = PathWindow::new(settings(), settings().ceiling);
    rule.seed(Duration::ZERO, Duration::from_millis(50));
    let mut now = Duration::ZERO;
    for _ in 0..STEPS {
        now += Duration::from_secs(1);
        rule.observe(now, Duration::from_secs(1), 1000);
    }
    assert_eq!(rule.window(), settings().floor);
}

#[test]
fn until_it_has_measured_the_window_is_the_assumed_one_within_the_bounds() {
    assert_eq!(PathWindow::new(settings(), 1).window(), settings().floor);
    assert_eq!(PathWindow::new(settings(), u32::MAX).window(), settings().ceiling);
    let mut rule = PathWindow::new(settings(), 12_500_000);
    rule.seed(Duration::ZERO, Duration::from_millis(50));
    rule.observe(Duration::from_millis(200), Duration::from_secs(1), 5_000_000);
    assert_eq!(rule.window(), 12_500_000, "one sample starts the clock, decides nothing");
}

#[test]
fn a_queue_within_half_the_allowance_changes_nothing_and_one_beyond_it_shrinks_the_window() {
    // A 50 ms path whose first samples found 2 MiB queueing behind a 20 MB/s link.
    let mut rule = PathWindow::new(settings(), 2 * 1024 * 1024);
    rule.seed(Duration::ZERO, FAST.base);
    rule.begin(Duration::ZERO);
    let allowance = allowance(&settings(), FAST.base);
    let mut now = Duration::from_millis(200);
    rule.observe(now, FAST.base + 2 * allowance, 4_000_000);
    assert!(!rule.starting(), "a queue did not end the startup");
    let settled = rule.window();
    let wanted = settings().gain * 20e6 * 0.05 + settings().slack;
    assert!((f64::from(settled) - wanted).abs() < 1.0, "{settled} B, not the {wanted:.0} the path wants");
    // The transfer slows down (the server, not the link), under a queue of two fifths of the
    // allowance: no reason to change the window.
    for _ in 0..STEPS {
        now += Duration::from_millis(200);
        rule.observe(now, FAST.base + allowance * 2 / 5, 2_000_000);
    }
    assert_eq!(rule.window(), settled);
    // The queue stands past half the allowance: now the window is what the slower rate wants.
    for _ in 0..2 {
        now += Duration::from_millis(200);
        rule.observe(now, FAST.base + allowance * 3 / 5, 2_000_000);
    }
    let shrunk = rule.window();
    let wanted = settings().gain * 10e6 * 0.05 + settings().slack;
    assert!(shrunk < settled && f64::from(shrunk) < wanted * 1.5, "{shrunk} B after a standing queue");
}

#[test]
fn the_startup_doubles_while_the_rate_grows_with_it_and_stops_at_the_first_queue() {
    let mut rule = PathWindow::new(settings(), 2 * 1024 * 1024);
    rule.seed(Duration::ZERO, FAST.base);
    rule.begin(Duration::ZERO);
    let mut now = Duration::ZERO;
    let mut windows = vec![rule.window()];
    while rule.starting() && windows.len() < 10 {
        let (rtt, rate) = FAST.carry(rule.window());
        now += rtt + GAP;
        rule.observe(now, rtt, (rate * (rtt + GAP).as_secs_f64()) as u64);
        windows.push(rule.window());
    }
    assert!(!rule.starting(), "still doubling after {windows:?}");
    for pair in windows.windows(2).take(windows.len() - 2) {
        assert_eq!(pair[1], 2 * pair[0], "{windows:?}");
    }
    let bdp = FAST.rate * FAST.base.as_secs_f64();
    let last = f64::from(rule.window());
    assert!(
        last >= bdp && last <= settings().gain * bdp + settings().slack + 1.0,
        "{windows:?}, BDP {bdp:.0}"
    );
}

/// A 200 Mbit/s path whose dial took `dial`, after a download whose three samples stood 600 ms
/// queued: the window shrank from that overstated minimum. Returns the rule and its clock.
fn shrunk_from_an_overstated_minimum(dial: Duration) -> (PathWindow, Duration) {
    let mut rule = PathWindow::new(settings(), assumed(&settings(), Some(dial)));
    rule.seed(Duration::ZERO, dial);
    let mut now = Duration::ZERO;
    for _ in 0..3 {
        now += Duration::from_millis(700);
        rule.observe(now, Duration::from_millis(600), 17_500_000);
    }
    (rule, now)
}

#[test]
fn a_window_set_from_an_overstated_minimum_is_set_again_when_a_lower_one_shows() {
    // 200 Mbit/s, a 30 ms round trip, first seen through a dial that took 60 ms.
    let link = Link { rate: 25e6, base: Duration::from_millis(30) };
    let (mut rule, mut now) = shrunk_from_an_overstated_minimum(Duration::from_millis(60));
    let first = rule.window();
    let (rtt, _) = link.carry(first);
    assert!(
        first > 1_900_000 && rtt.saturating_sub(link.base) < allowance(&settings(), link.base),
        "{first} B, {rtt:?}"
    );
    // A quiet moment shows the path's own round trip; the next busy samples carry no queue above
    // the allowance, and yet the window is reset from the better minimum.
    rule.seed(now, link.base);
    for _ in 0..2 {
        let (rtt, rate) = link.carry(rule.window());
        now += rtt + GAP;
        rule.observe(now, rtt, (rate * (rtt + GAP).as_secs_f64()) as u64);
    }
    let bdp = link.rate * link.base.as_secs_f64();
    assert!(
        f64::from(rule.window()) <= settings().gain * bdp + settings().slack + 1.0,
        "{} B, BDP {bdp:.0} B",
        rule.window()
    );
}

#[test]
fn a_quiet_moment_that_beats_the_minimum_resets_the_window_before_the_next_transfer() {
    // 200 Mbit/s at 20 ms, first seen through a dial that took 63 ms: the download shrank the
    // window from that minimum to about three times what the path needs.
    let link = Link { rate: 25e6, base: Duration::from_millis(20) };
    let (mut rule, mut now) = shrunk_from_an_overstated_minimum(Duration::from_millis(63));
    let during = rule.window();
    assert!(during < assumed(&settings(), Some(Duration::from_millis(63))), "the download did not shrink it");
    // Between two transfers the path is quiet, and its pings find its own round trip: the
    // window is set again at once, before the next transfer's first window adjust asks for it.
    now += GAP;
    rule.seed(now, link.base);
    let bdp = link.rate * link.base.as_secs_f64();
    let after = rule.window();
    assert!(after < during, "{after} B after the quiet ping, {during} B before");
    assert!(f64::from(after) <= settings().gain * bdp + settings().slack + 1.0, "{after} B, BDP {bdp:.0} B");
    // A quiet ping that beats nothing by a quarter changes nothing.
    rule.seed(now + GAP, link.base + Duration::from_millis(2));
    assert_eq!(rule.window(), after);
}

#[test]
fn a_drain_holds_the_window_until_its_ping_answers_and_comes_once_per_span() {
    // 200 Mbit/s at 20 ms, first seen through a dial that took 63 ms; the transfer goes on.
    let link = Link { rate: 25e6, base: Duration::from_millis(20) };
    let mut fresh = PathWindow::new(settings(), settings().start);
    fresh.begin(Duration::ZERO);
    assert_eq!(fresh.drain(Duration::ZERO), None, "drained before a rate was measured");
    let (mut rule, mut now) = shrunk_from_an_overstated_minimum(Duration::from_millis(63));
    let before = rule.window();
    let plan = rule.drain(now).expect("the first transfer on a path drains it");
    // The far side may still send what it was allowed beyond the drain's window, at the rate
    // the samples measured.
    let s = settings();
    assert_eq!(plan.allowed, u64::from(before - s.drain_window));
    assert!((plan.rate - link.rate).abs() < 1.0, "{} B/s", plan.rate);
    assert_eq!(plan.window, s.drain_window);
    let hold = Duration::from_secs_f64(plan.allowed as f64 / plan.rate);
    assert_eq!(rule.window(), s.drain_window, "the drain does not hold the window");
    assert_eq!(rule.drain(now), None, "a drain started during a drain");
    now += hold + link.base;
    rule.drained(now, Some(link.base));
    assert_eq!(rule.min_rtt(), Some(link.base));
    let bdp = link.rate * link.base.as_secs_f64();
    let after = rule.window();
    assert!(after > s.drain_window, "the hold outlasted its ping");
    assert!(f64::from(after) <= s.gain * bdp + s.slack + 1.0, "{after} B after the drain, BDP {bdp:.0} B");
    // Once per span: not again within it, whatever the transfers do.
    assert_eq!(rule.drain(now + s.min_rtt_span / 2), None, "drained twice within the span");
    let later = now + s.min_rtt_span + GAP;
    assert!(rule.drain(later).is_some(), "the minimum aged out and was not measured again");
    // A drain whose ping goes unanswered ends too, and leaves the minimum as it was.
    rule.drained(later + hold, None);
    assert_eq!(rule.window(), after);
    assert_eq!(rule.min_rtt(), Some(link.base));
    assert_eq!(rule.drain(later + hold + GAP), None, "a failing session is drained again at once");
}

#[test]
fn a_path_still_in_its_startup_is_not_drained() {
    let mut rule = PathWindow::new(settings(), 2 * 1024 * 1024);
    rule.seed(Duration::ZERO, FAST.base);
    rule.begin(Duration::ZERO);
    let (rtt, rate) = FAST.carry(rule.window());
    rule.observe(rtt + GAP, rtt, (rate * (rtt + GAP).as_secs_f64()) as u64);
    assert!(rule.starting());
    assert_eq!(rule.drain(rtt + GAP), None, "a window still doubling was held");
}

#[test]
fn a_drain_right_after_the_startup_shrank_the_window_waits_out_the_window_before_it() {
    // 200 Mbit/s at 20 ms: the first sample shows a queue, and the startup ends by shrinking
    // OpenSSH's 2 MiB to what the path wants; the far side may still send the 2 MiB.
    let mut rule = PathWindow::new(settings(), settings().start);
    rule.seed(Duration::ZERO, Duration::from_millis(20));
    rule.begin(Duration::ZERO);
    let rate = 25e6;
    rule.observe(Duration::from_millis(300), Duration::from_millis(150), (rate * 0.3) as u64);
    assert!(!rule.starting());
    assert!(rule.window() < settings().start, "the queue did not shrink the window");
    let plan = rule.drain(Duration::from_millis(300)).expect("drained");
    assert_eq!(plan.allowed, u64::from(settings().start - settings().drain_window));
}

#[test]
fn a_quiet_moment_with_nothing_arriving_counts_as_a_drain_and_one_beside_a_transfer_does_not() {
    // Both paths: dialled at 63 ms, then a download whose samples stood 600 ms queued.
    let steady = |idle: bool| {
        let mut rule = Adaptive::new(settings());
        rule.dial(Duration::ZERO, Some(Duration::from_millis(63)), true);
        rule.quiet(Duration::from_millis(100), Duration::from_millis(20), idle);
        assert!(rule.begin(Duration::from_millis(200)));
        let mut now = Duration::from_millis(200);
        for _ in 0..3 {
            now += Duration::from_millis(700);
            rule.sample(now, Duration::from_millis(600), 17_500_000);
        }
        (rule, now)
    };
    let (mut idle, now) = steady(true);
    assert_eq!(idle.min_rtt(), Some(Duration::from_millis(20)));
    assert_eq!(idle.drain(now), None, "a path measured idle was drained");
    let (mut beside, now) = steady(false);
    assert_eq!(beside.min_rtt(), Some(Duration::from_millis(20)));
    assert!(beside.drain(now).is_some(), "pings beside a transfer stood for a drain");
}
