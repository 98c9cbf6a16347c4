//! The config file: which one is read, its schema ([`FileConfig`]), and reading it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use kharon_common::paths;
use kharon_common::secret::Secret;

use crate::env;
use crate::error::Error;
use crate::overrides::Overrides;
use crate::tilde::expand_tilde;

/// The config file's schema. Unknown keys are an error, so a typo never goes unnoticed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) listen: Option<String>,
    pub(crate) inventory: Option<PathBuf>,
    pub(crate) ssh_config: Option<PathBuf>,
    pub(crate) control_socket: Option<PathBuf>,
    pub(crate) cache_dir: Option<PathBuf>,
    pub(crate) handshake_timeout_secs: Option<u64>,
    pub(crate) connect_timeout_secs: Option<u64>,
    pub(crate) max_connections: Option<usize>,
    pub(crate) socks: Option<FileSocks>,
    pub(crate) lieutenant_url: Option<String>,
    pub(crate) oidc_client: Option<String>,
    pub(crate) oidc_discovery_url: Option<String>,
    pub(crate) passbolt_url: Option<String>,
    pub(crate) allow_other_users: Option<bool>,
    pub(crate) dynamic_domains: Option<Vec<String>>,
    pub(crate) ssh_window: Option<String>,
    pub(crate) answer_wait_secs: Option<u64>,
    pub(crate) reload_deadline_secs: Option<u64>,
    pub(crate) desktop_notifications: Option<bool>,
    pub(crate) provider_domains: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileSocks {
    pub(crate) username: Option<String>,
    pub(crate) password: Option<Secret>,
}

/// The config file: an explicit one (`--config`, `KHARON_CONFIG`) must exist; the default one
/// may be missing. Its path, if one was read, and what it says.
pub(crate) fn read_file(
    overrides: &Overrides,
    raw_env: &dyn Fn(&str) -> Option<String>,
    home: Option<&Path>,
) -> Result<(Option<PathBuf>, FileConfig), Error> {
    let (path, explicit) = match (&overrides.config, raw_env(env::CONFIG).filter(|v| !v.is_empty())) {
        (Some(p), _) => (expand_tilde(p.clone(), home), true),
        (None, Some(p)) => (expand_tilde(PathBuf::from(p), home), true),
        (None, None) => match paths::config_file() {
            Ok(path) => (path, false),
            Err(_) => return Ok((None, FileConfig::default())),
        },
    };
    match kharon_common::files::read_regular(&path) {
        Ok(bytes) => {
            let text = String::from_utf8(bytes).map_err(|e| Error::Read {
                path: path.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
            })?;
            let cfg: FileConfig = toml::from_str(&text)
                .map_err(|source| Error::Parse { path: path.clone(), source: Box::new(source) })?;
            Ok((Some(path), cfg))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => Ok((None, FileConfig::default())),
        Err(source) => Err(Error::Read { path, source }),
    }
}
