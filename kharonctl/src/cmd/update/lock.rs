//! One `kharonctl update` at a time per cache directory: a shell's update beside a timer's must not
//! interleave, or the later rename wins while the other still reports what it wrote and reloaded.
//!
//! The lock is `update.lock` in the cache directory, held with an exclusive `flock(2)` from before
//! the old cache is read until kharond has reloaded the new one. The kernel drops a `flock` when
//! its holder exits, however it exits, so a killed update never leaves the next one waiting; the
//! file itself stays (removing it would let two updates lock two different files). While held, it
//! names the holder's pid and start time, for the message of the update that waits.
//!
//! A second update waits for the first, up to `--wait` (default [`DEFAULT_WAIT`]), saying so once
//! on stderr, and then runs on the cache the first one wrote; past that, or at once with
//! `--wait 0`, it fails naming the holder, having fetched and written nothing.

use std::fs::{File, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// File name of the lock inside the cache directory.
pub const FILE_NAME: &str = "update.lock";
/// How long an update waits for another one by default, as `--wait` takes it. An update takes
/// seconds; one that logs in waits for a person, up to its `--login-timeout`.
pub const DEFAULT_WAIT: &str = "1m";
/// How often a waiting update tries the lock again.
const RETRY: Duration = Duration::from_millis(100);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot open the update lock {}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error(
        "another `kharonctl update` ({holder}) holds {}{}; this update fetched and wrote nothing. \
         Let it finish (or stop it), then run `kharonctl update` again{}",
        path.display(),
        waited_for(*waited),
        if waited.is_zero() { " (without --wait 0 it waits for the other one)" } else { "; --wait 5m waits longer" }
    )]
    Busy { path: PathBuf, holder: Holder, waited: Duration },
}

fn waited_for(waited: Duration) -> String {
    if waited.is_zero() { String::new() } else { format!(" still after {}", crate::duration::show(waited)) }
}

/// Who holds the lock, as its file says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Holder {
    pub pid: Option<u32>,
    /// Unix seconds.
    pub since: Option<u64>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pid {
            Some(pid) => write!(f, "pid {pid}")?,
            None => f.write_str("its pid not written yet")?,
        }
        if let Some(since) = self.since {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(since);
            write!(
                f,
                ", running since {} ({} ago)",
                kharon_common::time::rfc3339(since),
                crate::output::age(now.saturating_sub(since))
            )?;
        }
        Ok(())
    }
}

impl Holder {
    /// What a lock file holds: `pid unix-seconds`; anything else (a holder that has not written
    /// yet) is unknown.
    fn parse(text: &str) -> Self {
        let mut words = text.split_whitespace().map(str::parse::<u64>);
        let pid = words.next().and_then(Result::ok).and_then(|p| u32::try_from(p).ok());
        let since = words.next().and_then(Result::ok);
        Self { pid, since }
    }
}

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct UpdateLock {
    _file: File,
}

/// Takes the update lock of `cache_dir` (creating the directory 0700 and the file 0600 when
/// missing), waiting up to `wait` for another update to finish.
pub async fn acquire(cache_dir: &Path, wait: Duration) -> Result<UpdateLock, Error> {
    let path = cache_dir.join(FILE_NAME);
    let mut file = open(&path).map_err(|source| Error::Open { path: path.clone(), source })?;
    let started = Instant::now();
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => {
                claim(&mut file).map_err(|source| Error::Open { path: path.clone(), source })?;
                return Ok(UpdateLock { _file: file });
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(source)) => return Err(Error::Open { path, source }),
        }
        let holder = holder(&mut file);
        if started.elapsed() >= wait {
            return Err(Error::Busy { path, holder, waited: wait });
        }
        if !said {
            eprintln!(
                "waiting for another `kharonctl update` ({holder}) to finish (up to {}, --wait)…",
                crate::duration::show(wait)
            );
            said = true;
        }
        tokio::time::sleep(RETRY.min(wait.saturating_sub(started.elapsed()))).await;
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Writes our pid and the time into the lock we now hold.
fn claim(file: &mut File) -> std::io::Result<()> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(format!("{} {now}\n", std::process::id()).as_bytes())
}

/// Who holds the lock, as far as its file says.
fn holder(file: &mut File) -> Holder {
    let mut text = String::new();
    if file.rewind().is_err() || file.read_to_string(&mut text).is_err() {
        return Holder::default();
    }
    Holder::parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_holder_is_read_from_the_file_and_unknown_when_it_is_not_written_yet() {
        assert_eq!(
            Holder::parse("4242 1700000000\n"),
            Holder { pid: Some(4242), since: Some(1_700_000_000) }
        );
        assert_eq!(Holder::parse(""), Holder::default());
        assert_eq!(Holder::parse("x y"), Holder::default());
        let shown = Holder { pid: Some(7), since: Some(1_767_225_600) }.to_string();
        assert!(shown.starts_with("pid 7, running since 2026-01-01T00:00:00Z ("), "{shown}");
        assert_eq!(Holder::default().to_string(), "its pid not written yet");
    }

    #[tokio::test]
    async fn a_second_lock_waits_its_time_then_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = acquire(dir.path(), Duration::ZERO).await.unwrap();
        let err = acquire(dir.path(), Duration::ZERO).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains(&format!("(pid {}, running since ", std::process::id())), "{text}");
        assert!(text.contains("fetched and wrote nothing"), "{text}");
        let started = Instant::now();
        let err = acquire(dir.path(), Duration::from_millis(300)).await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
        assert!(err.to_string().contains("still after 300ms"), "{err}");
        // Released by dropping (or by the holder's exit): the next one gets it at once.
        drop(first);
        let again = acquire(dir.path(), Duration::ZERO).await;
        assert!(again.is_ok(), "{again:?}");
    }
}
