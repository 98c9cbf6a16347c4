//! Our own token cache: `<cache dir>/tokens.json`, mode 0600, replaced atomically
//! ([`kharon_shared::files::write_private`]): `{"version": 1, "entries": {"<api url>": Tokens}}`,
//! keyed by the Lieutenant URL without a trailing slash. Commodore's cache is [`super::commodore`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::token::Tokens;

/// File name of our token cache inside the cache directory.
pub const FILE_NAME: &str = "tokens.json";
const VERSION: u32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read token cache {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The parse error stays inside the sentence, before the advice, so it is not a `source()`
    /// (a chain would print it after the advice).
    #[error("token cache {} is corrupt ({cause}); `kharonctl logout` removes it", path.display())]
    Corrupt { path: PathBuf, cause: serde_json::Error },
    #[error("cannot write token cache {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Our token cache file, in memory.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct TokenFile {
    version: u32,
    entries: BTreeMap<String, Tokens>,
}

/// The cache key for a Lieutenant URL: the URL without trailing slashes.
pub fn key(api_url: &str) -> &str {
    api_url.trim_end_matches('/')
}

/// Our token cache inside `cache_dir`.
pub fn path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(FILE_NAME)
}

impl TokenFile {
    /// Reads the file; a missing one is empty.
    pub fn load(path: &Path) -> Result<Self, Error> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|cause| Error::Corrupt { path: path.to_owned(), cause }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(Error::Read { path: path.to_owned(), source }),
        }
    }

    pub fn save(&mut self, path: &Path) -> Result<(), Error> {
        self.version = VERSION;
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Write { path: path.to_owned(), source: std::io::Error::other(e) })?;
        kharon_shared::files::write_private(path, &bytes)
            .map_err(|source| Error::Write { path: path.to_owned(), source })
    }

    pub fn get(&self, api_url: &str) -> Option<&Tokens> {
        self.entries.get(key(api_url))
    }

    pub fn put(&mut self, api_url: &str, tokens: Tokens) {
        self.entries.insert(key(api_url).to_owned(), tokens);
    }

    /// Removes the entry for `api_url`; whether there was one.
    pub fn remove(&mut self, api_url: &str) -> bool {
        self.entries.remove(key(api_url)).is_some()
    }

    /// The API URLs with cached tokens.
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tokens(id: &str) -> Tokens {
        Tokens { id_token: id.into(), refresh_token: Some(format!("r-{id}").into()), access_token: None }
    }

    #[test]
    fn token_file_round_trips_0600_and_ignores_trailing_slashes() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        let mut file = TokenFile::load(&path).unwrap();
        assert_eq!(file.urls().count(), 0);
        file.put("https://api.example/", tokens("a"));
        file.save(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let mut file = TokenFile::load(&path).unwrap();
        assert_eq!(file.get("https://api.example").unwrap().id_token, "a");
        assert!(file.remove("https://api.example/"));
        assert!(!file.remove("https://api.example/"));
    }

    #[test]
    fn corrupt_token_file_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        std::fs::write(&path, "{nope").unwrap();
        let err = TokenFile::load(&path).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()) && err.contains("logout"), "{err}");
    }
}
