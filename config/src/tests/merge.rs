//! The merge: the defaults, flag > environment > file, and errors that name the setting and its
//! source.

use super::*;

#[test]
fn defaults_listen_on_loopback_12000() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
    assert_eq!(cfg.listen.value.to_string(), "127.0.0.1:12000");
    assert_eq!(cfg.listen.source, Source::Default);
    assert_eq!(cfg.ssh_config.value, dir.path().join(".ssh/config"));
    assert!(cfg.inventory.is_none());
    assert!(cfg.socks_auth.is_none());
}

#[test]
fn flag_beats_env_beats_file() {
    let (dir, path) = write_config("listen = \"127.0.0.1:1\"\ninventory = \"~/inv.json\"\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.listen.value.port(), 1);
    assert_eq!(cfg.listen.source, Source::File(path.clone()));
    assert_eq!(cfg.inventory.unwrap().value, dir.path().join("inv.json"));

    let env = [(env::LISTEN, "127.0.0.1:2".to_string())];
    let cfg = load(&ov, &env, dir.path()).unwrap();
    assert_eq!(cfg.listen.value.port(), 2);
    assert_eq!(cfg.listen.source, Source::Env(env::LISTEN));

    let ov = Overrides { listen: Some("127.0.0.1:3".into()), ..ov };
    let cfg = load(&ov, &env, dir.path()).unwrap();
    assert_eq!(cfg.listen.value.port(), 3);
    assert_eq!(cfg.listen.source, Source::Flag("--listen"));
}

#[test]
fn bad_values_name_the_setting_and_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let ov = Overrides { listen: Some("localhost".into()), ..Default::default() };
    let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
    assert!(err.contains("listen (from flag --listen)"), "{err}");
    assert!(err.contains("IP:PORT"), "{err}");

    let (dir, path) = write_config("lisen = \"127.0.0.1:1\"\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(err.contains("lisen"), "{err}");

    let (dir, path) = write_config("[socks]\nusername = \"u\"\n");
    let ov = Overrides { config: Some(path), ..Default::default() };
    let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
    assert!(err.contains("must both be set"), "{err}");
}
