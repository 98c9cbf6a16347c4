//! The settings of both binaries: the TOML schema, its defaults, and the one merge
//! `defaults < config file < environment < flags` that yields a validated [`Config`].
//!
//! Every value remembers where it came from ([`Source`]), so `kharonctl config` and error
//! messages can say "listen (from KHARON_LISTEN)". This module knows nothing of clap: each binary
//! hands its flags over as [`Overrides`], and the environment arrives as a lookup function so tests
//! pass a map instead of mutating the process environment.
//!
//! kharonctl also hands over commodore's `.env` ([`DotEnv`], found and parsed by kharonctl): the
//! variables commodore reads from it ([`env::FROM_DOTENV`]) count for a variable that the real
//! environment does not have, as python-dotenv's `load_dotenv(override=False)` fills them in for
//! commodore (docs/lieutenant-and-oidc.md, "The API URL").
//!
//! # Layout
//! - `overrides.rs`: the flags a binary hands over ([`Overrides`]).
//! - `dotenv.rs`: commodore's `.env`, as kharonctl hands it over ([`DotEnv`]).
//! - `env.rs`: the environment variables' names ([`env`](mod@env)).
//! - `file.rs`: which config file is read, its schema, and reading it.
//! - `sources.rs`: the one precedence rule (flag, then the environment with commodore's `.env`
//!   below it, then the file, then the default) and each setting read and checked by it.
//! - `defaults.rs`: each setting's default and the range its value must lie in.
//! - `listen.rs`: `listen` as `IP:PORT` or as `NAME:PORT` ([`ListenName`]).
//! - `socks_auth.rs`: the `[socks]` username and password ([`SocksAuth`]).
//! - `ssh_window.rs`: the rule that sizes the SSH receive windows ([`SshWindow`]).
//! - `domains.rs`: `dynamic_domains` and `provider_domains`, judged by the routing model's rules.
//! - `tilde.rs`: `~/` in a path ([`expand_tilde`]).
//! - `source.rs`: where a value came from ([`Source`], [`Setting`]).
//! - `error.rs`: why a load fails, naming the setting and its source ([`Error`], [`DomainError`]).
//! - this file: [`Config`], the merge of them all into one validated value, and what it answers
//!   (the listener rule, warnings, the hosts and anchors the routing model's trust bounds take).

mod defaults;
mod domains;
mod dotenv;
pub mod env;
mod error;
mod file;
mod listen;
mod overrides;
mod socks_auth;
mod source;
mod sources;
mod ssh_window;
mod tilde;

#[cfg(test)]
mod tests;

pub use defaults::{
    DEFAULT_ANSWER_WAIT, DEFAULT_CONNECT_TIMEOUT, DEFAULT_HANDSHAKE_TIMEOUT, DEFAULT_LIEUTENANT_URL,
    DEFAULT_LISTEN, DEFAULT_PASSBOLT_URL, DEFAULT_RELOAD_DEADLINE, RELOAD_DEADLINE_SECS, SSH_WINDOW_BYTES,
    TIMEOUT_SECS,
};
pub use dotenv::DotEnv;
pub use error::{DomainError, Error};
pub use listen::ListenName;
pub use overrides::Overrides;
pub use socks_auth::SocksAuth;
pub use source::{Setting, Source};
pub use ssh_window::SshWindow;
pub use tilde::expand_tilde;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use kharon_common::secret::Secret;

use domains::domain_settings;
use file::read_file;
use listen::{Resolver, resolve_system};
use sources::Sources;

/// The validated, merged settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The config file that was read, if any.
    pub file: Option<PathBuf>,
    /// The `.env` file whose variables were consulted, if kharonctl found one.
    pub dotenv_file: Option<PathBuf>,
    /// Where to listen. A `NAME:PORT` value is resolved at load (see [`ListenName`]); this is
    /// the address that was picked.
    pub listen: Setting<SocketAddr>,
    /// The host name `listen` was written as, if it was one.
    pub listen_name: Option<ListenName>,
    /// A Lieutenant `/clusters` JSON file to route by, instead of the local cache.
    pub inventory: Option<Setting<PathBuf>>,
    pub ssh_config: Setting<PathBuf>,
    pub control_socket: Setting<PathBuf>,
    pub cache_dir: Setting<PathBuf>,
    pub socks_auth: Option<Setting<SocksAuth>>,
    pub handshake_timeout: Setting<Duration>,
    pub connect_timeout: Setting<Duration>,
    /// Clients kharond serves at once, when lower than what its descriptor limit fits.
    pub max_connections: Option<Setting<usize>>,
    /// The Lieutenant API base URL (docs/lieutenant-and-oidc.md); [`DEFAULT_LIEUTENANT_URL`] unless set.
    pub lieutenant_url: Setting<String>,
    /// OIDC client id; overrides what Lieutenant's discovery (`GET /`) announces.
    pub oidc_client: Option<Setting<String>>,
    /// OIDC discovery URL; overrides what Lieutenant's discovery announces.
    pub oidc_discovery_url: Option<Setting<String>>,
    /// commodore's static Lieutenant token (`COMMODORE_API_TOKEN`, also from its `.env`), as given:
    /// the token, or the path of a file holding it (kharonctl reads it as commodore does).
    pub api_token: Option<Setting<Secret>>,
    /// The Passbolt that holds the emergency credentials' bucket list.
    pub passbolt_url: Setting<String>,
    /// Without a `[socks]` password, kharond serves only clients of its own user unless this is
    /// set (`allow_other_users = true`): other local users would act with the engineer's SSH
    /// identity in every customer network.
    pub allow_other_users: Setting<bool>,
    /// Zones in which any cluster's dynamic facts may route names, beside each cluster's own
    /// anchors (`kharon_routing::anchor`): normalised, e.g. `appuio.cloud`.
    pub dynamic_domains: Setting<Vec<String>>,
    /// How large an SSH receive window each jump host's sessions get ([`SshWindow`]).
    pub ssh_window: Setting<SshWindow>,
    /// How long connections through a jump host wait for a person to answer its question.
    pub answer_wait: Setting<Duration>,
    /// How long one reload may take before it installs nothing.
    pub reload_deadline: Setting<Duration>,
    /// Whether kharond tells the person at the desktop when a jump host asks for a one-time
    /// password or a password (a desktop notification, where a desktop session exists).
    pub desktop_notifications: Setting<bool>,
    /// Provider's domains beside those the inventory shows (`provider`): normalised, e.g.
    /// `vshnmanaged.net`. The default is none here; the inventory adds its own when compiled.
    pub provider_domains: Setting<Vec<String>>,
}

impl Config {
    /// Loads the settings from the real environment.
    pub fn load(overrides: &Overrides) -> Result<Self, Error> {
        Self::load_with(overrides, &real_env)
    }

    /// [`Config::load`] with the variables of a `.env` file below the real environment's.
    pub fn load_with_dotenv(overrides: &Overrides, dotenv: Option<&DotEnv>) -> Result<Self, Error> {
        Self::load_resolving(overrides, &real_env, dotenv, &resolve_system)
    }

    /// Loads the settings with `getenv` standing in for the environment (an empty variable counts
    /// as unset).
    pub fn load_with(overrides: &Overrides, getenv: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        Self::load_resolving(overrides, getenv, None, &resolve_system)
    }

    /// [`Config::load_with`] with `.env` variables, and with `resolve` standing in for the system
    /// resolver (for `listen` given as a name), so tests never query DNS. Each setting is picked by
    /// one precedence rule ([`Sources::pick`]) and checked as it is read, one after the other
    /// below: the first bad one is the error.
    fn load_resolving(
        overrides: &Overrides,
        raw_env: &dyn Fn(&str) -> Option<String>,
        dotenv: Option<&DotEnv>,
        resolve: &Resolver,
    ) -> Result<Self, Error> {
        let home = raw_env("HOME").filter(|v| !v.is_empty()).map(PathBuf::from);
        let (file, file_cfg) = read_file(overrides, raw_env, home.as_deref())?;
        let sources = Sources { overrides, raw_env, dotenv, home, file, file_cfg };
        let file_cfg = &sources.file_cfg;
        let (listen, listen_name) = sources.listen(resolve)?;
        let inventory = sources.inventory();
        let ssh_config = sources.ssh_config()?;
        let control_socket = sources.control_socket()?;
        let cache_dir = sources.cache_dir()?;
        let socks_auth = sources.socks_auth()?;
        let handshake_timeout = sources.secs(
            "handshake_timeout_secs",
            file_cfg.handshake_timeout_secs,
            DEFAULT_HANDSHAKE_TIMEOUT,
        )?;
        let connect_timeout =
            sources.secs("connect_timeout_secs", file_cfg.connect_timeout_secs, DEFAULT_CONNECT_TIMEOUT)?;
        let max_connections = sources.max_connections()?;
        let lieutenant_url = sources.lieutenant_url()?;
        let oidc_client = sources.oidc_client();
        let oidc_discovery_url = sources.oidc_discovery_url()?;
        let api_token = sources.lookup(env::API_TOKEN).map(|(v, s)| Setting::new(Secret::new(v), s));
        let passbolt_url = sources.passbolt_url()?;
        let allow_other_users = sources.file_or(file_cfg.allow_other_users, false);
        let desktop_notifications = sources.file_or(file_cfg.desktop_notifications, true);
        let (dynamic_domains, provider_domains) = domain_settings(file_cfg, &|| sources.file_source())?;
        let ssh_window = sources.ssh_window()?;
        let answer_wait = sources.secs("answer_wait_secs", file_cfg.answer_wait_secs, DEFAULT_ANSWER_WAIT)?;
        let reload_deadline = sources.reload_deadline()?;
        let config = Config {
            allow_other_users,
            dynamic_domains,
            ssh_window,
            answer_wait,
            reload_deadline,
            desktop_notifications,
            provider_domains,
            file: sources.file.clone(),
            dotenv_file: dotenv.map(|d| d.path.clone()),
            listen,
            listen_name,
            inventory,
            ssh_config,
            control_socket,
            cache_dir,
            socks_auth,
            handshake_timeout,
            connect_timeout,
            max_connections,
            lieutenant_url,
            oidc_client,
            oidc_discovery_url,
            api_token,
            passbolt_url,
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), Error> {
        // A name counts as loopback only if every address it resolves to is: the user may well
        // mean the others.
        if let Some(name) = &self.listen_name
            && self.socks_auth.is_none()
            && let Some(open) = name.resolved.iter().find(|a| !a.ip().is_loopback())
        {
            return Err(Error::OpenListenerName {
                name: name.name.clone(),
                addr: *open,
                origin: self.listen.source.clone(),
            });
        }
        self.check_listener(self.listen.value, self.listen.source.clone())
    }

    /// Problems worth a warning at start that do not stop it. Today: a config file holding the
    /// SOCKS password that group or others may read.
    pub fn warnings(&self) -> Vec<String> {
        use std::os::unix::fs::PermissionsExt;
        let mut warnings = Vec::new();
        if let (Some(file), Some(_)) = (&self.file, &self.socks_auth)
            && let Ok(meta) = std::fs::metadata(file)
        {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                warnings.push(format!(
                    "config file {} holds the SOCKS password and others may read it (mode {mode:04o}); \
                     run `chmod 600 {}`",
                    file.display(),
                    file.display()
                ));
            }
        }
        warnings
    }

    /// The hosts kharon itself talks to, as these settings name them: Lieutenant, Passbolt and an
    /// OIDC discovery URL given here. No cluster's dynamic facts may claim them (`trust`).
    pub fn own_hosts(&self) -> kharon_routing::trust::OwnHosts {
        let mut own = kharon_routing::trust::OwnHosts::default();
        own.add_url("Lieutenant", &self.lieutenant_url.value);
        own.add_url("Passbolt", &self.passbolt_url.value);
        if let Some(discovery) = &self.oidc_discovery_url {
            own.add_url("the OIDC issuer", &discovery.value);
        }
        own
    }

    /// The anchors every cluster has: the zones of `dynamic_domains` (`anchor`); with the
    /// `provider_domains` for the compile (`provider`).
    pub fn anchors(&self) -> kharon_routing::anchor::Anchors {
        kharon_routing::anchor::Anchors::new(&self.dynamic_domains.value)
            .with_providers(&self.provider_domains.value)
    }

    /// The one rule for every SOCKS listener, however it came (`--listen`, the config file, a
    /// socket handed over by systemd): a non-loopback address needs a SOCKS username and password.
    pub fn check_listener(&self, addr: SocketAddr, origin: Source) -> Result<(), Error> {
        if !addr.ip().is_loopback() && self.socks_auth.is_none() {
            return Err(Error::OpenListener { addr, origin });
        }
        Ok(())
    }
}

/// The process environment, as [`Config::load_resolving`] takes it: a variable that is set, even
/// to nothing, is `Some`.
fn real_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}
