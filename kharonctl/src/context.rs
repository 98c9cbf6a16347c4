//! What every subcommand gets: the merged settings (`shared::config`) and how to reach the daemon.

use kharon_shared::config::{Config, Overrides};

use crate::daemon::{self, Daemon};

pub struct Context {
    pub config: Config,
}

impl Context {
    pub fn load(overrides: &Overrides) -> Result<Self, kharon_shared::config::Error> {
        Ok(Self { config: Config::load(overrides)? })
    }

    pub async fn daemon(&self) -> Result<Daemon, daemon::Error> {
        Daemon::connect(&self.config.control_socket.value).await
    }
}

/// No Lieutenant URL in flags, environment or config file.
#[derive(Debug, thiserror::Error)]
#[error(
    "no Lieutenant API URL configured; pass --lieutenant-url, set LIEUTENANT_URL (or commodore's \
     COMMODORE_API_URL), or put lieutenant_url = \"https://…\" in {}",
    config_file.display()
)]
pub struct NoLieutenantUrl {
    config_file: std::path::PathBuf,
}

/// What the Lieutenant and login commands need beyond `Config`. The browser variables and
/// commodore's cache location are other programs' conventions, so they are read here, at the edge.
impl Context {
    pub fn lieutenant_url(&self) -> Result<&str, NoLieutenantUrl> {
        match &self.config.lieutenant_url {
            Some(s) => Ok(&s.value),
            None => Err(NoLieutenantUrl {
                config_file: self
                    .config
                    .file
                    .clone()
                    .or_else(|| kharon_shared::paths::config_file().ok())
                    .unwrap_or_else(|| "the config file".into()),
            }),
        }
    }

    pub fn oidc_overrides(&self) -> crate::oidc::Overrides {
        crate::oidc::Overrides {
            client_id: self.config.oidc_client.as_ref().map(|s| s.value.clone()),
            discovery_url: self.config.oidc_discovery_url.as_ref().map(|s| s.value.clone()),
        }
    }

    pub fn oidc_places(&self) -> crate::oidc::Places {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let xdg_cache = var("XDG_CACHE_HOME").map(std::path::PathBuf::from);
        let home = var("HOME").map(std::path::PathBuf::from);
        crate::oidc::Places {
            token_file: crate::oidc::store::path(&self.config.cache_dir.value),
            commodore_file: crate::oidc::store::commodore_path(xdg_cache.as_deref(), home.as_deref()),
            kharon_browser: var("KHARON_BROWSER"),
            browser: var("BROWSER"),
        }
    }
}
