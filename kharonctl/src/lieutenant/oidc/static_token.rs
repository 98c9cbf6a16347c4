//! commodore's static Lieutenant token, `COMMODORE_API_TOKEN` (docs/lieutenant-and-oidc.md, "A
//! static token"), read as commodore reads it (commodore `commodore/config.py`, the `api_token`
//! property and its setter):
//!
//! - a value that names an existing file stands for that file's content (`Path(value).is_file()`,
//!   relative to the working directory), so a CI secret mounted as a file works as is;
//! - surrounding whitespace is dropped (`.strip()`), a trailing newline of that file included;
//! - a JWT whose `exp` is within 10 s is not used (the same margin as for cached tokens): commodore
//!   then goes on to its token cache and login, and so does kharonctl; a token that is not a JWT,
//!   or has no `exp`, counts as long-lived.
//!
//! A usable one is sent as it is: no cache is consulted, no login started, nothing written; a 401
//! for it is the end (commodore's `lieutenant_query` raises too). An empty one counts as unset.

use std::path::{Path, PathBuf};

use kharon_common::Secret;

use super::choice::{Cached, Origin};
use super::token::Tokens;

/// The setting as configured: the value and where it came from (`COMMODORE_API_TOKEN`, or that
/// variable in a `.env` file).
#[derive(Debug, Clone)]
pub struct Given {
    pub value: Secret,
    pub from: String,
}

/// Why a static token cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the token file {} that {from} names", path.display())]
pub struct Unreadable {
    pub path: PathBuf,
    pub from: String,
    pub source: std::io::Error,
}

/// The token `given` stands for, as a cache entry of its own origin; `None` when it is empty.
pub fn resolve(given: &Given) -> Result<Option<Cached>, Unreadable> {
    let raw = given.value.as_str();
    let path = Path::new(raw);
    let (text, file) = if path.is_file() {
        let bytes = kharon_common::files::read_regular(path).map_err(|source| Unreadable {
            path: path.to_owned(),
            from: given.from.clone(),
            source,
        })?;
        (Secret::new(String::from_utf8_lossy(&bytes).into_owned()), Some(path.to_owned()))
    } else {
        (given.value.clone(), None)
    };
    let token = text.as_str().trim();
    if token.is_empty() {
        return Ok(None);
    }
    let tokens = Tokens { id_token: Secret::new(token.to_owned()), refresh_token: None, access_token: None };
    Ok(Some(Cached { tokens, origin: Origin::Static { from: given.from.clone(), file } }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(value: &str) -> Given {
        Given { value: Secret::new(value.to_owned()), from: "COMMODORE_API_TOKEN".into() }
    }

    #[test]
    fn the_value_is_the_token_or_names_a_file_holding_it() {
        let found = resolve(&given("  static-token\n")).unwrap().unwrap();
        assert_eq!(found.tokens.id_token.as_str(), "static-token");
        assert_eq!(found.origin.to_string(), "COMMODORE_API_TOKEN");

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-a-file\n").unwrap();
        let found = resolve(&given(file.to_str().unwrap())).unwrap().unwrap();
        assert_eq!(found.tokens.id_token.as_str(), "from-a-file");
        assert_eq!(
            found.origin.to_string(),
            format!("the file {} that COMMODORE_API_TOKEN names", file.display())
        );

        // A directory is no file: the value is the token, as commodore takes it.
        let found = resolve(&given(dir.path().to_str().unwrap())).unwrap().unwrap();
        assert_eq!(found.tokens.id_token.as_str(), dir.path().to_str().unwrap());
        // A name too long for a path is a token too.
        assert!(resolve(&given(&"x".repeat(5000))).unwrap().is_some());

        std::fs::write(&file, " \n").unwrap();
        assert!(resolve(&given(file.to_str().unwrap())).unwrap().is_none());
        assert!(resolve(&given("   ")).unwrap().is_none());
    }
}
