//! `service-install`, `service-uninstall` and shell completions, run as the built kharonctl in a
//! temporary HOME. The systemd units are checked by systemd's own parser (`systemd-analyze verify`),
//! the launchd plist by the plist crate. No test talks to a real service manager: installs use
//! `--no-start`, uninstalls `--no-stop`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kharon_e2e::{Env, bin, kharonctl};

/// A file printed by `--dry-run`: `==> PATH <==` then its contents.
struct Printed {
    path: PathBuf,
    contents: String,
}

fn split_dry_run(stdout: &str) -> Vec<Printed> {
    let mut files: Vec<Printed> = Vec::new();
    for line in stdout.split_inclusive('\n') {
        if let Some(path) = line.trim_end().strip_prefix("==> ").and_then(|l| l.strip_suffix(" <==")) {
            if let Some(last) = files.last_mut() {
                // The blank separator line belongs to the output, not to the file.
                if last.contents.ends_with("\n\n") {
                    last.contents.pop();
                }
            }
            files.push(Printed { path: PathBuf::from(path), contents: String::new() });
        } else if let Some(file) = files.last_mut() {
            file.contents.push_str(line);
        }
    }
    files
}

fn unit_dir(env: &Env) -> PathBuf {
    env.path().join("config/systemd/user")
}

const AGENT: (&str, &str) = ("SSH_AUTH_SOCK", "/tmp/kharon-test-agent.sock");

#[test]
fn systemd_dry_run_passes_systemd_analyze_verify() {
    let env = Env::new();
    let out = kharonctl::run_with(
        &env,
        &["service-install", "--dry-run", "--socket-activation", "--platform", "linux"],
        &[AGENT],
    );
    assert!(out.success(), "{out:?}");
    let files = split_dry_run(&out.stdout);
    let names: Vec<String> =
        files.iter().map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["kharond.service", "kharond.socket", "kharond-control.socket"], "{}", out.stdout);
    for file in &files {
        assert_eq!(file.path.parent(), Some(unit_dir(&env).as_path()), "target path");
        assert!(!file.path.exists(), "--dry-run wrote {}", file.path.display());
    }
    let service = &files[0].contents;
    let kharond = bin("kharond");
    assert!(service.contains(&format!("\nExecStart={}\n", kharond.display())), "{service}");
    assert!(service.contains("\nType=notify\n") && service.contains("\nRestart=on-failure\n"), "{service}");
    assert!(service.contains("\nEnvironment=\"SSH_AUTH_SOCK=/tmp/kharon-test-agent.sock\"\n"), "{service}");
    assert!(files[1].contents.contains("\nListenStream=127.0.0.1:12000\nFileDescriptorName=socks\n"));
    assert!(
        files[2].contents.contains("\nListenStream=%t/kharon/kharond.sock\nFileDescriptorName=control\n")
    );

    let analyze = Path::new("/usr/bin/systemd-analyze");
    // .ci/run installs systemd when it is missing: a check that silently does nothing proves nothing.
    assert!(analyze.exists(), "{} is missing: run `apt-get install -y systemd`", analyze.display());
    // Written where verify can load them as a set (the service Requires= both sockets).
    let dir = tempfile::tempdir().expect("temp dir");
    let mut paths = Vec::new();
    for file in &files {
        let path = dir.path().join(file.path.file_name().unwrap());
        std::fs::write(&path, &file.contents).expect("write unit");
        paths.push(path);
    }
    let verify = Command::new(analyze)
        .args(["verify", "--user"])
        .args(&paths)
        .env("XDG_RUNTIME_DIR", env.path().join("run"))
        .current_dir(dir.path())
        .output()
        .expect("run systemd-analyze");
    let stderr = String::from_utf8_lossy(&verify.stderr);
    assert!(verify.status.success(), "systemd-analyze verify failed:\n{stderr}");
    // verify exits 0 on some warnings too; none may concern our units.
    let ours: Vec<&str> = stderr.lines().filter(|l| l.contains("kharond")).collect();
    assert!(ours.is_empty(), "systemd-analyze complains:\n{stderr}");
}

#[test]
fn gnome_session_gets_the_gcr_agent() {
    let env = Env::new();
    let out = kharonctl::run_with(
        &env,
        &["service-install", "--dry-run", "--platform", "linux"],
        &[AGENT, ("XDG_CURRENT_DESKTOP", "ubuntu:GNOME")],
    );
    assert!(out.success(), "{out:?}");
    assert!(out.stdout.contains("\nEnvironment=SSH_AUTH_SOCK=%t/gcr/ssh\n"), "{}", out.stdout);
    assert!(!out.stdout.contains("kharond.socket"), "no socket units without --socket-activation");
}

#[test]
fn launchd_dry_run_is_a_plist_with_absolute_paths() {
    let env = Env::new();
    let out = kharonctl::run_with(
        &env,
        &["service-install", "--dry-run", "--platform", "macos"],
        &[("SSH_AUTH_SOCK", "/private/tmp/com.apple.launchd.x1y2/Listeners")],
    );
    assert!(out.success(), "{out:?}");
    let files = split_dry_run(&out.stdout);
    assert_eq!(files.len(), 1, "{}", out.stdout);
    assert_eq!(files[0].path, env.home().join("Library/LaunchAgents/ch.vshn.kharond.plist"));
    assert!(!files[0].path.exists(), "--dry-run wrote the plist");
    let dict: plist::Dictionary = plist::from_bytes(files[0].contents.as_bytes()).expect("valid plist");
    let string = |key: &str| dict.get(key).and_then(plist::Value::as_string).map(str::to_owned);
    assert_eq!(string("Label").as_deref(), Some("ch.vshn.kharond"));
    let args = dict.get("ProgramArguments").and_then(plist::Value::as_array).expect("ProgramArguments");
    let program = PathBuf::from(args[0].as_string().expect("string"));
    assert!(program.is_absolute() && program.exists(), "{}", program.display());
    assert_eq!(program, bin("kharond"));
    let log = env.home().join("Library/Logs/kharond.log").display().to_string();
    assert_eq!(string("StandardOutPath"), Some(log.clone()));
    assert_eq!(string("StandardErrorPath"), Some(log));
    assert_eq!(dict.get("RunAtLoad").and_then(plist::Value::as_boolean), Some(true));
    // Restarted when it fails (launchd.plist(5) `SuccessfulExit` false), as systemd's on-failure.
    let keep_alive = dict.get("KeepAlive").and_then(plist::Value::as_dictionary).expect("KeepAlive");
    assert_eq!(keep_alive.get("SuccessfulExit").and_then(plist::Value::as_boolean), Some(false));
    // launchd hands the agent its own SSH_AUTH_SOCK; nothing to write in.
    assert!(dict.get("EnvironmentVariables").is_none());
}

#[test]
fn socket_activation_is_refused_for_launchd() {
    let env = Env::new();
    let out =
        kharonctl::run(&env, &["service-install", "--dry-run", "--socket-activation", "--platform", "macos"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains("--socket-activation needs systemd"), "{}", out.stderr);
}

#[test]
fn systemd_install_is_idempotent_and_uninstall_removes_the_units() {
    let env = Env::new();
    let install = |extra: &[&str]| {
        let mut args = vec!["service-install", "--no-start", "--platform", "linux"];
        args.extend_from_slice(extra);
        kharonctl::run_with(&env, &args, &[AGENT])
    };
    let service = unit_dir(&env).join("kharond.service");
    let socket = unit_dir(&env).join("kharond.socket");

    let first = install(&[]);
    assert!(first.success(), "{first:?}");
    assert!(first.stdout.contains(&format!("created {}", service.display())), "{}", first.stdout);
    assert!(first.stderr.contains("systemctl --user enable --now kharond.service"), "{}", first.stderr);
    let written = std::fs::read_to_string(&service).expect("unit written");

    let second = install(&[]);
    assert!(second.success(), "{second:?}");
    assert!(second.stdout.contains("all files unchanged"), "{}", second.stdout);
    assert_eq!(std::fs::read_to_string(&service).expect("unit"), written);

    let activated = install(&["--socket-activation"]);
    assert!(activated.success(), "{activated:?}");
    assert!(activated.stdout.contains(&format!("updated {}", service.display())), "{}", activated.stdout);
    assert!(activated.stdout.contains(&format!("created {}", socket.display())), "{}", activated.stdout);

    // Dropping socket activation removes the socket units again.
    let plain = install(&[]);
    assert!(plain.stdout.contains(&format!("removed {}", socket.display())), "{}", plain.stdout);
    assert!(!socket.exists());

    let dry = kharonctl::run(&env, &["service-uninstall", "--dry-run", "--platform", "linux"]);
    assert!(dry.stdout.contains(&format!("would remove {}", service.display())), "{}", dry.stdout);
    assert!(service.exists());
    let removed = kharonctl::run(&env, &["service-uninstall", "--no-stop", "--platform", "linux"]);
    assert!(removed.success(), "{removed:?}");
    assert!(removed.stdout.contains(&format!("removed {}", service.display())), "{}", removed.stdout);
    assert!(!service.exists());
    let again = kharonctl::run(&env, &["service-uninstall", "--no-stop", "--platform", "linux"]);
    assert!(again.success() && again.stdout.contains("not installed"), "{again:?}");
}

#[test]
fn launchd_install_is_idempotent_and_uninstall_removes_the_plist() {
    let env = Env::new();
    let args = ["service-install", "--no-start", "--platform", "macos"];
    let plist_path = env.home().join("Library/LaunchAgents/ch.vshn.kharond.plist");
    let first = kharonctl::run(&env, &args);
    assert!(first.success(), "{first:?}");
    assert!(first.stdout.contains(&format!("created {}", plist_path.display())), "{}", first.stdout);
    assert!(env.home().join("Library/Logs").is_dir(), "log directory created");
    let parsed: plist::Dictionary = plist::from_file(&plist_path).expect("plist parses");
    assert_eq!(parsed.get("Label").and_then(plist::Value::as_string), Some("ch.vshn.kharond"));
    let second = kharonctl::run(&env, &args);
    assert!(second.stdout.contains("all files unchanged"), "{}", second.stdout);
    let removed = kharonctl::run(&env, &["service-uninstall", "--no-stop", "--platform", "macos"]);
    assert!(removed.success(), "{removed:?}");
    assert!(!plist_path.exists());
}

#[test]
fn complete_env_prints_a_registration_script() {
    let env = Env::new();
    let out = kharonctl::run_with(&env, &[], &[("COMPLETE", "bash")]);
    assert!(out.success(), "{out:?}");
    assert!(out.stdout.contains("complete ") && out.stdout.contains("kharonctl"), "{}", out.stdout);
    assert!(out.stderr.is_empty(), "completion must be silent: {}", out.stderr);
}

#[test]
fn completions_subcommand_prints_scripts_for_each_shell() {
    let env = Env::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = kharonctl::run(&env, &["completions", shell]);
        assert!(out.success(), "{shell}: {out:?}");
        assert!(
            out.stdout.contains("kharonctl") && out.stdout.contains("COMPLETE="),
            "{shell}: {}",
            out.stdout
        );
    }
}

#[test]
fn cluster_ids_complete_from_the_cache() {
    let env = Env::new();
    // No cache yet: no candidates, and nothing on stderr.
    let none = kharonctl::run_with(&env, &["--", "kharonctl", "switch", "c-"], &[("COMPLETE", "fish")]);
    assert!(none.success(), "{none:?}");
    assert!(none.stdout.trim().is_empty() && none.stderr.is_empty(), "{none:?}");

    let clusters = kharon_routing::inventory::parse_clusters(
        br#"[{"id": "c-alpha", "tenant": "t-a", "displayName": "Alpha Prod"},
             {"id": "c-beta", "tenant": "t-b"},
             {"id": "c-bygone", "tenant": "t-b", "facts": {"kharonIgnore": "decommissioned"}},
             {"id": "x-other", "tenant": "t-b"}]"#,
    )
    .expect("clusters");
    let envelope = kharon_routing::cache::Envelope::new("https://lieutenant.example", clusters, Vec::new());
    kharon_routing::cache::store(&kharon_routing::cache::path(&env.cache_dir()), &envelope)
        .expect("store cache");

    let out = kharonctl::run_with(&env, &["--", "kharonctl", "switch", "c-"], &[("COMPLETE", "fish")]);
    assert!(out.success(), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    // c-bygone is ignored (kharonIgnore): nothing else offers it, so neither does TAB.
    assert_eq!(lines, ["c-alpha\tAlpha Prod", "c-beta"], "{}", out.stdout);
}
