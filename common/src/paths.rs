//! Every on-disk location kharon uses, and the only caller of `directories`.
//!
//! Callers get plain paths; what goes into the files is someone else's business. Each location can
//! be overridden (flag, env or config) by the caller, so tests never depend on the real home.
//!
//! | what | Linux | macOS |
//! |---|---|---|
//! | config file | `$XDG_CONFIG_HOME/kharon/config.toml` | `~/Library/Application Support/ch.vshn.kharon/config.toml` |
//! | cache dir | `$XDG_CACHE_HOME/kharon` | `~/Library/Caches/ch.vshn.kharon` |
//! | control socket | `$XDG_RUNTIME_DIR/kharon/kharond.sock` | `~/Library/Application Support/ch.vshn.kharon/kharond.sock` |
//!
//! Without `XDG_RUNTIME_DIR` (sudo, cron, containers, plain ssh without logind) the socket falls
//! back to `$TMPDIR/kharon-<uid>/` (`/tmp` when `TMPDIR` is unset; docs/dependencies.md, "directories").
//!
//! macOS has no runtime directory. Its per-user `$TMPDIR` (`/var/folders/…/T`) is the wrong place
//! for a daemon's socket: the system's cleaner (`com.apple.bsd.dirhelper`) deletes what lies there
//! untouched for three days, and connecting to a socket touches nothing, so a daemon running for
//! a week would lose its socket. The socket goes beside the config file instead, which nothing
//! prunes; a home path so long that this exceeds `sun_path`'s 104 bytes falls back to
//! `/tmp/kharon-<uid>/` (checked like any socket folder: ours, not writable by others).
//! [`default_control_socket`] is that rule, pure, so both platforms' are tested anywhere.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// `sun_path` holds 108 bytes on Linux, including the terminating NUL.
pub const LINUX_MAX_SOCKET_PATH: usize = 107;
/// `sun_path` holds 104 bytes on macOS (`<sys/un.h>`), including the terminating NUL.
pub const MACOS_MAX_SOCKET_PATH: usize = 103;
/// The longest socket path this platform's `sun_path` holds.
#[cfg(target_os = "linux")]
pub const MAX_SOCKET_PATH: usize = LINUX_MAX_SOCKET_PATH;
#[cfg(not(target_os = "linux"))]
pub const MAX_SOCKET_PATH: usize = MACOS_MAX_SOCKET_PATH;

/// File name of the control socket inside the runtime directory.
pub const SOCKET_FILE: &str = "kharond.sock";
/// File name of the config file inside the config directory.
pub const CONFIG_FILE: &str = "config.toml";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot determine the home directory; set HOME")]
    NoHome,
    #[error(
        "control socket path {} is {len} bytes, longer than the {max} a Unix socket allows; \
         pass a shorter --control-socket",
        path.display(),
        max = MAX_SOCKET_PATH
    )]
    SocketPathTooLong { path: PathBuf, len: usize },
    #[error("cannot create directory {}", path.display())]
    CreateDir { path: PathBuf, source: std::io::Error },
    #[error("directory {} is owned by uid {owner}, not by us (uid {uid}); {act}{}", path.display(), act.advice(path))]
    NotOurs { path: PathBuf, owner: u32, uid: u32, act: Act },
    #[error("directory {} is writable by others (mode {mode:o}); {act}{}", path.display(), act.advice(path))]
    WorldWritable { path: PathBuf, mode: u32, act: Act },
    #[error(
        "{} is a symbolic link owned by uid {owner}, not by us (uid {uid}): its owner can point it \
         anywhere at any time; {act}. Remove it, or pass --control-socket (or set XDG_RUNTIME_DIR)",
        path.display()
    )]
    ForeignLink { path: PathBuf, owner: u32, uid: u32, act: Act },
    #[error(
        "control socket path {} is {kind}, not a socket; refusing to use or replace it. \
         Remove it yourself if it is a leftover, or pass a different --control-socket",
        path.display()
    )]
    NotASocket { path: PathBuf, kind: &'static str },
    #[error(
        "control socket {} belongs to {}, not to us (uid {uid}): its daemon is not ours to \
         talk to or replace. Pass the socket of your own kharond with --control-socket",
        path.display(),
        User::of(*owner)
    )]
    ForeignSocket { path: PathBuf, owner: u32, uid: u32 },
    /// The socket lies in a directory of another user that does not let us in (boxed: the
    /// other variants are small, and this error travels in every control call's `Result`).
    #[error(transparent)]
    Unreachable(Box<KeptOut>),
    #[error("cannot inspect control socket {}", path.display())]
    Inspect { path: PathBuf, source: std::io::Error },
}

/// A control socket in a directory of another user that does not let us in.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot reach control socket {}: it lies in directory {} of {owner}, which does not let you \
     in (mode {mode:o}; you are {me}). It is that user's kharond, not yours, and kharonctl talks only \
     to a kharond of your own user: start yours (`kharonctl service-install`, or `kharond`) and use \
     its socket (`kharonctl config` shows where this path came from: --control-socket, \
     KHARON_CONTROL_SOCKET, the config file or XDG_RUNTIME_DIR), or run kharonctl as {owner}",
    path.display(),
    dir.display()
)]
pub struct KeptOut {
    pub path: PathBuf,
    pub dir: PathBuf,
    pub owner: User,
    pub me: User,
    pub mode: u32,
}

/// What a socket directory is checked for, which the refusal names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// kharond, about to create its control socket there.
    Serve,
    /// kharonctl, about to connect to the control socket there.
    Connect,
}

impl std::fmt::Display for Act {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Act::Serve => "refusing to put a control socket there",
            Act::Connect => "refusing to talk to the control socket there",
        })
    }
}

impl Act {
    /// What to do about a socket directory that stopped being private while kharond ran.
    fn advice(self, dir: &Path) -> String {
        match self {
            Act::Serve => String::new(),
            Act::Connect => format!(
                ": whoever owns it, or may write to it, can swap kharond's socket for one of their own. \
                 kharond checked it when it started, so it was changed since: make it yours and private \
                 again (`chown \"$(id -u)\" {0} && chmod 700 {0}`), then restart kharond",
                dir.display()
            ),
        }
    }
}

/// A local user as messages name one: `uid 1000 (alice)`, the name from the user database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub uid: u32,
    pub name: Option<String>,
}

impl User {
    pub fn of(uid: u32) -> Self {
        Self { uid, name: user_name(uid) }
    }
}

impl std::fmt::Display for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "uid {} ({})", self.uid, crate::text::Escaped(name)),
            None => write!(f, "uid {}", self.uid),
        }
    }
}

/// The login name of `uid` from the user database (getpwuid_r(3)), if it has one.
pub fn user_name(uid: u32) -> Option<String> {
    let user = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)).ok()??;
    Some(user.name)
}

fn project_dirs() -> Result<directories::ProjectDirs, Error> {
    directories::ProjectDirs::from("ch", "vshn", "kharon").ok_or(Error::NoHome)
}

/// The effective user id, for the per-user socket fallback and ownership checks.
pub fn uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Default config file path (it need not exist).
pub fn config_file() -> Result<PathBuf, Error> {
    Ok(project_dirs()?.config_dir().join(CONFIG_FILE))
}

/// Default cache directory (inventory cache, tokens, per-cluster kubeconfigs).
pub fn cache_dir() -> Result<PathBuf, Error> {
    Ok(project_dirs()?.cache_dir().to_path_buf())
}

/// Default control socket path.
pub fn control_socket() -> Result<PathBuf, Error> {
    let dirs = project_dirs()?;
    let tmpdir = std::env::var_os("TMPDIR").filter(|v| !v.is_empty()).map(PathBuf::from);
    Ok(default_control_socket(&SocketPlaces {
        macos: cfg!(target_os = "macos"),
        runtime_dir: dirs.runtime_dir(),
        tmpdir: tmpdir.as_deref(),
        config_dir: dirs.config_dir(),
        uid: uid(),
    }))
}

/// What the default control socket path is made of.
#[derive(Debug, Clone, Copy)]
pub struct SocketPlaces<'a> {
    /// Whether to follow macOS's rule rather than Linux's.
    pub macos: bool,
    /// `$XDG_RUNTIME_DIR/kharon` (Linux, when set).
    pub runtime_dir: Option<&'a Path>,
    /// `$TMPDIR`, when set and not empty.
    pub tmpdir: Option<&'a Path>,
    /// The config file's folder.
    pub config_dir: &'a Path,
    pub uid: u32,
}

/// The default control socket (see the module doc): Linux, in the runtime directory, else in
/// `kharon-<uid>` in `$TMPDIR` or `/tmp`; macOS, beside the config file, else (too long for
/// `sun_path`) in `/tmp/kharon-<uid>`.
pub fn default_control_socket(places: &SocketPlaces<'_>) -> PathBuf {
    let private_tmp = |tmp: &Path| tmp.join(format!("kharon-{}", places.uid)).join(SOCKET_FILE);
    if places.macos {
        let beside_config = places.config_dir.join(SOCKET_FILE);
        if beside_config.as_os_str().len() <= MACOS_MAX_SOCKET_PATH {
            return beside_config;
        }
        return private_tmp(Path::new("/tmp"));
    }
    match places.runtime_dir {
        Some(dir) => dir.join(SOCKET_FILE),
        None => private_tmp(places.tmpdir.unwrap_or(Path::new("/tmp"))),
    }
}

/// Checks that a socket path fits into `sun_path`.
pub fn check_socket_path(path: &Path) -> Result<(), Error> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(Error::SocketPathTooLong { path: path.to_owned(), len });
    }
    Ok(())
}

/// Creates the socket's parent directory `0700` if missing, then refuses a directory that is
/// not ours or that others can write to (someone could swap our socket for theirs).
///
/// The path itself is looked at too (lstat): in a shared folder such as `/tmp` (the fallback
/// `$TMPDIR/kharon-<uid>` without `XDG_RUNTIME_DIR`) another user can plant a symbolic link by
/// that name, pointing at a directory of ours today and at one of theirs tomorrow. A link of
/// another user is refused; a link of our own is followed and its target checked as below.
pub fn prepare_private_dir(dir: &Path) -> Result<(), Error> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| Error::CreateDir { path: dir.to_owned(), source })?;
        // `recursive` applies the mode to every level it creates, but umask may have narrowed it.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|source| Error::CreateDir { path: dir.to_owned(), source })?;
    }
    // After creating, not before: a link planted between the two would otherwise pass.
    check_private_dir(dir, Act::Serve)
}

/// kharonctl's check before it connects: the socket's directory is still what kharond made sure
/// of at start (ours, not writable by others, no link of another user), so nobody can have swapped
/// the socket since. A directory that does not exist, or that we cannot look at, passes here:
/// [`check_own_socket`] then says that nothing runs there, or whose it is.
pub fn check_socket_dir(dir: &Path) -> Result<(), Error> {
    check_private_dir(dir, Act::Connect)
}

/// `dir` is no link of another user (looked at first, as a link), and what it names is ours and
/// not writable by group or others.
fn check_private_dir(dir: &Path, act: Act) -> Result<(), Error> {
    let me = uid();
    match std::fs::symlink_metadata(dir) {
        Ok(link) if link.file_type().is_symlink() && link.uid() != me => {
            return Err(Error::ForeignLink { path: dir.to_owned(), owner: link.uid(), uid: me, act });
        }
        _ => {}
    }
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e)
            if act == Act::Connect
                && matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                ) =>
        {
            return Ok(());
        }
        Err(source) if act == Act::Serve => return Err(Error::CreateDir { path: dir.to_owned(), source }),
        Err(source) => return Err(Error::Inspect { path: dir.to_owned(), source }),
    };
    if meta.uid() != me {
        return Err(Error::NotOurs { path: dir.to_owned(), owner: meta.uid(), uid: me, act });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(Error::WorldWritable { path: dir.to_owned(), mode, act });
    }
    Ok(())
}

/// Whether a control socket of ours stands at `path`: `Ok(false)` when nothing does, an error
/// when something else does (a file, a directory, a symlink, a FIFO, another user's socket).
/// kharond replaces only a stale socket of ours; kharonctl talks only to a socket of ours, since
/// another user's daemon could answer with lies or collect our requests.
///
/// The path itself is checked, not what a symlink points to: replacing a symlink would delete
/// the link (harmless) but following it elsewhere is how a path gets hijacked.
pub fn check_own_socket(path: &Path) -> Result<bool, Error> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(source) if source.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(kept_out(path, source));
        }
        Err(source) => return Err(Error::Inspect { path: path.to_owned(), source }),
    };
    if !meta.file_type().is_socket() {
        return Err(Error::NotASocket { path: path.to_owned(), kind: crate::files::kind(meta.file_type()) });
    }
    let me = uid();
    if meta.uid() != me {
        return Err(Error::ForeignSocket { path: path.to_owned(), owner: meta.uid(), uid: me });
    }
    Ok(true)
}

/// The socket at `path` cannot even be looked at: the directory that keeps us out is the deepest
/// one above it we can look at. Another user's is named with its owner; one of our own (a mode
/// we changed ourselves) leaves the plain error.
fn kept_out(path: &Path, source: std::io::Error) -> Error {
    let me = uid();
    let blocking = path.ancestors().skip(1).find_map(|dir| std::fs::metadata(dir).ok().map(|m| (dir, m)));
    match blocking {
        Some((dir, meta)) if meta.uid() != me => Error::Unreachable(Box::new(KeptOut {
            path: path.to_owned(),
            dir: dir.to_owned(),
            owner: User::of(meta.uid()),
            me: User::of(me),
            mode: meta.mode() & 0o7777,
        })),
        _ => Error::Inspect { path: path.to_owned(), source },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_socket_path_is_refused_with_its_length() {
        let long = PathBuf::from(format!("/tmp/{}/kharond.sock", "x".repeat(120)));
        let err = check_socket_path(&long).unwrap_err().to_string();
        assert!(err.contains("longer than"), "{err}");
        assert!(err.contains("--control-socket"), "{err}");
        check_socket_path(Path::new("/run/user/1000/kharon/kharond.sock")).unwrap();
    }

    fn places<'a>(macos: bool, runtime_dir: Option<&'a Path>, config_dir: &'a Path) -> SocketPlaces<'a> {
        let tmpdir = Some(Path::new("/var/folders/5d/q8hk1m1d0b52lmfn62lw0t1h0000gn/T"));
        SocketPlaces { macos, runtime_dir, tmpdir, config_dir, uid: 501 }
    }

    #[test]
    fn macos_socket_goes_beside_the_config_file_never_into_tmpdir() {
        let config = Path::new("/Users/me/Library/Application Support/ch.vshn.kharon");
        let socket = default_control_socket(&places(true, None, config));
        assert_eq!(socket, config.join("kharond.sock"));
        // A home path that pushes it past sun_path's 104 bytes: a short private folder instead.
        let long = format!("/Users/{}/Library/Application Support/ch.vshn.kharon", "n".repeat(41));
        let socket = default_control_socket(&places(true, None, Path::new(&long)));
        assert_eq!(socket, Path::new("/tmp/kharon-501/kharond.sock"));
        // Right at the limit still fits: 103 bytes of path and the NUL.
        let at_limit = format!("/Users/{}/Library/Application Support/ch.vshn.kharon", "n".repeat(40));
        let socket = default_control_socket(&places(true, None, Path::new(&at_limit)));
        assert_eq!(socket.as_os_str().len(), MACOS_MAX_SOCKET_PATH);
        assert!(socket.starts_with("/Users/"));
    }

    #[test]
    fn linux_socket_goes_into_the_runtime_dir_else_a_private_tmp_folder() {
        let config = Path::new("/home/me/.config/kharon");
        let runtime = Path::new("/run/user/1000/kharon");
        let socket = default_control_socket(&places(false, Some(runtime), config));
        assert_eq!(socket, runtime.join("kharond.sock"));
        let socket = default_control_socket(&places(false, None, config));
        assert_eq!(
            socket,
            Path::new("/var/folders/5d/q8hk1m1d0b52lmfn62lw0t1h0000gn/T/kharon-501/kharond.sock")
        );
        let no_tmpdir = SocketPlaces { tmpdir: None, ..places(false, None, config) };
        assert_eq!(default_control_socket(&no_tmpdir), Path::new("/tmp/kharon-501/kharond.sock"));
    }

    #[test]
    fn only_a_socket_of_ours_counts_as_a_control_socket() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("kharond.sock");
        assert!(!check_own_socket(&path).unwrap());

        let _listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(check_own_socket(&path).unwrap());

        let file = tmp.path().join("file");
        std::fs::write(&file, b"keep me").unwrap();
        let err = check_own_socket(&file).unwrap_err().to_string();
        assert!(err.contains("is a regular file, not a socket"), "{err}");
        assert!(err.contains("--control-socket"), "{err}");

        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        let err = check_own_socket(&link).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link, not a socket"), "{err}");

        let err = check_own_socket(tmp.path()).unwrap_err().to_string();
        assert!(err.contains("is a directory, not a socket"), "{err}");
    }

    #[test]
    fn private_dir_is_created_0700_and_group_writable_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        prepare_private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);

        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = prepare_private_dir(&open).unwrap_err().to_string();
        assert!(err.contains("writable by others"), "{err}");

        // A link of our own to a private directory of ours is followed.
        let own_link = tmp.path().join("own-link");
        std::os::unix::fs::symlink(&dir, &own_link).unwrap();
        prepare_private_dir(&own_link).unwrap();
    }

    /// Without XDG_RUNTIME_DIR the socket folder is `$TMPDIR/kharon-<uid>`, where another
    /// user may plant a link to a directory of ours; it is refused for who owns the link.
    #[test]
    fn a_symlink_of_another_user_is_refused_even_when_it_points_at_our_directory() {
        assert_eq!(uid(), 0, "planting a link as another user (lchown) needs root; the suite runs as root");
        let tmp = tempfile::tempdir().unwrap();
        let ours = tmp.path().join("ours");
        prepare_private_dir(&ours).unwrap();
        let planted = tmp.path().join("kharon-0");
        std::os::unix::fs::symlink(&ours, &planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(65534), Some(65534)).unwrap();
        let err = prepare_private_dir(&planted).unwrap_err().to_string();
        assert!(err.contains("is a symbolic link owned by uid 65534, not by us (uid 0)"), "{err}");
        assert!(err.contains("--control-socket"), "{err}");
        let err = check_socket_dir(&planted).unwrap_err().to_string();
        assert!(err.contains("refusing to talk to the control socket there"), "{err}");
    }

    #[test]
    fn kharonctl_refuses_a_socket_directory_that_stopped_being_private() {
        assert_eq!(uid(), 0, "giving a directory away (chown) needs root; the suite runs as root");
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("kharon");
        check_socket_dir(&dir).unwrap();
        prepare_private_dir(&dir).unwrap();
        check_socket_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = check_socket_dir(&dir).unwrap_err().to_string();
        assert!(
            err.contains("is writable by others (mode 777); refusing to talk to the control socket"),
            "{err}"
        );
        assert!(err.contains(&format!("chmod 700 {}", dir.display())), "{err}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let err = check_socket_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("is owned by uid 65534, not by us (uid 0); refusing to talk"), "{err}");
        assert!(err.contains("then restart kharond"), "{err}");
    }

    #[test]
    fn users_are_named_from_the_user_database() {
        assert_eq!(User::of(0).to_string(), "uid 0 (root)");
        assert_eq!(user_name(0).as_deref(), Some("root"));
        // An id no entry has: the number alone.
        assert_eq!(User::of(3_999_999_999).to_string(), "uid 3999999999");
    }
}
