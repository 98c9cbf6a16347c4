//! The window rule on the links of `bench/shaped.sh`, simulated: each scenario runs the same
//! transfers through the adaptive rule and through OpenSSH's fixed 2 MiB window (what `ssh -D`
//! gives a channel) on the same path, and holds the rule to these targets against it: the
//! download at least 0.95× as fast, a small request beside it at most half as slow.

use super::*;
use crate::settings::WindowPolicy;

const MBIT: f64 = 1e6 / 8.0;

/// Two downloads on a new session: the first one after the session's quiet pings (the rule
/// knows only the path's round trip), the second after two idle seconds (it knows the path).
async fn two_downloads(path: Path, settings: FlowSettings) -> [Transfer; 2] {
    let sim = Sim::start(path, settings);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = sim.transfer(Duration::from_secs(6), Duration::from_secs(1)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let second = sim.transfer(Duration::from_secs(6), Duration::from_secs(1)).await;
    [first, second]
}

/// The rule's downloads and `ssh -D`'s on `path`.
async fn against_openssh(path: Path) -> ([Transfer; 2], [Transfer; 2]) {
    let rule = two_downloads(path.clone(), FlowSettings::default()).await;
    let fixed = FlowSettings { policy: WindowPolicy::OPENSSH, ..FlowSettings::default() };
    let openssh = two_downloads(path, fixed).await;
    for (rule, openssh) in rule.iter().zip(&openssh) {
        eprintln!(
            "rule {:.2} MB/s p50 {:?}; openssh {:.2} MB/s p50 {:?}",
            rule.rate / 1e6,
            rule.p50(),
            openssh.rate / 1e6,
            openssh.p50()
        );
    }
    (rule, openssh)
}

/// The verdict on both downloads: `Err` says what missed.
fn meets_targets(rule: &[Transfer; 2], openssh: &[Transfer; 2]) -> Result<(), String> {
    let missed: Vec<String> = ["first", "second"]
        .iter()
        .zip(rule.iter().zip(openssh))
        .filter_map(|(which, (rule, openssh))| {
            meets_target(rule, openssh).err().map(|e| format!("{which}: {e}"))
        })
        .collect();
    if missed.is_empty() { Ok(()) } else { Err(missed.join("; ")) }
}

/// The verdict on one download: at least 0.95× OpenSSH's rate, a small request beside it at
/// most half as slow; `Err` says what missed.
fn meets_target(rule: &Transfer, openssh: &Transfer) -> Result<(), String> {
    let mut missed = Vec::new();
    if rule.rate < 0.95 * openssh.rate {
        missed.push(format!("download {:.2} MB/s against {:.2}", rule.rate / 1e6, openssh.rate / 1e6));
    }
    if rule.p50() > openssh.p50() / 2 {
        missed.push(format!("small request p50 {:?} against {:?}", rule.p50(), openssh.p50()));
    }
    if missed.is_empty() { Ok(()) } else { Err(missed.join(", ")) }
}

fn path(rate: Rate, one_way_ms: u64, loss: f64) -> Path {
    let one_way = Duration::from_millis(one_way_ms);
    Path {
        rate,
        up: one_way,
        down: one_way,
        loss,
        dial_rtt: 4 * one_way,
        busy_cpu: Duration::ZERO,
        first_answer: Duration::ZERO,
    }
}

#[tokio::test(start_paused = true)]
async fn a_deep_buffer_holds_no_standing_queue_and_the_link_stays_full() {
    // 25 ms each way, 50 Mbit/s, a buffer deep enough that nothing is dropped.
    let (rule, openssh) = against_openssh(path(Rate::Fixed(50.0 * MBIT), 25, 0.0)).await;
    assert_eq!(meets_targets(&rule, &openssh), Ok(()), "{rule:?}");
    assert!(rule[1].rate >= 0.95 * 50.0 * MBIT, "{:.2} MB/s", rule[1].rate / 1e6);
}

#[tokio::test(start_paused = true)]
async fn random_loss_is_not_taken_for_a_queue() {
    // Half a percent of the segments lost: each one holds what follows for a round trip.
    let (rule, openssh) = against_openssh(path(Rate::Fixed(50.0 * MBIT), 25, 0.005)).await;
    assert_eq!(meets_targets(&rule, &openssh), Ok(()), "{rule:?}");
}

#[tokio::test(start_paused = true)]
async fn a_rate_that_halves_and_recovers_is_followed() {
    // Wi-Fi: 50 Mbit/s for 3 s, 25 for 2 s, over and over.
    let rate =
        Rate::Schedule(vec![(50.0 * MBIT, Duration::from_secs(3)), (25.0 * MBIT, Duration::from_secs(2))]);
    let (rule, openssh) = against_openssh(path(rate, 25, 0.0)).await;
    assert_eq!(meets_targets(&rule, &openssh), Ok(()), "{rule:?}");
}

#[tokio::test(start_paused = true)]
async fn a_fast_link_is_filled_with_at_most_a_round_trip_of_queue() {
    // 1 Gbit/s, 25 ms each way: six times what OpenSSH's window carries per round trip.
    let link = path(Rate::Fixed(1000.0 * MBIT), 25, 0.0);
    let base = link.base_rtt();
    let (rule, openssh) = against_openssh(link).await;
    for (rule, openssh) in rule.iter().zip(&openssh) {
        assert!(rule.rate >= 0.9 * 1000.0 * MBIT, "{:.1} MB/s", rule.rate / 1e6);
        assert!(
            rule.rate >= 2.0 * openssh.rate,
            "{:.1} against {:.1} MB/s",
            rule.rate / 1e6,
            openssh.rate / 1e6
        );
        // A request is two round trips; each may wait half a round trip of queue.
        assert!(rule.p50() <= base * 3, "small request p50 {:?} on a {base:?} path", rule.p50());
    }
}

#[tokio::test(start_paused = true)]
async fn a_short_fast_path_keeps_its_queue_short() {
    // 10 ms each way, 200 Mbit/s: OpenSSH's window is only three BDPs here; and a busy CPU
    // delays each answer by up to 10 ms, which is no queue.
    let link = Path { busy_cpu: Duration::from_millis(10), ..path(Rate::Fixed(200.0 * MBIT), 10, 0.0) };
    let (rule, openssh) = against_openssh(link).await;
    assert_eq!(meets_targets(&rule, &openssh), Ok(()), "{rule:?}");
}

#[tokio::test(start_paused = true)]
async fn a_far_slow_path_behind_a_deep_buffer_holds_no_standing_queue() {
    // 60 ms each way, 20 Mbit/s: OpenSSH's window stands 0.7 s in the queue.
    let (rule, openssh) = against_openssh(path(Rate::Fixed(20.0 * MBIT), 60, 0.0)).await;
    assert_eq!(meets_targets(&rule, &openssh), Ok(()), "{rule:?}");
}

/// A download that starts with its session on `link`, so that the session's quiet pings go out
/// while it fills the link: what the rule learned of the minimum round trip after 2 s, and the
/// download through the rule and through OpenSSH's fixed window.
async fn a_download_with_its_session(link: Path) -> (Option<Duration>, Transfer, Transfer) {
    let sim = Sim::start(link.clone(), FlowSettings::default());
    let transfer = {
        let sim = sim.clone();
        tokio::spawn(async move { sim.transfer(Duration::from_secs(6), Duration::from_secs(2)).await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let learned = sim.flow.min_rtt();
    let rule = transfer.await.expect("the transfer ran");
    let fixed = FlowSettings { policy: WindowPolicy::OPENSSH, ..FlowSettings::default() };
    let openssh = Sim::start(link, fixed);
    let openssh = openssh.transfer(Duration::from_secs(6), Duration::from_secs(2)).await;
    eprintln!(
        "min {learned:?}; rule {:.2} MB/s p50 {:?}; openssh {:.2} MB/s p50 {:?}",
        rule.rate / 1e6,
        rule.p50(),
        openssh.rate / 1e6,
        openssh.p50()
    );
    (learned, rule, openssh)
}

#[tokio::test(start_paused = true)]
async fn a_download_on_a_new_session_learns_the_path_s_round_trip_while_it_runs() {
    // 10 ms each way, 200 Mbit/s; the download starts with the session, so its quiet pings go
    // out while the download fills the link, and the first waits for the last sshd's start.
    let link = Path { first_answer: Duration::from_millis(40), ..path(Rate::Fixed(200.0 * MBIT), 10, 0.0) };
    let base = link.base_rtt();
    let (learned, rule, openssh) = a_download_with_its_session(link).await;
    assert!(
        learned.is_some_and(|min| min <= base * 5 / 4),
        "after 2 s the minimum is {learned:?} on a {base:?} path"
    );
    assert_eq!(meets_target(&rule, &openssh), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_lossy_download_on_a_new_session_keeps_its_rate_through_the_drain() {
    // The lossy link of `bench/shaped.sh`: 25 ms each way, 50 Mbit/s, half a percent lost. The
    // drain lowers the minimum round trip while the download runs; the window it is set to
    // then must still cover a lost segment's wait.
    let link = Path { first_answer: Duration::from_millis(40), ..path(Rate::Fixed(50.0 * MBIT), 25, 0.005) };
    let (_, rule, openssh) = a_download_with_its_session(link).await;
    assert_eq!(meets_target(&rule, &openssh), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_fast_download_on_a_new_session_regains_its_rate_after_the_drain() {
    // 1 Gbit/s, 25 ms each way: the drain holds a window of many BDPs' worth of rate down to
    // 128 KiB; the window after it must find the link's rate again as fast as the startup did.
    let link = Path { first_answer: Duration::from_millis(40), ..path(Rate::Fixed(1000.0 * MBIT), 25, 0.0) };
    let (_, rule, _) = a_download_with_its_session(link).await;
    assert!(rule.rate >= 0.9 * 1000.0 * MBIT, "{:.1} MB/s", rule.rate / 1e6);
}
