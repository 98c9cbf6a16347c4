//! The services kharonctl talks to: Lieutenant, its OIDC provider, Passbolt, and commodore's
//! `.env` that may name them; their URLs and the hosts no cluster may claim.

use super::*;

#[test]
fn lieutenant_url_flag_beats_lieutenant_url_beats_commodore_beats_file() {
    let (dir, path) = write_config("lieutenant_url = \"https://file.example/\"\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    let url = cfg.lieutenant_url;
    assert_eq!((url.value.as_str(), url.source), ("https://file.example/", Source::File(path.clone())));

    let commodore = (env::COMMODORE_API_URL, "https://commodore.example".to_string());
    let cfg = load(&ov, std::slice::from_ref(&commodore), dir.path()).unwrap();
    let url = cfg.lieutenant_url;
    assert_eq!(url.value, "https://commodore.example");
    assert_eq!(url.source, Source::Env(env::COMMODORE_API_URL));

    let both = [commodore.clone(), (env::LIEUTENANT_URL, "https://lieutenant.example".to_string())];
    let cfg = load(&ov, &both, dir.path()).unwrap();
    assert_eq!(cfg.lieutenant_url.source, Source::Env(env::LIEUTENANT_URL));

    let ov = Overrides { lieutenant_url: Some("http://127.0.0.1:1".into()), ..ov };
    let cfg = load(&ov, &both, dir.path()).unwrap();
    let url = cfg.lieutenant_url;
    assert_eq!((url.value.as_str(), url.source), ("http://127.0.0.1:1", Source::Flag("--lieutenant-url")));

    // Nothing set: VSHN's production Lieutenant, as Go kharon defaults to.
    let dir = tempfile::tempdir().unwrap();
    let url = load(&Overrides::default(), &[], dir.path()).unwrap().lieutenant_url;
    assert_eq!((url.value.as_str(), url.source), ("https://api.syn.vshn.net", Source::Default));
}

#[test]
fn oidc_overrides_come_from_flag_env_or_file() {
    let (dir, path) =
        write_config("oidc_client = \"from-file\"\noidc_discovery_url = \"https://idp/.well-known/x\"\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    let cfg = load(&ov, &[], dir.path()).unwrap();
    assert_eq!(cfg.oidc_client.unwrap().value, "from-file");
    assert_eq!(cfg.oidc_discovery_url.unwrap().source, Source::File(path));

    let env = [(env::OIDC_CLIENT, "from-env".to_string())];
    let cfg = load(&ov, &env, dir.path()).unwrap();
    assert_eq!(cfg.oidc_client.unwrap().source, Source::Env(env::OIDC_CLIENT));

    let ov = Overrides { oidc_client: Some("from-flag".into()), ..ov };
    let cfg = load(&ov, &env, dir.path()).unwrap();
    assert_eq!(cfg.oidc_client.unwrap().value, "from-flag");
}

#[test]
fn a_lieutenant_url_that_is_not_http_names_its_source() {
    let dir = tempfile::tempdir().unwrap();
    let env = [(env::COMMODORE_API_URL, "api.syn.example".to_string())];
    let err = load(&Overrides::default(), &env, dir.path()).unwrap_err().to_string();
    assert!(err.contains("lieutenant_url (from env COMMODORE_API_URL)"), "{err}");
    assert!(err.contains("not an http(s) URL"), "{err}");
}

#[test]
fn dotenv_fills_in_commodores_variables_that_the_environment_lacks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("project/.env");
    let vars = [
        (env::COMMODORE_API_URL, "http://dotenv.example"),
        (env::OIDC_CLIENT, "client-from-dotenv"),
        (env::API_TOKEN, "token-from-dotenv"),
        // Not commodore's: a .env is commodore's convention, not a config file of ours.
        (env::LIEUTENANT_URL, "http://not-commodores.example"),
        (env::PASSBOLT_URL, "http://not-commodores.example"),
    ];
    let dotenv = DotEnv {
        path: path.clone(),
        vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    let cfg = load_with_dotenv(&Overrides::default(), &[], dir.path(), &dotenv).unwrap();
    let from_dotenv = |var| Source::DotEnv { var, path: path.clone() };
    assert_eq!(
        (cfg.lieutenant_url.value.as_str(), &cfg.lieutenant_url.source),
        ("http://dotenv.example", &from_dotenv(env::COMMODORE_API_URL))
    );
    assert_eq!(cfg.lieutenant_url.source.to_string(), format!("COMMODORE_API_URL in {}", path.display()));
    let client = cfg.oidc_client.unwrap();
    assert_eq!((client.value.as_str(), client.source), ("client-from-dotenv", from_dotenv(env::OIDC_CLIENT)));
    assert_eq!(cfg.passbolt_url.source, Source::Default);
    assert_eq!(cfg.dotenv_file, Some(path.clone()));
    let token = cfg.api_token.unwrap();
    assert_eq!((token.value.as_str(), token.source), ("token-from-dotenv", from_dotenv(env::API_TOKEN)));
    let real = [(env::API_TOKEN, "token-from-env".to_string())];
    let token = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().api_token;
    assert_eq!(token.map(|t| t.source), Some(Source::Env(env::API_TOKEN)));

    // The real environment wins, even Go kharon's LIEUTENANT_URL over commodore's variable.
    let real = [(env::COMMODORE_API_URL, "http://env.example".to_string())];
    let url = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().lieutenant_url;
    assert_eq!((url.value.as_str(), url.source), ("http://env.example", Source::Env(env::COMMODORE_API_URL)));
    let real = [(env::LIEUTENANT_URL, "http://lieutenant.example".to_string())];
    let url = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().lieutenant_url;
    assert_eq!(url.source, Source::Env(env::LIEUTENANT_URL));
    // Set but empty: python-dotenv leaves it alone, and click takes an empty one as unset.
    let real = [(env::COMMODORE_API_URL, String::new())];
    let url = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().lieutenant_url;
    assert_eq!(url.source, Source::Default);
    // A flag wins over everything.
    let ov = Overrides { lieutenant_url: Some("http://flag.example".into()), ..Default::default() };
    let url = load_with_dotenv(&ov, &[], dir.path(), &dotenv).unwrap().lieutenant_url;
    assert_eq!(url.source, Source::Flag("--lieutenant-url"));
    // A bad value names the file it came from.
    let dotenv = DotEnv {
        path: path.clone(),
        vars: [(env::COMMODORE_API_URL.to_string(), "api.syn.example".to_string())].into(),
    };
    let err = load_with_dotenv(&Overrides::default(), &[], dir.path(), &dotenv).unwrap_err().to_string();
    assert!(err.contains(&format!("lieutenant_url (from COMMODORE_API_URL in {})", path.display())), "{err}");
}

#[test]
fn a_url_with_a_space_or_control_character_is_refused_naming_its_source() {
    let dir = tempfile::tempdir().unwrap();
    for value in [
        "http://127.0.0.1:18601/ ",
        " http://127.0.0.1:18601",
        "http://lieutenant.example/a b",
        "http://lieutenant.example/\t",
        "http://lieutenant.example\n",
        "http://lieutenant.example/\u{a0}",
    ] {
        let ov = Overrides { lieutenant_url: Some(value.into()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains(&format!("lieutenant_url (from flag --lieutenant-url): {value:?}")), "{err}");
        assert!(err.contains("has a space or control character in it"), "{err}");
    }
    let env = [(env::PASSBOLT_URL, "https://cloud.passbolt.com/vshn ".to_string())];
    let err = load(&Overrides::default(), &env, dir.path()).unwrap_err().to_string();
    assert!(err.contains("passbolt_url (from env KHARON_PASSBOLT_URL)"), "{err}");
}

#[test]
fn passbolt_url_defaults_to_vshn_and_env_beats_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
    assert_eq!(cfg.passbolt_url.value, "https://cloud.passbolt.com/vshn");
    assert_eq!(cfg.passbolt_url.source, Source::Default);

    let (dir, path) = write_config("passbolt_url = \"https://file.example/p\"\n");
    let ov = Overrides { config: Some(path.clone()), ..Default::default() };
    assert_eq!(load(&ov, &[], dir.path()).unwrap().passbolt_url.source, Source::File(path));
    let env = [(env::PASSBOLT_URL, "http://127.0.0.1:1/x".to_string())];
    let url = load(&ov, &env, dir.path()).unwrap().passbolt_url;
    assert_eq!((url.value.as_str(), url.source), ("http://127.0.0.1:1/x", Source::Env(env::PASSBOLT_URL)));
    let env = [(env::PASSBOLT_URL, "cloud.passbolt.com".to_string())];
    let err = load(&ov, &env, dir.path()).unwrap_err().to_string();
    assert!(err.contains("passbolt_url (from env KHARON_PASSBOLT_URL)"), "{err}");
}

#[test]
fn own_hosts_are_the_lieutenant_passbolt_and_a_configured_issuer() {
    let dir = tempfile::tempdir().unwrap();
    let hosts =
        |cfg: &Config| cfg.own_hosts().iter().map(|h| (h.host.clone(), h.what.clone())).collect::<Vec<_>>();
    let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
    assert_eq!(
        hosts(&cfg),
        [("api.syn.vshn.net".into(), "Lieutenant".into()), ("cloud.passbolt.com".into(), "Passbolt".into())]
    );
    let env = [(env::OIDC_DISCOVERY_URL, "https://id.example.net/realms/x".to_string())];
    let cfg = load(&Overrides::default(), &env, dir.path()).unwrap();
    assert_eq!(hosts(&cfg)[2], ("id.example.net".into(), "the OIDC issuer".into()));
}
