//! What resolving a jump host gives: the [`Chain`] of [`Hop`]s that reaches it, each with the
//! settings `ssh` would use for it.

use std::path::PathBuf;
use std::time::Duration;

use super::algorithms::Algorithms;
use super::error::Origin;

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

/// `AddressFamily`: which addresses of the first hop are dialled (and which ones
/// CanonicalizeHostname's lookups accept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AddressFamily {
    #[default]
    Any,
    /// `inet`: IPv4 only.
    Inet,
    /// `inet6`: IPv6 only.
    Inet6,
}

impl AddressFamily {
    /// The `AF_*` constant getaddrinfo(3) is given.
    pub fn libc(self) -> i32 {
        match self {
            AddressFamily::Any => libc::AF_UNSPEC,
            AddressFamily::Inet => libc::AF_INET,
            AddressFamily::Inet6 => libc::AF_INET6,
        }
    }

    /// The value as ssh_config writes it.
    pub fn name(self) -> &'static str {
        match self {
            AddressFamily::Any => "any",
            AddressFamily::Inet => "inet",
            AddressFamily::Inet6 => "inet6",
        }
    }
}

/// `BindAddress` or `BindInterface`: the first hop's source address. `BindAddress` wins when
/// both apply, as in ssh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// An address or a name (looked up in the family of the address dialled).
    Address(String),
    /// An interface: its first address of the family dialled.
    Interface(String),
}

impl std::fmt::Display for Bind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // ssh_config text in a log line or `status`: control characters escaped.
            Bind::Address(a) => write!(f, "BindAddress {}", a.escape_debug()),
            Bind::Interface(i) => write!(f, "BindInterface {}", i.escape_debug()),
        }
    }
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

/// Whether and how a person is asked to finish a login a hop wants more than a key for
/// (`prompt.rs`), as ssh_config(5) says for ssh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asking {
    /// `BatchMode yes`, where it was set: nobody is asked (nor is anyone by ssh).
    pub batch_mode: Option<Origin>,
    /// The methods a person may be asked for, in the order to use them: OpenSSH's default
    /// `PreferredAuthentications` order (keyboard-interactive, then password) or the config's,
    /// without what `KbdInteractiveAuthentication no`, `PasswordAuthentication no` or a
    /// `NumberOfPasswordPrompts 0` turn off. Keys always come first (unlike ssh, whatever
    /// `PreferredAuthentications` says).
    pub methods: Vec<&'static str>,
    /// `NumberOfPasswordPrompts`: how many answers of one method may be refused.
    pub attempts: u32,
}

/// ssh's defaults (ssh_config(5)): no `BatchMode`, keyboard-interactive then password (the
/// order of `PreferredAuthentications`), `NumberOfPasswordPrompts` 3.
impl Default for Asking {
    fn default() -> Self {
        Asking { batch_mode: None, methods: vec!["keyboard-interactive", "password"], attempts: 3 }
    }
}

/// `RekeyLimit`: when ssh exchanges a session's keys again (ssh_config(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RekeyLimit {
    /// Bytes per direction; `None` for `default` (or unset): the cipher's own limit, which
    /// OpenSSH derives from its block size (packet.c, `ssh_set_newkeys`: 2^32 blocks of a 16-byte
    /// block cipher, 1 GiB of an 8-byte one such as chacha20-poly1305).
    pub data: Option<u64>,
    /// `None` for `none`, 0 or unset: no time-based re-keying (OpenSSH's default).
    pub interval: Option<Duration>,
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
    /// `UseKeychain yes` (Apple's ssh): the passphrases of encrypted key files may be in the
    /// user's Keychain, which changes what the error for one says (`auth.rs`).
    pub use_keychain: bool,
    pub asking: Asking,
    /// `RequiredRSASize`: smaller RSA host keys are refused and smaller RSA user keys skipped.
    pub required_rsa_size: u32,
    pub identity_agent: IdentityAgent,
    pub certificate_files: Vec<PathBuf>,
    /// Only meaningful on the first hop; later hops always ride a direct-tcpip channel.
    pub transport: Transport,
    /// First hop over TCP only, as `transport`.
    pub address_family: AddressFamily,
    /// First hop over TCP only, with the line that set it.
    pub bind: Option<(Bind, Origin)>,
    /// 15 s when unset (not OpenSSH's "off": see `chain`); zero means `ServerAliveInterval 0`,
    /// i.e. no probes.
    pub server_alive_interval: Duration,
    pub server_alive_count_max: u32,
    /// `None`: unset, `none` or 0 (no limit of ssh's own; the pool has one).
    pub connect_timeout: Option<Duration>,
    pub rekey_limit: RekeyLimit,
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
    /// When no `Host` (or `Match host`) block names this alias, a close explicit Host name (a
    /// typo, or a difference in case only): OpenSSH connects with the defaults then, and so does
    /// kharon, but a failing connection says "did you mean".
    pub suggestion: Option<String>,
    /// Whether a `Host` (or `Match host`) block names this alias, as opposed to `Host *` and the
    /// like: an unnamed alias that does not resolve is likely a typo (`ssh::preflight`).
    pub named: bool,
}

impl Hop {
    /// "user@host:port", as `Status` shows it.
    pub fn display(&self) -> String {
        format!("{}@{}:{}", self.user, self.host_name, self.port)
    }

    /// The size of `key` if it is an RSA key smaller than `RequiredRSASize` (sshkey.c
    /// `sshkey_check_rsa_length`, which ssh applies to host keys and its own keys alike).
    pub fn rsa_too_small(&self, key: &russh::keys::PublicKey) -> Option<u32> {
        match key.key_data() {
            russh::keys::ssh_key::public::KeyData::Rsa(rsa) if rsa.key_size() < self.required_rsa_size => {
                Some(rsa.key_size())
            }
            _ => None,
        }
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
