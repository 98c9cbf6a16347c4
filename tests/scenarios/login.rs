//! Logging in to Lieutenant against a real OpenID provider (npm `oidc-provider`, PKCE enforced):
//! the browser flow played through `KHARON_BROWSER`, the device flow, refresh, the 401 paths,
//! commodore's token cache, and the failures a user can run into (busy port, refusal, timeout).
//!
//! Every test that uses port 18000 holds `oidc::login_lock()`.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use kharon_e2e::kharonctl::{self, Output};
use kharon_e2e::lieutenant::{Lieutenant, fixture};
use kharon_e2e::oidc::{self, Provider};
use kharon_e2e::{Env, wait_until};

/// One scenario's IdP, Lieutenant and HOME.
pub(crate) struct World {
    pub env: Env,
    pub provider: Provider,
    pub lieutenant: Lieutenant,
}

impl World {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(provider_env: &[(&str, &str)]) -> Self {
        let provider = Provider::start_with(provider_env);
        let lieutenant = Lieutenant::start(&provider, &fixture("clusters.json"));
        Self { env: Env::new(), provider, lieutenant }
    }

    /// Runs kharonctl against this Lieutenant with the playing browser.
    pub fn ctl(&self, args: &[&str]) -> Output {
        self.ctl_with(args, &[])
    }

    pub fn ctl_with(&self, args: &[&str], extra: &[(&str, &str)]) -> Output {
        let browser = oidc::browser_command();
        let mut vars: Vec<(&str, &str)> =
            vec![("LIEUTENANT_URL", self.lieutenant.url()), ("KHARON_BROWSER", browser.as_str())];
        vars.extend_from_slice(extra);
        kharonctl::run_with(&self.env, args, &vars)
    }

    /// A `KHARON_BROWSER` that only records that it was started, and the file it touches.
    pub fn tripwire_browser(&self) -> (String, PathBuf) {
        let marker = self.env.path().join("browser-was-opened");
        (format!("touch {} && false", marker.display()), marker)
    }

    pub fn token_file(&self) -> PathBuf {
        self.env.cache_dir().join("tokens.json")
    }

    pub fn tokens(&self) -> serde_json::Value {
        let text = std::fs::read_to_string(self.token_file()).expect("token cache");
        let all: serde_json::Value = serde_json::from_str(&text).expect("token cache JSON");
        all["entries"][self.lieutenant.url()].clone()
    }

    pub fn login(&self) {
        let out = self.ctl(&["login", "--timeout", "60"]);
        assert!(out.success(), "login failed:\n{}\n{}", out.stdout, out.stderr);
    }
}

fn assert_no_tokens_printed(world: &World, out: &Output) {
    let tokens = world.tokens();
    for key in ["id_token", "refresh_token", "access_token"] {
        if let Some(t) = tokens[key].as_str() {
            assert!(!out.stdout.contains(t) && !out.stderr.contains(t), "{key} was printed");
        }
    }
}

#[test]
fn browser_login_caches_tokens_0600_and_update_needs_no_second_login() {
    let _port = oidc::login_lock();
    let world = World::start();

    let out = world.ctl(&["login", "--timeout", "60"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    // The URL is always printed, with PKCE S256, state and nonce.
    assert!(out.stderr.contains(&format!("{}/auth?", world.provider.issuer())), "{}", out.stderr);
    for param in
        ["code_challenge_method=S256", "state=", "nonce=", "redirect_uri=http%3A%2F%2Flocalhost%3A18000"]
    {
        assert!(out.stderr.contains(param), "{param} missing:\n{}", out.stderr);
    }
    let mode = std::fs::metadata(world.token_file()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let tokens = world.tokens();
    assert!(tokens["id_token"].as_str().unwrap().split('.').count() == 3, "id_token is a JWT");
    assert!(tokens["refresh_token"].is_string());
    assert_no_tokens_printed(&world, &out);
    // Without a commodore cache, kharonctl creates none.
    assert!(!world.env.path().join("cache/commodore").exists());

    // Users export HTTPS_PROXY pointing at kharond; kharonctl's own requests must ignore it.
    let (tripwire, marker) = world.tripwire_browser();
    let dead_proxy = "socks5h://127.0.0.1:9";
    let out = world.ctl_with(
        &["update", "--no-reload"],
        &[
            ("KHARON_BROWSER", &tripwire),
            ("HTTPS_PROXY", dead_proxy),
            ("HTTP_PROXY", dead_proxy),
            ("ALL_PROXY", dead_proxy),
        ],
    );
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!marker.exists(), "update opened a browser although a valid token was cached");
    assert!(out.stdout.contains("fetched 5 clusters"), "{}", out.stdout);
    let seen = world.lieutenant.requests();
    assert_eq!(seen.last().unwrap()["status"], 200, "{seen:?}");
}

#[test]
fn a_stale_id_token_is_refreshed_without_a_browser() {
    let _port = oidc::login_lock();
    // 9 s id_tokens are always within the 10 s staleness margin. Not shorter: the refreshed
    // token must still be valid when the fake Lieutenant checks it, and with 5 s a loaded
    // machine took longer (ERR_JWT_EXPIRED, then a browser login the test waited out).
    let world = World::start_with(&[("ID_TOKEN_TTL", "9")]);
    world.login();
    let before = world.tokens();

    let (tripwire, marker) = world.tripwire_browser();
    let out = world.ctl_with(&["update", "--no-reload"], &[("KHARON_BROWSER", &tripwire)]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the token for {} in kharonctl's cache {} has expired; refreshing it",
            world.lieutenant.url(),
            world.token_file().display()
        )),
        "{}",
        out.stderr
    );
    assert!(!marker.exists(), "a refresh must not open the browser");
    // (The id_token may be byte-identical: RS256 is deterministic and iat has one-second
    // resolution. The refresh token proves the refresh: oidc-provider rotates it.)
    let after = world.tokens();
    assert_ne!(before["refresh_token"], after["refresh_token"]);
    assert!(after["refresh_token"].is_string());
}

#[test]
fn a_401_gets_one_refresh_and_retry() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let before = world.tokens();
    world.lieutenant.reject_next(1);

    let (tripwire, marker) = world.tripwire_browser();
    let out = world.ctl_with(&["update", "--no-reload"], &[("KHARON_BROWSER", &tripwire)]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "the token for {} in kharonctl's cache {} was rejected by Lieutenant; refreshing it",
            world.lieutenant.url(),
            world.token_file().display()
        )),
        "{}",
        out.stderr
    );
    assert!(!marker.exists());
    let seen = world.lieutenant.requests();
    let statuses: Vec<_> = seen.iter().map(|r| r["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [401, 200], "{seen:?}");
    // The retry used refreshed tokens (the rotated refresh token was stored).
    assert_ne!(before["refresh_token"], world.tokens()["refresh_token"]);
}

#[test]
fn a_401_after_the_refresh_leads_to_a_fresh_browser_login() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    world.lieutenant.reject_next(2);

    let out = world.ctl(&["update", "--no-reload", "--login-timeout", "60"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("logging in again"), "{}", out.stderr);
    assert!(out.stderr.contains("logged in to"), "{}", out.stderr);
    let statuses: Vec<_> =
        world.lieutenant.requests().iter().map(|r| r["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [401, 401, 200]);

    // A token rejected even after a fresh login is the end: no endless login loop.
    world.lieutenant.reject_next(3);
    let out = world.ctl(&["update", "--no-reload", "--login-timeout", "60"]);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("rejected the token (401 Unauthorized)"), "{}", out.stderr);
}

#[test]
fn device_login_shows_a_code_and_completes() {
    // No port 18000 involved.
    let world = World::start();
    let mut child = Command::new(kharon_e2e::bin("kharonctl"))
        .env_clear()
        .envs(world.env.vars())
        .env("LIEUTENANT_URL", world.lieutenant.url())
        .args(["login", "--device", "--timeout", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kharonctl");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut shown = String::new();
    let (uri, code) = loop {
        let line =
            rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no code shown:\n{shown}"));
        shown.push_str(&line);
        shown.push('\n');
        if let Some(rest) = line.strip_prefix("to log in, open ") {
            let (uri, rest) = rest.split_once(' ').unwrap();
            let code = rest.rsplit(": ").next().unwrap().trim().to_owned();
            break (uri.to_owned(), code);
        }
    };
    assert!(uri.starts_with(world.provider.issuer()), "{uri}");
    let status = Command::new("node")
        .arg(oidc::node_dir().join("browser.mjs"))
        .args(["--device", &uri, &code])
        .status()
        .expect("run browser.mjs");
    assert!(status.success(), "the device page flow failed");
    let mut exit = None;
    assert!(
        wait_until(Duration::from_secs(30), || {
            exit = child.try_wait().unwrap();
            exit.is_some()
        }),
        "kharonctl did not finish after the device was approved"
    );
    assert!(exit.unwrap().success(), "{shown}");
    assert!(world.tokens()["id_token"].is_string());

    // The device login's token works for Lieutenant.
    let out = world.ctl_with(&["update", "--no-reload"], &[("KHARON_BROWSER", "false")]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
}

#[test]
fn device_login_without_a_device_endpoint_says_so() {
    let world = World::start_with(&[("DEVICE_FLOW", "0")]);
    let out = world.ctl(&["login", "--device", "--timeout", "10"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("offers no device login"), "{}", out.stderr);
}

#[test]
fn busy_port_18000_is_a_clear_error_not_a_hang() {
    let _port = oidc::login_lock();
    let world = World::start();
    let _squatter = std::net::TcpListener::bind("127.0.0.1:18000").expect("bind 18000");
    let started = std::time::Instant::now();
    let out = world.ctl(&["login", "--timeout", "60"]);
    assert_eq!(out.code, Some(1));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(out.stderr.contains("port 18000 is in use"), "{}", out.stderr);
    assert!(out.stderr.contains("--device"), "{}", out.stderr);
}

#[test]
fn an_error_callback_ends_the_login_with_the_providers_reason() {
    let _port = oidc::login_lock();
    let world = World::start();
    let deny = oidc::denying_browser_command();
    let out = world.ctl_with(&["login", "--timeout", "60"], &[("KHARON_BROWSER", &deny)]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("the identity provider refused the login: access_denied: the user said no"),
        "{}",
        out.stderr
    );
    assert!(!world.token_file().exists());
}

#[test]
fn a_login_nobody_completes_times_out() {
    let _port = oidc::login_lock();
    let world = World::start();
    let out = world.ctl_with(&["login", "--timeout", "2"], &[("KHARON_BROWSER", "true")]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("no login completed within 2s"), "{}", out.stderr);
}

#[test]
fn a_valid_token_in_commodores_cache_is_used() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let tokens = world.tokens();
    std::fs::remove_file(world.token_file()).unwrap();
    // Commodore keys by the URL exactly as its user typed it; here with a trailing slash.
    let commodore = world.env.path().join("cache/commodore/token");
    std::fs::create_dir_all(commodore.parent().unwrap()).unwrap();
    let key = format!("{}/", world.lieutenant.url());
    let body = serde_json::json!({ key: {
        "id_token": tokens["id_token"], "refresh_token": tokens["refresh_token"],
        "token_type": "Bearer", "scope": ["openid", "email", "profile"], "expires_at": 1.9e9
    }});
    std::fs::write(&commodore, serde_json::to_string_pretty(&body).unwrap()).unwrap();

    let (tripwire, marker) = world.tripwire_browser();
    let out = world.ctl_with(&["update", "--no-reload"], &[("KHARON_BROWSER", &tripwire)]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "using the token for {} from commodore's cache {}",
            world.lieutenant.url(),
            commodore.display()
        )),
        "{}",
        out.stderr
    );
    assert!(!marker.exists());
    // Commodore's file is read, never written.
    assert_eq!(std::fs::read_to_string(&commodore).unwrap(), serde_json::to_string_pretty(&body).unwrap());
}

#[test]
fn logout_removes_our_tokens_and_says_so() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let out = world.ctl(&["logout"]);
    assert!(out.success(), "{}", out.stderr);
    assert!(
        out.stdout.contains(&format!("removed the cached tokens for {}", world.lieutenant.url())),
        "{}",
        out.stdout
    );
    assert!(world.tokens().is_null());
    let out = world.ctl(&["logout"]);
    assert!(out.stdout.contains("no cached tokens for"), "{}", out.stdout);
    let out = world.ctl(&["logout", "--all"]);
    assert!(out.success() && out.stdout.contains("removed"), "{}", out.stdout);
    assert!(!world.token_file().exists());
}

/// Before a login, kharonctl says why one is needed, naming the cache it looked in: here a token
/// that has expired and has no refresh token to renew it with.
#[test]
fn an_expired_token_without_a_refresh_token_says_so_before_the_login() {
    let world = World::start();
    let expired = {
        use base64::Engine as _;
        let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
        format!("{}.{}.c2ln", enc(br#"{"alg":"RS256"}"#), enc(br#"{"exp":1000000000}"#))
    };
    let url = world.lieutenant.url();
    let body = serde_json::json!({"version": 1, "entries": {url: {"id_token": expired}}});
    std::fs::create_dir_all(world.env.cache_dir()).unwrap();
    std::fs::write(world.token_file(), body.to_string()).unwrap();
    // A device login nobody completes: no port 18000, no browser.
    let out = world.ctl(&["update", "--no-reload", "--device", "--login-timeout", "1"]);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    let cache = world.token_file();
    for said in [
        format!(
            "the token for {url} in kharonctl's cache {} has expired, and there is no refresh token to renew it with",
            cache.display()
        ),
        format!(
            "logging in: no token for {url} in kharonctl's cache {} can be used or refreshed",
            cache.display()
        ),
    ] {
        assert!(out.stderr.contains(&said), "{said:?} missing:\n{}", out.stderr);
    }
    // Nothing cached at all: the message names both caches it looked in.
    std::fs::remove_file(world.token_file()).unwrap();
    let out = world.ctl(&["update", "--no-reload", "--device", "--login-timeout", "1"]);
    let commodore = world.env.path().join("cache/commodore/token");
    let said = format!(
        "logging in: there is no token for {url} in kharonctl's cache {}, nor in commodore's cache {}",
        cache.display(),
        commodore.display()
    );
    assert!(out.stderr.contains(&said), "{said:?} missing:\n{}", out.stderr);
}

/// A stray space in a pasted URL is refused, naming where it came from, instead of being sent as
/// `/%20/`.
#[test]
fn a_lieutenant_url_with_a_trailing_space_is_refused() {
    let env = kharon_e2e::Env::new();
    let out = kharonctl::run(&env, &["--lieutenant-url", "http://127.0.0.1:18601/ ", "config"]);
    assert_eq!(out.code, Some(2), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "lieutenant_url (from flag --lieutenant-url): \"http://127.0.0.1:18601/ \" has a space or control character"
        ),
        "{}",
        out.stderr
    );
}

/// A token cache cut short (an interrupted write, a full disk) is one message: the file, what is
/// wrong, that the login replaces it; not "corrupt" followed by "there is no token". The login
/// leaves a whole file again.
#[test]
fn a_token_cache_cut_short_is_named_once_and_the_login_replaces_it() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let cache = world.token_file();
    let whole = std::fs::read(&cache).unwrap();
    std::fs::write(&cache, &whole[..whole.len() / 2]).unwrap();

    let out = world.ctl(&["update", "--no-reload", "--login-timeout", "60"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let commodore = world.env.path().join("cache/commodore/token");
    let said = format!(
        "logging in: kharonctl's token cache {} is cut short: its JSON ends at line ",
        cache.display()
    );
    assert!(out.stderr.contains(&said), "{said:?} missing:\n{}", out.stderr);
    let rest = format!(
        "(an interrupted write, or a full disk), so its tokens cannot be used, and commodore's cache {} has \
         none for {}; the login replaces it",
        commodore.display(),
        world.lieutenant.url()
    );
    assert!(out.stderr.contains(&rest), "{rest:?} missing:\n{}", out.stderr);
    assert_eq!(out.stderr.matches(&cache.display().to_string()).count(), 1, "said once:\n{}", out.stderr);
    assert!(!out.stderr.contains("corrupt") && !out.stderr.contains("there is no token"), "{}", out.stderr);
    assert!(world.tokens()["id_token"].is_string(), "the login wrote a whole cache again");
}
