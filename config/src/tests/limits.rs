//! The numbers of the config file: timeouts, the connection limit and the SSH engine's settings,
//! with their defaults and bounds.

use super::*;

#[test]
fn engine_settings_come_from_the_file_with_their_defaults_and_bounds() {
    let from =
        |path: PathBuf, dir: &Path| load(&Overrides { config: Some(path), ..Default::default() }, &[], dir);
    let load_with = |(dir, path): &(tempfile::TempDir, PathBuf)| from(path.clone(), dir.path()).unwrap();
    let load_err = |(dir, path): &(tempfile::TempDir, PathBuf)| match from(path.clone(), dir.path()) {
        Ok(_) => panic!("accepted"),
        Err(e) => e.to_string(),
    };
    let written = write_config("");
    let cfg = load_with(&written);
    assert_eq!(cfg.ssh_window.value, SshWindow::Adaptive);
    assert_eq!(cfg.answer_wait.value, DEFAULT_ANSWER_WAIT);
    assert_eq!(cfg.reload_deadline.value, DEFAULT_RELOAD_DEADLINE);
    let written = write_config("ssh_window = \"openssh\"\nanswer_wait_secs = 2\nreload_deadline_secs = 5\n");
    let cfg = load_with(&written);
    assert_eq!(cfg.ssh_window.value, SshWindow::OPENSSH);
    assert_eq!(cfg.answer_wait.value, Duration::from_secs(2));
    assert_eq!(cfg.reload_deadline.value, Duration::from_secs(5));
    for (text, said) in [
        ("ssh_window = \"huge\"\n", "expected adaptive, openssh, or a size"),
        ("reload_deadline_secs = 60\n", "between 1 and 55 seconds"),
        ("answer_wait_secs = 0\n", "between 1 and 3600 seconds"),
    ] {
        let e = load_err(&write_config(text));
        assert!(e.contains(said), "{text}: {e}");
    }
}

#[test]
fn timeouts_outside_one_second_to_an_hour_name_the_key_and_the_range() {
    for (key, value) in [
        ("connect_timeout_secs", "0"),
        ("connect_timeout_secs", "3601"),
        ("handshake_timeout_secs", "9223372036854775807"),
    ] {
        let (dir, path) = write_config(&format!("{key} = {value}\n"));
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains(&format!("{key} = {value} (from {})", path.display())), "{err}");
        assert!(err.contains("between 1 and 3600 seconds"), "{err}");
    }
    let (dir, path) = write_config("connect_timeout_secs = 3600\nhandshake_timeout_secs = 1\n");
    let ov = Overrides { config: Some(path), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.connect_timeout.value, Duration::from_secs(3600));
    assert_eq!(cfg.handshake_timeout.value, Duration::from_secs(1));
}

#[test]
fn max_connections_comes_from_the_file_and_zero_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(load(&Overrides::default(), &[], dir.path()).unwrap().max_connections.is_none());

    let (dir, path) = write_config("max_connections = 32\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.max_connections, Some(Setting::new(32, Source::File(path))));

    let (dir, path) = write_config("max_connections = 0\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
    assert!(err.contains(&format!("max_connections (from {})", path.display())), "{err}");
    assert!(err.contains("at least 1"), "{err}");
}
