//! Reading: the config file and its `Include`s → a tree of parsed directives, each with its
//! file:line. Every line is validated here, once, whether or not any host will use it, and every
//! bad line is collected so the user sees them all at once.
//!
//! The tree keeps the file structure (an `Include` stays a node) because OpenSSH's matching
//! depends on it: an Include inside a Host block that does not match makes the whole included
//! file inert, and the included file's `Host` lines do not end the including file's block.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::algorithms::{self, Category};
use super::canonical;
use super::criteria::{self, Condition};
use super::error::{Error, Origin};
use super::expand;
use super::hop::{AddressFamily, StrictHostKeyChecking};
use super::jump::{self, JumpSpec, ProxyCommand};
use super::keyword::{self, Key, Kind};
use super::lexer::{self, Line};
use super::machine;
use super::pattern;

/// How deep `Include`s may nest below the top-level file: OpenSSH's `READCONF_MAX_DEPTH`. Past
/// it, ssh refuses the config; without a bound, a long chain of files would overflow the stack
/// of a reload (and take the daemon down).
const MAX_INCLUDE_DEPTH: usize = 16;

/// The longest time an option may name: OpenSSH's `convtime` refuses more than `INT_MAX`
/// seconds (68 years). It also keeps every `Instant + Duration` later on far from overflowing.
const MAX_TIME_SECS: u64 = i32::MAX as u64;

/// One `Host` pattern.
#[derive(Debug, Clone)]
pub(super) struct HostPattern {
    pub negated: bool,
    pub pattern: String,
}

/// `IdentityAgent`.
#[derive(Debug, Clone)]
pub(super) enum Agent {
    None,
    Env,
    /// Unexpanded; legacy `$NAME` already rewritten to `${NAME}`.
    Path(String),
}

/// A supported directive's value, parsed and checked; path-like values keep their tokens.
#[derive(Debug, Clone)]
pub(super) enum Setting {
    HostName(String),
    User(String),
    Port(u16),
    IdentityFile(String),
    IdentitiesOnly(bool),
    IdentityAgent(Agent),
    CertificateFile(String),
    /// `None` is `ProxyJump none`.
    ProxyJump(Option<Vec<JumpSpec>>),
    ProxyCommand(ProxyCommand),
    ServerAliveInterval(Duration),
    ServerAliveCountMax(u32),
    /// `None` is `none` or 0: no timeout.
    ConnectTimeout(Option<Duration>),
    StrictHostKeyChecking(StrictHostKeyChecking),
    /// Empty is `none`.
    UserKnownHostsFile(Vec<String>),
    GlobalKnownHostsFile(Vec<String>),
    HostKeyAlias(String),
    AddressFamily(AddressFamily),
    BindAddress(String),
    BindInterface(String),
    /// Already applied to kharon's default list; whether the order is the user's (see
    /// `algorithms::keeps_known_hosts_order`).
    Algorithms(Category, Vec<&'static str>, bool),
    CanonicalizeHostname(canonical::Mode),
    /// Lowercased, without a trailing dot; `none` stays as an entry (it ends the list).
    CanonicalDomains(Vec<String>),
    CanonicalizeMaxDots(u32),
    CanonicalizeFallbackLocal(bool),
    /// (source patterns, target patterns), lowercased; empty for `none`.
    CanonicalizePermittedCnames(Vec<(String, String)>),
    UseKeychain(bool),
    BatchMode(bool),
    KbdInteractiveAuthentication(bool),
    PasswordAuthentication(bool),
    NumberOfPasswordPrompts(u32),
    /// The method names, lowercased, in order.
    PreferredAuthentications(Vec<String>),
    RequiredRsaSize(u32),
    /// Bytes (0 is `default`: the cipher's own limit), and the interval when one is given (not
    /// `none`; 0 turns time-based re-keying off).
    RekeyLimit(u64, Option<Duration>),
}

#[derive(Debug, Clone)]
pub(super) struct Directive {
    pub origin: Origin,
    pub setting: Setting,
}

#[derive(Debug, Clone)]
pub(super) enum Item {
    Host {
        patterns: Vec<HostPattern>,
        origin: Origin,
    },
    Match {
        conditions: Vec<Condition>,
        origin: Origin,
    },
    Set(Directive),
    /// Indices into [`Loaded::files`], in glob order.
    Include(Vec<usize>),
}

#[derive(Debug, Clone)]
pub(super) struct File {
    pub items: Vec<Item>,
}

/// Everything `load` learned.
#[derive(Debug, Clone)]
pub(super) struct Loaded {
    pub files: Vec<File>,
    /// Index of the top-level file in `files`.
    pub root: usize,
    /// Files actually read, in reading order.
    pub read: Vec<PathBuf>,
    /// Environment variables named by `${VAR}` anywhere in the config.
    pub env_names: BTreeSet<String>,
    /// Some `Match` line names `final`: OpenSSH then reads the config a second time for every
    /// host, whatever that line's outcome (readconf.c `match_cfg_line`).
    pub wants_final: bool,
}

/// Reads the user's config `path` and, when given, the system-wide one after it (ssh_config(5):
/// "system-wide configuration file", read after the user's, so the user's values win; readconf.c
/// `read_config_file_depth` for each, ssh.c `process_config_files`). Both are walked as one: the
/// root is two Includes, the user's file and then the system's, each starting outside any Host
/// block, as each of ssh's files does.
pub(super) fn load(path: &Path, system: Option<&Path>, home: &Path) -> Result<Loaded, Error> {
    let mut loader = Loader {
        home,
        include_base: home.join(".ssh"),
        user: true,
        files: Vec::new(),
        by_path: HashMap::new(),
        stack: Vec::new(),
        read: Vec::new(),
        errors: Vec::new(),
        ignore_unknown: Vec::new(),
        env_names: BTreeSet::new(),
        wants_final: false,
    };
    let root = match kharon_common::files::read_regular(path) {
        Ok(bytes) => loader.file(path, &bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // OpenSSH treats a missing ~/.ssh/config as empty; so do we (direct hops only).
            tracing::debug!(path = %path.display(), "no ssh config file; using defaults");
            loader.files.push(File { items: Vec::new() });
            loader.files.len() - 1
        }
        Err(source) => return Err(Error::Read { path: path.to_owned(), source }),
    };
    let root = match system {
        None => root,
        Some(system) => {
            // Relative Includes of the system file are under its directory (/etc/ssh: readconf.c
            // `SSHDIR`), and `~` is refused there, as in ssh.
            loader.include_base = system.parent().map_or_else(|| PathBuf::from("/"), Path::to_owned);
            loader.user = false;
            let mut items = vec![Item::Include(vec![root])];
            match kharon_common::files::read_regular(system) {
                Ok(bytes) => items.push(Item::Include(vec![loader.file(system, &bytes)])),
                // ssh skips a system file it cannot open (readconf.c `read_config_file_depth`).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    tracing::debug!(path = %system.display(), "no system-wide ssh config");
                }
                Err(e) => {
                    tracing::warn!(path = %system.display(), error = %e, "cannot read the system-wide ssh config; ssh skips it too");
                }
            }
            loader.files.push(File { items });
            loader.files.len() - 1
        }
    };
    let Loader { files, read, mut errors, env_names, wants_final, .. } = loader;
    match errors.len() {
        0 => Ok(Loaded { files, root, read, env_names, wants_final }),
        1 => Err(errors.remove(0)),
        _ => Err(Error::Many(errors)),
    }
}

struct Loader<'a> {
    home: &'a Path,
    /// Where a relative `Include` path starts: `~/.ssh` in the user's files, the system file's
    /// directory in the system's.
    include_base: PathBuf,
    /// Reading the user's files (`~` allowed in Include), not the system's.
    user: bool,
    files: Vec<File>,
    /// Canonical path → index, so a file included twice is parsed (and reported) once.
    by_path: HashMap<PathBuf, usize>,
    /// Canonical paths of the files being read, outermost first: an Include cycle check.
    stack: Vec<PathBuf>,
    read: Vec<PathBuf>,
    errors: Vec<Error>,
    /// `IgnoreUnknown` values seen so far. OpenSSH applies the one of the matching Host block;
    /// validation is host-independent, so any earlier IgnoreUnknown line counts.
    ignore_unknown: Vec<String>,
    env_names: BTreeSet<String>,
    wants_final: bool,
}

impl Loader<'_> {
    /// Parses one file's bytes and returns its index in `files`.
    fn file(&mut self, path: &Path, bytes: &[u8]) -> usize {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        self.read.push(path.to_owned());
        self.stack.push(canonical.clone());
        let text = String::from_utf8_lossy(bytes);
        let mut items = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let origin = Origin { file: path.to_owned(), line: index + 1 };
            match self.line(raw, &origin) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => {}
                Err(message) => self.errors.push(Error::Invalid { origin, message }),
            }
        }
        self.stack.pop();
        self.files.push(File { items });
        let index = self.files.len() - 1;
        self.by_path.insert(canonical, index);
        index
    }

    fn line(&mut self, raw: &str, origin: &Origin) -> Result<Option<Item>, String> {
        let Some(line) = lexer::split(raw).map_err(|e| e.to_string())? else {
            return Ok(None);
        };
        let Some((name, kind)) = keyword::lookup(line.keyword) else {
            if self.ignored(line.keyword) {
                tracing::debug!(%origin, option = line.keyword, "ignoring option listed in IgnoreUnknown");
                return Ok(None);
            }
            return Err(format!(
                "unknown option {:?}; fix the spelling, or name it in IgnoreUnknown (before this line)",
                line.keyword
            ));
        };
        let refused = |this: &Self, what: String, why: &str| {
            if this.ignored(name) {
                tracing::debug!(%origin, option = name, "ignoring unsupported option listed in IgnoreUnknown");
                Ok(None)
            } else {
                Err(format!(
                    "{what} is not supported: {why}; remove it, or name {name} in IgnoreUnknown (before \
                     this line) to have kharon skip it"
                ))
            }
        };
        match kind {
            Kind::Host => {
                Ok(Some(Item::Host { patterns: host_patterns(&line.args, origin)?, origin: origin.clone() }))
            }
            Kind::Match => {
                let conditions = criteria::parse(&line.args)?;
                for condition in &conditions {
                    if let criteria::Criterion::Exec(command) = &condition.criterion {
                        expand::check(command, expand::EXEC, false)
                            .map_err(|e| format!("Match exec: {e}"))?;
                    }
                }
                self.wants_final |= criteria::wants_final(&conditions);
                Ok(Some(Item::Match { conditions, origin: origin.clone() }))
            }
            Kind::Include => Ok(Some(Item::Include(self.include(&line.args, origin)))),
            Kind::IgnoreUnknown => {
                self.ignore_unknown.push(one(name, &line)?.to_owned());
                Ok(None)
            }
            Kind::Ignore => {
                tracing::debug!(%origin, option = name, "ignoring ssh config option that only affects interactive ssh");
                Ok(None)
            }
            Kind::RefuseUnless(fine, why) => {
                if line.args.first().is_some_and(|arg| fine.iter().any(|v| v.eq_ignore_ascii_case(arg))) {
                    tracing::debug!(%origin, option = name, "ignoring ssh config option set to what kharon does anyway");
                    Ok(None)
                } else {
                    refused(self, format!("{name} {}", line.args.join(" ")), why)
                }
            }
            Kind::Apply(key) => {
                let setting = self.setting(key, name, &line, origin)?;
                Ok(Some(Item::Set(Directive { origin: origin.clone(), setting })))
            }
        }
    }

    fn ignored(&self, keyword: &str) -> bool {
        self.ignore_unknown.iter().any(|list| pattern::list_matches(keyword, list))
    }

    fn setting(&mut self, key: Key, name: &str, line: &Line<'_>, origin: &Origin) -> Result<Setting, String> {
        let prefixed = |message: String| format!("{name}: {message}");
        Ok(match key {
            Key::HostName => {
                let value = one(name, line)?;
                expand::check(value, expand::HOST_NAME, false).map_err(prefixed)?;
                Setting::HostName(value.to_owned())
            }
            Key::User => Setting::User(one(name, line)?.to_owned()),
            Key::Port => Setting::Port(jump::parse_port(one(name, line)?).map_err(prefixed)?),
            Key::IdentityFile => Setting::IdentityFile(self.path(name, one(name, line)?)?),
            Key::CertificateFile => Setting::CertificateFile(self.path(name, one(name, line)?)?),
            Key::IdentitiesOnly => Setting::IdentitiesOnly(yes_no(name, one(name, line)?)?),
            Key::UseKeychain => Setting::UseKeychain(yes_no(name, one(name, line)?)?),
            Key::BatchMode => Setting::BatchMode(yes_no(name, one(name, line)?)?),
            Key::KbdInteractiveAuthentication => {
                Setting::KbdInteractiveAuthentication(yes_no(name, one(name, line)?)?)
            }
            Key::PasswordAuthentication => Setting::PasswordAuthentication(yes_no(name, one(name, line)?)?),
            Key::NumberOfPasswordPrompts => {
                let value = one(name, line)?;
                Setting::NumberOfPasswordPrompts(
                    value.parse().map_err(|_| format!("{name}: bad number {value:?}"))?,
                )
            }
            Key::PreferredAuthentications => Setting::PreferredAuthentications(
                one(name, line)?.split(',').map(|m| m.trim().to_ascii_lowercase()).collect(),
            ),
            Key::RequiredRsaSize => {
                let value = one(name, line)?;
                Setting::RequiredRsaSize(value.parse().map_err(|_| format!("{name}: bad number {value:?}"))?)
            }
            Key::RekeyLimit => rekey_limit(name, &line.args)?,
            Key::IdentityAgent => Setting::IdentityAgent(match one(name, line)? {
                "none" => Agent::None,
                "SSH_AUTH_SOCK" => Agent::Env,
                // Legacy form: `IdentityAgent $NAME` names a variable holding the socket path.
                value if value.strip_prefix('$').is_some_and(expand::valid_env_name) => {
                    Agent::Path(self.path(name, &format!("${{{}}}", &value[1..]))?)
                }
                value => Agent::Path(self.path(name, value)?),
            }),
            Key::ProxyJump => Setting::ProxyJump(jump::parse_list(line.rest).map_err(prefixed)?),
            Key::ProxyCommand => {
                expand::check(line.rest, expand::COMMAND, false).map_err(prefixed)?;
                Setting::ProxyCommand(jump::parse_proxy_command(line.rest))
            }
            Key::ServerAliveInterval => Setting::ServerAliveInterval(time(name, one(name, line)?)?),
            Key::ServerAliveCountMax => {
                let value = one(name, line)?;
                Setting::ServerAliveCountMax(
                    value.parse().map_err(|_| format!("{name}: bad number {value:?}"))?,
                )
            }
            Key::ConnectTimeout => Setting::ConnectTimeout(match one(name, line)? {
                v if v.eq_ignore_ascii_case("none") => None,
                v => Some(time(name, v)?).filter(|t| !t.is_zero()),
            }),
            Key::StrictHostKeyChecking => Setting::StrictHostKeyChecking(strict(name, one(name, line)?)?),
            Key::UserKnownHostsFile => Setting::UserKnownHostsFile(self.paths(name, &line.args, true)?),
            Key::GlobalKnownHostsFile => Setting::GlobalKnownHostsFile(self.paths(name, &line.args, false)?),
            Key::HostKeyAlias => Setting::HostKeyAlias(one(name, line)?.to_owned()),
            Key::AddressFamily => Setting::AddressFamily(address_family(name, one(name, line)?)?),
            Key::BindAddress => Setting::BindAddress(one(name, line)?.to_owned()),
            Key::BindInterface => Setting::BindInterface(one(name, line)?.to_owned()),
            Key::Algorithms(category) => {
                let value = one(name, line)?;
                let (list, skipped) = algorithms::parse(category, value).map_err(prefixed)?;
                if !skipped.is_empty() {
                    tracing::debug!(%origin, option = name, ?skipped, "skipping algorithms kharon does not implement");
                }
                Setting::Algorithms(category, list, !algorithms::keeps_known_hosts_order(value))
            }
            Key::CanonicalizeHostname => Setting::CanonicalizeHostname(canonicalize(name, one(name, line)?)?),
            Key::CanonicalDomains => Setting::CanonicalDomains(domains(name, &line.args)?),
            Key::CanonicalizeMaxDots => {
                let value = one(name, line)?;
                Setting::CanonicalizeMaxDots(
                    value.parse().map_err(|_| format!("{name}: bad number {value:?}"))?,
                )
            }
            Key::CanonicalizeFallbackLocal => {
                Setting::CanonicalizeFallbackLocal(yes_no(name, one(name, line)?)?)
            }
            Key::CanonicalizePermittedCnames => {
                Setting::CanonicalizePermittedCnames(permitted_cnames(name, &line.args)?)
            }
        })
    }

    /// Checks a path option's `~`, `${VAR}` and tokens now; expands later, per hop.
    fn path(&mut self, name: &str, value: &str) -> Result<String, String> {
        let vars = expand::check(value, expand::PATH, true).map_err(|e| format!("{name}: {e}"))?;
        self.env_names.extend(vars);
        Ok(value.to_owned())
    }

    /// Known-hosts lists; `none` alone means no file. Only the user list takes tokens and
    /// variables (OpenSSH expands just `~` in GlobalKnownHostsFile).
    fn paths(&mut self, name: &str, args: &[String], tokens: bool) -> Result<Vec<String>, String> {
        if args.len() == 1 && args[0] == "none" {
            return Ok(Vec::new());
        }
        args.iter()
            .map(|arg| {
                if arg.is_empty() {
                    Err(format!("{name}: empty argument"))
                } else if tokens {
                    self.path(name, arg)
                } else {
                    expand::tilde(arg, Path::new("/")).map_err(|e| format!("{name}: {e}"))?;
                    Ok(arg.clone())
                }
            })
            .collect()
    }

    /// `Include`: relative paths are under `~/.ssh` (the system file's directory in the system
    /// file; not the including file's directory), globs are sorted, a pattern that matches
    /// nothing is fine, all as in OpenSSH (readconf.c, "Ensure all paths are anchored").
    fn include(&mut self, args: &[String], origin: &Origin) -> Vec<usize> {
        let mut included = Vec::new();
        for arg in args {
            if !self.user && arg.starts_with('~') {
                self.errors.push(Error::Invalid {
                    origin: origin.clone(),
                    message: format!(
                        "Include: bad include path {arg:?}: a system-wide file cannot name ~ (as in ssh)"
                    ),
                });
                continue;
            }
            let pattern = match expand::tilde(arg, self.home) {
                Ok(p) => self.include_base.join(p),
                Err(e) => {
                    self.errors
                        .push(Error::Invalid { origin: origin.clone(), message: format!("Include: {e}") });
                    continue;
                }
            };
            let paths = if pattern::has_glob_meta(&pattern.to_string_lossy()) {
                pattern::glob(&pattern)
            } else if pattern.is_file() {
                vec![pattern.clone()]
            } else {
                Vec::new()
            };
            if paths.is_empty() {
                tracing::debug!(%origin, pattern = %pattern.display(), "Include matched no files");
            }
            for path in paths {
                if let Some(index) = self.include_one(&path, origin) {
                    included.push(index);
                }
            }
        }
        included
    }

    fn include_one(&mut self, path: &Path, origin: &Origin) -> Option<usize> {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_owned());
        if let Some(start) = self.stack.iter().position(|p| *p == canonical) {
            let cycle: Vec<String> =
                self.stack[start..].iter().chain([&canonical]).map(|p| p.display().to_string()).collect();
            self.errors.push(Error::Invalid {
                origin: origin.clone(),
                message: format!("Include cycle: {}; remove one of these Include lines", cycle.join(" -> ")),
            });
            return None;
        }
        if let Some(&index) = self.by_path.get(&canonical) {
            return Some(index);
        }
        // The stack holds the top-level file and every file including this one: its length is
        // the depth the new file would have.
        if self.stack.len() > MAX_INCLUDE_DEPTH {
            self.errors.push(Error::Invalid {
                origin: origin.clone(),
                message: format!(
                    "Include of {} nests more than {MAX_INCLUDE_DEPTH} files deep (OpenSSH's limit); \
                     include these files from a shallower level",
                    path.display()
                ),
            });
            return None;
        }
        match kharon_common::files::read_regular(path) {
            Ok(bytes) => Some(self.file(path, &bytes)),
            Err(source) => {
                self.errors.push(Error::Read { path: path.to_owned(), source });
                None
            }
        }
    }
}

fn one<'l>(name: &str, line: &'l Line<'_>) -> Result<&'l str, String> {
    match line.args.as_slice() {
        [value] if value.is_empty() => Err(format!("{name}: empty argument")),
        [value] => Ok(value),
        args => Err(format!("{name} takes one argument, found {}", args.len())),
    }
}

fn host_patterns(args: &[String], origin: &Origin) -> Result<Vec<HostPattern>, String> {
    args.iter()
        .map(|arg| {
            let (negated, pattern) = match arg.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, arg.as_str()),
            };
            if pattern.is_empty() {
                return Err("Host: empty pattern".to_owned());
            }
            if pattern.contains(',') {
                // OpenSSH takes the comma literally (only Match uses comma lists), so this block
                // matches nothing; almost certainly not what was meant.
                tracing::warn!(%origin, pattern, "Host patterns are separated by spaces, not commas; this one never matches");
            }
            Ok(HostPattern { negated, pattern: pattern.to_owned() })
        })
        .collect()
}

/// `CanonicalDomains`: `none` only alone; each entry a valid domain (misc.c `valid_domain`).
fn domains(name: &str, args: &[String]) -> Result<Vec<String>, String> {
    if args.len() > 1 && args.iter().any(|a| a.eq_ignore_ascii_case("none")) {
        return Err(format!("{name}: \"none\" must appear alone"));
    }
    args.iter()
        .map(|arg| {
            if arg.eq_ignore_ascii_case("none") {
                Ok("none".to_owned())
            } else if machine::valid_domain(arg) {
                Ok(arg.trim_end_matches('.').to_ascii_lowercase())
            } else {
                Err(format!("{name}: invalid domain name {arg:?}"))
            }
        })
        .collect()
}

/// `CanonicalizePermittedCNAMEs`: `none` alone, `*`, or `SOURCES:TARGETS` pattern lists.
fn permitted_cnames(name: &str, args: &[String]) -> Result<Vec<(String, String)>, String> {
    if args.len() == 1 && args[0].eq_ignore_ascii_case("none") {
        return Ok(Vec::new());
    }
    args.iter()
        .map(|arg| {
            if arg.eq_ignore_ascii_case("none") {
                return Err(format!("{name}: \"none\" must appear alone"));
            }
            if arg == "*" {
                return Ok(("*".to_owned(), "*".to_owned()));
            }
            match arg.to_ascii_lowercase().split_once(':') {
                Some((source, target)) if !target.is_empty() => Ok((source.to_owned(), target.to_owned())),
                _ => Err(format!("{name}: invalid rule {arg:?} (expected SOURCES:TARGETS, * or none)")),
            }
        })
        .collect()
}

fn yes_no(name: &str, value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(true),
        "no" | "false" => Ok(false),
        _ => Err(format!("{name}: expected yes or no, found {value:?}")),
    }
}

/// OpenSSH `convtime`: `90`, `90s`, `1m30s`, `1h`, `2d`, `1w`; a bare number is seconds.
/// `StrictHostKeyChecking`: `ask` is `yes`, since the daemon cannot ask (refusing is what `ask`
/// does when nobody answers).
fn strict(name: &str, value: &str) -> Result<StrictHostKeyChecking, String> {
    match value.to_ascii_lowercase().as_str() {
        "yes" | "true" | "ask" => Ok(StrictHostKeyChecking::Yes),
        "accept-new" => Ok(StrictHostKeyChecking::AcceptNew),
        "no" | "false" | "off" => Ok(StrictHostKeyChecking::No),
        _ => Err(format!("{name}: bad value {value:?} (yes, ask, accept-new, no or off)")),
    }
}

fn address_family(name: &str, value: &str) -> Result<AddressFamily, String> {
    match value.to_ascii_lowercase().as_str() {
        "any" => Ok(AddressFamily::Any),
        "inet" => Ok(AddressFamily::Inet),
        "inet6" => Ok(AddressFamily::Inet6),
        _ => Err(format!("{name}: bad value {value:?} (any, inet or inet6)")),
    }
}

fn canonicalize(name: &str, value: &str) -> Result<canonical::Mode, String> {
    match value.to_ascii_lowercase().as_str() {
        "yes" | "true" => Ok(canonical::Mode::Yes),
        "no" | "false" => Ok(canonical::Mode::No),
        "always" => Ok(canonical::Mode::Always),
        _ => Err(format!("{name}: bad value {value:?} (yes, no or always)")),
    }
}

/// `RekeyLimit DATA [INTERVAL]` as OpenSSH 9.2 reads it (readconf.c, `process_config_line`,
/// `oRekeyLimit`): DATA is `default` or a size (`scan_scaled`: a number with an optional fraction
/// and a B, K, M, G, T, P or E suffix in powers of 1024), at least 16 bytes unless 0; INTERVAL is
/// `none` (the same as not giving one) or a time.
fn rekey_limit(name: &str, args: &[String]) -> Result<Setting, String> {
    let (data, interval) = match args {
        [data] => (data, None),
        [data, interval] => (data, Some(interval)),
        _ => {
            return Err(format!(
                "{name} takes one or two arguments (RekeyLimit 1G 1h), found {}",
                args.len()
            ));
        }
    };
    let bytes = if data == "default" { 0 } else { scaled(name, data)? };
    if bytes != 0 && bytes < 16 {
        return Err(format!("{name}: {data:?} is too small (at least 16 bytes, or default)"));
    }
    let interval = match interval {
        None => None,
        Some(v) if v == "none" => None,
        Some(v) => Some(time(name, v)?),
    };
    Ok(Setting::RekeyLimit(bytes, interval))
}

/// A size as OpenSSH's `scan_scaled` reads it (openbsd-compat/fmt_scaled.c): digits, an optional
/// fraction, and an optional unit, B, K, M, G, T, P or E in either case, each 1024 times the one
/// before.
fn scaled(name: &str, value: &str) -> Result<u64, String> {
    let bad = || format!("{name}: bad size {value:?} (e.g. 512M, 1G, 1.5G)");
    let digits_end = value.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(value.len());
    let (number, unit) = value.split_at(digits_end);
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        "E" => 60,
        _ => return Err(bad()),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || fraction.contains('.') {
        return Err(bad());
    }
    let whole: u64 = whole.parse().map_err(|_| bad())?;
    let scale = 1u64 << shift;
    let mut bytes = whole.checked_mul(scale).ok_or_else(bad)?;
    if !fraction.is_empty() {
        // As many fractional digits as the unit resolves (a byte has none).
        let digits: u64 = fraction.parse().map_err(|_| bad())?;
        let denominator = 10u64.checked_pow(fraction.len() as u32).ok_or_else(bad)?;
        let part = u128::from(digits) * u128::from(scale) / u128::from(denominator);
        bytes = bytes.checked_add(u64::try_from(part).map_err(|_| bad())?).ok_or_else(bad)?;
    }
    Ok(bytes)
}

fn time(name: &str, value: &str) -> Result<Duration, String> {
    let bad = || format!("{name}: bad time {value:?} (e.g. 30, 30s, 5m, 1h30m)");
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in value.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = n.checked_mul(unit).and_then(|s| total.checked_add(s)).ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() {
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = total.checked_add(n).ok_or_else(bad)?;
    } else if value.is_empty() {
        return Err(bad());
    }
    if total > MAX_TIME_SECS {
        return Err(format!("{name}: time {value:?} is longer than {MAX_TIME_SECS} seconds (68 years)"));
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_scan_scaled() {
        assert_eq!(scaled("X", "16"), Ok(16));
        assert_eq!(scaled("X", "512K"), Ok(512 << 10));
        assert_eq!(scaled("X", "4m"), Ok(4 << 20));
        assert_eq!(scaled("X", "1G"), Ok(1 << 30));
        assert_eq!(scaled("X", "1.5G"), Ok(3 << 29));
        assert_eq!(scaled("X", "2B"), Ok(2));
        for bad in ["", "G", "1X", "1.2.3M", "-1M", "99999999999E"] {
            assert!(scaled("X", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rekey_limit_takes_a_size_or_default_and_an_interval_or_none() {
        let args = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let parsed = |s: &str| match rekey_limit("RekeyLimit", &args(s)) {
            Ok(Setting::RekeyLimit(bytes, interval)) => Ok((bytes, interval)),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e),
        };
        assert_eq!(parsed("1G"), Ok((1 << 30, None)));
        assert_eq!(parsed("default 1h"), Ok((0, Some(Duration::from_secs(3600)))));
        assert_eq!(parsed("64M none"), Ok((64 << 20, None)));
        assert_eq!(parsed("0 30"), Ok((0, Some(Duration::from_secs(30)))));
        assert_eq!(
            parsed("8"),
            Err("RekeyLimit: \"8\" is too small (at least 16 bytes, or default)".to_owned())
        );
        assert!(parsed("1G 1h extra").is_err());
        assert!(parsed("1G soon").is_err());
    }

    #[test]
    fn time_follows_convtime() {
        assert_eq!(time("X", "90"), Ok(Duration::from_secs(90)));
        assert_eq!(time("X", "1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(time("X", "1h30"), Ok(Duration::from_secs(3630)), "a bare number is seconds");
        assert_eq!(time("X", "2W"), Ok(Duration::from_secs(1_209_600)));
        assert_eq!(time("X", "5x"), Err("X: bad time \"5x\" (e.g. 30, 30s, 5m, 1h30m)".to_owned()));
        assert!(time("X", "s").is_err());
    }

    #[test]
    fn time_stops_where_openssh_does() {
        assert_eq!(time("X", "2147483647"), Ok(Duration::from_secs(2_147_483_647)));
        assert_eq!(
            time("X", "2147483648"),
            Err("X: time \"2147483648\" is longer than 2147483647 seconds (68 years)".to_owned())
        );
        for huge in
            ["99999999999999w", "18446744073709551615", "18446744073709551616", "9999999999999999999999"]
        {
            assert!(time("X", huge).is_err(), "{huge}");
        }
    }
}
