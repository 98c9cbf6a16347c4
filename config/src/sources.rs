//! Where a setting may come from, for one load ([`Sources`]): the one precedence rule, flag, then
//! the environment with commodore's `.env` below it, then the config file, then the default; and
//! each setting read by it and checked as it is read.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kharon_common::paths;

use crate::defaults::{
    DEFAULT_LIEUTENANT_URL, DEFAULT_LISTEN, DEFAULT_PASSBOLT_URL, DEFAULT_RELOAD_DEADLINE,
    RELOAD_DEADLINE_SECS, TIMEOUT_SECS,
};
use crate::dotenv::DotEnv;
use crate::env;
use crate::error::Error;
use crate::file::{FileConfig, FileSocks};
use crate::listen::{ListenName, Resolver, parse_listen};
use crate::overrides::Overrides;
use crate::socks_auth::SocksAuth;
use crate::source::{Setting, Source};
use crate::ssh_window::SshWindow;
use crate::tilde::expand_tilde;

/// Where a setting may come from, for one load: the flags, the environment (and commodore's
/// `.env`), the config file; each setting's step reads them by one precedence rule.
pub(crate) struct Sources<'a> {
    pub(crate) overrides: &'a Overrides,
    pub(crate) raw_env: &'a dyn Fn(&str) -> Option<String>,
    pub(crate) dotenv: Option<&'a DotEnv>,
    pub(crate) home: Option<PathBuf>,
    /// The config file read, if any.
    pub(crate) file: Option<PathBuf>,
    pub(crate) file_cfg: FileConfig,
}

impl Sources<'_> {
    /// A variable of the environment, unset when empty (as click takes an empty one).
    fn getenv(&self, name: &str) -> Option<String> {
        (self.raw_env)(name).filter(|v| !v.is_empty())
    }

    /// A variable of the real environment, else (for commodore's) the `.env` file's. Present but
    /// empty still hides the file's value, as python-dotenv leaves any variable that is set alone,
    /// and then counts as unset, as click does with an empty one.
    pub(crate) fn lookup(&self, name: &'static str) -> Option<(String, Source)> {
        if (self.raw_env)(name).is_some() {
            return self.getenv(name).map(|v| (v, Source::Env(name)));
        }
        let dotenv = self.dotenv.filter(|_| env::FROM_DOTENV.contains(&name))?;
        let value = dotenv.vars.get(name).filter(|v| !v.is_empty())?;
        Some((value.clone(), Source::DotEnv { var: name, path: dotenv.path.clone() }))
    }

    /// The one precedence rule for every setting: flag > env > file > (the caller's) default.
    fn pick(
        &self,
        flag: Option<String>,
        flag_name: &'static str,
        env_name: &'static str,
        file_value: Option<String>,
    ) -> Option<(String, Source)> {
        if let Some(v) = flag {
            Some((v, Source::Flag(flag_name)))
        } else if let Some(found) = self.lookup(env_name) {
            Some(found)
        } else {
            file_value.map(|v| (v, self.file_source()))
        }
    }

    pub(crate) fn file_source(&self) -> Source {
        Source::File(self.file.clone().unwrap_or_default())
    }

    fn expand(&self, path: PathBuf) -> PathBuf {
        expand_tilde(path, self.home.as_deref())
    }

    /// A path setting picked by [`Sources::pick`], `~` expanded.
    fn path(
        &self,
        flag: &Option<PathBuf>,
        flag_name: &'static str,
        env_name: &'static str,
        file_value: &Option<PathBuf>,
    ) -> Option<Setting<PathBuf>> {
        let as_string = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        self.pick(as_string(flag), flag_name, env_name, as_string(file_value))
            .map(|(v, s)| Setting::new(self.expand(PathBuf::from(v)), s))
    }

    /// A value only the config file sets, else `default`.
    pub(crate) fn file_or<T>(&self, value: Option<T>, default: T) -> Setting<T> {
        match value {
            Some(value) => Setting::new(value, self.file_source()),
            None => Setting::new(default, Source::Default),
        }
    }

    pub(crate) fn listen(
        &self,
        resolve: &Resolver,
    ) -> Result<(Setting<SocketAddr>, Option<ListenName>), Error> {
        match self.pick(self.overrides.listen.clone(), "--listen", env::LISTEN, self.file_cfg.listen.clone())
        {
            Some((v, source)) => {
                let (addr, name) = parse_listen(&v, &source, resolve)?;
                Ok((Setting::new(addr, source), name))
            }
            None => Ok((
                Setting::new(
                    DEFAULT_LISTEN.parse().unwrap_or(SocketAddr::from(([127, 0, 0, 1], 12000))),
                    Source::Default,
                ),
                None,
            )),
        }
    }

    pub(crate) fn inventory(&self) -> Option<Setting<PathBuf>> {
        self.path(&self.overrides.inventory, "--inventory", env::INVENTORY, &self.file_cfg.inventory)
    }

    /// `~/.ssh/config` unless given.
    pub(crate) fn ssh_config(&self) -> Result<Setting<PathBuf>, Error> {
        match self.path(
            &self.overrides.ssh_config,
            "--ssh-config",
            env::SSH_CONFIG,
            &self.file_cfg.ssh_config,
        ) {
            Some(setting) => Ok(setting),
            None => {
                let home = self.home.clone().ok_or(paths::Error::NoHome)?;
                Ok(Setting::new(home.join(".ssh/config"), Source::Default))
            }
        }
    }

    /// The control socket, checked as a place a socket can be bound at.
    pub(crate) fn control_socket(&self) -> Result<Setting<PathBuf>, Error> {
        let given = self.path(
            &self.overrides.control_socket,
            "--control-socket",
            env::CONTROL_SOCKET,
            &self.file_cfg.control_socket,
        );
        let control_socket = match given {
            Some(setting) => setting,
            None => Setting::new(paths::control_socket()?, Source::Default),
        };
        paths::check_socket_path(&control_socket.value)?;
        Ok(control_socket)
    }

    pub(crate) fn cache_dir(&self) -> Result<Setting<PathBuf>, Error> {
        match self.path(&None, "", env::CACHE_DIR, &self.file_cfg.cache_dir) {
            Some(setting) => Ok(setting),
            None => Ok(Setting::new(paths::cache_dir()?, Source::Default)),
        }
    }

    /// Both the user name and the password, or neither.
    pub(crate) fn socks_auth(&self) -> Result<Option<Setting<SocksAuth>>, Error> {
        match &self.file_cfg.socks {
            None | Some(FileSocks { username: None, password: None }) => Ok(None),
            Some(FileSocks { username: Some(u), password: Some(p) }) if !u.is_empty() && !p.is_empty() => {
                Ok(Some(Setting::new(
                    SocksAuth { username: u.clone(), password: p.clone() },
                    self.file_source(),
                )))
            }
            Some(_) => Err(Error::HalfAuth { path: self.file.clone().unwrap_or_default() }),
        }
    }

    /// A timeout of the config file in seconds, within [`TIMEOUT_SECS`].
    pub(crate) fn secs(
        &self,
        name: &'static str,
        value: Option<u64>,
        default: Duration,
    ) -> Result<Setting<Duration>, Error> {
        match value {
            None => Ok(Setting::new(default, Source::Default)),
            Some(s) if TIMEOUT_SECS.contains(&s) => {
                Ok(Setting::new(Duration::from_secs(s), self.file_source()))
            }
            Some(value) => Err(Error::BadDuration { setting: name, origin: self.file_source(), value }),
        }
    }

    pub(crate) fn max_connections(&self) -> Result<Option<Setting<usize>>, Error> {
        match self.file_cfg.max_connections {
            None => Ok(None),
            Some(0) => Err(Error::NoConnections { origin: self.file_source() }),
            Some(n) => Ok(Some(Setting::new(n, self.file_source()))),
        }
    }

    /// An http(s) URL, kept as the user wrote it (commodore's token cache is keyed by that exact
    /// string).
    fn http_url(
        &self,
        setting: &'static str,
        picked: Option<(String, Source)>,
    ) -> Result<Option<Setting<String>>, Error> {
        match picked {
            None => Ok(None),
            // The URL parser would drop them at either end and percent-encode them inside (a
            // trailing space became a request for `/%20/`).
            Some((v, source)) if v.chars().any(|c| c.is_whitespace() || c.is_control()) => {
                Err(Error::UrlWhitespace { setting, origin: source, value: v })
            }
            Some((v, source)) => match url::Url::parse(&v) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {
                    Ok(Some(Setting::new(v, source)))
                }
                _ => Err(Error::BadUrl { setting, origin: source, value: v }),
            },
        }
    }

    /// flag > LIEUTENANT_URL > COMMODORE_API_URL > file > VSHN's production instance
    /// (docs/lieutenant-and-oidc.md, "The API URL").
    pub(crate) fn lieutenant_url(&self) -> Result<Setting<String>, Error> {
        let picked = match self.pick(
            self.overrides.lieutenant_url.clone(),
            "--lieutenant-url",
            env::LIEUTENANT_URL,
            None,
        ) {
            Some(p) => Some(p),
            None => self.pick(None, "", env::COMMODORE_API_URL, self.file_cfg.lieutenant_url.clone()),
        };
        Ok(self
            .http_url("lieutenant_url", picked)?
            .unwrap_or_else(|| Setting::new(DEFAULT_LIEUTENANT_URL.to_owned(), Source::Default)))
    }

    pub(crate) fn oidc_client(&self) -> Option<Setting<String>> {
        self.pick(
            self.overrides.oidc_client.clone(),
            "--oidc-client",
            env::OIDC_CLIENT,
            self.file_cfg.oidc_client.clone(),
        )
        .map(|(v, s)| Setting::new(v, s))
    }

    pub(crate) fn oidc_discovery_url(&self) -> Result<Option<Setting<String>>, Error> {
        let picked = self.pick(
            self.overrides.oidc_discovery_url.clone(),
            "--oidc-discovery-url",
            env::OIDC_DISCOVERY_URL,
            self.file_cfg.oidc_discovery_url.clone(),
        );
        self.http_url("oidc_discovery_url", picked)
    }

    /// No flag here: `clusters NAME emergency-credentials --passbolt-url` applies it on top.
    pub(crate) fn passbolt_url(&self) -> Result<Setting<String>, Error> {
        let picked = self.pick(None, "", env::PASSBOLT_URL, self.file_cfg.passbolt_url.clone());
        Ok(self
            .http_url("passbolt_url", picked)?
            .unwrap_or_else(|| Setting::new(DEFAULT_PASSBOLT_URL.to_owned(), Source::Default)))
    }

    pub(crate) fn ssh_window(&self) -> Result<Setting<SshWindow>, Error> {
        match &self.file_cfg.ssh_window {
            None => Ok(Setting::new(SshWindow::Adaptive, Source::Default)),
            Some(value) => match SshWindow::parse(value) {
                Some(window) => Ok(Setting::new(window, self.file_source())),
                None => Err(Error::BadWindow { origin: self.file_source(), value: value.clone() }),
            },
        }
    }

    pub(crate) fn reload_deadline(&self) -> Result<Setting<Duration>, Error> {
        match self.file_cfg.reload_deadline_secs {
            None => Ok(Setting::new(DEFAULT_RELOAD_DEADLINE, Source::Default)),
            Some(s) if RELOAD_DEADLINE_SECS.contains(&s) => {
                Ok(Setting::new(Duration::from_secs(s), self.file_source()))
            }
            Some(value) => Err(Error::BadReloadDeadline { origin: self.file_source(), value }),
        }
    }
}
