//! ssh_config → [`Chain`]: reads the user's ssh_config (and its `Include`s) once, validates
//! every line up front, and answers "which hops reach this jump host, with which settings".
//!
//! Owns: ssh_config syntax and OpenSSH's rules for it (Host patterns, first value wins,
//! Include, ProxyJump lists, `ProxyCommand ssh -W`, `~`/`${VAR}`/`%` expansion, defaults), and
//! the decision which options kharon refuses because it would connect differently from `ssh`.
//! Knows nothing of sockets, sessions, agents or known_hosts contents: it names files and
//! values; `ssh::chain`, `ssh::auth` and `ssh::known_hosts` act on them. Synchronous, and
//! [`SshConfig::load`] is the only function that touches the file system or the environment,
//! so a reload gets a consistent snapshot.
//!
//! # Why not ssh2-config (crates.md §3)
//! The crate is a dependency, but it is not used here, on purpose. §3 already planned a
//! pre-scanner of our own for file:line and for `Match`, leaving ssh2-config only Host
//! matching. Once that scanner exists, ssh2-config would add a second parse of the same files
//! that can disagree with the first, and it cannot do the part that is left:
//! - its values carry no file or line, but [`Hop::origin`] and the errors found per hop (an
//!   unset `${VAR}`) must name file:line;
//! - it keeps `ProxyCommand` as tokens with the quoting removed, while [`Transport::Command`]
//!   must be the original text for `sh -c`;
//! - ProxyCommand, IdentityAgent, StrictHostKeyChecking, UserKnownHostsFile, ... are raw
//!   `unsupported_fields` in a HashMap: a repeated option inside one block keeps the *last*
//!   value (OpenSSH: the first), and ProxyJump and ProxyCommand are two independent values,
//!   while OpenSSH applies one "first wins" across both (see `resolve`);
//! - without ALLOW_UNKNOWN_FIELDS it stops at the first `Match` with no line number; with it,
//!   it attaches the Match block's options to the previous Host (§3 "Match leak");
//! - it expands no `%` tokens and no `${VAR}`, so that code would be ours anyway.
//!
//! What is left (Host patterns, first-wins, Include and its globs) is small: the walk in
//! `resolve` and the matchers in `pattern`. The lead can drop `ssh2-config` from kharond's
//! Cargo.toml.
//!
//! # Matching, measured on OpenSSH 9.2 (`ssh -G -F file NAME`)
//! Host patterns are matched **case-sensitively** against the name as given (`FOO` does not
//! match `Host foo`; crates.md §3 assumed lowercasing first, `ssh -G` disagrees, and kharon-go
//! inherited ssh's behaviour by running `ssh -G`), and the final host name is lowercased. A comma in a Host pattern is literal (`Host a,b` matches
//! neither `a` nor `b`); we do the same and warn. How `ProxyJump a,b` is resolved is described
//! in `resolve`.
//!
//! # What is refused, ignored or applied
//! `keyword` has the full table. In short: `Match` and options that would change how kharon
//! connects or which host keys it trusts (CASignatureAlgorithms, BindAddress, AddressFamily
//! other than `any`, CanonicalizeHostname, KnownHostsCommand, RevokedHostKeys,
//! HostbasedAuthentication yes, PubkeyAuthentication no, ProxyUseFdpass yes, PKCS11Provider, ...)
//! are errors at load, with file:line, whether or not a jump host uses them; unknown keywords
//! too. Naming such an option in `IgnoreUnknown` (above it) tells kharon to skip it; `ssh` is
//! unaffected, since for ssh IgnoreUnknown only concerns keywords it does not know.
//! Interactive-only options (forwarding, multiplexing, logging, ...) are ignored with a debug log.
//! `Ciphers`, `MACs`, `KexAlgorithms`, `HostKeyAlgorithms` and `PubkeyAcceptedAlgorithms` are
//! applied as far as russh implements them (`algorithms`).

mod algorithms;
mod expand;
mod jump;
mod keyword;
mod lexer;
mod load;
mod pattern;
mod resolve;
#[cfg(test)]
mod tests;

pub use algorithms::Algorithms;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a directive or `Host` block was written, for "file:line" errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

/// Which agent to ask for keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityAgent {
    /// `SSH_AUTH_SOCK` of the daemon's environment (the default, and `IdentityAgent SSH_AUTH_SOCK`).
    Env,
    /// `IdentityAgent none`.
    None,
    /// An explicit socket path (`~` and `${VAR}` expanded).
    Path(PathBuf),
}

/// `StrictHostKeyChecking`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrictHostKeyChecking {
    /// `yes` and `ask` (the daemon cannot ask): unknown keys are refused. The default.
    Yes,
    /// `accept-new`: unknown keys are recorded in the first user known_hosts file.
    AcceptNew,
    /// `no` / `off`: unknown keys are accepted (changed keys are still refused).
    No,
}

/// How the first hop's transport is made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Plain TCP to `host_name:port`.
    Tcp,
    /// A `ProxyCommand` that is not `ssh -W`: run through `sh -c`, stdin/stdout carry SSH.
    /// Tokens (`%h %p %r %n %%`) are already expanded.
    Command(String),
}

/// One SSH server on the way to the cluster, fully resolved from ssh_config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    /// The name as written in the `jumphost` fact / `ProxyJump` (the Host alias).
    pub alias: String,
    /// `HostName` (tokens expanded), else the alias.
    pub host_name: String,
    pub port: u16,
    /// `User`, else `$USER`, else `$LOGNAME`, else `root` (a ProxyJump `user@` wins over all).
    pub user: String,
    /// Expanded. When no IdentityFile applies, OpenSSH's defaults (`~/.ssh/id_rsa`,
    /// `id_ecdsa`, `id_ecdsa_sk`, `id_ed25519`, `id_ed25519_sk`, `id_xmss`, `id_dsa`), which may
    /// not exist.
    pub identity_files: Vec<PathBuf>,
    pub identities_only: bool,
    pub identity_agent: IdentityAgent,
    pub certificate_files: Vec<PathBuf>,
    /// Only meaningful on the first hop; later hops always ride a direct-tcpip channel.
    pub transport: Transport,
    /// 15 s when unset (not OpenSSH's "off": see `resolve`); zero means `ServerAliveInterval 0`,
    /// i.e. no probes.
    pub server_alive_interval: Duration,
    pub server_alive_count_max: u32,
    /// `None`: unset, `none` or 0 (no limit of ssh's own; the pool has one).
    pub connect_timeout: Option<Duration>,
    pub strict_host_key_checking: StrictHostKeyChecking,
    /// Empty for `UserKnownHostsFile none`. Files may not exist; that is not an error.
    pub user_known_hosts_files: Vec<PathBuf>,
    pub global_known_hosts_files: Vec<PathBuf>,
    pub host_key_alias: Option<String>,
    /// `Ciphers`, `MACs`, `KexAlgorithms`, `HostKeyAlgorithms`, `PubkeyAcceptedAlgorithms`, as far
    /// as russh implements them.
    pub algorithms: Algorithms,
    /// Where the first `Host` block that matched this alias starts (None if only defaults apply).
    pub origin: Option<Origin>,
}

impl Hop {
    /// "user@host:port", as `Status` shows it.
    pub fn display(&self) -> String {
        format!("{}@{}:{}", self.user, self.host_name, self.port)
    }

    /// The name known_hosts is checked against: `HostKeyAlias`, else the host name.
    pub fn known_hosts_name(&self) -> &str {
        self.host_key_alias.as_deref().unwrap_or(&self.host_name)
    }
}

/// The hops to a cluster's jump host, first (dialled over TCP or a ProxyCommand) to last (the
/// `jumphost` itself, which opens the direct-tcpip channel to the target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    pub jumphost: String,
    pub hops: Vec<Hop>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read ssh config {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{origin}: {message}")]
    Invalid { origin: Origin, message: String },
    #[error("jump host {alias:?} is not a Host in {}{}", file.display(), did_you_mean(suggestion))]
    UnknownHost {
        alias: String,
        file: PathBuf,
        /// A close explicit Host name (a typo, or a difference in case only).
        suggestion: Option<String>,
    },
    #[error("ProxyJump cycle: {}", path.join(" -> "))]
    Cycle { path: Vec<String> },
    /// Every bad line of a config, in file order; one error per line when displayed.
    #[error("{}", many(.0))]
    Many(Vec<Error>),
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion.as_ref().map(|s| format!("; did you mean {s:?}?")).unwrap_or_default()
}

fn many(errors: &[Error]) -> String {
    errors.iter().flat_map(Error::iter).map(ToString::to_string).collect::<Vec<_>>().join("\n")
}

impl Error {
    /// The single errors, flattening [`Error::Many`].
    pub fn iter(&self) -> Box<dyn Iterator<Item = &Error> + '_> {
        match self {
            Error::Many(errors) => Box::new(errors.iter().flat_map(Error::iter)),
            single => Box::new(std::iter::once(single)),
        }
    }
}

/// A parsed, validated ssh_config (with its Includes). Cheap to query many times.
#[derive(Debug, Clone)]
pub struct SshConfig {
    path: PathBuf,
    home: PathBuf,
    loaded: load::Loaded,
    /// The variables the config names in `${VAR}`, as they were at load (unset ones absent).
    env: HashMap<String, String>,
    /// `%u` and the default `User`.
    local_user: String,
    /// `%i`.
    uid: u32,
}

impl SshConfig {
    /// Reads `path` (a missing file is an empty config), following `Include`, and rejects every
    /// unsupported directive with file:line. `home` expands `~`; `getenv` expands `${VAR}`.
    ///
    /// All bad lines are reported together ([`Error::Many`] when there are several). Values
    /// that depend on the host (tokens, `${VAR}` that is unset) are checked by [`Self::chain`].
    pub fn load(path: &Path, home: &Path, getenv: &dyn Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let loaded = load::load(path, home)?;
        let env = loaded.env_names.iter().filter_map(|name| Some((name.clone(), getenv(name)?))).collect();
        let local_user = ["USER", "LOGNAME"]
            .iter()
            .find_map(|name| getenv(name).filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "root".to_owned());
        // SAFETY: getuid(2) takes no arguments, cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let config = Self { path: path.to_owned(), home: home.to_owned(), loaded, env, local_user, uid };
        tracing::debug!(files = ?config.files(), "ssh config loaded");
        Ok(config)
    }

    /// The chain of hops that reaches `jumphost`, following ProxyJump/ProxyCommand `ssh -W` to any
    /// depth; cycles are an error. `jumphost` must be matched by a Host pattern other than `*`.
    pub fn chain(&self, jumphost: &str) -> Result<Chain, Error> {
        self.resolve_chain(jumphost)
    }

    /// The explicit Host names (no wildcards, no negations), in file order: for completion and
    /// "did you mean".
    pub fn hosts(&self) -> Vec<String> {
        self.explicit_hosts()
    }

    /// Every file that was read, the top-level one first (absent if it does not exist).
    pub fn files(&self) -> Vec<PathBuf> {
        self.loaded.read.clone()
    }

    /// The top-level config file, as given to [`Self::load`].
    pub fn path(&self) -> &Path {
        &self.path
    }
}
