//! The version string both binaries report: the package version plus the git commit the build
//! came from, e.g. `0.1.0 (3f2c1a9b7d4e)`, `0.1.0 (3f2c1a9b7d4e-dirty)`, or
//! `0.1.0 (not built from a git checkout)` for a crates tarball. Used by `build.rs`, and by the
//! library's unit tests, which run it against real repositories made with `git`.
//!
//! `-dirty` means a tracked file differed from HEAD when the build script ran. So that it stays
//! true, the script is rerun when HEAD or the branch moves and, while the tree is clean, when any
//! tracked file changes. Once the tree is dirty only HEAD is watched: a further edit cannot make
//! it cleaner, and rerunning on every edit would rebuild every crate that uses kharon-common.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Characters of the commit hash, as `git rev-parse --short=12` prints them.
pub const HASH_LEN: usize = 12;

/// What the build knows about its commit, and the files whose change makes that stale.
#[derive(Debug)]
pub struct BuildInfo {
    /// What goes between the parentheses after the package version.
    pub commit: String,
    /// Existing files to pass to `cargo:rerun-if-changed`.
    pub watch: Vec<PathBuf>,
}

/// Describes the checkout `dir` (a package directory) is in. Never fails: a build from a tarball,
/// or without git installed, says so in the version instead.
pub fn describe(dir: &Path) -> BuildInfo {
    match try_describe(dir) {
        Ok(Some(info)) => info,
        Ok(None) => BuildInfo { commit: "not built from a git checkout".into(), watch: Vec::new() },
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            BuildInfo { commit: "commit unknown: git is not installed".into(), watch: Vec::new() }
        }
        Err(e) => BuildInfo { commit: format!("commit unknown: running git failed: {e}"), watch: Vec::new() },
    }
}

/// `Ok(None)`: `dir` is not part of a git checkout's tracked files (an unpacked crate inside some
/// unrelated repository must not report that repository's commit).
fn try_describe(dir: &Path) -> io::Result<Option<BuildInfo>> {
    if git(dir, &["ls-files", "--error-unmatch", "--", "Cargo.toml"])?.is_none() {
        return Ok(None);
    }
    let Some(hash) = git(dir, &["rev-parse", &format!("--short={HASH_LEN}"), "HEAD"])? else {
        return Ok(None);
    };
    // --no-optional-locks: status would otherwise rewrite the index, which other tools watch.
    let status = git(dir, &["--no-optional-locks", "status", "--porcelain", "--untracked-files=no"])?;
    let dirty = status.is_none_or(|s| !s.is_empty());

    // Paths from --git-path are relative to `dir` or absolute; in a worktree HEAD and logs/HEAD are
    // the worktree's own, refs and packed-refs the main repository's.
    let mut git_paths = vec!["HEAD".to_owned(), "logs/HEAD".to_owned(), "packed-refs".to_owned()];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"])? {
        git_paths.push(branch);
    }
    let mut args = vec!["rev-parse".to_owned()];
    for path in &git_paths {
        args.extend(["--git-path".to_owned(), path.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut watch: Vec<PathBuf> = git(dir, &args)?.unwrap_or_default().lines().map(|p| dir.join(p)).collect();
    if !dirty && let Some(top) = git(dir, &["rev-parse", "--show-toplevel"])? {
        let top = PathBuf::from(top);
        let files = git_raw(dir, &["ls-files", "-z", "--full-name", ":/"])?.unwrap_or_default();
        watch.extend(files.split('\0').filter(|f| !f.is_empty()).map(|f| top.join(f)));
    }
    // cargo reruns a build script on every build while a watched path is missing.
    watch.retain(|p| p.exists());
    let commit = if dirty { format!("{hash}-dirty") } else { hash };
    Ok(Some(BuildInfo { commit, watch }))
}

/// Runs git in `dir`: `Ok(Some(trimmed stdout))` on success, `Ok(None)` when git says no.
fn git(dir: &Path, args: &[&str]) -> io::Result<Option<String>> {
    Ok(git_raw(dir, args)?.map(|out| out.trim().to_owned()))
}

fn git_raw(dir: &Path, args: &[&str]) -> io::Result<Option<String>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        // A GIT_DIR from a hook or wrapper would point git at another repository.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()?;
    Ok(out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs git for a test, with an identity so commits work on a bare CI machine.
    fn run(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=kharon test", "-c", "user.email=test@example.org"])
            .args(["-c", "init.defaultBranch=main"])
            .args(args)
            .output()
            .expect("run git");
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
    }

    /// A repository holding a package (`pkg/Cargo.toml`) and a file outside it, one commit.
    fn repo() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().expect("temp dir");
        let pkg = tmp.path().join("pkg");
        std::fs::create_dir(&pkg).expect("mkdir");
        std::fs::write(pkg.join("Cargo.toml"), "[package]\n").expect("write");
        std::fs::write(tmp.path().join("README.md"), "hello\n").expect("write");
        run(tmp.path(), &["init", "-q"]);
        run(tmp.path(), &["add", "."]);
        run(tmp.path(), &["commit", "-q", "-m", "first"]);
        (tmp, pkg)
    }

    fn short_head(dir: &Path) -> String {
        run(dir, &["rev-parse", &format!("--short={HASH_LEN}"), "HEAD"])
    }

    #[test]
    fn clean_tree_reports_the_commit_and_watches_head_branch_and_tracked_files() {
        let (tmp, pkg) = repo();
        let info = describe(&pkg);
        assert_eq!(info.commit, short_head(&pkg));
        assert_eq!(info.commit.len(), HASH_LEN);
        let git = tmp.path().join(".git");
        let canon: Vec<PathBuf> =
            info.watch.iter().map(|p| p.canonicalize().expect("watched path exists")).collect();
        let has = |p: PathBuf| canon.contains(&p.canonicalize().expect("expected path exists"));
        assert!(has(git.join("HEAD")), "{canon:?}");
        assert!(has(git.join("logs/HEAD")), "{canon:?}");
        assert!(has(git.join("refs/heads/main")), "{canon:?}");
        // A file outside the package counts too: the whole tree must be clean.
        assert!(has(tmp.path().join("README.md")), "{canon:?}");
        assert!(has(pkg.join("Cargo.toml")), "{canon:?}");
    }

    #[test]
    fn an_edit_anywhere_in_the_tree_makes_it_dirty_and_only_head_is_watched() {
        let (tmp, pkg) = repo();
        std::fs::write(tmp.path().join("README.md"), "changed\n").expect("write");
        let info = describe(&pkg);
        assert_eq!(info.commit, format!("{}-dirty", short_head(&pkg)));
        assert!(info.watch.iter().any(|p| p.ends_with("HEAD")), "{:?}", info.watch);
        assert!(!info.watch.iter().any(|p| p.ends_with("README.md")), "{:?}", info.watch);
    }

    #[test]
    fn untracked_files_do_not_make_it_dirty() {
        let (tmp, pkg) = repo();
        std::fs::write(tmp.path().join("notes.txt"), "scratch\n").expect("write");
        std::fs::create_dir(pkg.join("target")).expect("mkdir");
        assert_eq!(describe(&pkg).commit, short_head(&pkg));
    }

    #[test]
    fn a_commit_moves_the_reported_hash() {
        let (tmp, pkg) = repo();
        let before = describe(&pkg).commit;
        std::fs::write(tmp.path().join("README.md"), "second\n").expect("write");
        run(tmp.path(), &["commit", "-q", "-am", "second"]);
        let after = describe(&pkg).commit;
        assert_ne!(before, after);
        assert_eq!(after, short_head(&pkg));
    }

    #[test]
    fn a_directory_outside_any_checkout_says_so() {
        let tmp = tempfile::tempdir().expect("temp dir");
        std::fs::write(tmp.path().join("Cargo.toml"), "[package]\n").expect("write");
        let info = describe(tmp.path());
        assert_eq!(info.commit, "not built from a git checkout");
        assert!(info.watch.is_empty());
    }

    #[test]
    fn an_unpacked_crate_inside_an_unrelated_repository_does_not_take_its_commit() {
        let (tmp, _pkg) = repo();
        let unpacked = tmp.path().join("vendor/kharon-common-0.1.0");
        std::fs::create_dir_all(&unpacked).expect("mkdir");
        std::fs::write(unpacked.join("Cargo.toml"), "[package]\n").expect("write");
        assert_eq!(describe(&unpacked).commit, "not built from a git checkout");
    }

    #[test]
    fn a_worktree_reports_its_own_head_and_watches_its_own_head_file() {
        let (tmp, pkg) = repo();
        let wt = tmp.path().join("wt");
        run(tmp.path(), &["worktree", "add", "-q", "-b", "side", wt.to_str().expect("utf-8 path")]);
        std::fs::write(wt.join("README.md"), "on the side\n").expect("write");
        run(&wt, &["commit", "-q", "-am", "side"]);
        let info = describe(&wt.join("pkg"));
        assert_eq!(info.commit, short_head(&wt));
        assert_ne!(info.commit, describe(&pkg).commit);
        // In a worktree .git is a file; HEAD lives in the main repository's worktrees/ folder
        // and the branch under its refs/.
        let git = tmp.path().join(".git");
        let canon: Vec<PathBuf> = info.watch.iter().map(|p| p.canonicalize().expect("exists")).collect();
        let head = git.join("worktrees/wt/HEAD").canonicalize().expect("worktree HEAD");
        let branch = git.join("refs/heads/side").canonicalize().expect("branch ref");
        assert!(canon.contains(&head), "{canon:?}");
        assert!(canon.contains(&branch), "{canon:?}");
    }
}
