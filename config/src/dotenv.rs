//! commodore's `.env` as kharonctl hands it over ([`DotEnv`]); its variables count below the real
//! environment's (`Sources::lookup`).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The variables of a `.env` file, below the real environment (python-dotenv's `override=False`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DotEnv {
    /// The file they were read from.
    pub path: PathBuf,
    /// Every variable the file sets, its last assignment of each (as python-dotenv keeps it).
    pub vars: BTreeMap<String, String>,
}
