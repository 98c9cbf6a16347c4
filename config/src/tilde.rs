//! `~` in the paths users write: a leading `~/` stands for the home directory.

use std::path::{Path, PathBuf};

/// Expands a leading `~/` with the home directory, as users write it in config files.
pub fn expand_tilde(path: PathBuf, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path,
    }
}
