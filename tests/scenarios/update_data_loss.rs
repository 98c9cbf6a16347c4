//! `kharonctl update` loses no data without a word: an answer that would wipe most of the routes
//! (Lieutenant answering `[]`, or `--tenant` against a cache of every tenant) is refused, naming
//! what came from where, and changes neither the cache nor kharond; two updates at once run one
//! after the other, each telling the truth; and a writer killed in the middle of its write leaves
//! a temp file that the next write removes, while a live writer's stays.

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use kharon_e2e::kharonctl::{self, Output};
use kharon_e2e::kharond::Kharond;
use kharon_e2e::lieutenant::fixture;
use kharon_e2e::{oidc, wait_until};

use crate::login::World;

fn cache_file(world: &World) -> PathBuf {
    world.env.cache_dir().join("inventory.json")
}

fn jumphost_of(world: &World, host: &str) -> serde_json::Value {
    let out = kharonctl::run(&world.env, &["route", host, "-o", "json"]);
    assert!(out.success(), "{out:?}");
    out.json()["jumphost"].clone()
}

/// `kharonctl update ARGS` against the world's Lieutenant, not started yet.
fn update_command(world: &World, args: &[&str]) -> Command {
    let mut cmd = kharonctl::command(&world.env, &[&["update"][..], args].concat());
    cmd.env("LIEUTENANT_URL", world.lieutenant.url()).env("KHARON_BROWSER", oidc::browser_command());
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

fn finish(child: Child) -> Output {
    let out = kharon_e2e::output_within(child, Duration::from_secs(60)).expect("update finishes within 60 s");
    Output {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Our temp files in `dir` (`.kharon-XXXXXX.tmp`).
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with(".kharon-") && name.ends_with(".tmp")
        })
        .collect();
    found.sort();
    found
}

fn backdate(path: &Path, by: Duration) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - by).unwrap();
}

#[test]
fn an_answer_that_would_wipe_the_routes_is_refused_and_changes_nothing() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let cache = cache_file(&world);
    assert!(world.ctl(&["update", "--no-reload"]).success());
    let before = std::fs::read(&cache).unwrap();
    let daemon = Kharond::start(&world.env, &[]);
    assert_eq!(jumphost_of(&world, "api.green.acme.example"), "jump-acme");

    // An expired tenant binding or a token of the wrong account: Lieutenant answers `[]`.
    world.lieutenant.set_clusters(&world.env.write("empty.json", "[]"));
    let out = world.ctl(&["update"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    let tokens = world.token_file();
    for part in [
        format!("refusing to replace the inventory cache {}", cache.display()),
        format!(
            "Lieutenant answered {}/clusters with 0 clusters (0 routed; every tenant",
            world.lieutenant.url()
        ),
        format!(" from kharonctl's cache {})", tokens.display()),
        "has 5 clusters (2 routed)".to_owned(),
        "stop routing 2 of those 2 (c-green-meadow-1234, c-quiet-river-5678)".to_owned(),
        "The cache and kharond are unchanged".to_owned(),
        "An empty answer".to_owned(),
        "`kharonctl update --allow-shrink`".to_owned(),
    ] {
        assert!(out.stderr.contains(&part), "{part:?} missing:\n{}", out.stderr);
    }
    assert!(out.stderr.contains("token as "), "the account the token names: {}", out.stderr);
    assert!(!out.stdout.contains("wrote") && !out.stdout.contains("- cluster"), "{}", out.stdout);
    assert!(!out.stdout.contains("reloaded"), "{}", out.stdout);
    assert_eq!(std::fs::read(&cache).unwrap(), before, "the refused answer touched the cache");
    assert_eq!(jumphost_of(&world, "api.green.acme.example"), "jump-acme");

    // One tenant's clusters against a cache of every tenant: the other tenant's routes would go.
    world.lieutenant.set_clusters(&fixture("clusters.json"));
    let out = world.ctl(&["update", "--tenant", "t-other-0815"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains(&format!(
            "answered {}/clusters?tenant=t-other-0815 with 2 clusters (0 routed; only tenant t-other-0815 \
             (--tenant);",
            world.lieutenant.url()
        )),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("A part of the clusters"), "{}", out.stderr);
    assert_eq!(std::fs::read(&cache).unwrap(), before);

    // Told to, it writes the empty answer, says so, and kharond routes nothing any more.
    world.lieutenant.set_clusters(&world.env.write("empty.json", "[]"));
    let out = world.ctl(&["update", "--allow-shrink"]);
    assert!(out.success(), "{out:?}");
    assert!(
        out.stdout.contains("- cluster c-green-meadow-1234") && out.stdout.contains("wrote"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("kharond reloaded: 0 clusters"), "{}", out.stdout);
    assert!(out.stderr.contains("with no clusters"), "{}", out.stderr);
    assert_eq!(jumphost_of(&world, "api.green.acme.example"), serde_json::Value::Null);
    drop(daemon);
}

#[test]
fn two_updates_at_once_run_one_after_the_other_and_each_tells_the_truth() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let _daemon = Kharond::start(&world.env, &[]);
    // A slow Lieutenant: the first update is still fetching when the others start.
    world.lieutenant.delay(1500);
    let first = update_command(&world, &[]).spawn().unwrap();
    let fetching = wait_until(Duration::from_secs(20), || world.lieutenant.in_flight() == 1);
    assert!(fetching, "the first update did not ask Lieutenant");
    let pid = first.id();
    let second = update_command(&world, &[]).spawn().unwrap();

    // And one that will not wait.
    let hasty = update_command(&world, &["--wait", "0"]).spawn().unwrap();

    let (first, second, hasty) = (finish(first), finish(second), finish(hasty));
    assert!(first.success(), "{first:?}");
    assert!(first.stdout.contains("+ cluster c-green-meadow-1234"), "{}", first.stdout);
    assert!(first.stdout.contains("kharond reloaded: 5 clusters"), "{}", first.stdout);
    // The second waited, then compared with what the first wrote, and reloaded after it.
    assert!(second.success(), "{second:?}");
    assert!(
        second.stderr.contains(&format!("waiting for another `kharonctl update` (pid {pid}, running since ")),
        "{}",
        second.stderr
    );
    assert!(second.stdout.contains("no changes since the last update"), "{}", second.stdout);
    assert!(second.stdout.contains("kharond reloaded: 5 clusters"), "{}", second.stdout);
    // The one that would not wait failed at once, naming the holder, and claims nothing.
    assert_eq!(hasty.code, Some(1), "{hasty:?}");
    assert!(
        hasty.stderr.contains(&format!("another `kharonctl update` (pid {pid}, running since ")),
        "{}",
        hasty.stderr
    );
    assert!(hasty.stderr.contains("fetched and wrote nothing"), "{}", hasty.stderr);
    assert!(hasty.stdout.is_empty(), "{}", hasty.stdout);
    // Lieutenant saw them one after the other: the second asked once the first had its answer.
    let fetches: Vec<serde_json::Value> =
        world.lieutenant.requests().into_iter().filter(|r| r["path"] == "/clusters").collect();
    let [.., one, two] = &fetches[..] else { panic!("two fetches expected: {fetches:?}") };
    assert!(two["arrived"].as_u64() >= one["answered"].as_u64(), "{fetches:?}");
}

#[test]
fn a_writer_killed_in_its_write_leaves_a_temp_file_that_the_next_write_removes() {
    let _port = oidc::login_lock();
    let world = World::start();
    world.login();
    let cache = cache_file(&world);
    assert!(world.ctl(&["update", "--no-reload"]).success());
    let before = std::fs::read(&cache).unwrap();
    let dir = world.env.cache_dir();
    assert_eq!(temp_files(&dir), Vec::<PathBuf>::new());

    // A file size limit below the cache's size: the kernel ends the update with SIGXFSZ in the
    // middle of writing its temp file, as a kill would at that moment.
    world.lieutenant.set_clusters(&fixture("clusters-next.json"));
    let mut killed = update_command(&world, &["--no-reload"]);
    let limit = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
    // SAFETY: setrlimit in the forked child before exec; it only reads the struct we pass.
    unsafe {
        killed.pre_exec(move || {
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = killed.output().unwrap();
    assert_eq!(out.status.signal(), Some(libc::SIGXFSZ), "{out:?}");
    let left = temp_files(&dir);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(std::fs::metadata(&left[0]).unwrap().len(), 1024);
    assert_eq!(std::fs::read(&cache).unwrap(), before, "the killed update touched the cache");

    // Beside it, a live writer's temp file, as old (its writer holds its lock).
    let live = dir.join(".kharon-live01.tmp");
    std::fs::write(&live, b"being written").unwrap();
    let writer = std::fs::File::open(&live).unwrap();
    writer.lock().unwrap();
    // Some minutes later, the next update tidies up after the killed one.
    for file in [&left[0], &live] {
        backdate(file, Duration::from_secs(600));
    }
    let out = world.ctl(&["update", "--no-reload"]);
    assert!(out.success(), "{out:?}");
    assert!(out.stdout.contains("+ cluster c-new-forest-9999"), "{}", out.stdout);
    assert_eq!(temp_files(&dir), vec![live.clone()], "the leftover stays, or the live one went");
    drop(writer);
}
