//! `listen`: loopback unless SOCKS auth is set, however the listener came; a name resolved to one
//! address; values that are no address.

use super::*;

#[test]
fn non_loopback_listen_needs_socks_auth() {
    let dir = tempfile::tempdir().unwrap();
    let ov = Overrides { listen: Some("0.0.0.0:12000".into()), ..Default::default() };
    let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
    assert!(err.contains("not loopback"), "{err}");
    assert!(err.contains("username and password"), "{err}");

    let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
    let ov = Overrides { config: Some(path), listen: Some("0.0.0.0:12000".into()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.socks_auth.unwrap().value.username, "u");
}

#[test]
fn an_activated_listener_gets_the_same_loopback_rule() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
    let any: SocketAddr = "0.0.0.0:12000".parse().unwrap();
    let err = cfg.check_listener(any, Source::SocketActivation).unwrap_err().to_string();
    assert!(err.contains("0.0.0.0:12000 (from socket activation) is not loopback"), "{err}");
    assert!(err.contains("ListenStream=127.0.0.1:12000"), "{err}");
    assert!(err.contains("[socks] username and password"), "{err}");
    // `ListenStream=12000` binds every address of both families.
    let dual: SocketAddr = "[::]:12000".parse().unwrap();
    assert!(cfg.check_listener(dual, Source::SocketActivation).is_err());
    cfg.check_listener("127.0.0.1:12000".parse().unwrap(), Source::SocketActivation).unwrap();
    cfg.check_listener("[::1]:12000".parse().unwrap(), Source::SocketActivation).unwrap();

    let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
    let ov = Overrides { config: Some(path), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    cfg.check_listener(any, Source::SocketActivation).unwrap();
}

#[test]
fn listen_localhost_resolves_with_the_system_resolver_to_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let ov = Overrides { listen: Some("localhost:12000".into()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert!(cfg.listen.value.ip().is_loopback(), "{:?}", cfg.listen);
    assert_eq!(cfg.listen.value.port(), 12000);
    assert_eq!(cfg.listen.source, Source::Flag("--listen"));
    let name = cfg.listen_name.unwrap();
    assert_eq!(name.name, "localhost:12000");
    assert!(name.resolved.contains(&cfg.listen.value), "{name:?}");
}

#[test]
fn a_listen_name_that_resolves_to_loopback_only_listens_on_its_ipv4_address_first() {
    let dir = tempfile::tempdir().unwrap();
    let resolve = resolver(&[("localhost", &["::1", "127.0.0.1"]), ("ip6-localhost", &["::1"])]);
    // From each place a listen value can come from.
    let (_file_dir, path) = write_config("listen = \"localhost:3\"\n");
    let from_file = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load_resolving(&from_file, &[], dir.path(), &resolve).unwrap();
    assert_eq!(cfg.listen.value, "127.0.0.1:3".parse().unwrap());
    assert_eq!(cfg.listen.source, Source::File(path));
    let name = cfg.listen_name.unwrap();
    assert_eq!(name.resolved, ["[::1]:3".parse().unwrap(), "127.0.0.1:3".parse().unwrap()]);

    let env = [(env::LISTEN, "localhost:4".to_string())];
    let cfg = load_resolving(&Overrides::default(), &env, dir.path(), &resolve).unwrap();
    assert_eq!(
        (cfg.listen.value, cfg.listen.source),
        ("127.0.0.1:4".parse().unwrap(), Source::Env(env::LISTEN))
    );

    let ov = Overrides { listen: Some("ip6-localhost:0".into()), ..Default::default() };
    let cfg = load_resolving(&ov, &[], dir.path(), &resolve).unwrap();
    assert_eq!(cfg.listen.value, "[::1]:0".parse().unwrap());

    // An IP address is taken as it is, never resolved.
    let ov = Overrides { listen: Some("127.0.0.2:5".into()), ..Default::default() };
    let cfg = load_resolving(&ov, &[], dir.path(), &resolver(&[])).unwrap();
    assert_eq!(cfg.listen.value, "127.0.0.2:5".parse().unwrap());
    assert!(cfg.listen_name.is_none());
}

#[test]
fn a_listen_name_with_any_non_loopback_address_needs_socks_auth() {
    let dir = tempfile::tempdir().unwrap();
    let resolve = resolver(&[("laptop.lan", &["127.0.1.1", "192.0.2.7"])]);
    let ov = Overrides { listen: Some("laptop.lan:12000".into()), ..Default::default() };
    let err = load_resolving(&ov, &[], dir.path(), &resolve).unwrap_err().to_string();
    assert!(
        err.contains(
            "listen address laptop.lan:12000 (from flag --listen) resolves to 192.0.2.7:12000, which is \
             not loopback"
        ),
        "{err}"
    );
    assert!(err.contains("[socks] username and password"), "{err}");

    let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
    let ov = Overrides { config: Some(path), ..ov };
    let cfg = load_resolving(&ov, &[], dir.path(), &resolve).unwrap();
    assert_eq!(cfg.listen.value, "127.0.1.1:12000".parse().unwrap());
}

#[test]
fn a_listen_name_that_does_not_resolve_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let resolve = resolver(&[("nowhere", &[])]);
    let env = [(env::LISTEN, "no-such-host.example:12000".to_string())];
    let err = load_resolving(&Overrides::default(), &env, dir.path(), &resolve).unwrap_err().to_string();
    assert!(
        err.contains(
            "listen (from env KHARON_LISTEN): cannot resolve the host name in \
             \"no-such-host.example:12000\" (Name or service not known)"
        ),
        "{err}"
    );
    assert!(err.contains("use an IP address such as 127.0.0.1:12000"), "{err}");
    let env = [(env::LISTEN, "nowhere:1".to_string())];
    let err = load_resolving(&Overrides::default(), &env, dir.path(), &resolve).unwrap_err().to_string();
    assert!(err.contains("\"nowhere:1\" (it has no address)"), "{err}");
}

#[test]
fn listen_values_that_are_neither_ip_nor_name_with_a_port_are_refused_without_resolving() {
    let dir = tempfile::tempdir().unwrap();
    let never = |_: &str, _: u16| -> std::io::Result<Vec<SocketAddr>> { panic!("must not resolve") };
    for value in
        ["localhost", "localhost:", ":12000", "localhost:65536", "localhost:-1", "::1:12000", "a b:1"]
    {
        let ov = Overrides { listen: Some(value.into()), ..Default::default() };
        let err = load_resolving(&ov, &[], dir.path(), &never).unwrap_err().to_string();
        assert!(err.contains(&format!("listen (from flag --listen): {value:?} is not an address")), "{err}");
        assert!(err.contains("IP:PORT or NAME:PORT"), "{err}");
    }
}
