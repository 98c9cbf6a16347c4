//! Where the user's Passbolt private key comes from, and where it is kept (docs/emergency-credentials.md).
//!
//! In order: our own file (`passbolt_key` in kharon's config dir, 0600), the legacy
//! `emergency-credentials-receive` config (`passbolt_key` in its `config.yaml`, found the way that
//! tool finds it), `KHARON_PASSBOLT_KEY`, and last a paste on standard input. Only a pasted key is
//! stored, and only after a successful login: a key from the environment is the script's to keep
//! (Go kharon writing it to disk is one of its listed flaws), the legacy file is already on disk.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The environment variable holding the armored key for scripts.
pub const KEY_ENV: &str = "KHARON_PASSBOLT_KEY";
/// Our file name inside kharon's config directory.
pub const FILE_NAME: &str = "passbolt_key";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the Passbolt key {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("legacy config {} is not YAML with a passbolt_key: {reason}", path.display())]
    Legacy { path: PathBuf, reason: String },
    #[error("cannot store the Passbolt key in {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Where a key came from (for messages, and to know whether to store it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Stored(PathBuf),
    Legacy(PathBuf),
    Env,
    Pasted,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Stored(p) => write!(f, "{}", p.display()),
            Origin::Legacy(p) => write!(f, "{} (emergency-credentials-receive)", p.display()),
            Origin::Env => write!(f, "env {KEY_ENV}"),
            Origin::Pasted => f.write_str("standard input"),
        }
    }
}

/// The files a key may be read from.
#[derive(Debug, Clone)]
pub struct Places {
    pub own: PathBuf,
    pub legacy: Option<PathBuf>,
}

impl Places {
    /// Our file beside kharon's config file; the legacy one by `EMR_CONFIG_DIR`, then
    /// `$XDG_CONFIG_HOME`, then `~/.config` (emergency-credentials-receive's order).
    pub fn new(config_dir: &Path, getenv: &dyn Fn(&str) -> Option<String>) -> Self {
        let legacy_dir = getenv("EMR_CONFIG_DIR").map(PathBuf::from).or_else(|| {
            getenv("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| getenv("HOME").map(|h| Path::new(&h).join(".config")))
                .map(|base| base.join("emergency-credentials-receive"))
        });
        Self { own: config_dir.join(FILE_NAME), legacy: legacy_dir.map(|d| d.join("config.yaml")) }
    }
}

#[derive(Deserialize)]
struct LegacyConfig {
    #[serde(default)]
    passbolt_key: Option<String>,
}

/// A key found without asking, or `None` (then the caller asks for a paste).
pub fn find(
    places: &Places,
    getenv: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(String, Origin)>, Error> {
    if let Some(text) = read_if_exists(&places.own)?
        && !text.trim().is_empty()
    {
        return Ok(Some((text, Origin::Stored(places.own.clone()))));
    }
    if let Some(path) = &places.legacy
        && let Some(text) = read_if_exists(path)?
    {
        let legacy: LegacyConfig = serde_norway::from_str(&text)
            .map_err(|e| Error::Legacy { path: path.clone(), reason: e.to_string() })?;
        if let Some(key) = legacy.passbolt_key.filter(|k| !k.trim().is_empty()) {
            return Ok(Some((key, Origin::Legacy(path.clone()))));
        }
    }
    Ok(getenv(KEY_ENV).filter(|k| !k.trim().is_empty()).map(|k| (k, Origin::Env)))
}

fn read_if_exists(path: &Path) -> Result<Option<String>, Error> {
    // read_regular: the legacy path comes from the environment, and a FIFO there must not hang us.
    let read = kharon_common::files::read_regular(path).and_then(|bytes| {
        String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    });
    match read {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Read { path: path.to_owned(), source }),
    }
}

/// Stores `armored` as our key file: atomically, 0600, its directory 0700 when created.
pub fn store(path: &Path, armored: &str) -> Result<(), Error> {
    let mut text = armored.trim().to_owned();
    text.push('\n');
    kharon_common::files::write_private(path, text.as_bytes())
        .map_err(|source| Error::Write { path: path.to_owned(), source })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn own_file_then_legacy_then_env() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().display().to_string();
        let e = env(&[("HOME", &home), (KEY_ENV, "from-env")]);
        let places = Places::new(&dir.path().join("kharon"), &e);
        assert_eq!(
            places.legacy.as_deref(),
            Some(dir.path().join(".config/emergency-credentials-receive/config.yaml").as_path())
        );
        assert_eq!(find(&places, &e).unwrap(), Some(("from-env".into(), Origin::Env)));

        let legacy = places.legacy.clone().unwrap();
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        std::fs::write(&legacy, "passbolt_key: |\n  -----BEGIN PGP PRIVATE KEY BLOCK-----\n").unwrap();
        let (key, origin) = find(&places, &e).unwrap().unwrap();
        assert!(key.starts_with("-----BEGIN PGP PRIVATE KEY BLOCK-----"), "{key}");
        assert_eq!(origin, Origin::Legacy(legacy.clone()));

        store(&places.own, "own-key").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&places.own).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(
            find(&places, &e).unwrap(),
            Some(("own-key\n".into(), Origin::Stored(places.own.clone())))
        );

        std::fs::write(&legacy, "[not: a map").unwrap();
        std::fs::remove_file(&places.own).unwrap();
        assert!(find(&places, &e).unwrap_err().to_string().contains(&legacy.display().to_string()));
    }

    #[test]
    fn emr_config_dir_wins_for_the_legacy_file() {
        let e = env(&[("EMR_CONFIG_DIR", "/emr"), ("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")]);
        assert_eq!(Places::new(Path::new("/c"), &e).legacy.unwrap(), Path::new("/emr/config.yaml"));
        let e = env(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")]);
        let legacy = Places::new(Path::new("/c"), &e).legacy.unwrap();
        assert_eq!(legacy, Path::new("/xdg/emergency-credentials-receive/config.yaml"));
    }
}
