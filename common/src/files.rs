//! Reading and writing the files kharon keeps or a user (or a compromised inventory) names.
//!
//! - [`read_regular`] never blocks on a FIFO or a device, and [`kind`] names a file type for error
//!   messages.
//! - [`write_atomic`] (and [`write_private`], mode 0600) replaces a file so that a reader sees the
//!   old one or the new one, never half of one, and so that it survives a crash: a temp file
//!   `.kharon-XXXXXX.tmp` beside the target, written, flushed to disk, renamed over the target, and
//!   then the directory flushed too (the rename is an entry of the directory: without it, a power
//!   loss may bring back the old file or none, as fsync(2) says under "NOTES").
//! - A writer that is killed between creating its temp file and the rename leaves the temp file
//!   behind. The next write into the same directory removes such leftovers of ours
//!   ([`remove_stale_temps`]), never a live writer's: a writer holds an exclusive `flock` on its
//!   temp file until the rename, the kernel drops it when the writer dies, and a leftover must
//!   also be older than [`STALE_TEMP_AGE`] and belong to our user.

use std::fs::FileType;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How our temp files are named: `.kharon-` and six random letters or digits (tempfile's
/// default), then `.tmp`.
const TEMP_PREFIX: &str = ".kharon-";
const TEMP_SUFFIX: &str = ".tmp";
const TEMP_RANDOM_LEN: usize = 6;

/// A temp file of ours that no writer holds is a dead writer's once it is this old. A writer takes
/// its lock a moment after creating the file (microseconds) and writes in milliseconds; a minute
/// covers both many times over.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

/// "a FIFO", "a directory", …: what a path is, for "X is not a regular file (it is a FIFO)".
pub fn kind(file_type: FileType) -> &'static str {
    if file_type.is_file() {
        "a regular file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_socket() {
        "a socket"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else {
        "not a file"
    }
}

/// Reads the whole file at `path`, refusing anything but a regular file (symlinks to one are
/// fine). Opening a FIFO for reading blocks until a writer appears, and reading a device may never
/// end; so the file is opened non-blocking and its type checked on the open descriptor, which
/// also leaves no window for the path to be swapped between the check and the read.
///
/// A refusal is an [`std::io::ErrorKind::InvalidInput`] error reading "not a regular file (it is
/// a FIFO)"; callers add the path as they do for every other read error.
pub fn read_regular(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if !meta.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("not a regular file (it is {})", kind(meta.file_type())),
        ));
    }
    // O_NONBLOCK has no effect on regular files, so the read below is an ordinary one.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Replaces `path` with `bytes` atomically with mode 0600 (see the module doc): for every file that
/// must never be readable by others, not even for a moment (the inventory and token caches,
/// kubeconfigs). A missing directory is created 0700.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomic(path, bytes, 0o600)
}

/// [`write_private`] for files others may read (`mode`, e.g. 0644 for service units and man
/// pages). A missing directory is created 0700, or 0755 when the file itself is readable by others.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.exists() {
        let dir_mode = if mode & 0o044 != 0 { 0o755 } else { 0o700 };
        std::fs::DirBuilder::new().recursive(true).mode(dir_mode).create(dir)?;
    }
    // Tidying up is no reason to fail the write: a leftover that cannot be removed stays.
    let _ = remove_stale_temps(dir, SystemTime::now());
    // tempfile creates its files 0600 on Unix; widen only after the content is complete.
    let mut tmp = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .rand_bytes(TEMP_RANDOM_LEN)
        .suffix(TEMP_SUFFIX)
        .tempfile_in(dir)?;
    // Held until the file is renamed and closed: a live temp file is never taken for a leftover.
    tmp.as_file().lock()?;
    tmp.write_all(bytes)?;
    if mode != 0o600 {
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    sync_dir(dir)
}

/// Flushes `dir`'s entries (a rename into it) to disk. A file system that cannot flush a
/// directory says so with `EINVAL` (fsync(2)); there is nothing more to do then.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let handle = std::fs::File::open(dir)?;
    match handle.sync_all() {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        other => other,
    }
}

/// Whether `name` is one of our temp files' names (`.kharon-XXXXXX.tmp`).
fn is_temp_name(name: &str) -> bool {
    name.strip_prefix(TEMP_PREFIX).and_then(|rest| rest.strip_suffix(TEMP_SUFFIX)).is_some_and(|random| {
        random.len() == TEMP_RANDOM_LEN && random.bytes().all(|b| b.is_ascii_alphanumeric())
    })
}

/// Removes the temp files a killed writer of ours left in `dir` (see the module doc): named as
/// ours, a regular file of our user, unchanged for [`STALE_TEMP_AGE`] before `now`, and not locked
/// by a writer. Anything else, a live writer's temp file above all, stays. Returns how many it
/// removed.
pub fn remove_stale_temps(dir: &Path, now: SystemTime) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_temp_name) {
            continue;
        }
        if remove_if_stale(&entry.path(), now).unwrap_or(false) {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Our effective user id (`paths::uid` too; repeated here so that `files` needs nothing of `paths`,
/// which uses `files`).
fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Removes the temp file at `path` if it is a dead writer's; whether it did.
fn remove_if_stale(path: &Path, now: SystemTime) -> std::io::Result<bool> {
    // No symlink is followed, no FIFO blocks the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    let old_enough = meta.modified().ok().and_then(|m| now.duration_since(m).ok());
    if !meta.file_type().is_file()
        || meta.uid() != effective_uid()
        || old_enough.is_none_or(|age| age < STALE_TEMP_AGE)
    {
        return Ok(false);
    }
    // A live writer holds the lock; a dead one's was dropped with its process.
    if file.try_lock().is_err() {
        return Ok(false);
    }
    // Still the file that was checked, not one that took its name since.
    let now_there = std::fs::symlink_metadata(path)?;
    if (now_there.dev(), now_there.ino()) != (meta.dev(), meta.ino()) {
        return Ok(false);
    }
    std::fs::remove_file(path)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_and_a_symlink_to_one_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"content").unwrap();
        assert_eq!(read_regular(&file).unwrap(), b"content");
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&link).unwrap(), b"content");
    }

    #[test]
    fn a_fifo_is_refused_at_once_instead_of_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
        // Without a writer, a blocking open would never return; the test would hang, not fail.
        let err = read_regular(&fifo).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(err.to_string(), "not a regular file (it is a FIFO)");
    }

    #[test]
    fn a_directory_and_a_device_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_regular(dir.path()).unwrap_err().to_string();
        assert_eq!(err, "not a regular file (it is a directory)");
        let err = read_regular(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(err, "not a regular file (it is a character device)");
        let missing = read_regular(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
    }

    /// A temp file as a writer of ours names it, `age` old.
    fn temp(dir: &Path, random: &str, age: Duration) -> std::path::PathBuf {
        let path = dir.join(format!("{TEMP_PREFIX}{random}{TEMP_SUFFIX}"));
        std::fs::write(&path, b"half of a file").unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        path
    }

    #[test]
    fn only_our_names_count_as_temp_files() {
        assert!(is_temp_name(".kharon-a1B2c3.tmp"));
        for other in [".kharon-a1B2c.tmp", ".kharon-a1B2c34.tmp", ".kharon-a1/2c3.tmp", "kharon-a1B2c3.tmp"] {
            assert!(!is_temp_name(other), "{other}");
        }
        assert!(!is_temp_name(".kharon-a1B2c3.tmp~") && !is_temp_name("inventory.json"));
    }

    #[test]
    fn a_dead_writers_leftover_goes_and_everything_else_stays() {
        let dir = tempfile::tempdir().unwrap();
        let hour = Duration::from_secs(3600);
        let dead = temp(dir.path(), "dead01", hour);
        let fresh = temp(dir.path(), "fresh1", Duration::ZERO);
        // A live writer: its lock is held while the file is as old as a dead one's.
        let live = temp(dir.path(), "live01", hour);
        let held = std::fs::File::open(&live).unwrap();
        held.lock().unwrap();
        let not_ours = dir.path().join(".kharon-other.txt");
        std::fs::write(&not_ours, b"x").unwrap();
        let link = dir.path().join(".kharon-link01.tmp");
        std::os::unix::fs::symlink(&not_ours, &link).unwrap();

        assert_eq!(remove_stale_temps(dir.path(), SystemTime::now()).unwrap(), 1);
        assert!(!dead.exists(), "the dead writer's temp file stays");
        for kept in [&fresh, &live, &not_ours] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(std::fs::symlink_metadata(&link).is_ok(), "a symbolic link was removed");

        // Once its writer is gone, the live one is a leftover too. The lock belongs to the open
        // file, and a process another test spawns meanwhile holds a copy of every descriptor
        // until its exec closes them: the lock may outlive `held` by that long.
        drop(held);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let mut removed = 0;
        while removed == 0 && std::time::Instant::now() < deadline {
            removed = remove_stale_temps(dir.path(), SystemTime::now()).unwrap();
            if removed == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        assert_eq!(removed, 1);
        assert!(!live.exists());
    }

    #[test]
    fn another_users_temp_file_stays() {
        assert_eq!(effective_uid(), 0, "giving a file away (chown) needs root; the suite runs as root");
        let dir = tempfile::tempdir().unwrap();
        let theirs = temp(dir.path(), "theirs", Duration::from_secs(3600));
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        assert_eq!(remove_stale_temps(dir.path(), SystemTime::now()).unwrap(), 0);
        assert!(theirs.exists());
    }

    #[test]
    fn a_write_replaces_the_file_and_removes_a_dead_writers_leftover() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub/file.json");
        write_private(&target, b"one").unwrap();
        let dead = temp(target.parent().unwrap(), "dead02", Duration::from_secs(3600));
        write_atomic(&target, b"two", 0o644).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert!(!dead.exists(), "the leftover stays");
        let names: Vec<_> = std::fs::read_dir(target.parent().unwrap()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o644);
    }
}
