//! What every subcommand gets: the merged settings (`shared::config`) and how to reach the daemon.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use kharon_shared::config::{Config, Overrides, Source};

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

    /// The SOCKS address to hand to clients (a kubeconfig's `proxy-url`, the web login): where the
    /// running kharond listens, which a flag or another config may have moved away from what this
    /// process's settings say. When no daemon answers, the configured address, and a note on
    /// stderr saying so.
    pub async fn proxy_address(&self) -> SocketAddr {
        let why = match self.daemon().await {
            Ok(mut daemon) => match daemon.status().await {
                Ok(status) => match status.listen_address.parse::<SocketAddr>() {
                    Ok(addr) => return connectable(addr),
                    Err(_) => {
                        format!("kharond reports listen address {:?}, not IP:PORT", status.listen_address)
                    }
                },
                Err(e) => e.to_string(),
            },
            Err(e) => e.to_string(),
        };
        let listen = &self.config.listen;
        eprintln!(
            "kharonctl: {why}; using the configured listen address {} ({})",
            listen.value, listen.source
        );
        listen.value
    }
}

/// A listener on all addresses (possible with SOCKS auth) is reached on loopback.
pub fn connectable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port()),
        _ => addr,
    }
}

/// What the Lieutenant and login commands need beyond `Config`. The browser variables and
/// commodore's cache location are other programs' conventions, so they are read here, at the edge.
impl Context {
    /// The Lieutenant API URL: the configured one, else VSHN's production instance.
    pub fn lieutenant_url(&self) -> &str {
        &self.config.lieutenant_url.value
    }

    /// `e` (a failure talking to Lieutenant) plus, when nobody chose the URL, a line saying it is
    /// only the default and how to pick another one: a user of another Lieutenant may not know
    /// there is a default.
    pub fn with_lieutenant_hint(&self, e: anyhow::Error) -> anyhow::Error {
        let setting = &self.config.lieutenant_url;
        if setting.source != Source::Default {
            return e;
        }
        let file = self
            .config
            .file
            .clone()
            .or_else(|| kharon_shared::paths::config_file().ok())
            .unwrap_or_else(|| "the config file".into());
        anyhow::anyhow!(
            "{e:#}\n{} is the default Lieutenant; for another one pass --lieutenant-url, set \
             LIEUTENANT_URL (or commodore's COMMODORE_API_URL), or put lieutenant_url = \"https://…\" in {}",
            setting.value,
            file.display()
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_listener_is_reached_on_loopback() {
        let cases = [
            ("0.0.0.0:12000", "127.0.0.1:12000"),
            ("[::]:12000", "[::1]:12000"),
            ("127.0.0.2:1", "127.0.0.2:1"),
            ("[::1]:5", "[::1]:5"),
        ];
        for (listen, want) in cases {
            assert_eq!(connectable(listen.parse().unwrap()).to_string(), want, "{listen}");
        }
    }
}
