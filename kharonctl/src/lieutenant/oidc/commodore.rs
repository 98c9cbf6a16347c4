//! Commodore's token cache (docs/lieutenant-and-oidc.md, "Commodore's token cache"): where it is,
//! the entry for a Lieutenant URL, and keeping that entry current when kharonctl logs in or
//! refreshes, so that one login serves both tools.
//!
//! Where: `commodore/token` in pyxdg's `xdg_cache_home` (commodore `commodore/tokencache.py`,
//! `cache_name`): `$XDG_CACHE_HOME` when set and not empty, else `$HOME/.cache`. pyxdg takes a
//! relative `XDG_CACHE_HOME` as it is, so commodore opens it relative to its working directory;
//! we do the same, to find the file commodore wrote.
//!
//! What: one JSON object keyed by the API URL exactly as commodore's user passed it; each value is
//! the token endpoint's answer as oauthlib parses it (`scope` a list, `expires_at` added as now
//! plus `expires_in`), the whole written by `json.dumps(cache, indent=1)` (`tokencache.save`).
//! Commodore reads back `id_token` and `refresh_token` only (`commodore/config.py`, `api_token`;
//! `commodore/login.py`, `refresh_tokens`). We look the URL up as given, then without and with a
//! trailing slash.
//!
//! Writing ([`keep_current`]): only a file that exists (kharonctl never creates commodore's
//! cache), and only one that is the JSON object commodore writes (anything else, a half-written
//! file too, is left alone). Every spelling of the URL that has an entry is replaced by the new
//! tokens, else the URL as given gets one; every other entry is written back byte for byte, in its
//! place. The file is replaced atomically, 0600 (commodore itself writes it in place with the
//! umask's mode); a symlink is followed, so a dotfile manager's link stays a link.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use indexmap::IndexMap;
use serde::Serialize;
use serde_json::value::RawValue;

use super::token::{Grant, Tokens};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read commodore's token cache {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "commodore's token cache {} is not the JSON object commodore writes, so it was left as it is",
        path.display()
    )]
    Foreign { path: PathBuf, source: serde_json::Error },
    #[error("cannot write commodore's token cache {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Commodore's token cache for these places (see the module doc); `None` without a home.
pub fn path(xdg_cache_home: Option<&Path>, home: Option<&Path>, cwd: Option<&Path>) -> Option<PathBuf> {
    let base = match xdg_cache_home.filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) if dir.is_absolute() => dir.to_path_buf(),
        Some(dir) => cwd?.join(dir),
        None => home?.join(".cache"),
    };
    Some(base.join("commodore").join("token"))
}

/// The spellings of `api_url` commodore may have keyed it by: as given, without and with a
/// trailing slash (without repeats).
fn spellings(api_url: &str) -> Vec<String> {
    let bare = api_url.trim_end_matches('/');
    let mut all = vec![api_url.to_owned()];
    for other in [bare.to_owned(), format!("{bare}/")] {
        if !all.contains(&other) {
            all.push(other);
        }
    }
    all
}

/// An entry of commodore's cache and the key it is under.
#[derive(Debug, Clone)]
pub struct Entry {
    pub key: String,
    pub tokens: Tokens,
}

/// The entry for `api_url` in commodore's cache file, if any and if it holds an `id_token`.
/// Unreadable or foreign content is no entry: the file belongs to commodore.
pub fn lookup(path: &Path, api_url: &str) -> Option<Entry> {
    let bytes = std::fs::read(path).ok()?;
    let all: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes).ok()?;
    spellings(api_url).into_iter().find_map(|key| {
        let tokens = serde_json::from_value::<Tokens>(all.get(&key)?.clone()).ok()?;
        Some(Entry { key, tokens })
    })
}

/// What [`keep_current`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// These keys hold the new tokens now.
    Updated { keys: Vec<String> },
    /// There is no commodore cache: nothing was written.
    NoCache,
}

/// A token response as oauthlib leaves it and commodore stores it (RFC 6749 §5.1 fields, `scope`
/// as a list, `expires_at` in whole seconds as oauthlib 3.2+ computes it, `parse_expires`).
#[derive(Serialize)]
struct Stored<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    access_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_in: Option<u64>,
    id_token: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    refresh_token: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<&'a [String]>,
    token_type: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<u64>,
}

/// One value of the file: another tool's entry as it was, or ours.
#[derive(Serialize)]
#[serde(untagged)]
enum Value<'a> {
    Kept(Box<RawValue>),
    New(&'a Stored<'a>),
}

/// Puts `grant` into commodore's cache at `path` for `api_url` (see the module doc for what is
/// written and what is left alone); `now` dates `expires_at`.
pub fn keep_current(path: &Path, api_url: &str, grant: &Grant, now: SystemTime) -> Result<Kept, Error> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            std::fs::canonicalize(path).map_err(|source| Error::Read { path: path.to_owned(), source })?
        }
        Ok(_) => path.to_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Kept::NoCache),
        Err(source) => return Err(Error::Read { path: path.to_owned(), source }),
    };
    let bytes = std::fs::read(&target).map_err(|source| Error::Read { path: path.to_owned(), source })?;
    let entries: IndexMap<String, Box<RawValue>> =
        serde_json::from_slice(&bytes).map_err(|source| Error::Foreign { path: path.to_owned(), source })?;

    let mut keys: Vec<String> = spellings(api_url).into_iter().filter(|k| entries.contains_key(k)).collect();
    if keys.is_empty() {
        keys.push(api_url.to_owned());
    }
    let tokens = &grant.tokens;
    let details = &grant.details;
    let secs = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    let stored = Stored {
        access_token: tokens.access_token.as_ref().map(|t| t.as_str()),
        expires_in: details.expires_in,
        id_token: tokens.id_token.as_str(),
        refresh_token: tokens.refresh_token.as_ref().map(|t| t.as_str()),
        scope: details.scope.as_deref(),
        token_type: if details.token_type.is_empty() { "Bearer" } else { &details.token_type },
        expires_at: details.expires_in.map(|e| secs.saturating_add(e)),
    };
    let mut file: IndexMap<String, Value<'_>> =
        entries.into_iter().map(|(key, raw)| (key, Value::Kept(raw))).collect();
    for key in &keys {
        // An existing key keeps its place (IndexMap::insert), a new one goes last, as in
        // commodore's dict.
        file.insert(key.clone(), Value::New(&stored));
    }

    let mut out = Vec::new();
    let mut serializer =
        serde_json::Serializer::with_formatter(&mut out, serde_json::ser::PrettyFormatter::with_indent(b" "));
    file.serialize(&mut serializer)
        .map_err(|e| Error::Write { path: path.to_owned(), source: std::io::Error::other(e) })?;
    kharon_common::files::write_private(&target, &out)
        .map_err(|source| Error::Write { path: path.to_owned(), source })?;
    Ok(Kept::Updated { keys })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lieutenant::oidc::token::Details;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    fn grant(id: &str) -> Grant {
        Grant {
            tokens: Tokens {
                id_token: id.into(),
                refresh_token: Some(format!("r-{id}").into()),
                access_token: Some(format!("a-{id}").into()),
            },
            details: Details {
                token_type: "Bearer".into(),
                expires_in: Some(300),
                scope: Some(vec!["openid".into(), "email".into(), "profile".into()]),
            },
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    /// A file as commodore's `json.dumps(cache, indent=1)` writes it, keys in insertion order.
    const COMMODORE_WROTE: &str = "{\n \"https://other.example\": {\n  \"id_token\": \"other-id\",\n  \
         \"session_state\": \"s\",\n  \"scope\": [\n   \"openid\"\n  ],\n  \"expires_at\": 1700000000.5\n },\n \
         \"https://syn.example/\": {\n  \"id_token\": \"old-id\",\n  \"refresh_token\": \"old-r\"\n },\n \
         \"https://zzz.example\": \"a string from an old commodore\"\n}";

    #[test]
    fn commodore_cache_is_found_with_or_without_trailing_slash() {
        let dir = tempfile::tempdir().unwrap();
        let path = path(Some(dir.path()), None, None).unwrap();
        assert_eq!(path, dir.path().join("commodore/token"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let body = serde_json::json!({
            "https://syn.example": {"id_token": "id-1", "refresh_token": "r-1", "expires_in": 300,
                                    "scope": ["openid"], "expires_at": 1.5e9},
            "https://other.example/": {"id_token": "id-2"},
            "https://old.example": "a string from an old commodore",
        });
        std::fs::write(&path, body.to_string()).unwrap();
        let found = lookup(&path, "https://syn.example").unwrap();
        assert_eq!(found.key, "https://syn.example");
        assert_eq!(
            (found.tokens.id_token.as_str(), found.tokens.refresh_token.as_deref()),
            ("id-1", Some("r-1"))
        );
        assert_eq!(lookup(&path, "https://syn.example/").unwrap().key, "https://syn.example");
        let other = lookup(&path, "https://other.example").unwrap();
        assert_eq!((other.key.as_str(), other.tokens.id_token.as_str()), ("https://other.example/", "id-2"));
        assert!(lookup(&path, "https://old.example").is_none());
        assert!(lookup(&path, "https://unknown.example").is_none());
        assert!(lookup(&dir.path().join("missing"), "https://syn.example").is_none());
    }

    #[test]
    fn commodore_path_is_pyxdgs_cache_home_relative_ones_from_the_working_directory() {
        let home = Path::new("/home/u");
        let cwd = Path::new("/work/project");
        assert_eq!(path(None, Some(home), Some(cwd)).unwrap(), home.join(".cache/commodore/token"));
        assert_eq!(
            path(Some(Path::new("")), Some(home), Some(cwd)).unwrap(),
            home.join(".cache/commodore/token")
        );
        assert_eq!(
            path(Some(Path::new("/var/cache/u")), Some(home), Some(cwd)).unwrap(),
            Path::new("/var/cache/u/commodore/token")
        );
        assert_eq!(
            path(Some(Path::new("relative/cache")), Some(home), Some(cwd)).unwrap(),
            Path::new("/work/project/relative/cache/commodore/token")
        );
        assert!(path(None, None, Some(cwd)).is_none());
        assert!(path(Some(Path::new("relative")), Some(home), None).is_none());
    }

    #[test]
    fn keeping_current_replaces_the_entry_and_writes_every_other_one_back_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, COMMODORE_WROTE).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();

        // The spelling commodore used (with the slash) is the one updated; no second key appears.
        let kept = keep_current(&file, "https://syn.example", &grant("new-id"), at(1_000)).unwrap();
        assert_eq!(kept, Kept::Updated { keys: vec!["https://syn.example/".into()] });
        let text = std::fs::read_to_string(&file).unwrap();
        let want = "{\n \"https://other.example\": {\n  \"id_token\": \"other-id\",\n  \
             \"session_state\": \"s\",\n  \"scope\": [\n   \"openid\"\n  ],\n  \"expires_at\": 1700000000.5\n },\n \
             \"https://syn.example/\": {\n  \"access_token\": \"a-new-id\",\n  \"expires_in\": 300,\n  \
             \"id_token\": \"new-id\",\n  \"refresh_token\": \"r-new-id\",\n  \"scope\": [\n   \"openid\",\n   \
             \"email\",\n   \"profile\"\n  ],\n  \"token_type\": \"Bearer\",\n  \"expires_at\": 1300\n },\n \
             \"https://zzz.example\": \"a string from an old commodore\"\n}";
        assert_eq!(text, want);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(lookup(&file, "https://syn.example").unwrap().tokens.id_token, "new-id");

        // A URL commodore has no entry for gets one, spelled as given, last.
        let kept = keep_current(&file, "http://127.0.0.1:1", &grant("third"), at(1_000)).unwrap();
        assert_eq!(kept, Kept::Updated { keys: vec!["http://127.0.0.1:1".into()] });
        let all: IndexMap<String, serde_json::Value> =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let keys: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["https://other.example", "https://syn.example/", "https://zzz.example", "http://127.0.0.1:1"]
        );
        // No temporary file is left beside it.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn no_commodore_cache_is_created_and_a_foreign_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("commodore/token");
        assert_eq!(keep_current(&file, "https://syn.example", &grant("x"), at(0)).unwrap(), Kept::NoCache);
        assert!(!dir.path().join("commodore").exists());

        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        // Half of what commodore writes (it writes in place), a list, and garbage.
        for foreign in ["{\n \"https://syn.example\": {\n  \"id_tok", "[1, 2]", "\u{0}\u{1}"] {
            std::fs::write(&file, foreign).unwrap();
            let err = keep_current(&file, "https://syn.example", &grant("x"), at(0)).unwrap_err();
            let shown = kharon_common::errors::chain(&err);
            assert!(shown.contains(&format!("commodore's token cache {}", file.display())), "{shown}");
            assert!(shown.contains("left as it is"), "{shown}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), foreign);
        }
    }

    #[test]
    fn a_symlinked_commodore_cache_stays_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("dotfiles-token");
        std::fs::write(&real, "{}").unwrap();
        let link = dir.path().join("token");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        keep_current(&link, "https://syn.example", &grant("x"), at(0)).unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(lookup(&real, "https://syn.example").unwrap().tokens.id_token, "x");
    }
}
