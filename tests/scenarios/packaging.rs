//! What packagers and releases rely on: the licence file, the changelog's order, the release
//! script making the tag the Homebrew formula and the Arch PKGBUILD build from (run in a throwaway
//! clone), the Homebrew formula's man page and completion steps, and the zsh completion loader
//! completing from the first TAB in a real zsh on a pty.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kharon_e2e::{Env, bin, wait_until};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `KEY = "VALUE"` of the `[workspace.package]` table of a checkout's Cargo.toml.
fn workspace_package(root: &Path, key: &str) -> String {
    let manifest = read(&root.join("Cargo.toml"));
    let table = manifest.split("[workspace.package]").nth(1).expect("[workspace.package]");
    let table = table.split("\n[").next().unwrap_or_default();
    table
        .lines()
        .find_map(|l| {
            l.strip_prefix(key)?.trim_start().strip_prefix('=')?.trim().strip_prefix('"')?.strip_suffix('"')
        })
        .unwrap_or_else(|| panic!("no {key} in [workspace.package]"))
        .to_owned()
}

fn workspace_version(root: &Path) -> String {
    workspace_package(root, "version")
}

/// The `## ` headings of a changelog, checked newest first: `Unreleased` on top, then releases
/// `MAJOR.MINOR.PATCH (YYYY-MM-DD)` with falling versions and dates that do not rise.
fn check_changelog(text: &str) -> Vec<String> {
    let headings: Vec<String> =
        text.lines().filter_map(|l| l.strip_prefix("## ")).map(str::to_owned).collect();
    assert_eq!(headings.first().map(String::as_str), Some("Unreleased"), "{headings:?}");
    let mut previous: Option<((u64, u64, u64), String)> = None;
    for heading in &headings[1..] {
        let (version, date) = heading
            .split_once(" (")
            .and_then(|(v, d)| Some((v, d.strip_suffix(')')?)))
            .unwrap_or_else(|| panic!("release heading {heading:?} is not 'VERSION (DATE)'"));
        let parts: Vec<u64> = version.split('.').map(|p| p.parse().expect("version number")).collect();
        let [major, minor, patch] = parts[..] else { panic!("{version} is not MAJOR.MINOR.PATCH") };
        assert!(date.len() == 10 && date.as_bytes()[4] == b'-', "{heading}: date is not YYYY-MM-DD");
        if let Some((newer, newer_date)) = &previous {
            assert!(
                (major, minor, patch) < *newer,
                "{heading} comes after a lower version: not newest first"
            );
            assert!(date <= newer_date.as_str(), "{heading} is dated after the release above it");
        }
        previous = Some(((major, minor, patch), date.to_owned()));
    }
    headings
}

#[test]
fn license_is_bsd_3_clause_held_by_the_kharon_authors() {
    let root = workspace();
    let license = read(&root.join("LICENSE"));
    let lines: Vec<&str> = license.lines().collect();
    assert_eq!(lines.first().copied(), Some("BSD 3-Clause License"));
    let holder = lines.iter().find(|l| l.starts_with("Copyright (c) ")).expect("a copyright line");
    let year = holder.trim_start_matches("Copyright (c) ").split(',').next().unwrap_or_default();
    assert!(year.len() == 4 && year.parse::<u32>().is_ok(), "{holder}");
    assert!(holder.ends_with(", The kharon authors"), "{holder}");
    // The three conditions, and the disclaimer, in the words of the SPDX text.
    let flat = license.split_whitespace().collect::<Vec<_>>().join(" ");
    for clause in [
        "1. Redistributions of source code must retain the above copyright notice",
        "2. Redistributions in binary form must reproduce the above copyright notice",
        "3. Neither the name of the copyright holder nor the names of its contributors may be used to endorse",
        "THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS \"AS IS\"",
    ] {
        assert!(flat.contains(clause), "LICENSE lacks {clause:?}");
    }
    assert_eq!(workspace_package(&root, "license"), "BSD-3-Clause");
}

#[test]
fn changelog_is_newest_first_and_the_formula_builds_the_current_version_tag() {
    let root = workspace();
    check_changelog(&read(&root.join("CHANGELOG.md")));
    let version = workspace_version(&root);
    let formula = read(&root.join("contrib/homebrew/kharon.rb"));
    assert!(
        formula.contains(&format!("tag: \"v{version}\"")),
        "formula does not build v{version}:\n{formula}"
    );
    let pkgbuild = read(&root.join("contrib/arch/PKGBUILD"));
    assert!(pkgbuild.lines().any(|l| l == format!("pkgver={version}")), "{pkgbuild}");
    assert!(pkgbuild.contains("#tag=v$pkgver"), "{pkgbuild}");
}

/// The Homebrew formula's install steps, run here as far as Linux can: each `system bin/"X", …, man1`
/// line with the built binary X and a Homebrew-shaped `share/man/man1`, and each
/// `*_completion.install` naming a loader that exists, into the folder Homebrew gives that shell.
#[test]
fn homebrew_formula_installs_man_pages_and_completion_loaders_where_homebrew_looks() {
    let root = workspace();
    let formula = read(&root.join("contrib/homebrew/kharon.rb"));
    let env = Env::new();
    let man1 = env.path().join("Cellar/kharon/share/man/man1");
    let quoted =
        |line: &str| -> Vec<String> { line.split('"').skip(1).step_by(2).map(str::to_owned).collect() };
    // `def install` up to its `end` (the `test do` block runs the binaries differently).
    let install: Vec<&str> = formula
        .lines()
        .skip_while(|l| l.trim() != "def install")
        .take_while(|l| l.trim_end() != "  end")
        .map(str::trim)
        .collect();
    assert!(!install.is_empty(), "no `def install` in\n{formula}");
    let mut ran = Vec::new();
    for line in &install {
        let Some(rest) = line.strip_prefix("system bin/") else { continue };
        assert!(rest.ends_with(", man1"), "a system line that does not write into man1: {line}");
        let words = quoted(rest);
        let (program, args) = words.split_first().expect("a program");
        let out = Command::new(bin(program)).args(args).arg(&man1).output().expect("run");
        assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
        ran.push(program.clone());
    }
    assert_eq!(ran, ["kharonctl", "kharond"], "{formula}");
    for page in ["kharonctl.1", "kharonctl-status.1", "kharond.1"] {
        assert!(man1.join(page).is_file(), "{page} not in {}", man1.display());
    }
    let installs: Vec<(String, Vec<String>)> = install
        .iter()
        .filter_map(|l| Some((l.split_once("_completion.install ")?.0.to_owned(), quoted(l))))
        .collect();
    assert_eq!(
        installs,
        [
            (
                "bash".to_owned(),
                vec!["contrib/completions/kharonctl.bash".to_owned(), "kharonctl".to_owned()]
            ),
            ("zsh".to_owned(), vec!["contrib/completions/_kharonctl".to_owned()]),
            ("fish".to_owned(), vec!["contrib/completions/kharonctl.fish".to_owned()]),
        ]
    );
    for (_, files) in &installs {
        let loader = read(&root.join(&files[0]));
        assert!(loader.contains("kharonctl completions"), "{}: {loader}", files[0]);
    }
    // macOS's /bin/bash 3.2 sources nothing from `source <(…)`: the bash loader must eval.
    let bash = read(&root.join("contrib/completions/kharonctl.bash"));
    assert!(bash.lines().any(|l| l == "eval \"$(kharonctl completions bash)\""), "{bash}");
}

/// A git command in `dir` as a release engineer would run it; panics with its output on failure.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").current_dir(dir).args(args).output().expect("run git");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn release(clone: &Path, version: &str) -> std::process::Output {
    Command::new("bash")
        .arg(clone.join("contrib/release.sh"))
        .arg(version)
        .current_dir(clone)
        .env("GIT_AUTHOR_NAME", "Release Test")
        .env("GIT_AUTHOR_EMAIL", "release@example.com")
        .env("GIT_COMMITTER_NAME", "Release Test")
        .env("GIT_COMMITTER_EMAIL", "release@example.com")
        .output()
        .expect("run release.sh")
}

#[test]
fn release_script_makes_the_tag_the_formula_and_pkgbuild_build_from() {
    let env = Env::new();
    let clone = env.path().join("repo");
    let source = workspace();
    git(env.path(), &["clone", "-q", "--no-local", source.to_str().unwrap(), clone.to_str().unwrap()]);

    // Bad input first: each refused with a reason, the clone untouched.
    let head = git(&clone, &["rev-parse", "HEAD"]);
    let out = release(&clone, "v1.0");
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage:"));
    std::fs::write(clone.join("README.md"), "edited\n").unwrap();
    let out = release(&clone, "9.9.9");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("uncommitted changes"));
    git(&clone, &["checkout", "-q", "README.md"]);
    assert_eq!(git(&clone, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&clone, &["status", "--porcelain"]), "");

    let out = release(&clone, "9.9.9");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("git push origin HEAD v9.9.9"));
    assert_eq!(git(&clone, &["tag", "--list", "v9.9.9"]).trim(), "v9.9.9");
    assert_eq!(git(&clone, &["cat-file", "-t", "v9.9.9"]).trim(), "tag", "not an annotated tag");
    assert_eq!(git(&clone, &["status", "--porcelain"]), "", "release.sh left changes uncommitted");
    // What the tag holds is what Homebrew and makepkg check out.
    let at = |file: &str| git(&clone, &["show", &format!("v9.9.9:{file}")]);
    assert!(at("contrib/homebrew/kharon.rb").contains("tag: \"v9.9.9\""));
    assert!(at("contrib/arch/PKGBUILD").lines().any(|l| l == "pkgver=9.9.9"));
    assert_eq!(workspace_version(&clone), "9.9.9");
    assert!(at("Cargo.lock").contains("name = \"kharonctl\"\nversion = \"9.9.9\""));
    let headings = check_changelog(&at("CHANGELOG.md"));
    assert_eq!(headings[0], "Unreleased");
    assert!(headings[1].starts_with("9.9.9 ("), "{headings:?}");
    // What was unreleased is now under the release; the new Unreleased section is empty.
    let changelog = at("CHANGELOG.md");
    let unreleased = changelog.split("## Unreleased").nth(1).and_then(|r| r.split("## 9.9.9").next());
    assert_eq!(unreleased.map(str::trim), Some(""), "{changelog}");

    let out = release(&clone, "9.9.9");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("tag v9.9.9 exists already"));
}

/// Types into an interactive zsh (on a pty from util-linux `script`) whose `$fpath` has only our
/// `_kharonctl` added and whose PATH finds the built kharonctl: the first TAB after `kharonctl sw`
/// must complete `switch`, and a later one `update`. Each line is then echoed back with a marker,
/// so what the shell's buffer held is read from a line of its own.
#[test]
fn zsh_loader_completes_from_the_first_tab() {
    let env = Env::new();
    let functions = env.path().join("site-functions");
    std::fs::create_dir_all(&functions).unwrap();
    std::fs::copy(workspace().join("contrib/completions/_kharonctl"), functions.join("_kharonctl")).unwrap();
    let zdotdir = env.path().join("zdotdir");
    env.write(
        "zdotdir/.zshrc",
        &format!(
            "fpath=({} $fpath)\nautoload -Uz compinit\ncompinit -u -d {}\nPS1='%% '\n",
            functions.display(),
            env.path().join("zcompdump").display()
        ),
    );
    let bin_dir = bin("kharonctl").parent().expect("bin dir").to_owned();
    let mut child = Command::new("script")
        .args(["-qfec", "zsh -i", "/dev/null"])
        .env_clear()
        .envs(env.vars())
        .env("PATH", format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default()))
        .env("ZDOTDIR", &zdotdir)
        .env("TERM", "dumb")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run script (util-linux) and zsh");
    let shown = Arc::new(Mutex::new(String::new()));
    // Ends at EOF, when script exits.
    let reader = kharon_e2e::collect_output(child.stdout.take().unwrap(), Arc::clone(&shown));
    let mut input = child.stdin.take().unwrap();
    let has_line = |want: &str| shown.lock().unwrap().split(['\r', '\n']).any(|l| l.trim() == want);
    let mut outcome = Vec::new();
    for (typed, marker, want) in [
        ("kharonctl sw", "FIRST:", "FIRST:kharonctl switch"),
        ("kharonctl upd", "LATER:", "LATER:kharonctl update"),
    ] {
        input.write_all(format!("{typed}\t").as_bytes()).unwrap();
        input.flush().unwrap();
        // The completion has landed when the shell redraws the completed word.
        let completed = typed.replace("sw", "switch").replace("upd", "update");
        wait_until(Duration::from_secs(20), || shown.lock().unwrap().contains(&completed));
        // Ctrl-A, then make the line print itself.
        input.write_all(format!("\x01echo {marker}\n").as_bytes()).unwrap();
        input.flush().unwrap();
        outcome.push((want, wait_until(Duration::from_secs(20), || has_line(want))));
    }
    let _ = input.write_all(b"exit\n");
    drop(input);
    let exited = wait_until(Duration::from_secs(20), || matches!(child.try_wait(), Ok(Some(_))));
    if !exited {
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = reader.join();
    let text = shown.lock().unwrap().clone();
    for (want, seen) in outcome {
        assert!(seen, "zsh never printed {want:?}; the terminal showed:\n{text}");
    }
    assert!(exited, "zsh did not exit:\n{text}");
}
