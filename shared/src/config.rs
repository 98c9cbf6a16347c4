//! The settings of both binaries: the TOML schema, its defaults, and the one merge
//! `defaults < config file < environment < flags` that yields a validated [`Config`].
//!
//! Every value remembers where it came from ([`Source`]), so `kharonctl config` and error
//! messages can say "listen (from KHARON_LISTEN)". This module knows nothing of clap: each binary
//! hands its flags over as [`Overrides`], and the environment arrives as a lookup function so tests
//! pass a map instead of mutating the process environment.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::paths;

/// Default SOCKS listen address: loopback only (house rule 6).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:12000";
/// How long a SOCKS client may take to send its greeting, auth and request.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long resolving and connecting a target may take before the client gets a reply code.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    Flag(&'static str),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::Flag(n) => write!(f, "flag {n}"),
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
#[derive(Clone, PartialEq, Eq)]
pub struct SocksAuth {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for SocksAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SocksAuth")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// The validated, merged settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The config file that was read, if any.
    pub file: Option<PathBuf>,
    pub listen: Setting<SocketAddr>,
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
    /// The Lieutenant API base URL (protocols.md §1.1); `None` until the user sets one.
    pub lieutenant_url: Option<Setting<String>>,
    /// OIDC client id; overrides what Lieutenant's discovery (`GET /`) announces.
    pub oidc_client: Option<Setting<String>>,
    /// OIDC discovery URL; overrides what Lieutenant's discovery announces.
    pub oidc_discovery_url: Option<Setting<String>>,
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
    #[error("cannot read config file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {}: {source}", path.display())]
    Parse { path: PathBuf, source: Box<toml::de::Error> },
    #[error(
        "{setting} (from {origin}): {value:?} is not an address; expected IP:PORT such as 127.0.0.1:12000"
    )]
    BadAddress { setting: &'static str, origin: Source, value: String },
    #[error("{setting} (from {origin}) must be at least 1 second")]
    BadDuration { setting: &'static str, origin: Source },
    #[error("max_connections (from {origin}) must be at least 1; remove it to serve as many as fit")]
    NoConnections { origin: Source },
    #[error(
        "listen address {addr} (from {origin}) is not loopback; anyone on that network could use \
         the proxy. Set [socks] username and password in the config file, or listen on 127.0.0.1"
    )]
    OpenListener { addr: SocketAddr, origin: Source },
    #[error("{setting} (from {origin}): {value:?} is not an http(s) URL")]
    BadUrl { setting: &'static str, origin: Source, value: String },
    #[error("[socks] in {}: username and password must both be set and non-empty", path.display())]
    HalfAuth { path: PathBuf },
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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSocks {
    username: Option<String>,
    password: Option<String>,
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
}

impl Config {
    /// Loads the settings from the real environment.
    pub fn load(overrides: &Overrides) -> Result<Self, Error> {
        Self::load_with(overrides, &|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    /// Loads the settings with `getenv` standing in for the environment.
    pub fn load_with(overrides: &Overrides, getenv: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let home = getenv("HOME").map(PathBuf::from);
        let expand = |p: PathBuf| expand_tilde(p, home.as_deref());

        // The config file: an explicit one must exist; the default one may be missing.
        let (file_path, explicit) = match (&overrides.config, getenv(env::CONFIG)) {
            (Some(p), _) => (Some(expand(p.clone())), true),
            (None, Some(p)) => (Some(expand(PathBuf::from(p))), true),
            (None, None) => (paths::config_file().ok(), false),
        };
        let (file, file_cfg) = match file_path {
            Some(path) => match std::fs::read_to_string(&path) {
                Ok(text) => {
                    let cfg: FileConfig = toml::from_str(&text)
                        .map_err(|source| Error::Parse { path: path.clone(), source: Box::new(source) })?;
                    (Some(path), cfg)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => {
                    (None, FileConfig::default())
                }
                Err(source) => return Err(Error::Read { path, source }),
            },
            None => (None, FileConfig::default()),
        };
        let from_file = || Source::File(file.clone().unwrap_or_default());

        // One precedence rule for every setting: flag > env > file > default.
        let pick = |flag: Option<String>,
                    flag_name: &'static str,
                    env_name: &'static str,
                    file_value: Option<String>| {
            if let Some(v) = flag {
                Some((v, Source::Flag(flag_name)))
            } else if let Some(v) = getenv(env_name) {
                Some((v, Source::Env(env_name)))
            } else {
                file_value.map(|v| (v, from_file()))
            }
        };
        let path_str = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());

        let listen = match pick(overrides.listen.clone(), "--listen", env::LISTEN, file_cfg.listen.clone()) {
            Some((v, source)) => {
                let addr = v.parse::<SocketAddr>().map_err(|_| Error::BadAddress {
                    setting: "listen",
                    origin: source.clone(),
                    value: v.clone(),
                })?;
                Setting::new(addr, source)
            }
            None => Setting::new(
                DEFAULT_LISTEN.parse().unwrap_or(SocketAddr::from(([127, 0, 0, 1], 12000))),
                Source::Default,
            ),
        };

        let inventory = pick(
            path_str(&overrides.inventory),
            "--inventory",
            env::INVENTORY,
            path_str(&file_cfg.inventory),
        )
        .map(|(v, s)| Setting::new(expand(PathBuf::from(v)), s));

        let ssh_config = match pick(
            path_str(&overrides.ssh_config),
            "--ssh-config",
            env::SSH_CONFIG,
            path_str(&file_cfg.ssh_config),
        ) {
            Some((v, s)) => Setting::new(expand(PathBuf::from(v)), s),
            None => {
                let home = home.clone().ok_or(paths::Error::NoHome)?;
                Setting::new(home.join(".ssh/config"), Source::Default)
            }
        };

        let control_socket = match pick(
            path_str(&overrides.control_socket),
            "--control-socket",
            env::CONTROL_SOCKET,
            path_str(&file_cfg.control_socket),
        ) {
            Some((v, s)) => Setting::new(expand(PathBuf::from(v)), s),
            None => Setting::new(paths::control_socket()?, Source::Default),
        };
        paths::check_socket_path(&control_socket.value)?;

        let cache_dir = match pick(None, "", env::CACHE_DIR, path_str(&file_cfg.cache_dir)) {
            Some((v, s)) => Setting::new(expand(PathBuf::from(v)), s),
            None => Setting::new(paths::cache_dir()?, Source::Default),
        };

        let socks_auth = match &file_cfg.socks {
            None => None,
            Some(FileSocks { username: None, password: None }) => None,
            Some(FileSocks { username: Some(u), password: Some(p) }) if !u.is_empty() && !p.is_empty() => {
                Some(Setting::new(SocksAuth { username: u.clone(), password: p.clone() }, from_file()))
            }
            Some(_) => return Err(Error::HalfAuth { path: file.clone().unwrap_or_default() }),
        };

        let secs = |name: &'static str, v: Option<u64>, default: Duration| match v {
            None => Ok(Setting::new(default, Source::Default)),
            Some(0) => Err(Error::BadDuration { setting: name, origin: from_file() }),
            Some(s) => Ok(Setting::new(Duration::from_secs(s), from_file())),
        };
        let handshake_timeout =
            secs("handshake_timeout_secs", file_cfg.handshake_timeout_secs, DEFAULT_HANDSHAKE_TIMEOUT)?;
        let connect_timeout =
            secs("connect_timeout_secs", file_cfg.connect_timeout_secs, DEFAULT_CONNECT_TIMEOUT)?;
        let max_connections = match file_cfg.max_connections {
            None => None,
            Some(0) => return Err(Error::NoConnections { origin: from_file() }),
            Some(n) => Some(Setting::new(n, from_file())),
        };

        // Lieutenant: flag > LIEUTENANT_URL > COMMODORE_API_URL > file (protocols.md §1.1). The URL is
        // kept as the user wrote it: commodore's token cache is keyed by that exact string.
        let http_url = |setting: &'static str, picked: Option<(String, Source)>| match picked {
            None => Ok(None),
            Some((v, source)) => match url::Url::parse(&v) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.has_host() => {
                    Ok(Some(Setting::new(v, source)))
                }
                _ => Err(Error::BadUrl { setting, origin: source, value: v }),
            },
        };
        let lieutenant_url = http_url(
            "lieutenant_url",
            match pick(overrides.lieutenant_url.clone(), "--lieutenant-url", env::LIEUTENANT_URL, None) {
                Some(p) => Some(p),
                None => pick(None, "", env::COMMODORE_API_URL, file_cfg.lieutenant_url.clone()),
            },
        )?;
        let oidc_client = pick(
            overrides.oidc_client.clone(),
            "--oidc-client",
            env::OIDC_CLIENT,
            file_cfg.oidc_client.clone(),
        )
        .map(|(v, s)| Setting::new(v, s));
        let oidc_discovery_url = http_url(
            "oidc_discovery_url",
            pick(
                overrides.oidc_discovery_url.clone(),
                "--oidc-discovery-url",
                env::OIDC_DISCOVERY_URL,
                file_cfg.oidc_discovery_url.clone(),
            ),
        )?;

        let config = Config {
            file,
            listen,
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
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), Error> {
        if !self.listen.value.ip().is_loopback() && self.socks_auth.is_none() {
            return Err(Error::OpenListener { addr: self.listen.value, origin: self.listen.source.clone() });
        }
        Ok(())
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
    fn bad_values_name_the_setting_and_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let ov = Overrides { listen: Some("localhost".into()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains("listen (from flag --listen)"), "{err}");
        assert!(err.contains("IP:PORT"), "{err}");

        let (dir, path) = write_config("lisen = \"127.0.0.1:1\"\n");
        let ov = Overrides { config: Some(path.clone()), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains(&path.display().to_string()), "{err}");
        assert!(err.contains("lisen"), "{err}");

        let (dir, path) = write_config("[socks]\nusername = \"u\"\n");
        let ov = Overrides { config: Some(path), ..Default::default() };
        let err = load(&ov, &[], dir.path()).unwrap_err().to_string();
        assert!(err.contains("must both be set"), "{err}");
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
        let url = cfg.lieutenant_url.unwrap();
        assert_eq!((url.value.as_str(), url.source), ("https://file.example/", Source::File(path.clone())));

        let commodore = (env::COMMODORE_API_URL, "https://commodore.example".to_string());
        let cfg = load(&ov, std::slice::from_ref(&commodore), dir.path()).unwrap();
        let url = cfg.lieutenant_url.unwrap();
        assert_eq!(url.value, "https://commodore.example");
        assert_eq!(url.source, Source::Env(env::COMMODORE_API_URL));

        let both = [commodore.clone(), (env::LIEUTENANT_URL, "https://lieutenant.example".to_string())];
        let cfg = load(&ov, &both, dir.path()).unwrap();
        assert_eq!(cfg.lieutenant_url.unwrap().source, Source::Env(env::LIEUTENANT_URL));

        let ov = Overrides { lieutenant_url: Some("http://127.0.0.1:1".into()), ..ov };
        let cfg = load(&ov, &both, dir.path()).unwrap();
        let url = cfg.lieutenant_url.unwrap();
        assert_eq!(
            (url.value.as_str(), url.source),
            ("http://127.0.0.1:1", Source::Flag("--lieutenant-url"))
        );

        let dir = tempfile::tempdir().unwrap();
        assert!(load(&Overrides::default(), &[], dir.path()).unwrap().lieutenant_url.is_none());
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

    #[test]
    fn socks_password_is_not_in_debug_output() {
        let auth = SocksAuth { username: "u".into(), password: "hunter2".into() };
        assert!(!format!("{auth:?}").contains("hunter2"));
    }
}
