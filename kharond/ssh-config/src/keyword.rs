//! Every ssh_config(5) client keyword of OpenSSH 9.x and what kharon does with it: apply it
//! (`Match` is evaluated per host by `criteria`),
//! ignore it (it only matters to an interactive `ssh`), or refuse the file because honouring
//! the config would need it and ignoring it would make kharon connect differently from `ssh`
//! (other algorithms, another source address, fewer host-key checks, ...).
//!
//! Refusal is the safe default: a keyword missing from this table is "unknown" and refused too,
//! unless the user lists it in `IgnoreUnknown`.

use super::algorithms::Category;

/// The keywords whose values [`super::load`] parses and [`super::chain`] applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    HostName,
    User,
    Port,
    IdentityFile,
    IdentitiesOnly,
    IdentityAgent,
    CertificateFile,
    ProxyJump,
    ProxyCommand,
    ServerAliveInterval,
    ServerAliveCountMax,
    ConnectTimeout,
    StrictHostKeyChecking,
    UserKnownHostsFile,
    GlobalKnownHostsFile,
    HostKeyAlias,
    AddressFamily,
    BindAddress,
    BindInterface,
    Algorithms(Category),
    CanonicalizeHostname,
    CanonicalDomains,
    CanonicalizeMaxDots,
    CanonicalizeFallbackLocal,
    CanonicalizePermittedCnames,
    /// Apple's ssh only; read for the advice an encrypted key gets (`auth.rs`).
    UseKeychain,
    /// Whether and how a person is asked to finish a login (`prompt.rs`).
    BatchMode,
    KbdInteractiveAuthentication,
    PasswordAuthentication,
    NumberOfPasswordPrompts,
    PreferredAuthentications,
    RequiredRsaSize,
    /// When a session's keys are exchanged again (`chain.rs`, `client_config`).
    RekeyLimit,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Host,
    Match,
    Include,
    IgnoreUnknown,
    Apply(Key),
    /// Interactive-only, or OpenSSH itself ignores it (deprecated): logged at debug.
    Ignore,
    /// Refused unless its (first) argument is one of these (case-insensitive); those values
    /// are what `ssh` does anyway, so they are ignored.
    RefuseUnless(&'static [&'static str], &'static str),
}

const PUBLIC_KEY_ONLY: &str = "kharon authenticates by public key only";
const HOST_KEYS: &str = "kharon checks host keys only against known_hosts files";

/// (canonical spelling, what to do). Canonical spellings are what error messages print.
const TABLE: &[(&str, Kind)] = &[
    ("Host", Kind::Host),
    ("Match", Kind::Match),
    ("Include", Kind::Include),
    ("IgnoreUnknown", Kind::IgnoreUnknown),
    ("HostName", Kind::Apply(Key::HostName)),
    ("User", Kind::Apply(Key::User)),
    ("Port", Kind::Apply(Key::Port)),
    ("IdentityFile", Kind::Apply(Key::IdentityFile)),
    ("IdentitiesOnly", Kind::Apply(Key::IdentitiesOnly)),
    ("IdentityAgent", Kind::Apply(Key::IdentityAgent)),
    ("CertificateFile", Kind::Apply(Key::CertificateFile)),
    ("ProxyJump", Kind::Apply(Key::ProxyJump)),
    ("ProxyCommand", Kind::Apply(Key::ProxyCommand)),
    ("ServerAliveInterval", Kind::Apply(Key::ServerAliveInterval)),
    ("ServerAliveCountMax", Kind::Apply(Key::ServerAliveCountMax)),
    ("ConnectTimeout", Kind::Apply(Key::ConnectTimeout)),
    ("StrictHostKeyChecking", Kind::Apply(Key::StrictHostKeyChecking)),
    ("UserKnownHostsFile", Kind::Apply(Key::UserKnownHostsFile)),
    ("GlobalKnownHostsFile", Kind::Apply(Key::GlobalKnownHostsFile)),
    ("HostKeyAlias", Kind::Apply(Key::HostKeyAlias)),
    ("Ciphers", Kind::Apply(Key::Algorithms(Category::Ciphers))),
    ("MACs", Kind::Apply(Key::Algorithms(Category::Macs))),
    ("KexAlgorithms", Kind::Apply(Key::Algorithms(Category::Kex))),
    ("HostKeyAlgorithms", Kind::Apply(Key::Algorithms(Category::HostKeys))),
    ("PubkeyAcceptedAlgorithms", Kind::Apply(Key::Algorithms(Category::Pubkeys))),
    // Its name before OpenSSH 8.5.
    ("PubkeyAcceptedKeyTypes", Kind::Apply(Key::Algorithms(Category::Pubkeys))),
    ("CASignatureAlgorithms", Kind::Apply(Key::Algorithms(Category::CaSignatures))),
    ("AddressFamily", Kind::Apply(Key::AddressFamily)),
    ("BindAddress", Kind::Apply(Key::BindAddress)),
    ("BindInterface", Kind::Apply(Key::BindInterface)),
    ("CanonicalizeHostname", Kind::Apply(Key::CanonicalizeHostname)),
    ("CanonicalDomains", Kind::Apply(Key::CanonicalDomains)),
    ("CanonicalizeMaxDots", Kind::Apply(Key::CanonicalizeMaxDots)),
    ("CanonicalizeFallbackLocal", Kind::Apply(Key::CanonicalizeFallbackLocal)),
    ("CanonicalizePermittedCNAMEs", Kind::Apply(Key::CanonicalizePermittedCnames)),
    // Apple's ssh: the passphrases of key files are kept in the user's Keychain, which only
    // Apple's ssh and ssh-add may read; kharond cannot, so it only tells how to load them.
    ("UseKeychain", Kind::Apply(Key::UseKeychain)),
    // What a person may be asked when a jump host wants more than a key (prompt.rs).
    ("BatchMode", Kind::Apply(Key::BatchMode)),
    ("KbdInteractiveAuthentication", Kind::Apply(Key::KbdInteractiveAuthentication)),
    // Its name before OpenSSH 8.7.
    ("ChallengeResponseAuthentication", Kind::Apply(Key::KbdInteractiveAuthentication)),
    ("PasswordAuthentication", Kind::Apply(Key::PasswordAuthentication)),
    ("NumberOfPasswordPrompts", Kind::Apply(Key::NumberOfPasswordPrompts)),
    ("PreferredAuthentications", Kind::Apply(Key::PreferredAuthentications)),
    // Fedora's and RHEL's crypto policies set it: the smallest RSA host or user key.
    ("RequiredRSASize", Kind::Apply(Key::RequiredRsaSize)),
    // How much data, and how long, a session's keys are used before they are exchanged again.
    ("RekeyLimit", Kind::Apply(Key::RekeyLimit)),
    // Interactive sessions, forwarding, multiplexing, logging: a tunnel does none of it.
    // AddKeysToAgent: ssh adds a key file it decrypted to the agent; kharond never decrypts one
    // (an encrypted key must already be in the agent), so there is nothing for it to add.
    ("AddKeysToAgent", Kind::Ignore),
    ("ChannelTimeout", Kind::Ignore),
    ("CheckHostIP", Kind::Ignore), // an extra warning in ssh; off by default since 8.5
    ("ClearAllForwardings", Kind::Ignore),
    ("Compression", Kind::Ignore),
    ("ConnectionAttempts", Kind::Ignore), // the pool has its own retry
    ("ControlMaster", Kind::Ignore),
    ("ControlPath", Kind::Ignore),
    ("ControlPersist", Kind::Ignore),
    ("DynamicForward", Kind::Ignore),
    ("EnableEscapeCommandline", Kind::Ignore),
    ("EnableSSHKeysign", Kind::Ignore), // only for HostbasedAuthentication, refused below
    ("EscapeChar", Kind::Ignore),
    ("ExitOnForwardFailure", Kind::Ignore),
    ("FingerprintHash", Kind::Ignore),
    ("ForkAfterAuthentication", Kind::Ignore),
    ("ForwardAgent", Kind::Ignore),
    ("ForwardX11", Kind::Ignore),
    ("ForwardX11Timeout", Kind::Ignore),
    ("ForwardX11Trusted", Kind::Ignore),
    ("GatewayPorts", Kind::Ignore),
    // Only for HostbasedAuthentication, refused below; crypto policies (Fedora, RHEL) set them
    // for every host in the system-wide config.
    ("HostbasedAcceptedAlgorithms", Kind::Ignore),
    ("HostbasedKeyTypes", Kind::Ignore),
    ("HashKnownHosts", Kind::Ignore),
    ("IPQoS", Kind::Ignore),
    ("KbdInteractiveDevices", Kind::Ignore), // a hint to the server; PAM decides what it asks
    ("KeepAlive", Kind::Ignore),
    ("LocalCommand", Kind::Ignore),
    ("LocalForward", Kind::Ignore),
    ("LogLevel", Kind::Ignore),
    ("LogVerbose", Kind::Ignore),
    ("ObscureKeystrokeTiming", Kind::Ignore),
    ("PermitLocalCommand", Kind::Ignore),
    ("PermitRemoteOpen", Kind::Ignore),
    ("RemoteCommand", Kind::Ignore),
    ("RemoteForward", Kind::Ignore),
    ("RequestTTY", Kind::Ignore),
    ("SendEnv", Kind::Ignore),
    ("SessionType", Kind::Ignore),
    ("SetEnv", Kind::Ignore),
    ("StdinNull", Kind::Ignore),
    ("StreamLocalBindMask", Kind::Ignore),
    ("StreamLocalBindUnlink", Kind::Ignore),
    ("SyslogFacility", Kind::Ignore),
    ("Tag", Kind::Ignore),
    ("TCPKeepAlive", Kind::Ignore),
    ("Tunnel", Kind::Ignore),
    ("TunnelDevice", Kind::Ignore),
    ("UpdateHostKeys", Kind::Ignore),
    ("VisualHostKey", Kind::Ignore),
    ("WarnWeakCrypto", Kind::Ignore),
    ("XAuthLocation", Kind::Ignore),
    // Deprecated or removed keywords that OpenSSH itself only warns about.
    ("AFSTokenPassing", Kind::Ignore),
    ("Cipher", Kind::Ignore),
    ("CompressionLevel", Kind::Ignore),
    ("FallBackToRsh", Kind::Ignore),
    ("GlobalKnownHostsFile2", Kind::Ignore),
    ("KerberosAuthentication", Kind::Ignore),
    ("KerberosTGTPassing", Kind::Ignore),
    ("Protocol", Kind::Ignore),
    ("RhostsAuthentication", Kind::Ignore),
    ("RhostsRSAAuthentication", Kind::Ignore),
    ("RSAAuthentication", Kind::Ignore),
    ("SkeyAuthentication", Kind::Ignore),
    ("TISAuthentication", Kind::Ignore),
    ("UsePrivilegedPort", Kind::Ignore),
    ("UseRoaming", Kind::Ignore),
    ("UseRsh", Kind::Ignore),
    ("UserKnownHostsFile2", Kind::Ignore),
    // Would change how kharon connects, authenticates or trusts a host.
    ("DSAAuthentication", Kind::RefuseUnless(&["yes", "true"], "kharon always authenticates by public key")),
    ("HostbasedAuthentication", Kind::RefuseUnless(&["no", "false"], PUBLIC_KEY_ONLY)),
    ("KnownHostsCommand", Kind::RefuseUnless(&["none"], HOST_KEYS)),
    (
        "NoHostAuthenticationForLocalhost",
        Kind::RefuseUnless(&["no", "false"], "kharon checks the host key of localhost too"),
    ),
    ("PKCS11Provider", Kind::RefuseUnless(&["none"], "kharon uses keys from the agent and key files only")),
    ("ProxyUseFdpass", Kind::RefuseUnless(&["no", "false"], "kharon reads the ProxyCommand's stdout")),
    (
        "PubkeyAuthentication",
        Kind::RefuseUnless(
            &["yes", "true", "unbound", "host-bound"],
            "kharon always authenticates by public key",
        ),
    ),
    ("RefuseConnection", Kind::RefuseUnless(&["no", "false"], "ssh itself would refuse this connection")),
    ("RevokedHostKeys", Kind::RefuseUnless(&["none"], HOST_KEYS)),
    (
        "SecurityKeyProvider",
        Kind::RefuseUnless(&["internal"], "kharon uses keys from the agent and key files only"),
    ),
    ("SmartcardDevice", Kind::RefuseUnless(&["none"], "kharon uses keys from the agent and key files only")),
    ("VerifyHostKeyDNS", Kind::RefuseUnless(&["no", "false", "ask"], HOST_KEYS)),
];

/// Looks a keyword up case-insensitively, as OpenSSH does.
pub(super) fn lookup(keyword: &str) -> Option<(&'static str, Kind)> {
    // `get`, not `[..6]`: a keyword is user text, and byte 6 may fall inside a character (`xÄÄÄ`).
    if keyword.len() > 6 && keyword.get(..6).is_some_and(|prefix| prefix.eq_ignore_ascii_case("gssapi")) {
        // GSSAPIAuthentication, GSSAPIDelegateCredentials and the Debian GSSAPIKeyExchange family.
        return Some(("GSSAPI*", Kind::Ignore));
    }
    TABLE.iter().find(|(name, _)| name.eq_ignore_ascii_case(keyword)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_ignores_case_and_knows_gssapi() {
        assert!(matches!(lookup("proxyjump"), Some(("ProxyJump", Kind::Apply(Key::ProxyJump)))));
        assert!(matches!(lookup("GSSAPIAuthentication"), Some((_, Kind::Ignore))));
        assert!(lookup("Frobnicate").is_none());
    }

    #[test]
    fn non_ascii_keywords_are_unknown_not_a_panic() {
        for keyword in ["ÄÄÄÄ", "xÄÄÄ", "GSSAP\u{e4}x", "gssapi", "\u{1f600}\u{1f600}", "ProxyJumpé"]
        {
            assert!(lookup(keyword).is_none(), "{keyword}");
        }
    }

    #[test]
    fn table_has_no_duplicates() {
        for (i, (a, _)) in TABLE.iter().enumerate() {
            for (b, _) in &TABLE[i + 1..] {
                assert!(!a.eq_ignore_ascii_case(b), "{a} twice");
            }
        }
    }
}
