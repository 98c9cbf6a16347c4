//! A sleep as the pool sees it, against real sshd jump hosts on loopback: the pool's
//! [`SleepClock`] is the test's own counter, and a sleep of the machine is an addition to it (a
//! container cannot suspend its machine). A connection through the pool and `round_trips` (what
//! kharond's `status` asks) are the moments the detector looks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kharon_e2e::agent::Agent;
use kharon_e2e::servers::HttpServer;
use kharon_e2e::sshd::{self, Sshd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::sessions::keepalive::SleepClock;
use crate::sessions::pool::{Patience, Pool, PoolSettings};
use crate::sessions::slot::ChainState;
use crate::settings::Settings;

/// A chain of `hops` real sshds (`hop1`, `hop2`, …, each behind the one before) to a target on
/// loopback, a pool on it, and the clock the pool takes for suspended time.
struct Lab {
    hops: Vec<Sshd>,
    _agent: Agent,
    _home: tempfile::TempDir,
    target: HttpServer,
    pool: Pool,
    asleep: Arc<AtomicU64>,
}

impl Lab {
    fn new(hops: usize, host_options: &[&str]) -> Lab {
        let home = tempfile::tempdir().expect("a home");
        let key = home.path().join("id_kharon");
        let (agent, public) = Agent::with_new_key(&key);
        let hops: Vec<Sshd> = (0..hops).map(|_| Sshd::builder().authorize(&public).start()).collect();
        let known_hosts = home.path().join("known_hosts");
        let lines: Vec<String> = hops.iter().map(Sshd::host_key_line).collect();
        std::fs::write(&known_hosts, lines.join("\n") + "\n").expect("known_hosts");
        let user = sshd::current_user();
        let mut config = String::new();
        for (i, hop) in hops.iter().enumerate() {
            let mut extra: Vec<String> = host_options.iter().map(|o| (*o).to_owned()).collect();
            extra.push(format!("UserKnownHostsFile {}", known_hosts.display()));
            if i > 0 {
                extra.push(format!("ProxyJump hop{i}"));
            }
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            config.push_str(&sshd::host_block(&format!("hop{}", i + 1), hop.port(), &user, &key, &extra));
        }
        let ssh_config = home.path().join("config");
        std::fs::write(&ssh_config, config).expect("ssh_config");
        let asleep = Arc::new(AtomicU64::new(0));
        let read = asleep.clone();
        let env = [
            ("SSH_AUTH_SOCK", agent.socket().display().to_string()),
            ("USER", user.clone()),
            ("HOME", home.path().display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let pool = Pool::new(PoolSettings {
            ssh_config,
            system_ssh_config: None,
            home: home.path().to_owned(),
            env,
            connect_timeout: Duration::from_secs(10),
            engine: Settings::default(),
            sleep_clock: SleepClock::new(move || read.load(Ordering::Relaxed)),
            questions: None,
        })
        .expect("the ssh config reads");
        Lab { hops, _agent: agent, _home: home, target: HttpServer::start("target"), pool, asleep }
    }

    fn jumphost(&self) -> String {
        format!("hop{}", self.hops.len())
    }

    /// `GET /hello` through the pool.
    async fn hello(&self) -> Result<String, String> {
        let mut tunnel = self
            .pool
            .connect(&self.jumphost(), "127.0.0.1", self.target.port(), Patience::Wait)
            .await
            .map_err(|e| kharon_common::errors::chain(&e))?;
        tunnel
            .write_all(b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), tunnel.read_to_string(&mut answer)).await;
        read.map_err(|_| "no answer within 10 s".to_owned())?.map_err(|e| e.to_string())?;
        Ok(answer.rsplit("\r\n\r\n").next().unwrap_or_default().to_owned())
    }

    fn state(&self) -> ChainState {
        self.pool
            .status()
            .iter()
            .find(|c| c.jumphost == self.jumphost())
            .map_or(ChainState::Idle, |c| c.state)
    }

    /// The machine sleeps `secs` seconds, as the pool's clock sees it.
    fn sleep(&self, secs: u64) {
        self.asleep.fetch_add(secs * 1_000_000_000, Ordering::Relaxed);
    }
}

/// Waits up to `limit` for `condition`, looking every 50 ms.
async fn within(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    condition()
}

#[tokio::test]
async fn after_a_sleep_every_session_is_probed_at_once_not_at_the_next_keepalive() {
    // Keepalive alone would need 60 s × 3 to notice; the probe after a sleep is much faster.
    let lab = Lab::new(1, &["ServerAliveInterval 60", "ServerAliveCountMax 3"]);
    assert_eq!(lab.hello().await.as_deref(), Ok("hello from target"));
    assert_eq!(lab.state(), ChainState::Connected);

    // The jump host's network is gone (frozen), and the machine slept 5 s meanwhile: the next
    // thing that happens (`status`'s round trips) notices and probes.
    lab.hops[0].stop();
    lab.sleep(5);
    let woke = Instant::now();
    let _ = lab.pool.round_trips(Duration::from_millis(100)).await;
    assert!(
        within(Duration::from_secs(15), || lab.state() != ChainState::Connected).await,
        "the dead session was not probed after the sleep"
    );
    assert!(woke.elapsed() < Duration::from_secs(15), "took {:?}", woke.elapsed());

    // The network is back: the first request dials again and goes through.
    lab.hops[0].cont();
    assert_eq!(lab.hello().await.as_deref(), Ok("hello from target"));
}

#[tokio::test]
async fn after_a_sleep_a_healthy_chain_of_two_hops_keeps_its_session() {
    // The last hop is reached through the first, where the handler answers sshd's small
    // messages (chain.rs, `Handler::answer`); the probe after a sleep must still get its reply.
    let lab = Lab::new(2, &[]);
    for _ in 0..3 {
        assert_eq!(lab.hello().await.as_deref(), Ok("hello from target"));
    }
    let logins = |hop: &Sshd| hop.log().matches("Accepted publickey").count();
    assert_eq!(logins(&lab.hops[1]), 1);

    // A sleep with the network intact: the probe is answered, nothing is dialled again.
    lab.sleep(5);
    let _ = lab.pool.round_trips(Duration::from_secs(2)).await;
    // The probe runs on a task of its own; a dropped session would show within its 2 s.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(lab.state(), ChainState::Connected);
    assert_eq!(lab.hello().await.as_deref(), Ok("hello from target"));
    assert_eq!(logins(&lab.hops[1]), 1, "the session was dialled again:\n{}", lab.hops[1].log());

    // The same sleep seen twice is one sleep.
    let _ = lab.pool.round_trips(Duration::from_secs(2)).await;
    assert_eq!(logins(&lab.hops[1]), 1);
}
