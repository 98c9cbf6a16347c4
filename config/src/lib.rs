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

use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use kharon_common::paths;
use kharon_common::secret::Secret;

/// Default SOCKS listen address: loopback only (house rule 6).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:12000";
/// How long a SOCKS client may take to send its greeting, auth and request.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long resolving and connecting a target may take before the client gets a reply code.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// VSHN's production Lieutenant, the default of Go kharon's `update` (its `internal/cmd/update.go`),
/// so the first `kharonctl update` works without any setting.
pub const DEFAULT_LIEUTENANT_URL: &str = "https://api.syn.vshn.net";
/// The range of `handshake_timeout_secs` and `connect_timeout_secs`. Both are waits a client
/// sits through before it hears anything: an hour is far past any useful value (a TCP connect
/// gives up after about two minutes of SYN retries), and a bound keeps deadlines computed from
/// them (`now + timeout`) representable.
pub const TIMEOUT_SECS: std::ops::RangeInclusive<u64> = 1..=3600;
/// How long connections through a jump host wait for a person to answer its question (a one-time
/// password), unless `answer_wait_secs` says otherwise. sshd gives a whole login `LoginGraceTime`
/// (120 s unless configured, sshd_config(5)); 90 s is time to find a token or open an app, and
/// leaves sshd's own time for its verdict and a second question.
pub const DEFAULT_ANSWER_WAIT: Duration = Duration::from_secs(90);
/// How long one reload may take, waiting for an earlier one included, unless
/// `reload_deadline_secs` says otherwise. Reading and compiling a 10,000-cluster inventory and an
/// ssh config takes well under a second, so this only trips on a read that hangs or `Match exec`
/// commands that take long, and leaves room for a slow disk or a network home directory.
pub const DEFAULT_RELOAD_DEADLINE: Duration = Duration::from_secs(30);
/// The range of `reload_deadline_secs`: below kharonctl's 60 s call timeout, so that the user gets
/// kharond's explanation rather than a bare client timeout.
pub const RELOAD_DEADLINE_SECS: std::ops::RangeInclusive<u64> = 1..=55;
/// The range of `ssh_window` sizes: the engine's smallest and largest window.
pub const SSH_WINDOW_BYTES: std::ops::RangeInclusive<u64> = (256 << 10)..=(16 << 20);
/// VSHN's Passbolt, which holds the emergency credentials' bucket list (docs/emergency-credentials.md).
pub const DEFAULT_PASSBOLT_URL: &str = "https://cloud.passbolt.com/vshn";

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    /// A variable commodore's `.env` file sets (and the real environment does not).
    DotEnv {
        var: &'static str,
        path: PathBuf,
    },
    Flag(&'static str),
    /// A listener handed over by systemd (or another manager speaking its protocol).
    SocketActivation,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::DotEnv { var, path } => write!(f, "{var} in {}", path.display()),
            Source::Flag(n) => write!(f, "flag {n}"),
            Source::SocketActivation => f.write_str("socket activation"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}

/// RFC 1929 username/password the SOCKS listener requires. The password is never printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocksAuth {
    pub username: String,
    pub password: Secret,
}

/// The variables of a `.env` file, below the real environment (python-dotenv's `override=False`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DotEnv {
    /// The file they were read from.
    pub path: PathBuf,
    /// Every variable the file sets, its last assignment of each (as python-dotenv keeps it).
    pub vars: BTreeMap<String, String>,
}

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

/// `ssh_window`: which rule sizes the SSH receive windows of a jump host's sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SshWindow {
    /// `adaptive` (the default): the window follows what the path is measured to carry.
    Adaptive,
    /// `openssh`, or a size such as `4M`: every channel gets that window, as `ssh` gives every
    /// channel OpenSSH's 2 MiB (`openssh`).
    Fixed(u32),
}

impl SshWindow {
    /// OpenSSH's own channel window (`CHAN_TCP_WINDOW_DEFAULT`, channels.h).
    pub const OPENSSH: SshWindow = SshWindow::Fixed(2 << 20);

    /// `adaptive`, `openssh`, or a size: bytes, or a number with K or M (powers of 1024).
    pub fn parse(value: &str) -> Option<SshWindow> {
        match value.trim().to_ascii_lowercase().as_str() {
            "adaptive" => Some(SshWindow::Adaptive),
            "openssh" => Some(SshWindow::OPENSSH),
            size => {
                let (digits, shift) = match size.strip_suffix(['k', 'm']) {
                    Some(digits) if size.ends_with('k') => (digits, 10),
                    Some(digits) => (digits, 20),
                    None => (size, 0),
                };
                let bytes = digits.parse::<u64>().ok()?.checked_mul(1 << shift)?;
                let bytes =
                    u32::try_from(bytes).ok().filter(|b| SSH_WINDOW_BYTES.contains(&u64::from(*b)))?;
                Some(SshWindow::Fixed(bytes))
            }
        }
    }
}

/// Why a `dynamic_domains` or `provider_domains` entry is refused.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error(transparent)]
    Name(#[from] kharon_routing::inventory::SuffixError),
    #[error(transparent)]
    Refused(#[from] kharon_routing::trust::Refusal),
    #[error(
        "it lies in {zone}, a zone of dynamic_domains, where any cluster's dynamic names may route; \
         remove it from one of the two lists"
    )]
    InZone { zone: String },
}

/// A listen value written as `NAME:PORT` (e.g. `localhost:12000`) and what the name resolved to
/// when the settings were loaded.
///
/// Only one address is listened on (kharond has one SOCKS listener, and `Status`, the PAC and
/// kubeconfigs name one address): the first IPv4 address, else the first. IPv4 first because the
/// default, the docs and kubeconfigs say 127.0.0.1, and because `localhost` is often listed as
/// `::1` too on machines where IPv6 is off; clients that resolve the name themselves (curl, Go,
/// Java, browsers) try each of its addresses, so they reach the one we picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenName {
    /// The value as written, `NAME:PORT`.
    pub name: String,
    /// Every address the name resolved to, in the resolver's order.
    pub resolved: Vec<SocketAddr>,
}

/// Values given on the command line. `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub listen: Option<String>,
    pub inventory: Option<PathBuf>,
    pub ssh_config: Option<PathBuf>,
    pub control_socket: Option<PathBuf>,
    pub lieutenant_url: Option<String>,
    pub oidc_client: Option<String>,
    pub oidc_discovery_url: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {}", path.display())]
    Parse { path: PathBuf, source: Box<toml::de::Error> },
    #[error(
        "{setting} (from {origin}): {value:?} is not an address; expected IP:PORT or NAME:PORT such as \
         127.0.0.1:12000 or localhost:12000"
    )]
    BadAddress { setting: &'static str, origin: Source, value: String },
    #[error(
        "{setting} (from {origin}): cannot resolve the host name in {value:?} ({reason}); use an IP \
         address such as 127.0.0.1:12000, or a name from /etc/hosts"
    )]
    Unresolvable { setting: &'static str, origin: Source, value: String, reason: String },
    #[error(
        "{setting} = {value} (from {origin}) is out of range; it must be between {} and {} seconds",
        TIMEOUT_SECS.start(),
        TIMEOUT_SECS.end()
    )]
    BadDuration { setting: &'static str, origin: Source, value: u64 },
    #[error(
        "ssh_window = {value:?} (from {origin}): expected adaptive, openssh, or a size between 256K and \
         16M (such as 4M)"
    )]
    BadWindow { origin: Source, value: String },
    #[error(
        "reload_deadline_secs = {value} (from {origin}) is out of range; it must be between {} and {} seconds",
        RELOAD_DEADLINE_SECS.start(),
        RELOAD_DEADLINE_SECS.end()
    )]
    BadReloadDeadline { origin: Source, value: u64 },
    #[error("max_connections (from {origin}) must be at least 1; remove it to serve as many as fit")]
    NoConnections { origin: Source },
    #[error(
        "listen address {addr} (from {origin}) is not loopback; anyone on that network could use \
         the proxy. Set [socks] username and password in the config file, or {}",
        loopback_advice(origin, *addr)
    )]
    OpenListener { addr: SocketAddr, origin: Source },
    #[error(
        "listen address {name} (from {origin}) resolves to {addr}, which is not loopback; anyone on \
         that network could use the proxy. Set [socks] username and password in the config file, or \
         listen on 127.0.0.1 or a name that resolves to loopback only (localhost)"
    )]
    OpenListenerName { name: String, addr: SocketAddr, origin: Source },
    #[error("{setting} (from {origin}): {value:?} is not an http(s) URL")]
    BadUrl { setting: &'static str, origin: Source, value: String },
    #[error(
        "{setting} (from {origin}): {value:?} has a space or control character in it (a stray one from \
         copying?); a URL has none, so remove it"
    )]
    UrlWhitespace { setting: &'static str, origin: Source, value: String },
    #[error("[socks] in {}: username and password must both be set and non-empty", path.display())]
    HalfAuth { path: PathBuf },
    #[error("dynamic_domains (from {origin}): {value:?} cannot be a zone for dynamic names")]
    DynamicDomain { origin: Source, value: String, source: Box<DomainError> },
    #[error("provider_domains (from {origin}): {value:?} cannot be a provider's domain")]
    ProviderDomain { origin: Source, value: String, source: Box<DomainError> },
    #[error(transparent)]
    Paths(#[from] paths::Error),
}

/// The config file's schema. Unknown keys are an error, so a typo never goes unnoticed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    inventory: Option<PathBuf>,
    ssh_config: Option<PathBuf>,
    control_socket: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    handshake_timeout_secs: Option<u64>,
    connect_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    socks: Option<FileSocks>,
    lieutenant_url: Option<String>,
    oidc_client: Option<String>,
    oidc_discovery_url: Option<String>,
    passbolt_url: Option<String>,
    allow_other_users: Option<bool>,
    dynamic_domains: Option<Vec<String>>,
    ssh_window: Option<String>,
    answer_wait_secs: Option<u64>,
    reload_deadline_secs: Option<u64>,
    desktop_notifications: Option<bool>,
    provider_domains: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSocks {
    username: Option<String>,
    password: Option<Secret>,
}

/// Environment variable names, one per setting.
pub mod env {
    pub const CONFIG: &str = "KHARON_CONFIG";
    pub const LISTEN: &str = "KHARON_LISTEN";
    pub const INVENTORY: &str = "KHARON_INVENTORY";
    pub const SSH_CONFIG: &str = "KHARON_SSH_CONFIG";
    pub const CONTROL_SOCKET: &str = "KHARON_CONTROL_SOCKET";
    pub const CACHE_DIR: &str = "KHARON_CACHE_DIR";
    /// Go kharon's name for the Lieutenant URL; wins over commodore's.
    pub const LIEUTENANT_URL: &str = "LIEUTENANT_URL";
    /// Commodore's name for the Lieutenant URL, which commodore users already export.
    pub const COMMODORE_API_URL: &str = "COMMODORE_API_URL";
    pub const OIDC_CLIENT: &str = "COMMODORE_OIDC_CLIENT";
    pub const OIDC_DISCOVERY_URL: &str = "COMMODORE_OIDC_DISCOVERY_URL";
    /// commodore's static Lieutenant token (`--api-token` in commodore `cli/options.py`), for CI and
    /// service accounts.
    pub const API_TOKEN: &str = "COMMODORE_API_TOKEN";
    pub const PASSBOLT_URL: &str = "KHARON_PASSBOLT_URL";
    /// The variables taken from commodore's `.env`: those of commodore's options (`--api-url`,
    /// `--api-token`, `--oidc-client`, `--oidc-discovery-url` in commodore `cli/options.py`) that
    /// kharonctl has too. The others are ours or Go kharon's, which no `.env` convention covers.
    pub const FROM_DOTENV: [&str; 4] = [COMMODORE_API_URL, API_TOKEN, OIDC_CLIENT, OIDC_DISCOVERY_URL];
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

/// A list of domains as a setting.
type Domains = Setting<Vec<String>>;

/// The config file: an explicit one (`--config`, `KHARON_CONFIG`) must exist; the default one
/// may be missing. Its path, if one was read, and what it says.
fn read_file(
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

/// Where a setting may come from, for one load: the flags, the environment (and commodore's
/// `.env`), the config file; each setting's step reads them by one precedence rule.
struct Sources<'a> {
    overrides: &'a Overrides,
    raw_env: &'a dyn Fn(&str) -> Option<String>,
    dotenv: Option<&'a DotEnv>,
    home: Option<PathBuf>,
    /// The config file read, if any.
    file: Option<PathBuf>,
    file_cfg: FileConfig,
}

impl Sources<'_> {
    /// A variable of the environment, unset when empty (as click takes an empty one).
    fn getenv(&self, name: &str) -> Option<String> {
        (self.raw_env)(name).filter(|v| !v.is_empty())
    }

    /// A variable of the real environment, else (for commodore's) the `.env` file's. Present but
    /// empty still hides the file's value, as python-dotenv leaves any variable that is set alone,
    /// and then counts as unset, as click does with an empty one.
    fn lookup(&self, name: &'static str) -> Option<(String, Source)> {
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

    fn file_source(&self) -> Source {
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
    fn file_or<T>(&self, value: Option<T>, default: T) -> Setting<T> {
        match value {
            Some(value) => Setting::new(value, self.file_source()),
            None => Setting::new(default, Source::Default),
        }
    }

    fn listen(&self, resolve: &Resolver) -> Result<(Setting<SocketAddr>, Option<ListenName>), Error> {
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

    fn inventory(&self) -> Option<Setting<PathBuf>> {
        self.path(&self.overrides.inventory, "--inventory", env::INVENTORY, &self.file_cfg.inventory)
    }

    /// `~/.ssh/config` unless given.
    fn ssh_config(&self) -> Result<Setting<PathBuf>, Error> {
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
    fn control_socket(&self) -> Result<Setting<PathBuf>, Error> {
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

    fn cache_dir(&self) -> Result<Setting<PathBuf>, Error> {
        match self.path(&None, "", env::CACHE_DIR, &self.file_cfg.cache_dir) {
            Some(setting) => Ok(setting),
            None => Ok(Setting::new(paths::cache_dir()?, Source::Default)),
        }
    }

    /// Both the user name and the password, or neither.
    fn socks_auth(&self) -> Result<Option<Setting<SocksAuth>>, Error> {
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
    fn secs(
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

    fn max_connections(&self) -> Result<Option<Setting<usize>>, Error> {
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
    fn lieutenant_url(&self) -> Result<Setting<String>, Error> {
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

    fn oidc_client(&self) -> Option<Setting<String>> {
        self.pick(
            self.overrides.oidc_client.clone(),
            "--oidc-client",
            env::OIDC_CLIENT,
            self.file_cfg.oidc_client.clone(),
        )
        .map(|(v, s)| Setting::new(v, s))
    }

    fn oidc_discovery_url(&self) -> Result<Option<Setting<String>>, Error> {
        let picked = self.pick(
            self.overrides.oidc_discovery_url.clone(),
            "--oidc-discovery-url",
            env::OIDC_DISCOVERY_URL,
            self.file_cfg.oidc_discovery_url.clone(),
        );
        self.http_url("oidc_discovery_url", picked)
    }

    /// No flag here: `clusters NAME emergency-credentials --passbolt-url` applies it on top.
    fn passbolt_url(&self) -> Result<Setting<String>, Error> {
        let picked = self.pick(None, "", env::PASSBOLT_URL, self.file_cfg.passbolt_url.clone());
        Ok(self
            .http_url("passbolt_url", picked)?
            .unwrap_or_else(|| Setting::new(DEFAULT_PASSBOLT_URL.to_owned(), Source::Default)))
    }

    fn ssh_window(&self) -> Result<Setting<SshWindow>, Error> {
        match &self.file_cfg.ssh_window {
            None => Ok(Setting::new(SshWindow::Adaptive, Source::Default)),
            Some(value) => match SshWindow::parse(value) {
                Some(window) => Ok(Setting::new(window, self.file_source())),
                None => Err(Error::BadWindow { origin: self.file_source(), value: value.clone() }),
            },
        }
    }

    fn reload_deadline(&self) -> Result<Setting<Duration>, Error> {
        match self.file_cfg.reload_deadline_secs {
            None => Ok(Setting::new(DEFAULT_RELOAD_DEADLINE, Source::Default)),
            Some(s) if RELOAD_DEADLINE_SECS.contains(&s) => {
                Ok(Setting::new(Duration::from_secs(s), self.file_source()))
            }
            Some(value) => Err(Error::BadReloadDeadline { origin: self.file_source(), value }),
        }
    }
}

/// The config file's `dynamic_domains` and `provider_domains` as settings: none by default.
fn domain_settings(
    file_cfg: &FileConfig,
    from_file: &dyn Fn() -> Source,
) -> Result<(Domains, Domains), Error> {
    let dynamic = match &file_cfg.dynamic_domains {
        None => Setting::new(Vec::new(), Source::Default),
        Some(zones) => Setting::new(dynamic_domains(zones, from_file)?, from_file()),
    };
    let providers = match &file_cfg.provider_domains {
        None => Setting::new(Vec::new(), Source::Default),
        Some(domains) => Setting::new(provider_domains(domains, &dynamic.value, from_file)?, from_file()),
    };
    Ok((dynamic, providers))
}

/// The config file's `dynamic_domains`, normalised. A public suffix is refused: it would let every
/// cluster route every domain under it, which is what the anchors are there to stop.
fn dynamic_domains(zones: &[String], origin: &dyn Fn() -> Source) -> Result<Vec<String>, Error> {
    domain_list(zones, |value, source| Error::DynamicDomain { origin: origin(), value, source }, |_| Ok(()))
}

/// The config file's `provider_domains`, normalised. A public suffix is refused as in
/// `dynamic_domains` (a provider registers a domain, not a suffix), and so is a domain at or below
/// one of the `zones` of `dynamic_domains`: there the engineer lets any cluster route, which a
/// provider's domain would forbid.
fn provider_domains(
    domains: &[String],
    zones: &[String],
    origin: &dyn Fn() -> Source,
) -> Result<Vec<String>, Error> {
    let in_zone =
        |domain: &str| match zones.iter().find(|zone| kharon_routing::trust::at_or_below(domain, zone)) {
            Some(zone) => Err(DomainError::InZone { zone: zone.clone() }),
            None => Ok(()),
        };
    domain_list(domains, |value, source| Error::ProviderDomain { origin: origin(), value, source }, in_zone)
}

/// A list of domains, normalised, each once; `refuse` makes the error of an entry, `check` looks
/// at each beyond the name rules.
fn domain_list(
    values: &[String],
    refuse: impl Fn(String, Box<DomainError>) -> Error,
    check: impl Fn(&str) -> Result<(), DomainError>,
) -> Result<Vec<String>, Error> {
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        let refused = |source: DomainError| refuse(value.clone(), Box::new(source));
        let domain = kharon_routing::inventory::normalize_suffix(value).map_err(|e| refused(e.into()))?;
        kharon_routing::trust::judge_name(&domain, false).map_err(|e| refused(e.into()))?;
        check(&domain).map_err(refused)?;
        if !out.contains(&domain) {
            out.push(domain);
        }
    }
    Ok(out)
}

/// The process environment, as [`Config::load_resolving`] takes it: a variable that is set, even
/// to nothing, is `Some`.
fn real_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Resolves a host name and port to addresses; [`resolve_system`] outside tests.
type Resolver = dyn Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>>;

/// The system resolver (getaddrinfo: /etc/hosts, then DNS).
fn resolve_system(host: &str, port: u16) -> std::io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// A `listen` value: `IP:PORT` as it is, or `NAME:PORT` resolved with `resolve` to the address to
/// listen on (see [`ListenName`] for which one) plus what the name resolved to.
fn parse_listen(
    value: &str,
    origin: &Source,
    resolve: &Resolver,
) -> Result<(SocketAddr, Option<ListenName>), Error> {
    if let Ok(addr) = value.parse::<SocketAddr>() {
        return Ok((addr, None));
    }
    let bad = || Error::BadAddress { setting: "listen", origin: origin.clone(), value: value.to_owned() };
    let (host, port) = value.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    // A bare IPv6 address without brackets, or `:PORT` alone, is not a name.
    if host.is_empty() || host.contains(':') || host.chars().any(char::is_whitespace) {
        return Err(bad());
    }
    let unresolvable = |reason: String| Error::Unresolvable {
        setting: "listen",
        origin: origin.clone(),
        value: value.to_owned(),
        reason,
    };
    let resolved = resolve(host, port).map_err(|e| unresolvable(e.to_string()))?;
    let chosen = resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| resolved.first())
        .copied()
        .ok_or_else(|| unresolvable("it has no address".to_owned()))?;
    Ok((chosen, Some(ListenName { name: value.to_owned(), resolved })))
}

/// How to get back to loopback, in the terms of where the address came from.
fn loopback_advice(origin: &Source, addr: SocketAddr) -> String {
    match origin {
        Source::SocketActivation => {
            format!("set ListenStream=127.0.0.1:{} in the socket unit", addr.port())
        }
        _ => "listen on 127.0.0.1".to_owned(),
    }
}

/// Expands a leading `~/` with the home directory, as users write it in config files.
pub fn expand_tilde(path: PathBuf, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_window_is_adaptive_openssh_or_a_size_within_the_engine_s_bounds() {
        assert_eq!(SshWindow::parse("adaptive"), Some(SshWindow::Adaptive));
        assert_eq!(SshWindow::parse("OpenSSH"), Some(SshWindow::Fixed(2 << 20)));
        assert_eq!(SshWindow::parse("4M"), Some(SshWindow::Fixed(4 << 20)));
        assert_eq!(SshWindow::parse("768K"), Some(SshWindow::Fixed(768 << 10)));
        assert_eq!(SshWindow::parse("1048576"), Some(SshWindow::Fixed(1 << 20)));
        for bad in ["", "fast", "128K", "32M", "4G", "-1M", "99999999999999999999M"] {
            assert_eq!(SshWindow::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn engine_settings_come_from_the_file_with_their_defaults_and_bounds() {
        let from = |path: PathBuf, dir: &Path| {
            load(&Overrides { config: Some(path), ..Default::default() }, &[], dir)
        };
        let load_with = |(dir, path): &(tempfile::TempDir, PathBuf)| from(path.clone(), dir.path()).unwrap();
        let load_err = |(dir, path): &(tempfile::TempDir, PathBuf)| match from(path.clone(), dir.path()) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        };
        let written = write_config("");
        let cfg = load_with(&written);
        assert_eq!(cfg.ssh_window.value, SshWindow::Adaptive);
        assert_eq!(cfg.answer_wait.value, DEFAULT_ANSWER_WAIT);
        assert_eq!(cfg.reload_deadline.value, DEFAULT_RELOAD_DEADLINE);
        let written =
            write_config("ssh_window = \"openssh\"\nanswer_wait_secs = 2\nreload_deadline_secs = 5\n");
        let cfg = load_with(&written);
        assert_eq!(cfg.ssh_window.value, SshWindow::OPENSSH);
        assert_eq!(cfg.answer_wait.value, Duration::from_secs(2));
        assert_eq!(cfg.reload_deadline.value, Duration::from_secs(5));
        for (text, said) in [
            ("ssh_window = \"huge\"\n", "expected adaptive, openssh, or a size"),
            ("reload_deadline_secs = 60\n", "between 1 and 55 seconds"),
            ("answer_wait_secs = 0\n", "between 1 and 3600 seconds"),
        ] {
            let e = load_err(&write_config(text));
            assert!(e.contains(said), "{text}: {e}");
        }
    }
    use kharon_common::errors::chain;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    fn write_config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn base_env(dir: &Path) -> Vec<(&'static str, String)> {
        vec![
            ("HOME", dir.display().to_string()),
            (env::CONTROL_SOCKET, dir.join("k.sock").display().to_string()),
            (env::CACHE_DIR, dir.join("cache").display().to_string()),
        ]
    }

    fn load(overrides: &Overrides, extra: &[(&'static str, String)], dir: &Path) -> Result<Config, Error> {
        let mut pairs = base_env(dir);
        pairs.extend(extra.iter().cloned());
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Config::load_with(overrides, &env_of(&pairs))
    }

    #[test]
    fn defaults_listen_on_loopback_12000() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
        assert_eq!(cfg.listen.value.to_string(), "127.0.0.1:12000");
        assert_eq!(cfg.listen.source, Source::Default);
        assert_eq!(cfg.ssh_config.value, dir.path().join(".ssh/config"));
        assert!(cfg.inventory.is_none());
        assert!(cfg.socks_auth.is_none());
    }

    #[test]
    fn flag_beats_env_beats_file() {
        let (dir, path) = write_config("listen = \"127.0.0.1:1\"\ninventory = \"~/inv.json\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.listen.value.port(), 1);
        assert_eq!(cfg.listen.source, Source::File(path.clone()));
        assert_eq!(cfg.inventory.unwrap().value, dir.path().join("inv.json"));

        let env = [(env::LISTEN, "127.0.0.1:2".to_string())];
        let cfg = load(&ov, &env, dir.path()).unwrap();
        assert_eq!(cfg.listen.value.port(), 2);
        assert_eq!(cfg.listen.source, Source::Env(env::LISTEN));

        let ov = Overrides { listen: Some("127.0.0.1:3".into()), ..ov };
        let cfg = load(&ov, &env, dir.path()).unwrap();
        assert_eq!(cfg.listen.value.port(), 3);
        assert_eq!(cfg.listen.source, Source::Flag("--listen"));
    }

    #[test]
    fn non_loopback_listen_needs_socks_auth() {
        let dir = tempfile::tempdir().unwrap();
        let ov = Overrides { listen: Some("0.0.0.0:12000".into()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains("not loopback"), "{err}");
        assert!(err.contains("username and password"), "{err}");

        let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
        let ov = Overrides { config: Some(path), listen: Some("0.0.0.0:12000".into()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.socks_auth.unwrap().value.username, "u");
    }

    #[test]
    fn an_activated_listener_gets_the_same_loopback_rule() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
        let any: SocketAddr = "0.0.0.0:12000".parse().unwrap();
        let err = cfg.check_listener(any, Source::SocketActivation).unwrap_err().to_string();
        assert!(err.contains("0.0.0.0:12000 (from socket activation) is not loopback"), "{err}");
        assert!(err.contains("ListenStream=127.0.0.1:12000"), "{err}");
        assert!(err.contains("[socks] username and password"), "{err}");
        // `ListenStream=12000` binds every address of both families.
        let dual: SocketAddr = "[::]:12000".parse().unwrap();
        assert!(cfg.check_listener(dual, Source::SocketActivation).is_err());
        cfg.check_listener("127.0.0.1:12000".parse().unwrap(), Source::SocketActivation).unwrap();
        cfg.check_listener("[::1]:12000".parse().unwrap(), Source::SocketActivation).unwrap();

        let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
        let ov = Overrides { config: Some(path), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        cfg.check_listener(any, Source::SocketActivation).unwrap();
    }

    #[test]
    fn bad_values_name_the_setting_and_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let ov = Overrides { listen: Some("localhost".into()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains("listen (from flag --listen)"), "{err}");
        assert!(err.contains("IP:PORT"), "{err}");

        let (dir, path) = write_config("lisen = \"127.0.0.1:1\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("lisen"), "{err}");

        let (dir, path) = write_config("[socks]\nusername = \"u\"\n");
        let ov = Overrides { config: Some(path), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains("must both be set"), "{err}");
    }

    /// A resolver that knows `names` only; nothing here reaches a real DNS server.
    fn resolver(names: &[(&str, &[&str])]) -> impl Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>> + use<> {
        let names: Vec<(String, Vec<std::net::IpAddr>)> = names
            .iter()
            .map(|(n, ips)| (n.to_string(), ips.iter().map(|ip| ip.parse().unwrap()).collect()))
            .collect();
        move |host, port| match names.iter().find(|(n, _)| n == host) {
            Some((_, ips)) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            None => Err(std::io::Error::other("Name or service not known")),
        }
    }

    fn load_resolving(
        overrides: &Overrides,
        extra: &[(&'static str, String)],
        dir: &Path,
        resolve: &Resolver,
    ) -> Result<Config, Error> {
        let mut pairs = base_env(dir);
        pairs.extend(extra.iter().cloned());
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Config::load_resolving(overrides, &env_of(&pairs), None, resolve)
    }

    #[test]
    fn listen_localhost_resolves_with_the_system_resolver_to_loopback() {
        let dir = tempfile::tempdir().unwrap();
        let ov = Overrides { listen: Some("localhost:12000".into()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert!(cfg.listen.value.ip().is_loopback(), "{:?}", cfg.listen);
        assert_eq!(cfg.listen.value.port(), 12000);
        assert_eq!(cfg.listen.source, Source::Flag("--listen"));
        let name = cfg.listen_name.unwrap();
        assert_eq!(name.name, "localhost:12000");
        assert!(name.resolved.contains(&cfg.listen.value), "{name:?}");
    }

    #[test]
    fn a_listen_name_that_resolves_to_loopback_only_listens_on_its_ipv4_address_first() {
        let dir = tempfile::tempdir().unwrap();
        let resolve = resolver(&[("localhost", &["::1", "127.0.0.1"]), ("ip6-localhost", &["::1"])]);
        // From each place a listen value can come from.
        let (_file_dir, path) = write_config("listen = \"localhost:3\"\n");
        let from_file = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load_resolving(&from_file, &[], dir.path(), &resolve).unwrap();
        assert_eq!(cfg.listen.value, "127.0.0.1:3".parse().unwrap());
        assert_eq!(cfg.listen.source, Source::File(path));
        let name = cfg.listen_name.unwrap();
        assert_eq!(name.resolved, ["[::1]:3".parse().unwrap(), "127.0.0.1:3".parse().unwrap()]);

        let env = [(env::LISTEN, "localhost:4".to_string())];
        let cfg = load_resolving(&Overrides::default(), &env, dir.path(), &resolve).unwrap();
        assert_eq!(
            (cfg.listen.value, cfg.listen.source),
            ("127.0.0.1:4".parse().unwrap(), Source::Env(env::LISTEN))
        );

        let ov = Overrides { listen: Some("ip6-localhost:0".into()), ..Default::default() };
        let cfg = load_resolving(&ov, &[], dir.path(), &resolve).unwrap();
        assert_eq!(cfg.listen.value, "[::1]:0".parse().unwrap());

        // An IP address is taken as it is, never resolved.
        let ov = Overrides { listen: Some("127.0.0.2:5".into()), ..Default::default() };
        let cfg = load_resolving(&ov, &[], dir.path(), &resolver(&[])).unwrap();
        assert_eq!(cfg.listen.value, "127.0.0.2:5".parse().unwrap());
        assert!(cfg.listen_name.is_none());
    }

    #[test]
    fn a_listen_name_with_any_non_loopback_address_needs_socks_auth() {
        let dir = tempfile::tempdir().unwrap();
        let resolve = resolver(&[("laptop.lan", &["127.0.1.1", "192.0.2.7"])]);
        let ov = Overrides { listen: Some("laptop.lan:12000".into()), ..Default::default() };
        let err = load_resolving(&ov, &[], dir.path(), &resolve).unwrap_err().to_string();
        assert!(
            err.contains(
                "listen address laptop.lan:12000 (from flag --listen) resolves to 192.0.2.7:12000, which is \
                 not loopback"
            ),
            "{err}"
        );
        assert!(err.contains("[socks] username and password"), "{err}");

        let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
        let ov = Overrides { config: Some(path), ..ov };
        let cfg = load_resolving(&ov, &[], dir.path(), &resolve).unwrap();
        assert_eq!(cfg.listen.value, "127.0.1.1:12000".parse().unwrap());
    }

    #[test]
    fn a_listen_name_that_does_not_resolve_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let resolve = resolver(&[("nowhere", &[])]);
        let env = [(env::LISTEN, "no-such-host.example:12000".to_string())];
        let err = load_resolving(&Overrides::default(), &env, dir.path(), &resolve).unwrap_err().to_string();
        assert!(
            err.contains(
                "listen (from env KHARON_LISTEN): cannot resolve the host name in \
                 \"no-such-host.example:12000\" (Name or service not known)"
            ),
            "{err}"
        );
        assert!(err.contains("use an IP address such as 127.0.0.1:12000"), "{err}");
        let env = [(env::LISTEN, "nowhere:1".to_string())];
        let err = load_resolving(&Overrides::default(), &env, dir.path(), &resolve).unwrap_err().to_string();
        assert!(err.contains("\"nowhere:1\" (it has no address)"), "{err}");
    }

    #[test]
    fn listen_values_that_are_neither_ip_nor_name_with_a_port_are_refused_without_resolving() {
        let dir = tempfile::tempdir().unwrap();
        let never = |_: &str, _: u16| -> std::io::Result<Vec<SocketAddr>> { panic!("must not resolve") };
        for value in
            ["localhost", "localhost:", ":12000", "localhost:65536", "localhost:-1", "::1:12000", "a b:1"]
        {
            let ov = Overrides { listen: Some(value.into()), ..Default::default() };
            let err = load_resolving(&ov, &[], dir.path(), &never).unwrap_err().to_string();
            assert!(
                err.contains(&format!("listen (from flag --listen): {value:?} is not an address")),
                "{err}"
            );
            assert!(err.contains("IP:PORT or NAME:PORT"), "{err}");
        }
    }

    #[test]
    fn timeouts_outside_one_second_to_an_hour_name_the_key_and_the_range() {
        for (key, value) in [
            ("connect_timeout_secs", "0"),
            ("connect_timeout_secs", "3601"),
            ("handshake_timeout_secs", "9223372036854775807"),
        ] {
            let (dir, path) = write_config(&format!("{key} = {value}\n"));
            let ov = Overrides { config: Some(path.clone()), ..Default::default() };
            let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
            assert!(err.contains(&format!("{key} = {value} (from {})", path.display())), "{err}");
            assert!(err.contains("between 1 and 3600 seconds"), "{err}");
        }
        let (dir, path) = write_config("connect_timeout_secs = 3600\nhandshake_timeout_secs = 1\n");
        let ov = Overrides { config: Some(path), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.connect_timeout.value, Duration::from_secs(3600));
        assert_eq!(cfg.handshake_timeout.value, Duration::from_secs(1));
    }

    #[test]
    fn a_fifo_as_config_file_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
        let ov = Overrides { config: Some(fifo.clone()), ..Default::default() };
        let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
        assert!(err.contains(&fifo.display().to_string()), "{err}");
        assert!(err.contains("not a regular file (it is a FIFO)"), "{err}");
    }

    #[test]
    fn max_connections_comes_from_the_file_and_zero_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load(&Overrides::default(), &[], dir.path()).unwrap().max_connections.is_none());

        let (dir, path) = write_config("max_connections = 32\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.max_connections, Some(Setting::new(32, Source::File(path))));

        let (dir, path) = write_config("max_connections = 0\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains(&format!("max_connections (from {})", path.display())), "{err}");
        assert!(err.contains("at least 1"), "{err}");
    }

    #[test]
    fn explicit_missing_config_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ov = Overrides { config: Some(dir.path().join("nope.toml")), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains("cannot read config file"), "{err}");
    }

    #[test]
    fn lieutenant_url_flag_beats_lieutenant_url_beats_commodore_beats_file() {
        let (dir, path) = write_config("lieutenant_url = \"https://file.example/\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        let url = cfg.lieutenant_url;
        assert_eq!((url.value.as_str(), url.source), ("https://file.example/", Source::File(path.clone())));

        let commodore = (env::COMMODORE_API_URL, "https://commodore.example".to_string());
        let cfg = load(&ov, std::slice::from_ref(&commodore), dir.path()).unwrap();
        let url = cfg.lieutenant_url;
        assert_eq!(url.value, "https://commodore.example");
        assert_eq!(url.source, Source::Env(env::COMMODORE_API_URL));

        let both = [commodore.clone(), (env::LIEUTENANT_URL, "https://lieutenant.example".to_string())];
        let cfg = load(&ov, &both, dir.path()).unwrap();
        assert_eq!(cfg.lieutenant_url.source, Source::Env(env::LIEUTENANT_URL));

        let ov = Overrides { lieutenant_url: Some("http://127.0.0.1:1".into()), ..ov };
        let cfg = load(&ov, &both, dir.path()).unwrap();
        let url = cfg.lieutenant_url;
        assert_eq!(
            (url.value.as_str(), url.source),
            ("http://127.0.0.1:1", Source::Flag("--lieutenant-url"))
        );

        // Nothing set: VSHN's production Lieutenant, as Go kharon defaults to.
        let dir = tempfile::tempdir().unwrap();
        let url = load(&Overrides::default(), &[], dir.path()).unwrap().lieutenant_url;
        assert_eq!((url.value.as_str(), url.source), ("https://api.syn.vshn.net", Source::Default));
    }

    #[test]
    fn oidc_overrides_come_from_flag_env_or_file() {
        let (dir, path) =
            write_config("oidc_client = \"from-file\"\noidc_discovery_url = \"https://idp/.well-known/x\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.oidc_client.unwrap().value, "from-file");
        assert_eq!(cfg.oidc_discovery_url.unwrap().source, Source::File(path));

        let env = [(env::OIDC_CLIENT, "from-env".to_string())];
        let cfg = load(&ov, &env, dir.path()).unwrap();
        assert_eq!(cfg.oidc_client.unwrap().source, Source::Env(env::OIDC_CLIENT));

        let ov = Overrides { oidc_client: Some("from-flag".into()), ..ov };
        let cfg = load(&ov, &env, dir.path()).unwrap();
        assert_eq!(cfg.oidc_client.unwrap().value, "from-flag");
    }

    #[test]
    fn a_lieutenant_url_that_is_not_http_names_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let env = [(env::COMMODORE_API_URL, "api.syn.example".to_string())];
        let err = load(&Overrides::default(), &env, dir.path()).unwrap_err().to_string();
        assert!(err.contains("lieutenant_url (from env COMMODORE_API_URL)"), "{err}");
        assert!(err.contains("not an http(s) URL"), "{err}");
    }

    fn load_with_dotenv(
        overrides: &Overrides,
        extra: &[(&'static str, String)],
        dir: &Path,
        dotenv: &DotEnv,
    ) -> Result<Config, Error> {
        let mut pairs = base_env(dir);
        pairs.extend(extra.iter().cloned());
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Config::load_resolving(overrides, &env_of(&pairs), Some(dotenv), &resolver(&[]))
    }

    #[test]
    fn dotenv_fills_in_commodores_variables_that_the_environment_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("project/.env");
        let vars = [
            (env::COMMODORE_API_URL, "http://dotenv.example"),
            (env::OIDC_CLIENT, "client-from-dotenv"),
            (env::API_TOKEN, "token-from-dotenv"),
            // Not commodore's: a .env is commodore's convention, not a config file of ours.
            (env::LIEUTENANT_URL, "http://not-commodores.example"),
            (env::PASSBOLT_URL, "http://not-commodores.example"),
        ];
        let dotenv = DotEnv {
            path: path.clone(),
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let cfg = load_with_dotenv(&Overrides::default(), &[], dir.path(), &dotenv).unwrap();
        let from_dotenv = |var| Source::DotEnv { var, path: path.clone() };
        assert_eq!(
            (cfg.lieutenant_url.value.as_str(), &cfg.lieutenant_url.source),
            ("http://dotenv.example", &from_dotenv(env::COMMODORE_API_URL))
        );
        assert_eq!(cfg.lieutenant_url.source.to_string(), format!("COMMODORE_API_URL in {}", path.display()));
        let client = cfg.oidc_client.unwrap();
        assert_eq!(
            (client.value.as_str(), client.source),
            ("client-from-dotenv", from_dotenv(env::OIDC_CLIENT))
        );
        assert_eq!(cfg.passbolt_url.source, Source::Default);
        assert_eq!(cfg.dotenv_file, Some(path.clone()));
        let token = cfg.api_token.unwrap();
        assert_eq!((token.value.as_str(), token.source), ("token-from-dotenv", from_dotenv(env::API_TOKEN)));
        let real = [(env::API_TOKEN, "token-from-env".to_string())];
        let token = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().api_token;
        assert_eq!(token.map(|t| t.source), Some(Source::Env(env::API_TOKEN)));

        // The real environment wins, even Go kharon's LIEUTENANT_URL over commodore's variable.
        let real = [(env::COMMODORE_API_URL, "http://env.example".to_string())];
        let url = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().lieutenant_url;
        assert_eq!(
            (url.value.as_str(), url.source),
            ("http://env.example", Source::Env(env::COMMODORE_API_URL))
        );
        let real = [(env::LIEUTENANT_URL, "http://lieutenant.example".to_string())];
        let url = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().lieutenant_url;
        assert_eq!(url.source, Source::Env(env::LIEUTENANT_URL));
        // Set but empty: python-dotenv leaves it alone, and click takes an empty one as unset.
        let real = [(env::COMMODORE_API_URL, String::new())];
        let url = load_with_dotenv(&Overrides::default(), &real, dir.path(), &dotenv).unwrap().lieutenant_url;
        assert_eq!(url.source, Source::Default);
        // A flag wins over everything.
        let ov = Overrides { lieutenant_url: Some("http://flag.example".into()), ..Default::default() };
        let url = load_with_dotenv(&ov, &[], dir.path(), &dotenv).unwrap().lieutenant_url;
        assert_eq!(url.source, Source::Flag("--lieutenant-url"));
        // A bad value names the file it came from.
        let dotenv = DotEnv {
            path: path.clone(),
            vars: [(env::COMMODORE_API_URL.to_string(), "api.syn.example".to_string())].into(),
        };
        let err = load_with_dotenv(&Overrides::default(), &[], dir.path(), &dotenv).unwrap_err().to_string();
        assert!(
            err.contains(&format!("lieutenant_url (from COMMODORE_API_URL in {})", path.display())),
            "{err}"
        );
    }

    #[test]
    fn a_url_with_a_space_or_control_character_is_refused_naming_its_source() {
        let dir = tempfile::tempdir().unwrap();
        for value in [
            "http://127.0.0.1:18601/ ",
            " http://127.0.0.1:18601",
            "http://lieutenant.example/a b",
            "http://lieutenant.example/\t",
            "http://lieutenant.example\n",
            "http://lieutenant.example/\u{a0}",
        ] {
            let ov = Overrides { lieutenant_url: Some(value.into()), ..Default::default() };
            let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
            assert!(
                err.contains(&format!("lieutenant_url (from flag --lieutenant-url): {value:?}")),
                "{err}"
            );
            assert!(err.contains("has a space or control character in it"), "{err}");
        }
        let env = [(env::PASSBOLT_URL, "https://cloud.passbolt.com/vshn ".to_string())];
        let err = load(&Overrides::default(), &env, dir.path()).unwrap_err().to_string();
        assert!(err.contains("passbolt_url (from env KHARON_PASSBOLT_URL)"), "{err}");
    }

    #[test]
    fn a_password_file_others_may_read_is_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, path) = write_config("[socks]\nusername = \"u\"\npassword = \"p\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        for mode in [0o644, 0o640, 0o604] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let warnings = load(&ov, &[], dir.path()).unwrap().warnings();
            assert_eq!(warnings.len(), 1, "{mode:o}: {warnings:?}");
            assert!(warnings[0].contains(&format!("chmod 600 {}", path.display())), "{warnings:?}");
            assert!(warnings[0].contains(&format!("mode {mode:04o}")), "{warnings:?}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load(&ov, &[], dir.path()).unwrap().warnings().is_empty());
        // No password in it: nothing to protect.
        let (dir, path) = write_config("listen = \"127.0.0.1:1\"\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let ov = Overrides { config: Some(path), ..Default::default() };
        assert!(load(&ov, &[], dir.path()).unwrap().warnings().is_empty());
    }

    #[test]
    fn passbolt_url_defaults_to_vshn_and_env_beats_file() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
        assert_eq!(cfg.passbolt_url.value, "https://cloud.passbolt.com/vshn");
        assert_eq!(cfg.passbolt_url.source, Source::Default);

        let (dir, path) = write_config("passbolt_url = \"https://file.example/p\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        assert_eq!(load(&ov, &[], dir.path()).unwrap().passbolt_url.source, Source::File(path));
        let env = [(env::PASSBOLT_URL, "http://127.0.0.1:1/x".to_string())];
        let url = load(&ov, &env, dir.path()).unwrap().passbolt_url;
        assert_eq!(
            (url.value.as_str(), url.source),
            ("http://127.0.0.1:1/x", Source::Env(env::PASSBOLT_URL))
        );
        let env = [(env::PASSBOLT_URL, "cloud.passbolt.com".to_string())];
        let err = load(&ov, &env, dir.path()).unwrap_err().to_string();
        assert!(err.contains("passbolt_url (from env KHARON_PASSBOLT_URL)"), "{err}");
    }

    #[test]
    fn other_local_users_are_served_only_when_the_file_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
        assert_eq!((cfg.allow_other_users.value, cfg.allow_other_users.source), (false, Source::Default));
        let (dir, path) = write_config("allow_other_users = true\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!((cfg.allow_other_users.value, cfg.allow_other_users.source), (true, Source::File(path)));
        let (dir, path) = write_config("allow_other_users = \"yes\"\n");
        let ov = Overrides { config: Some(path), ..Default::default() };
        let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
        assert!(err.contains("allow_other_users"), "{err}");
    }

    #[test]
    fn desktop_notifications_are_on_unless_the_file_turns_them_off() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
        let on = &cfg.desktop_notifications;
        assert_eq!((on.value, &on.source), (true, &Source::Default));
        let (dir, path) = write_config("desktop_notifications = false\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        let off = &cfg.desktop_notifications;
        assert_eq!((off.value, &off.source), (false, &Source::File(path)));
        let (dir, path) = write_config("desktop_notifications = \"off\"\n");
        let ov = Overrides { config: Some(path), ..Default::default() };
        let err = chain(&load(&ov, &[], dir.path()).unwrap_err());
        assert!(err.contains("desktop_notifications"), "{err}");
    }

    #[test]
    fn own_hosts_are_the_lieutenant_passbolt_and_a_configured_issuer() {
        let dir = tempfile::tempdir().unwrap();
        let hosts = |cfg: &Config| {
            cfg.own_hosts().iter().map(|h| (h.host.clone(), h.what.clone())).collect::<Vec<_>>()
        };
        let cfg = load(&Overrides::default(), &[], dir.path()).unwrap();
        assert_eq!(
            hosts(&cfg),
            [
                ("api.syn.vshn.net".into(), "Lieutenant".into()),
                ("cloud.passbolt.com".into(), "Passbolt".into())
            ]
        );
        let env = [(env::OIDC_DISCOVERY_URL, "https://id.example.net/realms/x".to_string())];
        let cfg = load(&Overrides::default(), &env, dir.path()).unwrap();
        assert_eq!(hosts(&cfg)[2], ("id.example.net".into(), "the OIDC issuer".into()));
    }

    #[test]
    fn dynamic_domains_are_normalised_zones_and_never_a_public_suffix() {
        let (dir, path) = write_config("dynamic_domains = [\"APPUiO.cloud.\", \"appuio.cloud\", \"corp\"]\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.dynamic_domains.value, ["appuio.cloud", "corp"]);
        assert_eq!(cfg.dynamic_domains.source, Source::File(path));
        assert_eq!(cfg.anchors().zones(), ["appuio.cloud", "corp"]);
        assert!(load(&Overrides::default(), &[], dir.path()).unwrap().dynamic_domains.value.is_empty());
        for (text, why) in [("[\"co.uk\"]", "co.uk is a public suffix"), ("[\"a b\"]", "is not allowed")] {
            let (dir, path) = write_config(&format!("dynamic_domains = {text}\n"));
            let ov = Overrides { config: Some(path), ..Default::default() };
            let err = kharon_common::errors::chain(&load(&ov, &[], dir.path()).unwrap_err());
            assert!(err.contains("dynamic_domains (from ") && err.contains(why), "{err}");
        }
    }

    #[test]
    fn provider_domains_are_normalised_and_never_a_public_suffix_nor_inside_a_dynamic_zone() {
        let text = "provider_domains = [\"VSHNmanaged.net.\", \"vshnmanaged.net\"]\ndynamic_domains = [\"apps.vshnmanaged.net\"]\n";
        let (dir, path) = write_config(text);
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let cfg = load(&ov, &[], dir.path()).unwrap();
        assert_eq!(cfg.provider_domains.value, ["vshnmanaged.net"]);
        assert_eq!(cfg.provider_domains.source, Source::File(path));
        assert_eq!(cfg.anchors().providers(), ["vshnmanaged.net"]);
        assert!(load(&Overrides::default(), &[], dir.path()).unwrap().provider_domains.value.is_empty());
        for (text, why) in [
            ("provider_domains = [\"co.uk\"]", "co.uk is a public suffix"),
            ("provider_domains = [\"a b\"]", "is not allowed"),
            (
                "provider_domains = [\"x.example\"]\ndynamic_domains = [\"example\"]",
                "it lies in example, a zone of dynamic_domains, where any cluster's dynamic names may route; \
                 remove it from one of the two lists",
            ),
        ] {
            let (dir, path) = write_config(&format!("{text}\n"));
            let ov = Overrides { config: Some(path), ..Default::default() };
            let err = kharon_common::errors::chain(&load(&ov, &[], dir.path()).unwrap_err());
            assert!(err.contains("provider_domains (from ") && err.contains(why), "{err}");
        }
    }

    #[test]
    fn socks_password_is_not_in_debug_output() {
        let auth = SocksAuth { username: "u".into(), password: "hunter2".into() };
        assert!(!format!("{auth:?}").contains("hunter2"));
    }
}
