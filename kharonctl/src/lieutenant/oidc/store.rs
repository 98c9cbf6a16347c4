//! Our own token cache: `<cache dir>/tokens.json`, mode 0600, replaced atomically
//! ([`kharon_common::files::write_private`]): `{"version": 1, "entries": {"<api url>": Tokens}}`,
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
    /// What is wrong stays inside the sentence, before the advice, so the parse error is not a
    /// `source()` (a chain would print it after the advice).
    #[error(
        "{}; logging in again (`kharonctl login`) replaces it, `kharonctl logout` removes it",
        damage(path, cause)
    )]
    Corrupt { path: PathBuf, cause: serde_json::Error },
    #[error("cannot write token cache {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

impl Error {
    /// For an unreadable file: what is wrong with it, in one sentence without advice (callers that
    /// act on it say what they do instead).
    pub fn damage(&self) -> String {
        match self {
            Error::Corrupt { path, cause } => damage(path, cause),
            other => kharon_common::errors::chain(other),
        }
    }
}

/// What is wrong with a token cache that does not parse, as its owner can act on it: cut short
/// (an interrupted write, a full disk), not JSON, or JSON of another shape.
fn damage(path: &Path, cause: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let place = format!("line {}, column {}", cause.line(), cause.column());
    let what = match cause.classify() {
        Category::Eof => {
            format!("is cut short: its JSON ends at {place} (an interrupted write, or a full disk)")
        }
        Category::Syntax => format!("is not JSON ({cause})"),
        Category::Data | Category::Io => format!("is not a token cache this kharonctl reads ({cause})"),
    };
    format!("kharonctl's token cache {} {what}, so its tokens cannot be used", path.display())
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
        kharon_common::files::write_private(path, &bytes)
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
    fn a_damaged_token_file_is_named_with_what_is_wrong_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(dir.path());
        let mut file = TokenFile::default();
        file.put("https://api.example", tokens("a"));
        file.save(&path).unwrap();
        let whole = std::fs::read(&path).unwrap();
        std::fs::write(&path, &whole[..whole.len() / 2]).unwrap();
        let err = TokenFile::load(&path).unwrap_err();
        let text = err.to_string();
        let shown = path.display();
        assert!(
            text.starts_with(&format!(
                "kharonctl's token cache {shown} is cut short: its JSON ends at line "
            ))
        );
        assert!(
            text.contains("(an interrupted write, or a full disk), so its tokens cannot be used"),
            "{text}"
        );
        assert!(text.ends_with("`kharonctl login`) replaces it, `kharonctl logout` removes it"), "{text}");
        assert!(!err.damage().contains("logout"), "{}", err.damage());

        std::fs::write(&path, "{nope").unwrap();
        let text = TokenFile::load(&path).unwrap_err().to_string();
        assert!(text.contains(&format!("{shown} is not JSON (key must be a string")), "{text}");
        std::fs::write(&path, r#"{"version": 1, "entries": []}"#).unwrap();
        let text = TokenFile::load(&path).unwrap_err().to_string();
        assert!(text.contains("is not a token cache this kharonctl reads (invalid type"), "{text}");
    }
}
