//! The config file itself: which one must exist, what is refused as one, the warning about its
//! mode, and the settings only it sets.

use super::*;

#[test]
fn a_fifo_as_config_file_is_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("config.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
    let ov = Overrides { config: Some(fifo.clone()), ..Default::default() };
    let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
    assert!(err.contains(&fifo.display().to_string()), "{err}");
    assert!(err.contains("not a regular file (it is a FIFO)"), "{err}");
}

#[test]
fn explicit_missing_config_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let ov = Overrides { config: Some(dir.path().join("nope.toml")), ..Default::default() };
    let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
    assert!(err.contains("cannot read config file"), "{err}");
}

#[test]
fn a_password_file_others_may_read_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        let warnings = load(&ov, &[], dir.path()).unwrap().warnings();
        assert_eq!(warnings.len(), 1, "{mode:o}: {warnings:?}");
        assert!(warnings[0].contains(&format!("chmod 600 {}", path.display())), "{warnings:?}");
        assert!(warnings[0].contains(&format!("mode {mode:04o}")), "{warnings:?}");
    }
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(load(&ov, &[], dir.path()).unwrap().warnings().is_empty());
    // No password in it: nothing to protect.
    let (dir, path) = write_config("listen = \"127.0.0.1:1\"\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ov = Overrides { config: Some(path), ..Default::default() };
    assert!(load(&ov, &[], dir.path()).unwrap().warnings().is_empty());
}

#[test]
fn other_local_users_are_served_only_when_the_file_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
    assert_eq!((cfg.allow_other_users.value, cfg.allow_other_users.source), (false, Source::Default));
    let (dir, path) = write_config("allow_other_users = true\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!((cfg.allow_other_users.value, cfg.allow_other_users.source), (true, Source::File(path)));
    let (dir, path) = write_config("allow_other_users = \"yes\"\n");
    let ov = Overrides { config: Some(path), ..Default::default() };
    let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
    assert!(err.contains("allow_other_users"), "{err}");
}

#[test]
fn desktop_notifications_are_on_unless_the_file_turns_them_off() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
    let on = &cfg.desktop_notifications;
    assert_eq!((on.value, &on.source), (true, &Source::Default));
    let (dir, path) = write_config("desktop_notifications = false\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    let off = &cfg.desktop_notifications;
    assert_eq!((off.value, &off.source), (false, &Source::File(path)));
    let (dir, path) = write_config("desktop_notifications = \"off\"\n");
    let ov = Overrides { config: Some(path), ..Default::default() };
    let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
    assert!(err.contains("desktop_notifications"), "{err}");
}
