//! What every subcommand gets: the merged settings (`kharon_config`) and how to reach the daemon.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use kharon_config::{Config, Overrides, SocksAuth, Source};
use kharon_proto::v1 as pb;

use crate::daemon::{self, Daemon};

pub struct Context {
    pub config: Config,
}

impl Context {
    /// The settings, with commodore's `.env` (found from the working directory) below the real
    /// environment; what is wrong with that file is a warning on stderr.
    pub fn load(overrides: &Overrides) -> Result<Self, kharon_config::Error> {
        let disabled = crate::dotenv::disabled(std::env::var("PYTHON_DOTENV_DISABLED").ok().as_deref());
        let found = match std::env::current_dir() {
            Ok(cwd) => crate::dotenv::load(&cwd, disabled),
            // No working directory (it was removed): no .env to look for (commodore would stop).
            Err(_) => crate::dotenv::Found::default(),
        };
        for warning in &found.warnings {
            eprintln!("kharonctl: warning: {}", kharon_common::errors::shown(warning));
        }
        Ok(Self { config: Config::load_with_dotenv(overrides, found.dotenv.as_ref())? })
    }

    pub async fn daemon(&self) -> Result<Daemon, daemon::Error> {
        Daemon::connect(&self.config.control_socket.value).await
    }

    /// kharond's SOCKS listener as clients are to reach it (a kubeconfig's `proxy-url`, the web
    /// login): where the running kharond listens, which a flag or another config may have moved
    /// away from what this process's settings say, with the username and password it requires.
    /// When no daemon answers, the configured address and credentials, and a note on stderr
    /// saying so.
    pub async fn proxy(&self) -> Proxy {
        let why = match self.daemon().await {
            Ok(mut daemon) => match daemon.status().await {
                Ok(status) => match self.proxy_of(&status) {
                    Ok(proxy) => return proxy,
                    Err(e) => e,
                },
                Err(e) => kharon_common::errors::chain(&e),
            },
            Err(e) => kharon_common::errors::chain(&e),
        };
        let listen = &self.config.listen;
        eprintln!(
            "kharonctl: {why}; using the configured listen address {} ({})",
            listen.value, listen.source
        );
        Proxy { addr: listen.value, auth: self.config.socks_auth.as_ref().map(|s| s.value.clone()) }
    }

    /// The listener of the kharond that answered `status`, reached on loopback when it listens on
    /// all addresses. The credentials are never sent over the control socket: they come from this
    /// process's own settings, the config file kharond reads too (`--config`, `KHARON_CONFIG`, or
    /// the default path), and only when kharond says it requires them; when it does and these
    /// settings have none, a warning on stderr says kubectl will be refused.
    pub fn proxy_of(&self, status: &pb::StatusResponse) -> Result<Proxy, String> {
        let addr = status.listen_address.parse::<SocketAddr>().map_err(|_| {
            format!("kharond reports listen address {:?}, not IP:PORT", status.listen_address)
        })?;
        let auth = match (&self.config.socks_auth, status.socks_auth_required) {
            (_, false) => None,
            (Some(auth), true) => Some(auth.value.clone()),
            (None, true) => {
                let file = self.config.file.as_ref().map_or_else(
                    || "no config file was found".to_owned(),
                    |f| format!("{} has no [socks] section", f.display()),
                );
                eprintln!(
                    "kharonctl: warning: kharond requires a SOCKS username and password, but this \
                     kharonctl knows none ({file}), so clients given this proxy will be refused; \
                     point kharonctl at the config file kharond reads (--config FILE or KHARON_CONFIG)"
                );
                None
            }
        };
        Ok(Proxy { addr: connectable(addr), auth })
    }
}

/// Everything but RFC 3986's unreserved characters: `%` too, which `url::Url::set_password` would
/// leave alone and a parser would then decode.
const USERINFO: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// Where a client reaches kharond's SOCKS listener, and the username and password it requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    pub addr: SocketAddr,
    pub auth: Option<SocksAuth>,
}

impl Proxy {
    /// `scheme://user:password@addr` (or without the credentials when none are required), the
    /// userinfo percent-encoded (RFC 3986 §3.2.1) so that any byte of a password survives: the form
    /// kubectl's `proxy-url` and reqwest take SOCKS5 credentials in. It holds the password: for
    /// files written 0600 and for clients, never for a terminal or a log.
    pub fn url(&self, scheme: &str) -> String {
        match &self.auth {
            None => format!("{scheme}://{}", self.addr),
            Some(auth) => {
                let enc = |s: &str| percent_encoding::utf8_percent_encode(s, USERINFO).to_string();
                format!("{scheme}://{}:{}@{}", enc(&auth.username), enc(auth.password.as_str()), self.addr)
            }
        }
    }

    /// The same proxy without its credentials: what a printed kubeconfig gets.
    pub fn without_auth(&self) -> Self {
        Self { addr: self.addr, auth: None }
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
            .or_else(|| kharon_common::paths::config_file().ok())
            .unwrap_or_else(|| "the config file".into());
        anyhow::anyhow!(
            "{}\n{} is the default Lieutenant; for another one pass --lieutenant-url, set \
             LIEUTENANT_URL (or commodore's COMMODORE_API_URL, in the environment or in a .env file \
             here or in a parent directory), or put lieutenant_url = \"https://…\" in {}",
            kharon_common::errors::chain(e.as_ref()),
            setting.value,
            file.display()
        )
    }

    pub fn oidc_overrides(&self) -> crate::lieutenant::oidc::Overrides {
        let api_token =
            self.config.api_token.as_ref().map(|s| crate::lieutenant::oidc::static_token::Given {
                value: s.value.clone(),
                from: match &s.source {
                    Source::Env(var) => (*var).to_owned(),
                    other => other.to_string(),
                },
            });
        crate::lieutenant::oidc::Overrides {
            client_id: self.config.oidc_client.as_ref().map(|s| s.value.clone()),
            discovery_url: self.config.oidc_discovery_url.as_ref().map(|s| s.value.clone()),
            api_token,
        }
    }

    pub fn oidc_places(&self) -> crate::lieutenant::oidc::Places {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let xdg_cache = var("XDG_CACHE_HOME").map(std::path::PathBuf::from);
        let home = var("HOME").map(std::path::PathBuf::from);
        let cwd = std::env::current_dir().ok();
        crate::lieutenant::oidc::Places {
            token_file: crate::lieutenant::oidc::store::path(&self.config.cache_dir.value),
            commodore_file: crate::lieutenant::oidc::commodore::path(
                xdg_cache.as_deref(),
                home.as_deref(),
                cwd.as_deref(),
            ),
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

    #[test]
    fn proxy_credentials_are_percent_encoded_into_the_userinfo() {
        let addr: SocketAddr = "127.0.0.1:12000".parse().unwrap();
        let plain = Proxy { addr, auth: None };
        assert_eq!(plain.url("socks5"), "socks5://127.0.0.1:12000");
        let password = "p@ss:w/rd%41?#[] é";
        let auth = SocksAuth { username: "kh:user@x".into(), password: password.into() };
        let proxy = Proxy { addr, auth: Some(auth) };
        let url = proxy.url("socks5");
        assert_eq!(url, "socks5://kh%3Auser%40x:p%40ss%3Aw%2Frd%2541%3F%23%5B%5D%20%C3%A9@127.0.0.1:12000");
        // What a URL parser (Go's, reqwest's) reads back is the very username and password.
        let parsed = url::Url::parse(&url).unwrap();
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().unwrap().into_owned();
        assert_eq!(decode(parsed.username()), "kh:user@x");
        assert_eq!(decode(parsed.password().unwrap()), password);
        assert_eq!(parsed.host_str(), Some("127.0.0.1"));
        assert_eq!(parsed.port(), Some(12000));
        let v6 = Proxy { addr: "[::1]:5".parse().unwrap(), auth: proxy.auth.clone() };
        assert!(v6.url("socks5h").ends_with("@[::1]:5"), "{}", v6.url("socks5h"));
        assert_eq!(proxy.without_auth().url("socks5"), "socks5://127.0.0.1:12000");
        assert!(!format!("{proxy:?}").contains("p@ss"), "{proxy:?}");
    }
}
