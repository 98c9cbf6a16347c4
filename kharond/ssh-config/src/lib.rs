//! kharon's ssh_config engine: ssh_config → [`Chain`]. It reads the user's ssh_config, then the
//! system-wide one (and their `Include`s) once, validates every line up front, and answers
//! "which hops reach this jump host, with which settings", as OpenSSH's `ssh` would.
//!
//! # Public surface
//! [`SshConfig::load`] and [`SshConfig::chain`] (a [`Chain`] of [`Hop`]s, each with every
//! setting the engine acts on: [`Transport`], [`Algorithms`], [`RekeyLimit`], [`Asking`], …),
//! [`Error`] with the [`Origin`] (file:line) of what it refuses, [`Machine`] (how `Match exec`
//! runs and names are looked up), and two helpers the SSH engine's host key checks share:
//! [`patterns_match`] (OpenSSH's `match_hostname` lists) and [`implemented`] (whether russh has
//! an algorithm).
//!
//! Owns: ssh_config syntax and OpenSSH's rules for it (Host patterns, `Match`, first value wins,
//! Include, ProxyJump lists, `ProxyCommand ssh -W`, `~`/`${VAR}`/`%` expansion,
//! CanonicalizeHostname, defaults), and the decision which options kharon refuses because it
//! would connect differently from `ssh`.
//! Knows nothing of sockets, sessions, agents or known_hosts contents: it names files and
//! values; the SSH engine (kharon-ssh) acts on them. [`SshConfig::load`]
//! reads the files and the environment once, so a reload gets a consistent snapshot;
//! [`SshConfig::chain`] may run `Match exec` commands and look names up (through [`Machine`]),
//! as `ssh` does for every connection and kharon does once per chain and reload.
//!
//! # Why not ssh2-config (docs/ssh-engine.md, "Why not the ssh2-config crate")
//! file:line and `Match` need a scanner of our own in any case, which would leave ssh2-config
//! only Host matching. Beside that scanner, ssh2-config would add a second parse of the same
//! files that can disagree with the first, and it cannot do the part that is left:
//! - its values carry no file or line, but [`Hop::origin`] and the errors found per hop (an
//!   unset `${VAR}`) must name file:line;
//! - it keeps `ProxyCommand` as tokens with the quoting removed, while [`Transport::Command`]
//!   must be the original text for `sh -c`;
//! - ProxyCommand, IdentityAgent, StrictHostKeyChecking, UserKnownHostsFile, ... are raw
//!   `unsupported_fields` in a HashMap: a repeated option inside one block keeps the *last*
//!   value (OpenSSH: the first), and ProxyJump and ProxyCommand are two independent values,
//!   while OpenSSH applies one "first wins" across both (see `chain`);
//! - it does not know `Match`: without ALLOW_UNKNOWN_FIELDS it stops at the first one with no
//!   line number; with it, it attaches the Match block's options to the previous Host
//!   (docs/ssh-engine.md, "Why not the ssh2-config crate");
//! - it expands no `%` tokens and no `${VAR}`, so that code would be ours anyway.
//!
//! What is left (Host patterns, first-wins, Include and its globs) is small: the walk in
//! `chain` and the matchers in `pattern`.
//!
//! # Matching, measured on OpenSSH 9.2 (`ssh -G -F file NAME`)
//! Host patterns are matched **case-sensitively** against the name as given (`FOO` does not
//! match `Host foo`; the design research assumed lowercasing first, `ssh -G` disagrees (docs/ssh-engine.md, "Host
//! patterns are case-sensitive"), and kharon-go
//! inherited ssh's behaviour by running `ssh -G`), and the final host name is lowercased. A comma in a Host pattern is literal (`Host a,b` matches
//! neither `a` nor `b`); we do the same and warn. How `ProxyJump a,b` is resolved is described
//! in `chain`.
//!
//! # What is refused, ignored or applied
//! `keyword` has the full table. In short: options that would change how kharon connects or
//! which host keys it trusts (KnownHostsCommand, RevokedHostKeys, VerifyHostKeyDNS yes,
//! HostbasedAuthentication yes, PubkeyAuthentication no, ProxyUseFdpass yes, PKCS11Provider,
//! ...) are errors at load, with file:line, whether or
//! not a jump host uses them; unknown keywords too. Naming such an option in `IgnoreUnknown`
//! (above it) tells kharon to skip it; `ssh` is unaffected, since for ssh IgnoreUnknown only
//! concerns keywords it does not know.
//! Interactive-only options (forwarding, multiplexing, logging, ...) are ignored with a debug log.
//! `Ciphers`, `MACs`, `KexAlgorithms`, `HostKeyAlgorithms`, `PubkeyAcceptedAlgorithms` and
//! `CASignatureAlgorithms` are applied as far as russh implements them (`algorithms`);
//! `AddressFamily`, `BindAddress` and `BindInterface` are the first hop's (`ssh::tcp`).
//!
//! `Match` is evaluated as OpenSSH 9.2 does (`criteria`, `options`). A criterion kharon cannot
//! evaluate without guessing (`tagged`, `localnetwork`, `version`, `sessiontype`, `command`,
//! unknown ones) is not an error of the file: [`SshConfig::chain`] refuses exactly the jump
//! hosts whose lookup reaches that line undecided, naming file:line and the criterion, and every
//! other jump host works.

mod algorithms;
mod canonical;
mod chain;
mod criteria;
mod error;
mod expand;
mod hop;
mod jump;
mod keyword;
mod lexer;
mod load;
mod machine;
mod options;
mod pattern;
#[cfg(test)]
mod tests;

pub use algorithms::{Algorithms, KnownHostKeys, SignatureRefusal, implemented};
pub use error::{Error, Origin};
pub use hop::{
    AddressFamily, Asking, Bind, Chain, Hop, IdentityAgent, RekeyLimit, StrictHostKeyChecking, Transport,
};
pub use machine::Machine;
use machine::System;
pub use pattern::patterns_match;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How long a `Match exec` command may run before kharon stops it and refuses the jump hosts
/// whose lookup ran it (OpenSSH waits forever; a daemon's reload must not).
const EXEC_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// `%l` in `Match exec`: this machine's host name.
    local_host: String,
    /// Runs `Match exec`: `$SHELL`, else `/bin/sh`, as OpenSSH.
    shell: PathBuf,
    exec_timeout: Duration,
    machine: Arc<dyn Machine>,
}

impl SshConfig {
    /// Reads `path` (a missing file is an empty config), then `system` if given (the system-wide
    /// file, `/etc/ssh/ssh_config`: read after the user's, as ssh does unless `-F` names a file),
    /// following `Include`, and rejects every unsupported directive with file:line. `home`
    /// expands `~`; `getenv` expands `${VAR}`.
    ///
    /// All bad lines are reported together ([`Error::Many`] when there are several). Values
    /// that depend on the host (tokens, `${VAR}` that is unset) are checked by [`Self::chain`].
    pub fn load(
        path: &Path,
        system: Option<&Path>,
        home: &Path,
        getenv: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, Error> {
        let loaded = load::load(path, system, home)?;
        let env = loaded.env_names.iter().filter_map(|name| Some((name.clone(), getenv(name)?))).collect();
        let local_user = ["USER", "LOGNAME"]
            .iter()
            .find_map(|name| getenv(name).filter(|v| !v.is_empty()))
            .unwrap_or_else(|| "root".to_owned());
        // SAFETY: getuid(2) takes no arguments, cannot fail and touches no memory.
        let uid = unsafe { libc::getuid() };
        let shell = getenv("SHELL").filter(|s| s.starts_with('/')).unwrap_or_else(|| "/bin/sh".to_owned());
        let config = Self {
            path: path.to_owned(),
            home: home.to_owned(),
            loaded,
            env,
            local_user,
            uid,
            local_host: dns_lookup::get_hostname().unwrap_or_default(),
            shell: PathBuf::from(shell),
            exec_timeout: EXEC_TIMEOUT,
            machine: Arc::new(System),
        };
        tracing::debug!(files = ?config.files(), "ssh config loaded");
        Ok(config)
    }

    /// The chain of hops that reaches `jumphost`, following ProxyJump/ProxyCommand `ssh -W` to any
    /// depth; cycles are an error. A name no Host block names gets OpenSSH's defaults (plus
    /// `Host *` and whatever else matches), as with `ssh`.
    ///
    /// Blocking: evaluates `Match exec` (bounded by a timeout per command) and, for
    /// CanonicalizeHostname, looks names up. Call it once per chain and reload, off the async
    /// workers.
    pub fn chain(&self, jumphost: &str) -> Result<Chain, Error> {
        self.resolve_chain(jumphost)
    }

    /// Uses `machine` for name lookups and `Match exec` from now on (tests: names that resolve
    /// only there, or nothing run at all).
    #[cfg(test)]
    pub(crate) fn with_machine(mut self, machine: Arc<dyn Machine>) -> Self {
        self.machine = machine;
        self
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
