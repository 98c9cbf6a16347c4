//! Installing as the README says: `cargo install --locked --path kharond` and `--path kharonctl`
//! into an empty prefix, then what a user does next: `--version` names the commit, `man-pages`
//! writes the pages and `man` renders every one of them without a warning.
//!
//! The install is real (`cargo install` resolving the package on its own, with the lock file) but
//! `--debug --offline`, with this workspace's target dir as cargo's build dir: it reuses what the
//! suite already compiled. Resolved alone, a package would turn on fewer features in some
//! dependencies and compile half of its tree again (4 CPU-minutes); `workspace-hack` gives both
//! packages the workspace's features, so the test takes about 10 s. The final binaries land in a
//! temporary target dir, never next to the ones the other scenarios run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kharon_e2e::kharond::Kharond;
use kharon_e2e::{Env, bin, collect_output, inventory, kharonctl, wait_until};

/// The workspace root: the parent of this crate's directory.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

/// The build dir the suite was compiled in: `<dir>/debug/deps/e2e-…` is this test binary.
fn build_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.ancestors().nth(3).expect("build dir above debug/deps").to_owned()
}

/// What `--version` should say after the package version: the commit, as `git` sees the tree now.
fn expected_commit() -> String {
    let git = |args: &[&str]| {
        let out = Command::new("git").arg("-C").arg(workspace()).args(args).output().expect("run git");
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let Some(hash) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "not built from a git checkout".into();
    };
    let status =
        git(&["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"]).expect("git status");
    if status.is_empty() { hash } else { format!("{hash}-dirty") }
}

/// `cargo install --locked --offline --debug --root PREFIX --path PACKAGE`, bounded in time.
fn cargo_install(package: &str, prefix: &Path, uplift_dir: &Path) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    // What cargo sets for this test process is not in the environment the suite was built in:
    // build scripts watching such a variable (ring's watches CARGO_PKG_NAME and
    // CARGO_MANIFEST_DIR) would run again, and everything above ring would be compiled again.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_PKG_")
            || ["CARGO_MANIFEST_DIR", "CARGO_MANIFEST_PATH", "CARGO_CRATE_NAME", "CARGO_PRIMARY_PACKAGE"]
                .contains(&name.as_ref())
            || ["CARGO_BIN_NAME", "CARGO_TARGET_TMPDIR", "OUT_DIR"].contains(&name.as_ref())
        {
            command.env_remove(name.as_ref());
        }
    }
    let mut child = command
        .current_dir(workspace())
        .args(["install", "--locked", "--offline", "--debug", "--root"])
        .arg(prefix)
        .arg("--path")
        .arg(workspace().join(package))
        .env("CARGO_TARGET_DIR", uplift_dir)
        .env("CARGO_BUILD_BUILD_DIR", build_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run cargo install");
    let log = Arc::new(Mutex::new(String::new()));
    collect_output(child.stdout.take().expect("stdout"), log.clone());
    collect_output(child.stderr.take().expect("stderr"), log.clone());
    // Slow only with an out-of-date workspace-hack (the dependencies whose features differ when
    // the package is resolved alone are compiled again); generous for a loaded 2-core machine.
    let mut status = None;
    let done = wait_until(Duration::from_secs(1800), || {
        status = child.try_wait().expect("wait for cargo");
        status.is_some()
    });
    if !done {
        let _ = child.kill();
    }
    let log = log.lock().expect("log").clone();
    assert!(done && status.is_some_and(|s| s.success()), "cargo install {package} failed:\n{log}");
}

/// The long options `--help` lists: the first `--name` of each line that starts with a dash.
fn long_options(help: &str) -> Vec<String> {
    let mut options: Vec<String> = help
        .lines()
        .filter(|l| l.trim_start().starts_with('-'))
        .filter_map(|l| l.split([' ', ',', '=', '[', '<']).find(|w| w.starts_with("--") && w.len() > 2))
        // `--verbose...`: clap's mark for a repeatable flag
        .map(|w| w.trim_end_matches('.').to_owned())
        .collect();
    options.sort();
    options.dedup();
    options
}

/// The subcommands `--help` lists under "Commands:", without `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

fn run(program: &Path, args: &[&str], env: &Env) -> std::process::Output {
    Command::new(program).args(args).env_clear().envs(env.vars()).output().expect("run installed binary")
}

/// `man -l PAGE` as a user's terminal would get it, with every groff warning enabled.
fn render(page: &Path) -> String {
    let out = Command::new("man")
        // No hyphenation or justification, so option names stay whole.
        .args(["--warnings=w", "--nh", "--nj", "-l"])
        .arg(page)
        .env("LC_ALL", "C")
        .env("MANWIDTH", "100")
        .output()
        .expect("run man (package man-db; .ci/run installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "man -l {} failed or warned:\n{stderr}",
        page.display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cargo_install_into_an_empty_prefix_gives_both_binaries_their_commit_and_man_pages_that_render() {
    let env = Env::new();
    let prefix = env.path().join("prefix");
    let uplift = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(&prefix).expect("mkdir prefix");
    for package in ["kharond", "kharonctl"] {
        cargo_install(package, &prefix, uplift.path());
    }
    let mut installed: Vec<String> = std::fs::read_dir(prefix.join("bin"))
        .expect("prefix/bin")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    installed.sort();
    assert_eq!(installed, ["kharonctl", "kharond"]);
    let kharond = prefix.join("bin/kharond");
    let kharonctl = prefix.join("bin/kharonctl");

    let commit = expected_commit();
    for (name, path) in [("kharond", &kharond), ("kharonctl", &kharonctl)] {
        let out = run(path, &["--version"], &env);
        assert!(out.status.success());
        let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert_eq!(version, format!("{name} {} ({commit})", env!("CARGO_PKG_VERSION")));
    }

    let man1 = prefix.join("share/man/man1");
    let man1_arg = man1.to_str().expect("utf-8 path");
    let written = run(&kharonctl, &["man-pages", "--output", man1_arg], &env);
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));
    let written = run(&kharond, &["--man-pages", man1_arg], &env);
    assert!(written.status.success(), "{}", String::from_utf8_lossy(&written.stderr));

    // One page per command: kharond, kharonctl, each subcommand, and nested ones.
    let help = String::from_utf8(run(&kharonctl, &["--help"], &env).stdout).expect("utf-8");
    let subs = subcommands(&help);
    assert!(subs.len() >= 10 && subs.contains(&"man-pages".to_owned()), "{subs:?}");
    let mut commands: Vec<Vec<String>> = vec![vec!["kharond".into()], vec!["kharonctl".into()]];
    commands.extend(subs.iter().map(|s| vec!["kharonctl".into(), s.clone()]));
    commands.push(vec!["kharonctl".into(), "clusters".into(), "shell".into()]);
    let mut pages: Vec<String> = std::fs::read_dir(&man1)
        .expect("man1")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();

    for command in &commands {
        let name = command.join("-");
        let page = man1.join(format!("{name}.1"));
        assert!(pages.contains(&format!("{name}.1")), "no page {name}.1 in {pages:?}");
        let text = render(&page);
        assert!(text.contains("NAME") && text.contains(&format!("{name} - ")), "{name}.1:\n{text}");
        assert!(text.contains("OPTIONS"), "{name}.1:\n{text}");
        assert!(
            text.contains(&format!("kharon {} ({commit})", env!("CARGO_PKG_VERSION"))),
            "{name}.1:\n{text}"
        );
        let program = if command[0] == "kharond" { &kharond } else { &kharonctl };
        let mut args: Vec<&str> = command[1..].iter().map(String::as_str).collect();
        args.push("--help");
        let help = String::from_utf8(run(program, &args, &env).stdout).expect("utf-8");
        let options = long_options(&help);
        assert!(options.contains(&"--help".to_owned()), "{args:?}: {help}");
        for option in options {
            assert!(text.contains(&option), "{name}.1 lacks {option}:\n{text}");
        }
    }

    // Where a user would put them: `man -M` finds a page by name, as MANPATH would.
    let out = Command::new("man")
        .arg("-M")
        .arg(prefix.join("share/man"))
        .arg("kharonctl-status")
        .env("LC_ALL", "C")
        .output()
        .expect("run man");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("kharonctl-status - "));
}

#[test]
fn both_binaries_and_the_status_rpc_report_one_version_naming_the_commit() {
    let env = Env::new();
    let commit = expected_commit();
    let expected = format!("{} ({commit})", env!("CARGO_PKG_VERSION"));
    let ctl = kharonctl::run(&env, &["--version"]);
    assert_eq!(ctl.stdout.trim(), format!("kharonctl {expected}"));
    let out = Command::new(bin("kharond")).arg("--version").output().expect("run kharond");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("kharond {expected}"));

    let inv = env.write("inventory.json", &inventory::to_json(&[inventory::direct("c-d", "d.example")]));
    let _daemon = Kharond::start(&env, &["--inventory", inv.to_str().expect("utf-8 path")]);
    let status = kharonctl::run(&env, &["status", "-o", "json"]).json();
    assert_eq!(status["version"], expected);
    let human = kharonctl::run(&env, &["status"]);
    assert!(human.stdout.contains(&format!("kharond {expected} (pid")), "{}", human.stdout);
}

#[test]
fn man_pages_into_an_unwritable_place_is_a_clear_error() {
    let env = Env::new();
    // A regular file where the directory should be: nothing can be created below it.
    let blocker = env.write("not-a-dir", "");
    let target = blocker.join("man1");
    let target = target.to_str().expect("utf-8 path");
    let ctl = kharonctl::run(&env, &["man-pages", "--output", target]);
    assert_eq!(ctl.code, Some(1), "{ctl:?}");
    assert!(
        ctl.stderr.contains("cannot write the man page") && ctl.stderr.contains(target),
        "{}",
        ctl.stderr
    );
    let out = Command::new(bin("kharond")).args(["--man-pages", target]).output().expect("run kharond");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write the man page") && stderr.contains(target), "{stderr}");
}

#[test]
fn man_pages_need_neither_home_nor_a_valid_config() {
    let env = Env::new();
    let out_dir = env.path().join("man1");
    let broken = env.write("broken.toml", "listen = [not toml");
    for (program, args) in
        [(bin("kharonctl"), vec!["man-pages", "--output"]), (bin("kharond"), vec!["--man-pages"])]
    {
        let out = Command::new(&program)
            .args(&args)
            .arg(&out_dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("KHARON_CONFIG", &broken)
            .output()
            .expect("run");
        assert!(out.status.success(), "{program:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert!(out_dir.join("kharonctl.1").is_file() && out_dir.join("kharond.1").is_file());
}

/// contrib/dist-files.sh, which the .deb and the PKGBUILD run: pages, units for /usr/bin/kharond
/// without a per-user value left in them, and a bash loader that registers kharonctl's completion.
#[test]
fn dist_files_makes_pages_units_without_placeholders_and_a_working_bash_loader() {
    let env = Env::new();
    let out = env.path().join("dist");
    let bin_dir = bin("kharonctl").parent().expect("bin dir").to_owned();
    let script = workspace().join("contrib/dist-files.sh");
    let run = Command::new("bash").arg(&script).arg(&bin_dir).arg(&out).arg("/usr").envs(env.vars()).output();
    let run = run.expect("run dist-files.sh");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    for page in ["kharond.1", "kharonctl.1", "kharonctl-status.1", "kharonctl-clusters-shell.1"] {
        assert!(render(&out.join("man/man1").join(page)).contains("NAME"), "{page}");
    }
    for unit in ["kharond.service", "kharond.socket", "kharond-control.socket"] {
        let text = std::fs::read_to_string(out.join("systemd").join(unit)).expect("unit written");
        assert!(!text.contains('@') && !text.contains("SSH_AUTH_SOCK"), "{unit}:\n{text}");
        assert!(!text.contains("service-install;"), "{unit} keeps the per-user header:\n{text}");
    }
    let service = std::fs::read_to_string(out.join("systemd/kharond.service")).expect("service");
    assert!(service.lines().any(|l| l == "ExecStart=/usr/bin/kharond"), "{service}");
    assert!(service.contains("Type=notify") && service.contains("Requires=kharond.socket"), "{service}");

    // The zsh loader is copied as it is (packaging.rs types TABs into it).
    assert_eq!(
        std::fs::read(out.join("completions/_kharonctl")).expect("zsh loader"),
        std::fs::read(workspace().join("contrib/completions/_kharonctl")).expect("contrib loader")
    );
    // What bash-completion does with the installed loader: source it, then look for the function.
    let loader = out.join("completions/kharonctl.bash");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let bash = Command::new("bash")
        .arg("-c")
        .arg(format!("source '{}' && complete -p kharonctl", loader.display()))
        .env_clear()
        .envs(env.vars())
        .env("PATH", path)
        .output()
        .expect("run bash");
    let registered = String::from_utf8_lossy(&bash.stdout);
    assert!(
        bash.status.success() && registered.contains("-F"),
        "{registered}{}",
        String::from_utf8_lossy(&bash.stderr)
    );
    assert!(registered.trim_end().ends_with(" kharonctl"), "{registered}");
}

#[test]
fn dist_files_without_built_binaries_says_to_build_first() {
    let env = Env::new();
    let empty = env.path().join("no-binaries");
    std::fs::create_dir(&empty).expect("mkdir");
    let out = Command::new("bash")
        .arg(workspace().join("contrib/dist-files.sh"))
        .arg(&empty)
        .arg(env.path().join("dist"))
        .output()
        .expect("run dist-files.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("kharond is missing: build first"), "{stderr}");
    assert!(!env.path().join("dist").exists(), "wrote files before failing");
}
