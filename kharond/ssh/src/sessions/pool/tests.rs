use std::io::ErrorKind;

use super::*;

#[test]
fn backoff_doubles_from_half_a_second_to_eight_with_jitter() {
    for _ in 0..50 {
        let b1 = backoff(&SessionSettings::default(), 1);
        assert!(b1 >= Duration::from_millis(400) && b1 <= Duration::from_millis(600), "{b1:?}");
        let b3 = backoff(&SessionSettings::default(), 3);
        assert!(b3 >= Duration::from_millis(1600) && b3 <= Duration::from_millis(2400), "{b3:?}");
        let b = backoff(&SessionSettings::default(), 40);
        assert!(b >= Duration::from_millis(6400) && b <= Duration::from_millis(9600), "{b:?}");
    }
}

/// A pool on a config written into a temporary HOME.
fn pool_on(config: &str) -> (tempfile::TempDir, Pool) {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/config"), config).unwrap();
    let settings = PoolSettings {
        ssh_config: home.path().join(".ssh/config"),
        system_ssh_config: None,
        home: home.path().to_owned(),
        env: HashMap::from([("USER".to_owned(), "alice".to_owned())]),
        connect_timeout: Duration::from_secs(5),
        engine: Settings::default(),
        sleep_clock: SleepClock::system(),
        questions: None,
    };
    (home, Pool::new(settings).unwrap())
}

#[tokio::test]
async fn a_refused_jump_host_is_remembered_with_its_line_until_a_reload_and_others_resolve() {
    let config = "Host good bad\n  HostName 127.0.0.1\nMatch originalhost bad tagged x\n  User y\n";
    let (home, pool) = pool_on(config);
    let errors = pool.validate(&["good".to_owned(), "bad".to_owned()]);
    assert_eq!(errors.len(), 1);
    assert!(
        matches!(&errors[0].1, Error::Refused { jumphost, .. } if jumphost == "bad"),
        "{:?}",
        errors[0].1
    );
    let status = pool.status();
    let names: Vec<&str> = status.iter().map(|c| c.jumphost.as_str()).collect();
    assert_eq!(names, ["bad", "good"]);
    let origin = format!("{}:3", home.path().join(".ssh/config").display());
    let refused = status[0].refused.as_ref().expect("bad is refused");
    assert_eq!(refused.origin.as_deref(), Some(origin.as_str()));
    assert!(refused.reason.starts_with(&format!("{origin}: Match tagged x: ")), "{}", refused.reason);
    assert_eq!((status[0].state, status[0].hops.len()), (ChainState::Failed, 0));
    assert_eq!(status[1].refused, None);
    assert_eq!(status[1].details[0].host_name, "127.0.0.1");

    // A routed connection fails at once, with the reason, and nothing is dialled.
    let err = pool.connect("bad", "target.example", 443, Patience::Wait).await.err().expect("refused");
    assert_eq!(err.io_kind(), ErrorKind::NetworkUnreachable);
    assert!(
        err.to_string().starts_with(&format!("jump host bad cannot be used: {origin}: Match tagged x")),
        "{err}"
    );

    // Fixed and reloaded: usable; a jump host new with this inventory is resolved too.
    std::fs::write(home.path().join(".ssh/config"), "Host good bad\n  HostName 127.0.0.1\n").unwrap();
    let (pool, installed) = pool.reload(&["good".to_owned(), "fresh".to_owned()]);
    assert!(installed.refused.is_empty() && installed.config_error.is_none(), "{installed:?}");
    let status = pool.status();
    assert!(status.iter().all(|c| c.refused.is_none()), "{status:?}");
    let names: Vec<&str> = status.iter().map(|c| c.jumphost.as_str()).collect();
    assert_eq!(names, ["bad", "fresh", "good"]);
}

#[tokio::test]
async fn a_match_exec_runs_once_per_jump_host_and_reload_not_per_connection() {
    let (home, pool) = pool_on("");
    let count = home.path().join("count");
    let config = format!("Match exec \"echo x >> {}\"\n  HostName 127.0.0.1\n  Port 9\n", count.display());
    std::fs::write(home.path().join(".ssh/config"), config).unwrap();
    let (pool, _) = pool.reload(&["j".to_owned()]);
    let runs = || std::fs::read_to_string(&count).unwrap_or_default().lines().count();
    assert_eq!(runs(), 1);
    for _ in 0..3 {
        let _ = pool.connect("j", "target.example", 443, Patience::Wait).await;
    }
    assert_eq!(runs(), 1, "connections reuse the resolved chain");
    let _ = pool.reload(&["j".to_owned()]);
    assert_eq!(runs(), 2);
}

#[tokio::test]
async fn a_prepared_reload_changes_nothing_until_installed_and_an_abandoned_one_never_is() {
    let (home, pool) = pool_on("Host j\n  HostName 127.0.0.1\n  Port 2201\n");
    pool.validate(&["j".to_owned()]);
    let port = |pool: &Pool| pool.status().iter().find(|c| c.jumphost == "j").map(|c| c.details[0].port);
    assert_eq!(port(&pool), Some(2201));
    let config = home.path().join(".ssh/config");
    std::fs::write(
        &config,
        "Host j\n  HostName 127.0.0.1\n  Port 2202\nMatch originalhost bad tagged x\n  User y\n",
    )
    .unwrap();
    let wanted = ["j".to_owned(), "bad".to_owned()];

    // Abandoned before the first jump host: nothing prepared, nothing changed.
    assert!(pool.prepare(&wanted, &|| true).is_none());
    assert_eq!(port(&pool), Some(2201));

    let prepared = pool.prepare(&wanted, &|| false).expect("not abandoned");
    assert_eq!(port(&pool), Some(2201), "prepared, not installed");
    assert!(pool.status().iter().all(|c| c.jumphost != "bad"));
    let (next, installed) = pool.next(prepared);
    assert_eq!(port(&pool), Some(2201), "the generation in hand stays as it was");
    let pool = next;
    assert_eq!(port(&pool), Some(2202));
    let refused: Vec<&str> = installed.refused.iter().map(|(j, _)| j.as_str()).collect();
    assert_eq!(refused, ["bad"]);
    let origin = format!("{}:4", config.display());
    assert_eq!(installed.refused[0].1.origin.as_deref(), Some(origin.as_str()));
    assert_eq!(installed.config_error, None);

    // A config that cannot be loaded: the one in force stays, and says why.
    std::fs::write(&config, "Host j\n  Port 2203\n  NoSuchKeyword yes\n").unwrap();
    let (pool, installed) = pool.reload(&wanted);
    assert!(installed.config_error.as_deref().is_some_and(|e| e.contains("NoSuchKeyword")), "{installed:?}");
    assert_eq!(port(&pool), Some(2202));
}
