//! kubectl's lock on a kubeconfig (docs/kubeconfig.md, "Sharing the file with kubectl"):
//! client-go takes `<file>.lock` around every read–modify–write of a kubeconfig
//! (`tools/clientcmd/config.go`, `ModifyConfig`; the lock is `lockFile` in
//! `tools/clientcmd/loader.go`: the file created with `O_CREATE|O_EXCL`, removed after, the
//! kubeconfig's parent directory created first when missing). kharonctl takes the same lock around
//! its own edits (`--merge`, `-o FILE`, `switch`), so that neither loses the other's change.
//!
//! The lock is the path as given (`~/.kube/config.lock`, even when `config` is a symbolic link),
//! as client-go names it. client-go does not wait: while kharonctl holds the lock, kubectl fails
//! with "…config.lock: file exists", and the user runs it again. kharonctl waits up to [`WAIT`]
//! (kubectl holds it for milliseconds), then fails naming the lock: one that stays is left over
//! from a client that was killed while holding it, which client-go never removes either.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// How long kharonctl waits for another client's lock on a kubeconfig.
pub const WAIT: Duration = Duration::from_secs(5);
/// How often it tries again meanwhile.
const RETRY: Duration = Duration::from_millis(50);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "kubeconfig {} is locked by {}, which has existed for {age} (still after waiting {}){holder}: kubectl \
         and other client-go programs create it while they change the file and remove it after. If none \
         of them is running, it is left over from one that was killed: remove {} and try again",
        path.display(),
        lock.display(),
        crate::duration::show(WAIT),
        lock.display()
    )]
    Busy { path: PathBuf, lock: PathBuf, age: String, holder: String },
    #[error("cannot create the lock {} of kubeconfig {}", lock.display(), path.display())]
    Create { path: PathBuf, lock: PathBuf, source: std::io::Error },
}

/// The lock file client-go uses for `kubeconfig`: its path with `.lock` appended.
pub fn lock_path(kubeconfig: &Path) -> PathBuf {
    let mut name = kubeconfig.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// A held lock; dropping it removes the lock file.
#[derive(Debug)]
pub struct KubeconfigLock {
    lock: PathBuf,
}

impl Drop for KubeconfigLock {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_file(&self.lock) {
            eprintln!(
                "kharonctl: warning: cannot remove the kubeconfig lock {} ({e}); kubectl refuses to change \
                 the kubeconfig until it is removed",
                self.lock.display()
            );
        }
    }
}

/// Takes the lock of `kubeconfig`, waiting up to [`WAIT`] for another client to release it.
pub fn acquire(kubeconfig: &Path) -> Result<KubeconfigLock, Error> {
    let lock = lock_path(kubeconfig);
    let failed = |source| Error::Create { path: kubeconfig.to_owned(), lock: lock.clone(), source };
    // As client-go does: the directory first (kharonctl's own files are private, hence 0700).
    if let Some(dir) = kubeconfig.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(failed)?;
    }
    let started = Instant::now();
    loop {
        match std::fs::File::options().write(true).create_new(true).mode(0o600).open(&lock) {
            Ok(mut file) => {
                // For whoever finds it: which program holds it. client-go only looks at its existence.
                let _ = writeln!(file, "kharonctl pid {}", std::process::id());
                return Ok(KubeconfigLock { lock });
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(failed(e)),
        }
        if started.elapsed() >= WAIT {
            return Err(busy(kubeconfig, &lock));
        }
        std::thread::sleep(RETRY);
    }
}

/// The lock is still there after [`WAIT`]: how old it is, and who wrote it when it says so.
fn busy(kubeconfig: &Path, lock: &Path) -> Error {
    let age = std::fs::metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .map_or_else(|| "an unknown time".to_owned(), |d| crate::output::age(d.as_secs()));
    let text = std::fs::read_to_string(lock).unwrap_or_default();
    let holder = match text.trim() {
        said if said.starts_with("kharonctl pid ") => format!(" ({})", kharon_common::text::Escaped(said)),
        _ => String::new(),
    };
    Error::Busy { path: kubeconfig.to_owned(), lock: lock.to_owned(), age, holder }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_is_client_gos_name_held_exclusively_and_removed_after() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("sub/config");
        assert_eq!(lock_path(&config), dir.path().join("sub/config.lock"));
        let held = acquire(&config).unwrap();
        assert!(dir.path().join("sub").is_dir(), "the directory is created first, as client-go does");
        let text = std::fs::read_to_string(lock_path(&config)).unwrap();
        assert_eq!(text, format!("kharonctl pid {}\n", std::process::id()));
        drop(held);
        assert!(!lock_path(&config).exists());
    }
}
