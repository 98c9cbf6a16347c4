//! kharonctl and the real commodore on one machine: commodore users log in once.
//! Commodore (PyPI `syn-commodore`, pinned; `harness/commodore.rs`) logs in, saves and fetches
//! tokens through its own code; kharonctl must use what it wrote, find the `.env` it reads, and
//! keep its cache current so that `commodore fetch-token` needs no login after `kharonctl login`.
//!
//! Every test holds `oidc::login_lock()`: both programs' login servers bind port 18000.

use std::path::Path;

use base64::Engine as _;
use kharon_e2e::commodore;
use kharon_e2e::kharonctl;
use kharon_e2e::oidc;
use sha2::Digest as _;

use crate::login::World;

/// The top-level keys of the JSON object `text` in the order the file has them (serde_json's map
/// would sort them).
fn keys_in_order(text: &str) -> Vec<String> {
    let value: serde_json::Value = serde_json::from_str(text).expect("a JSON object");
    let mut keys: Vec<(usize, String)> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(|k| (text.find(&format!("\n \"{k}\": ")).expect("a key at depth 1"), k.clone()))
        .collect();
    keys.sort();
    keys.into_iter().map(|(_, k)| k).collect()
}

/// An unsigned JWT that expired in 2001, as an old login leaves its id_token and Keycloak's
/// refresh token.
fn expired_jwt() -> String {
    let enc = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    format!("{}.{}.c2ln", enc(br#"{"alg":"RS256"}"#), enc(br#"{"sub":"alice","exp":1000000000}"#))
}

/// The fake Lieutenant's short hash of a bearer token.
fn token_hash(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>()[..16]
        .to_owned()
}

/// Writes an entry of kharonctl's own cache whose id_token and refresh token have both expired.
fn stale_kharonctl_entry(world: &World) {
    let body = serde_json::json!({"version": 1, "entries": {
        world.lieutenant.url(): {"id_token": expired_jwt(), "refresh_token": expired_jwt()}
    }});
    std::fs::create_dir_all(world.env.cache_dir()).unwrap();
    std::fs::write(world.token_file(), body.to_string()).unwrap();
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// (1) An old `kharonctl login` whose refresh token has expired, then today's `commodore login`:
/// kharonctl sends commodore's token without asking for a login, says which cache it came from,
/// and leaves commodore's file as it was.
#[test]
fn a_stale_kharonctl_entry_never_hides_a_fresh_commodore_login() {
    let _port = oidc::login_lock();
    let world = World::start_with(&[("PKCE", "optional")]);
    let url = world.lieutenant.url();
    stale_kharonctl_entry(&world);
    commodore::login(&world.env, url);
    let theirs = commodore::cache_file(&world.env);
    let before = read(&theirs);
    let cached: serde_json::Value = serde_json::from_str(&before).unwrap();
    let commodores_token = cached[url]["id_token"].as_str().expect("commodore cached an id_token").to_owned();

    let (tripwire, marker) = world.tripwire_browser();
    let out =
        world.ctl_with(&["update", "--no-reload", "--login-timeout", "5"], &[("KHARON_BROWSER", &tripwire)]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!marker.exists(), "a login was asked for although commodore's cache holds a fresh token");
    assert!(!out.stderr.contains("logging in"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("using the token for {url} from commodore's cache {}", theirs.display())),
        "{}",
        out.stderr
    );
    let seen = world.lieutenant.requests();
    let last = seen.last().expect("Lieutenant saw the request");
    assert_eq!(
        (last["status"].as_u64(), last["token"].as_str()),
        (Some(200), Some(token_hash(&commodores_token).as_str()))
    );
    assert_eq!(read(&theirs), before, "commodore's cache was written although nothing new was obtained");
    assert!(!out.stdout.contains(&commodores_token) && !out.stderr.contains(&commodores_token));
}

/// (2) A `.env` in a parent directory sets the Lieutenant: commodore (started deeper down, no URL
/// given) logs in to it, `kharonctl config` shows it with the file as its source, and `update`
/// from there fetches from that Lieutenant with commodore's token. The real environment wins.
#[test]
fn dotenv_in_a_parent_directory_sets_the_lieutenant_for_kharonctl_as_for_commodore() {
    let _port = oidc::login_lock();
    let world = World::start_with(&[("PKCE", "optional")]);
    let url = world.lieutenant.url();
    let project = world.env.path().join("project");
    let deep = project.join("catalog/manifests");
    std::fs::create_dir_all(&deep).unwrap();
    let dotenv =
        world.env.write("project/.env", &format!("# this project's Lieutenant\nCOMMODORE_API_URL={url}\n"));

    let out = commodore::run(&world.env, &deep, &commodore::browser(&world.env), &["login"], &[]);
    assert!(out.success(), "commodore login (URL from .env) failed:\n{}\n{}", out.stdout, out.stderr);
    let cached: serde_json::Value = serde_json::from_str(&read(&commodore::cache_file(&world.env))).unwrap();
    assert!(
        cached[url]["id_token"].is_string(),
        "commodore did not log in to the .env's Lieutenant: {cached}"
    );

    let out = kharonctl::run_in(&world.env, &deep, &["config", "-o", "json"], &[]);
    assert!(out.success(), "{}", out.stderr);
    let rows = out.json();
    let row = |name: &str| rows.as_array().unwrap().iter().find(|r| r["setting"] == name).cloned().unwrap();
    assert_eq!(row("lieutenant_url")["value"], url);
    assert_eq!(row("lieutenant_url")["source"], format!("COMMODORE_API_URL in {}", dotenv.display()));
    assert_eq!(row("dotenv_file")["value"], dotenv.display().to_string());
    let table = kharonctl::run_in(&world.env, &deep, &["config"], &[]);
    assert!(table.stdout.contains("COMMODORE_API_URL in"), "{}", table.stdout);

    let (tripwire, marker) = world.tripwire_browser();
    let out = kharonctl::run_in(
        &world.env,
        &deep,
        &["update", "--no-reload", "--login-timeout", "5"],
        &[("KHARON_BROWSER", &tripwire)],
    );
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!marker.exists());
    assert!(out.stdout.contains(&format!("fetched 5 clusters from {url}")), "{}", out.stdout);
    assert_eq!(world.lieutenant.requests().last().unwrap()["status"], 200);

    // python-dotenv's override=False: the real environment wins over the file.
    let out = kharonctl::run_in(
        &world.env,
        &deep,
        &["config", "-o", "json"],
        &[("COMMODORE_API_URL", "http://127.0.0.1:9")],
    );
    let rows = out.json();
    let url_row =
        rows.as_array().unwrap().iter().find(|r| r["setting"] == "lieutenant_url").cloned().unwrap();
    assert_eq!(
        (url_row["value"].as_str(), url_row["source"].as_str()),
        (Some("http://127.0.0.1:9"), Some("env COMMODORE_API_URL"))
    );
}

/// (5) Commodore was used before (an entry for another Lieutenant, an expired one for this one,
/// both saved by commodore's own `tokencache`); after `kharonctl login`, `commodore fetch-token`
/// prints the token kharonctl got without a login, and the other entry is byte for byte as it was.
#[test]
fn after_a_kharonctl_login_commodore_fetch_token_needs_no_login() {
    let _port = oidc::login_lock();
    let world = World::start();
    let env = &world.env;
    let url = world.lieutenant.url();
    let other = "https://other-lieutenant.example";
    let other_entry = serde_json::json!({"access_token": "other-a", "expires_in": 300, "id_token": "other-id",
        "refresh_token": "other-r", "scope": ["openid", "email"], "token_type": "Bearer", "expires_at": 1900000000});
    commodore::save(env, env.path(), &[], other, &other_entry);
    commodore::save(
        env,
        env.path(),
        &[],
        url,
        &serde_json::json!({"id_token": expired_jwt(), "refresh_token": expired_jwt()}),
    );
    let theirs = commodore::cache_file(env);
    let before = read(&theirs);

    let out = world.ctl(&["login", "--timeout", "60"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains(&format!("updated the token for {url} in commodore's cache {} too", theirs.display())),
        "{}",
        out.stderr
    );
    let ours = world.tokens()["id_token"].as_str().unwrap().to_owned();

    let (tripwire, marker) = commodore::tripwire(env);
    let out = commodore::run(env, env.path(), &tripwire, &["fetch-token", "--api-url", url], &[]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!marker.exists(), "commodore asked for a login after kharonctl's:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), ours, "commodore fetch-token printed another token than kharonctl got");

    let after = read(&theirs);
    // Commodore's other entry, and everything before this Lieutenant's, byte for byte.
    let ours_at = before.find(&format!("\n \"{url}\": ")).unwrap();
    assert!(after.starts_with(&before[..ours_at]), "{before}\n---\n{after}");
    assert_eq!(keys_in_order(&after), [other, url]);
    let written: serde_json::Value = serde_json::from_str(&after).unwrap();
    assert_eq!(written[other], other_entry);
    assert_eq!(written[url]["token_type"], "Bearer");
    assert_eq!(written[url]["scope"], serde_json::json!(["openid", "email", "profile"]));
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&theirs).unwrap().permissions().mode() & 0o777, 0o600);

    // logout leaves commodore's login alone and says that kharonctl would still use it.
    let out = world.ctl(&["logout"]);
    assert!(out.success(), "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("note: commodore's cache {} still holds a token for {url}", theirs.display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("goes on using it, and refreshing it"), "{}", out.stdout);
    assert_eq!(read(&theirs), after);
}

/// A commodore token that kharonctl refreshes: the messages name commodore's cache, and the new
/// tokens (the provider rotates refresh tokens) go back to commodore's entry, or commodore would be
/// left holding a spent refresh token.
#[test]
fn a_commodore_token_kharonctl_refreshes_goes_back_to_commodore() {
    let _port = oidc::login_lock();
    // 9 s id_tokens are always within the 10 s margin: stale for both programs at once.
    let world = World::start_with(&[("PKCE", "optional"), ("ID_TOKEN_TTL", "9")]);
    let url = world.lieutenant.url();
    commodore::login(&world.env, url);
    let theirs = commodore::cache_file(&world.env);
    let before: serde_json::Value = serde_json::from_str(&read(&theirs)).unwrap();

    let (tripwire, marker) = world.tripwire_browser();
    let out =
        world.ctl_with(&["update", "--no-reload", "--login-timeout", "5"], &[("KHARON_BROWSER", &tripwire)]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!marker.exists());
    let cache = theirs.display();
    for said in [
        format!("the token for {url} in commodore's cache {cache} has expired; refreshing it"),
        format!("updated the token for {url} in commodore's cache {cache} too"),
    ] {
        assert!(out.stderr.contains(&said), "{said:?} missing:\n{}", out.stderr);
    }
    let after: serde_json::Value = serde_json::from_str(&read(&theirs)).unwrap();
    let ours = world.tokens();
    assert_ne!(
        after[url]["refresh_token"], before[url]["refresh_token"],
        "the rotated refresh token was not written back"
    );
    assert_eq!(after[url]["refresh_token"], ours["refresh_token"]);
    assert_eq!(after[url]["id_token"], ours["id_token"]);
}

/// A relative `XDG_CACHE_HOME` is relative to the working directory for commodore (pyxdg takes
/// it as it is); kharonctl finds commodore's cache there too.
#[test]
fn a_relative_xdg_cache_home_finds_commodores_cache_where_commodore_wrote_it() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let tokens = world.tokens();
    std::fs::remove_file(world.token_file()).unwrap();
    let work = world.env.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let relative = [("XDG_CACHE_HOME", "rel-cache")];
    commodore::save(&world.env, &work, &relative, world.lieutenant.url(), &tokens);
    let theirs = work.join("rel-cache/commodore/token");
    assert!(theirs.exists(), "commodore did not write its cache relative to its working directory");

    let (tripwire, marker) = world.tripwire_browser();
    let out = kharonctl::run_in(
        &world.env,
        &work,
        &["update", "--no-reload", "--login-timeout", "5"],
        &[("LIEUTENANT_URL", world.lieutenant.url()), ("KHARON_BROWSER", &tripwire), relative[0]],
    );
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert!(!marker.exists());
    assert!(out.stderr.contains(&format!("from commodore's cache {}", theirs.display())), "{}", out.stderr);
}

/// (6) `COMMODORE_API_TOKEN`, commodore's static token for CI and service accounts: kharonctl
/// sends it as commodore's own `catalog list` does (commodore `config.py`, `api_token`): also from
/// the `.env`, and from a file it names; with no cache read or written and no login. A token
/// Lieutenant refuses is the end for both, no login instead; one that has expired makes both go on
/// to their login.
#[test]
fn commodores_static_token_is_sent_as_commodore_sends_it_and_starts_no_login() {
    let _port = oidc::login_lock();
    let world = World::start_with(&[("PKCE", "optional")]);
    let url = world.lieutenant.url();
    world.login();
    let token = world.tokens()["id_token"].as_str().expect("an id_token").to_owned();
    std::fs::remove_file(world.token_file()).unwrap();
    let (tripwire, marker) = world.tripwire_browser();
    let (commodores_tripwire, commodore_opened) = commodore::tripwire(&world.env);

    // In a project whose .env names a file holding the token (as a CI secret is mounted).
    let file = world.env.write("ci/lieutenant-token", &format!("{token}\n"));
    let dotenv = world.env.write("project/.env", &format!("COMMODORE_API_TOKEN={}\n", file.display()));
    let project = dotenv.parent().unwrap();
    let args = ["catalog", "list", "--api-url", url, "-o", "id"];
    let listed = commodore::run(&world.env, project, &commodores_tripwire, &args, &[]);
    assert!(listed.success(), "commodore catalog list:\n{}\n{}", listed.stdout, listed.stderr);
    assert!(listed.stdout.contains("c-green-meadow-1234"), "{}", listed.stdout);
    assert!(!commodore_opened.exists(), "commodore logged in although the token was set");
    let out = kharonctl::run_in(
        &world.env,
        project,
        &["update", "--no-reload", "--login-timeout", "5"],
        &[("LIEUTENANT_URL", url), ("KHARON_BROWSER", &tripwire)],
    );
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let from = format!("the file {} that COMMODORE_API_TOKEN in {} names", file.display(), dotenv.display());
    assert!(out.stderr.contains(&format!("using the token for {url} from {from}")), "{}", out.stderr);
    assert!(out.stdout.contains("fetched 5 clusters"), "{}", out.stdout);
    assert!(!marker.exists(), "kharonctl logged in although the token was set");
    assert!(!world.token_file().exists(), "the static token was written to a cache");
    let last = world.lieutenant.requests().last().cloned().unwrap_or_default();
    assert_eq!(last["token"].as_str(), Some(token_hash(&token).as_str()), "{last}");
    let config = kharonctl::run_in(&world.env, project, &["config", "-o", "json"], &[]).json();
    let row = config.as_array().unwrap().iter().find(|r| r["setting"] == "api_token").cloned().unwrap();
    assert_eq!(row["value"], "(set, not shown)");
    assert_eq!(row["source"], format!("COMMODORE_API_TOKEN in {}", dotenv.display()));
    assert!(!config.to_string().contains(&token));

    // A token Lieutenant refuses: an error for both, and no login instead.
    let refused = [("COMMODORE_API_TOKEN", "not-a-token-lieutenant-takes")];
    let listed = commodore::run(&world.env, world.env.path(), &commodores_tripwire, &args, &refused);
    assert!(!listed.success(), "{}", listed.stdout);
    assert!(!commodore_opened.exists());
    let out = world.ctl_with(&["update", "--no-reload"], &[("KHARON_BROWSER", &tripwire), refused[0]]);
    assert_eq!(out.code, Some(1), "{}\n{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "the token from COMMODORE_API_TOKEN was refused; like commodore, kharonctl does not log in"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(&format!("Lieutenant at {url}/clusters rejected the token (401")),
        "{}",
        out.stderr
    );
    assert!(!marker.exists());

    // One that has expired: both go on to their login (each opens its browser).
    let expired = expired_jwt();
    let stale = [("COMMODORE_API_TOKEN", expired.as_str())];
    commodore::run(&world.env, world.env.path(), &commodores_tripwire, &args, &stale);
    assert!(commodore_opened.exists(), "commodore did not fall back to its login");
    let out = world.ctl_with(
        &["update", "--no-reload", "--login-timeout", "5"],
        &[("KHARON_BROWSER", &tripwire), stale[0]],
    );
    assert!(
        out.stderr.contains(
            "the token in COMMODORE_API_TOKEN expired at 2001-09-09T01:46:40Z; like commodore, kharonctl goes on with its own login"
        ),
        "{}",
        out.stderr
    );
    assert!(marker.exists(), "kharonctl did not fall back to its login");
}
