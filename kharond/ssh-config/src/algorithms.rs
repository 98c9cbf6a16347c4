//! `Ciphers`, `MACs`, `KexAlgorithms`, `HostKeyAlgorithms`, `PubkeyAcceptedAlgorithms` and
//! `CASignatureAlgorithms`: OpenSSH's list syntax, applied to the algorithms kharon's SSH library
//! (russh) implements.
//!
//! ssh_config(5): a plain list replaces the default; `+list` appends to it, `-list` removes
//! what matches its patterns (`*`, `?`), `^list` moves to its head. `ssh` refuses a name it does
//! not know, and so do we (a typo must not quietly change what is negotiated). A name OpenSSH
//! knows but russh lacks (`umac-128-etm@openssh.com`, `sntrup761x25519-sha512`, security-key
//! host key types, `ssh-dss`) is skipped in a list that replaces the default (crypto policies
//! such as Fedora's name every algorithm ssh has): what is left is still a subset of what the
//! user allowed. Named in a `+` or `^` list it is refused, with file and line: the user added it
//! for a server that needs it, and kharond could not reach that server. A list that
//! leaves nothing kharon implements is an error naming file and line too.
//!
//! # Defaults (docs/ssh-engine.md, "Algorithm defaults")
//! OpenSSH 9.x's client lists (myproposal.h `KEX_CLIENT_KEX`, `KEX_DEFAULT_PK_ALG`,
//! `KEX_CLIENT_ENCRYPT`, `KEX_CLIENT_MAC`, `SSH_ALLOWED_CA_SIGALGS`) without what russh lacks:
//! `ecdh-sha2-nistp*` and `hmac-sha1` are offered as ssh offers them, SHA-1 key exchanges, CBC
//! ciphers and `ssh-rsa` signatures only when a `+` line adds them. Only the cipher order is
//! kharon's own (AES-GCM first where the CPU accelerates it).
//!
//! # RSA signatures, as ssh(1) picks them
//! sshconnect2.c `key_sig_algorithm`: without the server's `server-sig-algs` (RFC 8308), an RSA
//! key signs as `ssh-rsa` (SHA-1), and only if `PubkeyAcceptedAlgorithms` allows it; with the
//! list, the first RSA entry of `PubkeyAcceptedAlgorithms` the server names. ssh's default list
//! has no `ssh-rsa`, so against a server that takes only SHA-1 RSA signatures ssh skips the key,
//! and so does kharond ([`Algorithms::pubkey_signature`]).
//!
//! # Host key algorithms, as ssh(1) orders them
//! Host certificates (`*-cert-v01@openssh.com`) are offered, ahead of plain keys, only to a host
//! that an `@cert-authority` line of known_hosts names ([`KnownHostKeys`]): a certificate is
//! worth nothing without a CA to check it against, and russh leaves that decision to us. Unless
//! the user's `HostKeyAlgorithms` replaced the list or moved names to its head, the plain types
//! known_hosts already holds a key of for the host come first, as sshconnect2.c
//! `order_hostkeyalgs` does: a host known by its RSA key is asked for that key, not for an
//! ed25519 key nobody recorded.

use std::borrow::Cow;

use russh::keys::HashAlg;
use russh::keys::ssh_key::Algorithm;
use russh::{cipher, kex, mac};

use super::error::Origin;
use super::pattern;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Category {
    Ciphers,
    Macs,
    Kex,
    HostKeys,
    /// `PubkeyAcceptedAlgorithms`: the signature algorithms our keys may sign in with.
    Pubkeys,
    /// `CASignatureAlgorithms`: what a host certificate's CA may have signed it with.
    CaSignatures,
}

/// How a value changes the default list (ssh_config(5) "If the specified list begins with ...").
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Replace,
    Append,
    Remove,
    Head,
}

/// kharon's cipher order when the config names none and the CPU accelerates AES (AES-NI and
/// PCLMULQDQ, or ARMv8 AES and PMULL): AES-GCM first, faster than chacha20-poly1305 there
/// (docs/ssh-engine.md, "Algorithm defaults"), then russh's other defaults.
const AES_FIRST_CIPHERS: &[&str] = &[
    "aes256-gcm@openssh.com",
    "aes128-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
];

/// The same without AES instructions: table-based AES is slower than chacha20, so chacha20
/// first, as OpenSSH orders it everywhere.
const CHACHA_FIRST_CIPHERS: &[&str] = &[
    "chacha20-poly1305@openssh.com",
    "aes256-gcm@openssh.com",
    "aes128-gcm@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
];

/// kharon's cipher order for a CPU that does (`true`) or does not accelerate AES-GCM.
fn default_ciphers(aes_accelerated: bool) -> &'static [&'static str] {
    if aes_accelerated { AES_FIRST_CIPHERS } else { CHACHA_FIRST_CIPHERS }
}

/// Whether this CPU has the instructions ring's AES-GCM uses (AES rounds and carry-less
/// multiply for GHASH); without them AES-GCM falls back to slower constant-time code.
fn aes_gcm_accelerated() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// russh's host key algorithms (`Preferred::DEFAULT.key`, checked by a test), by SSH name.
const HOST_KEYS: &[&str] = &[
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
    "ssh-rsa",
];

/// The certificate signature algorithms russh can sign in with. With [`HOST_KEYS`] after them
/// they are kharon's `PubkeyAcceptedAlgorithms`, in OpenSSH's order: all it can use, so an unset
/// option keeps russh's choice (the server's best RSA hash, `ssh-rsa` for a server naming none).
/// They are also the host certificate types kharon can check; OpenSSH's default
/// `HostKeyAlgorithms` has all but the SHA-1 one ([`DEFAULT_HOST_KEY_CERTS`]).
const PUBKEY_CERTS: &[&str] = &[
    "ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "rsa-sha2-512-cert-v01@openssh.com",
    "rsa-sha2-256-cert-v01@openssh.com",
    "ssh-rsa-cert-v01@openssh.com",
];
const CERT_SUFFIX: &str = "-cert-v01@openssh.com";

/// The host certificate types offered when the config names none: OpenSSH 9.2's default
/// `HostKeyAlgorithms` without the security-key types, i.e. [`PUBKEY_CERTS`] without its last,
/// SHA-1 one.
const DEFAULT_HOST_KEY_CERTS: &[&str] = without_sha1(PUBKEY_CERTS);

/// The plain host key types offered when the config names none: [`HOST_KEYS`] without `ssh-rsa`,
/// which OpenSSH offers only when asked to since 8.8 (its `KEX_DEFAULT_PK_ALG`).
const DEFAULT_PLAIN_HOST_KEYS: &[&str] = without_sha1(HOST_KEYS);

/// OpenSSH 9.9's client `KexAlgorithms` without the `sntrup761x25519` methods russh lacks (OpenSSH
/// 10 moved `mlkem768x25519-sha256` to the head, where russh's order already had it). The SHA-1
/// exchanges (`diffie-hellman-group14-sha1`, `-group-exchange-sha1`, `-group1-sha1`) are there for
/// a `+` line, as in ssh.
const DEFAULT_KEX: &[&str] = &[
    "mlkem768x25519-sha256",
    "curve25519-sha256",
    "curve25519-sha256@libssh.org",
    "ecdh-sha2-nistp256",
    "ecdh-sha2-nistp384",
    "ecdh-sha2-nistp521",
    "diffie-hellman-group-exchange-sha256",
    "diffie-hellman-group16-sha512",
    "diffie-hellman-group18-sha512",
    "diffie-hellman-group14-sha256",
];

/// OpenSSH 9.x's client `MACs`, in its order, without the `umac-*` ones russh lacks: `hmac-sha1`
/// included, as every old appliance needs it and ssh offers it (an AEAD cipher needs no MAC, so
/// it only matters to `*-ctr` and `*-cbc` ciphers).
const DEFAULT_MACS: &[&str] = &[
    "hmac-sha2-256-etm@openssh.com",
    "hmac-sha2-512-etm@openssh.com",
    "hmac-sha1-etm@openssh.com",
    "hmac-sha2-256",
    "hmac-sha2-512",
    "hmac-sha1",
];

/// OpenSSH 9.2's default `CASignatureAlgorithms` without the security-key types, which kharon
/// cannot verify: [`HOST_KEYS`] without `ssh-rsa`. A host certificate signed with anything else
/// (SHA-1 RSA above all) is not accepted.
const DEFAULT_CA_SIGNATURES: &[&str] = without_sha1(HOST_KEYS);

/// `list` without its last entry, the SHA-1 RSA one (checked by a test).
const fn without_sha1(list: &'static [&'static str]) -> &'static [&'static str] {
    match list.split_last() {
        Some((_, rest)) => rest,
        None => list,
    }
}

/// Whether `name` is a certificate type (`*-cert-v01@openssh.com`).
pub(crate) fn is_certificate(name: &str) -> bool {
    name.ends_with(CERT_SUFFIX)
}

/// Names OpenSSH 9.x accepts (`ssh -Q cipher|mac|kex|HostKeyAlgorithms`, 9.2 plus 9.9's
/// mlkem768x25519-sha256), so that a typo is told apart from an algorithm russh lacks.
const OPENSSH_CIPHERS: &[&str] = &[
    "3des-cbc",
    "aes128-cbc",
    "aes192-cbc",
    "aes256-cbc",
    "aes128-ctr",
    "aes192-ctr",
    "aes256-ctr",
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
];
const OPENSSH_MACS: &[&str] = &[
    "hmac-sha1",
    "hmac-sha1-96",
    "hmac-sha2-256",
    "hmac-sha2-512",
    "hmac-md5",
    "hmac-md5-96",
    "umac-64@openssh.com",
    "umac-128@openssh.com",
    "hmac-sha1-etm@openssh.com",
    "hmac-sha1-96-etm@openssh.com",
    "hmac-sha2-256-etm@openssh.com",
    "hmac-sha2-512-etm@openssh.com",
    "hmac-md5-etm@openssh.com",
    "hmac-md5-96-etm@openssh.com",
    "umac-64-etm@openssh.com",
    "umac-128-etm@openssh.com",
];
const OPENSSH_KEX: &[&str] = &[
    "diffie-hellman-group1-sha1",
    "diffie-hellman-group14-sha1",
    "diffie-hellman-group14-sha256",
    "diffie-hellman-group16-sha512",
    "diffie-hellman-group18-sha512",
    "diffie-hellman-group-exchange-sha1",
    "diffie-hellman-group-exchange-sha256",
    "ecdh-sha2-nistp256",
    "ecdh-sha2-nistp384",
    "ecdh-sha2-nistp521",
    "curve25519-sha256",
    "curve25519-sha256@libssh.org",
    "sntrup761x25519-sha512",
    "sntrup761x25519-sha512@openssh.com",
    "mlkem768x25519-sha256",
];
const OPENSSH_HOST_KEYS: &[&str] = &[
    "ssh-ed25519",
    "ssh-ed25519-cert-v01@openssh.com",
    "sk-ssh-ed25519@openssh.com",
    "sk-ssh-ed25519-cert-v01@openssh.com",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp384-cert-v01@openssh.com",
    "ecdsa-sha2-nistp521",
    "ecdsa-sha2-nistp521-cert-v01@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
    "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    "webauthn-sk-ecdsa-sha2-nistp256@openssh.com",
    "ssh-dss",
    "ssh-dss-cert-v01@openssh.com",
    "ssh-rsa",
    "ssh-rsa-cert-v01@openssh.com",
    "rsa-sha2-256",
    "rsa-sha2-256-cert-v01@openssh.com",
    "rsa-sha2-512",
    "rsa-sha2-512-cert-v01@openssh.com",
];

#[cfg(test)]
fn borrowed<T>(list: Cow<'static, [T]>) -> &'static [T]
where
    [T]: ToOwned,
{
    match list {
        Cow::Borrowed(list) => list,
        Cow::Owned(_) => &[],
    }
}

impl Category {
    fn what(self) -> &'static str {
        match self {
            Category::Ciphers => "cipher",
            Category::Macs => "MAC",
            Category::Kex => "key exchange algorithm",
            Category::HostKeys => "host key algorithm",
            Category::Pubkeys => "public key signature algorithm",
            Category::CaSignatures => "CA signature algorithm",
        }
    }

    /// The `ssh -Q` argument that lists OpenSSH's names.
    fn query(self) -> &'static str {
        match self {
            Category::Ciphers => "cipher",
            Category::Macs => "mac",
            Category::Kex => "kex",
            Category::HostKeys => "HostKeyAlgorithms",
            Category::Pubkeys => "PubkeyAcceptedAlgorithms",
            Category::CaSignatures => "sig",
        }
    }

    fn openssh(self) -> &'static [&'static str] {
        match self {
            Category::Ciphers => OPENSSH_CIPHERS,
            Category::Macs => OPENSSH_MACS,
            Category::Kex => OPENSSH_KEX,
            // `ssh -Q PubkeyAcceptedAlgorithms` lists the same names, and ssh takes any of them
            // in CASignatureAlgorithms.
            Category::HostKeys | Category::Pubkeys | Category::CaSignatures => OPENSSH_HOST_KEYS,
        }
    }

    /// What russh implements, in its own order; never `none`.
    fn implemented(self) -> Vec<&'static str> {
        let names: Vec<&'static str> = match self {
            Category::Ciphers => cipher::ALL_CIPHERS.iter().map(|n| n.as_ref()).collect(),
            Category::Macs => mac::ALL_MAC_ALGORITHMS.iter().map(|n| n.as_ref()).collect(),
            Category::Kex => kex::ALL_KEX_ALGORITHMS.iter().map(|n| n.as_ref()).collect(),
            // The certificate types are kharon's to check, not russh's: see the module doc.
            Category::HostKeys | Category::Pubkeys => pubkeys(),
            Category::CaSignatures => HOST_KEYS.to_vec(),
        };
        names.into_iter().filter(|n| !matches!(*n, "none" | "clear")).collect()
    }

    /// kharon's list when the config says nothing.
    fn default_list(self) -> Vec<&'static str> {
        match self {
            Category::Ciphers => default_ciphers(aes_gcm_accelerated()).to_vec(),
            Category::Macs => DEFAULT_MACS.to_vec(),
            Category::Kex => DEFAULT_KEX.to_vec(),
            // ssh's default `PubkeyAcceptedAlgorithms` is its default `HostKeyAlgorithms`.
            Category::HostKeys | Category::Pubkeys => default_key_types(),
            Category::CaSignatures => DEFAULT_CA_SIGNATURES.to_vec(),
        }
    }
}

fn pubkeys() -> Vec<&'static str> {
    PUBKEY_CERTS.iter().chain(HOST_KEYS).copied().collect()
}

fn default_key_types() -> Vec<&'static str> {
    DEFAULT_HOST_KEY_CERTS.iter().chain(DEFAULT_PLAIN_HOST_KEYS).copied().collect()
}

/// The hash of an RSA signature algorithm by its SSH name (`Some(None)`: SHA-1 `ssh-rsa`);
/// `None` for any other name.
fn rsa_hash(name: &str) -> Option<Option<HashAlg>> {
    match name {
        "rsa-sha2-512" => Some(Some(HashAlg::Sha512)),
        "rsa-sha2-256" => Some(Some(HashAlg::Sha256)),
        "ssh-rsa" => Some(None),
        _ => None,
    }
}

/// Whether russh implements `name` as an algorithm of the kind it negotiated as `kind`.
pub fn implemented(kind: &russh::AlgorithmKind, name: &str) -> bool {
    let category = match kind {
        russh::AlgorithmKind::Kex => Category::Kex,
        russh::AlgorithmKind::Key => Category::HostKeys,
        russh::AlgorithmKind::Cipher => Category::Ciphers,
        russh::AlgorithmKind::Mac => Category::Macs,
        russh::AlgorithmKind::Compression => return false,
    };
    category.implemented().contains(&name)
}

/// One algorithm-list value (see the module doc) applied to kharon's default: the resulting
/// list, and the names skipped because russh lacks them.
pub(super) fn parse(category: Category, value: &str) -> Result<(Vec<&'static str>, Vec<String>), String> {
    let (op, list) = match value.as_bytes().first() {
        Some(b'+') => (Op::Append, &value[1..]),
        Some(b'-') => (Op::Remove, &value[1..]),
        Some(b'^') => (Op::Head, &value[1..]),
        _ => (Op::Replace, value),
    };
    let implemented = category.implemented();
    let (mut named, mut patterns, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for name in list.split(',') {
        if name.is_empty() {
            return Err(format!("empty {} name in {value:?}", category.what()));
        }
        if op == Op::Remove {
            // Patterns: anything goes, as in ssh; a pattern that matches nothing removes nothing.
            patterns.push(name);
        } else if name.contains(['*', '?']) {
            return Err(format!("{name:?}: patterns only work in a list that starts with '-' (as in ssh)"));
        } else if let Some(known) = implemented.iter().find(|n| **n == name) {
            named.push(*known);
        } else if category.openssh().contains(&name) {
            if op != Op::Replace {
                return Err(format!(
                    "{name:?} is an OpenSSH {what} that kharon's SSH library (russh) does not implement, so \
                     kharond cannot offer it and would not reach a server that needs it; remove it from \
                     this line (kharond implements {list})",
                    what = category.what(),
                    list = implemented.join(",")
                ));
            }
            skipped.push(name.to_owned());
        } else {
            return Err(format!(
                "unknown {} {name:?} (`ssh -Q {}` lists them)",
                category.what(),
                category.query()
            ));
        }
    }
    let default = category.default_list();
    let list = match op {
        Op::Replace => named,
        Op::Append => default.into_iter().chain(named).collect(),
        Op::Head => named.into_iter().chain(default).collect(),
        Op::Remove => {
            default.into_iter().filter(|n| !patterns.iter().any(|p| pattern::wildcard(n, p))).collect()
        }
    };
    let mut unique: Vec<&'static str> = Vec::with_capacity(list.len());
    for name in list {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    if unique.is_empty() {
        // Say which of the user's names were dropped, or the list looks merely rejected.
        let lacks = if skipped.is_empty() { String::new() } else { format!(", not {}", skipped.join(",")) };
        return Err(format!(
            "leaves no {} that kharon implements; it has {}{lacks}",
            category.what(),
            implemented.join(",")
        ));
    }
    Ok((unique, skipped))
}

/// Whether a list value keeps ssh's reordering of host key algorithms by known_hosts: a list
/// that only adds to or removes from the default does (sshconnect.c `ssh_kex2`), one that
/// replaces it or names a head does not.
pub(super) fn keeps_known_hosts_order(value: &str) -> bool {
    value.starts_with(['+', '-'])
}

/// What known_hosts says about one host, for choosing and ordering its host key algorithms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownHostKeys {
    /// An `@cert-authority` line names the host: certificate types are offered, first.
    pub certificate_authority: bool,
    /// The types of the plain keys recorded for the host.
    pub plain: Vec<Algorithm>,
}

/// The algorithm lists of one hop; `None` is kharon's default for that kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Algorithms {
    pub(super) ciphers: Option<Vec<&'static str>>,
    pub(super) macs: Option<Vec<&'static str>>,
    pub(super) kex: Option<Vec<&'static str>>,
    pub(super) host_keys: Option<Vec<&'static str>>,
    /// The user's `HostKeyAlgorithms` fixed the order (a plain list, or `^`): known_hosts does
    /// not reorder it.
    pub(super) host_keys_as_given: bool,
    pub(super) pubkeys: Option<Vec<&'static str>>,
    pub(super) ca_signatures: Option<Vec<&'static str>>,
    /// Where each list that is set came from, for the error when a server has none of it.
    pub(super) origins: Vec<(Category, Origin)>,
}

/// Why a key is not offered (see [`Algorithms::pubkey_signature`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureRefusal {
    /// `PubkeyAcceptedAlgorithms` has no entry for the key's type.
    NotAccepted,
    /// An RSA key whose only signature the server takes (or the only one it can take: no
    /// `server-sig-algs`) is SHA-1 `ssh-rsa`, which `PubkeyAcceptedAlgorithms` does not allow.
    Sha1Only,
}

impl std::fmt::Display for SignatureRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SignatureRefusal::NotAccepted => "its type is not in PubkeyAcceptedAlgorithms",
            SignatureRefusal::Sha1Only => {
                "the server takes RSA signatures only as SHA-1 ssh-rsa, which PubkeyAcceptedAlgorithms does \
                 not allow; ssh skips this key too (`PubkeyAcceptedAlgorithms +ssh-rsa` for this host allows it)"
            }
        })
    }
}

impl Algorithms {
    /// Sets `category`'s list unless an earlier line already did (first obtained value wins).
    /// `as_given`: see [`keeps_known_hosts_order`] (only host key lists use it).
    pub(super) fn keep_first(
        &mut self,
        category: Category,
        list: &[&'static str],
        as_given: bool,
        origin: &Origin,
    ) {
        let slot = match category {
            Category::Ciphers => &mut self.ciphers,
            Category::Macs => &mut self.macs,
            Category::Kex => &mut self.kex,
            Category::HostKeys => &mut self.host_keys,
            Category::Pubkeys => &mut self.pubkeys,
            Category::CaSignatures => &mut self.ca_signatures,
        };
        if slot.is_none() {
            *slot = Some(list.to_vec());
            self.origins.push((category, origin.clone()));
            if category == Category::HostKeys {
                self.host_keys_as_given = as_given;
            }
        }
    }

    /// Only `CASignatureAlgorithms` set, to `list` (what the host certificate checks read).
    pub fn with_ca_signatures(list: &[&'static str]) -> Self {
        Algorithms { ca_signatures: Some(list.to_vec()), ..Algorithms::default() }
    }

    /// Whether a host certificate's CA may have signed it with `algorithm` (an SSH signature
    /// name such as `rsa-sha2-512`) under `CASignatureAlgorithms`; if not, the list in force.
    pub fn ca_signature(&self, algorithm: &str) -> Result<(), String> {
        let list = self.ca_signatures.as_deref().unwrap_or(DEFAULT_CA_SIGNATURES);
        if list.contains(&algorithm) { Ok(()) } else { Err(list.join(",")) }
    }

    /// The RSA hash a key (or certificate, with `certificate`) of `key` signs in with (meaningless
    /// for other types), as sshconnect2.c `key_sig_algorithm` picks it, or why it is not offered.
    /// `server_rsa` is what russh read of the server's `server-sig-algs`: `None` when there was
    /// no such list (or it names no RSA signature), else the best RSA signature it names
    /// (SHA-512, SHA-256, then `ssh-rsa`). A server naming SHA-512 is taken to take SHA-256 and
    /// `ssh-rsa` too, and one naming SHA-256 to take `ssh-rsa` (every server we know does):
    /// russh tells no more. Then, as in ssh: the first RSA entry of `PubkeyAcceptedAlgorithms`
    /// (kharon's default: ssh's) that the server takes; without the list, `ssh-rsa` if allowed.
    pub fn pubkey_signature(
        &self,
        key: &Algorithm,
        certificate: bool,
        server_rsa: Option<Option<HashAlg>>,
    ) -> Result<Option<HashAlg>, SignatureRefusal> {
        let defaults;
        let list: &[&str] = match &self.pubkeys {
            Some(list) => list,
            None => {
                defaults = default_key_types();
                &defaults
            }
        };
        let base = |name: &'static str| if certificate { name.strip_suffix(CERT_SUFFIX) } else { Some(name) };
        let entries = || list.iter().filter_map(|n| base(n)).filter(|n| !is_certificate(n));
        match key {
            Algorithm::Rsa { .. } => {
                let taken: &[Option<HashAlg>] = match server_rsa {
                    None | Some(None) => &[None],
                    Some(Some(HashAlg::Sha256)) => &[Some(HashAlg::Sha256), None],
                    Some(Some(_)) => &[Some(HashAlg::Sha512), Some(HashAlg::Sha256), None],
                };
                let chosen = entries().filter_map(rsa_hash).find(|hash| taken.contains(hash));
                match chosen {
                    Some(hash) => Ok(hash),
                    None if taken == [None] && entries().any(|n| rsa_hash(n).is_some()) => {
                        Err(SignatureRefusal::Sha1Only)
                    }
                    None => Err(SignatureRefusal::NotAccepted),
                }
            }
            other => {
                if entries().any(|n| n == other.as_str()) {
                    Ok(None)
                } else {
                    Err(SignatureRefusal::NotAccepted)
                }
            }
        }
    }

    /// Which option set the list russh negotiates as `kind`, and where; `None` for kharon's
    /// default.
    pub fn origin(&self, kind: &russh::AlgorithmKind) -> (&'static str, Option<&Origin>) {
        let (category, option) = match kind {
            russh::AlgorithmKind::Kex => (Category::Kex, "KexAlgorithms"),
            russh::AlgorithmKind::Key => (Category::HostKeys, "HostKeyAlgorithms"),
            russh::AlgorithmKind::Cipher => (Category::Ciphers, "Ciphers"),
            russh::AlgorithmKind::Mac => (Category::Macs, "MACs"),
            russh::AlgorithmKind::Compression => return ("Compression", None),
        };
        (option, self.origins.iter().find(|(c, _)| *c == category).map(|(_, origin)| origin))
    }

    /// What russh offers a host of which known_hosts says `known`. Every name here came from
    /// russh's own tables, so the conversions cannot fail; one that did would only shorten the list.
    pub fn preferred(&self, known: &KnownHostKeys) -> russh::Preferred {
        let list = |slot: &Option<Vec<&'static str>>, category: Category| {
            slot.clone().unwrap_or_else(|| category.default_list())
        };
        let mut kex: Vec<kex::Name> =
            list(&self.kex, Category::Kex).into_iter().filter_map(|n| kex::Name::try_from(n).ok()).collect();
        // What OpenSSH adds to every client proposal: extension negotiation, and strict key
        // exchange (the Terrapin fix).
        kex.extend([kex::EXTENSION_SUPPORT_AS_CLIENT, kex::EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT]);
        let (certificates, plain): (Vec<&str>, Vec<&str>) =
            list(&self.host_keys, Category::HostKeys).into_iter().partition(|n| is_certificate(n));
        let mut key: Vec<Algorithm> = plain.into_iter().filter_map(|n| Algorithm::new(n).ok()).collect();
        if !self.host_keys_as_given {
            // Stable: known types first, each part in the list's order.
            key.sort_by_key(|algorithm| !known.plain.iter().any(|k| same_key_type(k, algorithm)));
        }
        // A list of certificate types only still has to negotiate something; the check then
        // falls back to the certified key, as ssh's does.
        let host_key_certificates = if known.certificate_authority || key.is_empty() {
            certificates.into_iter().filter_map(|n| Algorithm::new_certificate(n).ok()).collect()
        } else {
            Vec::new()
        };
        russh::Preferred {
            kex: Cow::Owned(kex),
            key: Cow::Owned(key),
            host_key_certificates: Cow::Owned(host_key_certificates),
            cipher: Cow::Owned(
                list(&self.ciphers, Category::Ciphers)
                    .into_iter()
                    .filter_map(|n| cipher::Name::try_from(n).ok())
                    .collect(),
            ),
            mac: Cow::Owned(
                list(&self.macs, Category::Macs)
                    .into_iter()
                    .filter_map(|n| mac::Name::try_from(n).ok())
                    .collect(),
            ),
            ..russh::Preferred::DEFAULT
        }
    }
}

/// ssh's "a key of this type": every RSA signature algorithm uses any RSA key.
fn same_key_type(known: &Algorithm, algorithm: &Algorithm) -> bool {
    known == algorithm
        || (matches!(known, Algorithm::Rsa { .. }) && matches!(algorithm, Algorithm::Rsa { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_full_lists_without_their_sha1_entry() {
        assert_eq!(PUBKEY_CERTS.last(), Some(&"ssh-rsa-cert-v01@openssh.com"));
        assert_eq!(HOST_KEYS.last(), Some(&"ssh-rsa"));
        assert_eq!(DEFAULT_HOST_KEY_CERTS.len(), 6);
        assert_eq!(DEFAULT_CA_SIGNATURES.len(), 6);
        assert!(!DEFAULT_CA_SIGNATURES.contains(&"ssh-rsa"));
        let keys = default_key_types();
        assert_eq!(keys.len(), 12);
        assert!(!keys.iter().any(|k| k.starts_with("ssh-rsa")), "{keys:?}");
    }

    #[test]
    fn the_defaults_are_openssh_9s_client_lists_as_far_as_russh_goes() {
        // `ssh -G` of OpenSSH 9.2 and 9.9 (myproposal.h), without what russh lacks.
        let openssh_macs = "umac-64-etm@openssh.com,umac-128-etm@openssh.com,hmac-sha2-256-etm@openssh.com,\
            hmac-sha2-512-etm@openssh.com,hmac-sha1-etm@openssh.com,umac-64@openssh.com,umac-128@openssh.com,\
            hmac-sha2-256,hmac-sha2-512,hmac-sha1";
        let openssh_kex = "sntrup761x25519-sha512,sntrup761x25519-sha512@openssh.com,mlkem768x25519-sha256,\
            curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,ecdh-sha2-nistp384,\
            ecdh-sha2-nistp521,diffie-hellman-group-exchange-sha256,diffie-hellman-group16-sha512,\
            diffie-hellman-group18-sha512,diffie-hellman-group14-sha256";
        let openssh_ciphers = "chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr,\
            aes128-gcm@openssh.com,aes256-gcm@openssh.com";
        for (category, openssh) in [
            (Category::Macs, openssh_macs),
            (Category::Kex, openssh_kex),
            (Category::Ciphers, openssh_ciphers),
        ] {
            let implemented = category.implemented();
            let expected: Vec<&str> = openssh.split(',').filter(|n| implemented.contains(n)).collect();
            let mut ours = category.default_list();
            if category == Category::Ciphers {
                // The same ciphers, in kharon's order (AES-GCM first where the CPU helps).
                ours.sort_unstable();
                let mut expected = expected.clone();
                expected.sort_unstable();
                assert_eq!(ours, expected);
            } else {
                assert_eq!(ours, expected, "{category:?}");
            }
        }
        // The legacy ones are there to be added, with the `des` feature for 3des-cbc.
        for (category, name) in [
            (Category::Ciphers, "3des-cbc"),
            (Category::Ciphers, "aes128-cbc"),
            (Category::Kex, "diffie-hellman-group14-sha1"),
            (Category::Kex, "diffie-hellman-group-exchange-sha1"),
            (Category::HostKeys, "ssh-rsa"),
            (Category::Pubkeys, "ssh-rsa"),
        ] {
            let (list, skipped) = parse(category, &format!("+{name}")).expect("implemented");
            assert_eq!((list.last(), skipped.len()), (Some(&name), 0), "{category:?} {name}");
        }
    }

    #[test]
    fn adding_what_russh_lacks_is_refused_replacing_with_it_skips_it() {
        for (category, name) in [
            (Category::Macs, "umac-128-etm@openssh.com"),
            (Category::Kex, "sntrup761x25519-sha512@openssh.com"),
            (Category::HostKeys, "ssh-dss"),
        ] {
            for op in ["+", "^"] {
                let err = parse(category, &format!("{op}{name}")).unwrap_err();
                assert!(err.starts_with(&format!("\"{name}\" is an OpenSSH ")), "{err}");
                assert!(err.contains("does not implement"), "{err}");
            }
        }
        let (list, skipped) = parse(Category::Macs, "umac-128-etm@openssh.com,hmac-sha1").unwrap();
        assert_eq!((list, skipped), (vec!["hmac-sha1"], vec!["umac-128-etm@openssh.com".to_owned()]));
    }

    #[test]
    fn host_key_names_are_russhs_defaults() {
        let russh: Vec<String> =
            borrowed(russh::Preferred::DEFAULT.key).iter().map(|a| a.as_str().to_owned()).collect();
        assert_eq!(russh, HOST_KEYS);
    }

    #[test]
    fn every_default_is_implemented_and_accepted_by_parse() {
        for category in
            [Category::Ciphers, Category::Macs, Category::Kex, Category::HostKeys, Category::Pubkeys]
        {
            let implemented = category.implemented();
            for name in category.default_list() {
                assert!(implemented.contains(&name), "{name} is not in russh's {category:?}");
                assert_eq!(parse(category, name), Ok((vec![name], Vec::new())));
            }
        }
    }

    #[test]
    fn the_default_cipher_order_follows_the_cpus_aes_support() {
        assert_eq!(default_ciphers(true)[0], "aes256-gcm@openssh.com");
        assert_eq!(default_ciphers(false)[0], "chacha20-poly1305@openssh.com");
        // Only the order differs: the same ciphers are offered either way.
        let mut with: Vec<_> = default_ciphers(true).to_vec();
        let mut without: Vec<_> = default_ciphers(false).to_vec();
        with.sort_unstable();
        without.sort_unstable();
        assert_eq!(with, without);
        // With no Ciphers line, this machine's order is what russh offers.
        let offered: Vec<String> = Algorithms::default()
            .preferred(&KnownHostKeys::default())
            .cipher
            .iter()
            .map(|n| n.as_ref().to_owned())
            .collect();
        assert_eq!(offered, default_ciphers(aes_gcm_accelerated()));
        // A relative list starts from the same order.
        let (appended, _) = parse(Category::Ciphers, "-aes*-ctr").unwrap();
        assert_eq!(appended[0], default_ciphers(aes_gcm_accelerated())[0]);
    }

    fn pubkeys(value: &str) -> Algorithms {
        let (list, _) = parse(Category::Pubkeys, value).expect("valid list");
        Algorithms { pubkeys: Some(list), ..Algorithms::default() }
    }

    const RSA: Algorithm = Algorithm::Rsa { hash: None };

    const SHA512: Option<Option<HashAlg>> = Some(Some(HashAlg::Sha512));
    const SHA256: Option<Option<HashAlg>> = Some(Some(HashAlg::Sha256));
    /// The server names only `ssh-rsa` in `server-sig-algs` (an OpenSSH 7-like server).
    const SHA1: Option<Option<HashAlg>> = Some(None);
    /// The server sent no `server-sig-algs` at all.
    const UNSAID: Option<Option<HashAlg>> = None;

    #[test]
    fn without_a_pubkey_list_rsa_signs_as_ssh_would_by_default() {
        let none = Algorithms::default();
        assert_eq!(none.pubkey_signature(&RSA, false, SHA512), Ok(Some(HashAlg::Sha512)));
        assert_eq!(none.pubkey_signature(&RSA, false, SHA256), Ok(Some(HashAlg::Sha256)));
        assert_eq!(none.pubkey_signature(&Algorithm::Ed25519, true, UNSAID), Ok(None));
        // ssh's default has no ssh-rsa since 8.8: a server that takes only SHA-1 gets no RSA key.
        assert_eq!(none.pubkey_signature(&RSA, false, SHA1), Err(SignatureRefusal::Sha1Only));
        assert_eq!(none.pubkey_signature(&RSA, false, UNSAID), Err(SignatureRefusal::Sha1Only));
        assert_eq!(none.pubkey_signature(&RSA, true, SHA1), Err(SignatureRefusal::Sha1Only));
        // `+ssh-rsa`, the usual line for an old jump host, allows it and keeps everything else.
        let plus = pubkeys("+ssh-rsa");
        assert_eq!(plus.pubkey_signature(&RSA, false, SHA1), Ok(None));
        assert_eq!(plus.pubkey_signature(&RSA, false, UNSAID), Ok(None));
        assert_eq!(plus.pubkey_signature(&RSA, false, SHA512), Ok(Some(HashAlg::Sha512)));
        assert_eq!(plus.pubkey_signature(&Algorithm::Ed25519, false, UNSAID), Ok(None));
    }

    #[test]
    fn a_pubkey_list_picks_the_rsa_hash_in_its_own_order_and_excludes_key_types() {
        let sha256 = pubkeys("rsa-sha2-256,ssh-ed25519");
        assert_eq!(sha256.pubkey_signature(&RSA, false, SHA512), Ok(Some(HashAlg::Sha256)));
        assert_eq!(sha256.pubkey_signature(&RSA, false, SHA256), Ok(Some(HashAlg::Sha256)));
        assert_eq!(sha256.pubkey_signature(&RSA, false, UNSAID), Err(SignatureRefusal::Sha1Only));
        assert_eq!(sha256.pubkey_signature(&Algorithm::Ed25519, false, UNSAID), Ok(None));
        let ecdsa = Algorithm::Ecdsa { curve: russh::keys::ssh_key::EcdsaCurve::NistP256 };
        assert_eq!(sha256.pubkey_signature(&ecdsa, false, UNSAID), Err(SignatureRefusal::NotAccepted));
        // Certificates are named on their own.
        assert_eq!(
            sha256.pubkey_signature(&Algorithm::Ed25519, true, UNSAID),
            Err(SignatureRefusal::NotAccepted)
        );
        let certs = pubkeys("ssh-ed25519-cert-v01@openssh.com");
        assert_eq!(certs.pubkey_signature(&Algorithm::Ed25519, true, UNSAID), Ok(None));
        assert_eq!(
            certs.pubkey_signature(&Algorithm::Ed25519, false, UNSAID),
            Err(SignatureRefusal::NotAccepted)
        );
        assert_eq!(certs.pubkey_signature(&RSA, false, SHA512), Err(SignatureRefusal::NotAccepted));
        // The user's order, not the server's best (sshconnect2.c `key_sig_algorithm`).
        let ordered = pubkeys("ssh-rsa,rsa-sha2-512");
        assert_eq!(ordered.pubkey_signature(&RSA, false, SHA512), Ok(None));
        assert_eq!(
            pubkeys("rsa-sha2-256,rsa-sha2-512").pubkey_signature(&RSA, false, SHA512),
            Ok(Some(HashAlg::Sha256))
        );
    }

    #[test]
    fn pubkey_names_ssh_knows_but_russh_lacks_are_skipped_and_typos_refused() {
        let (list, skipped) = parse(Category::Pubkeys, "sk-ssh-ed25519@openssh.com,ssh-ed25519").unwrap();
        assert_eq!((list, skipped), (vec!["ssh-ed25519"], vec!["sk-ssh-ed25519@openssh.com".to_owned()]));
        let err = parse(Category::Pubkeys, "rsa-sha2-384").unwrap_err();
        assert!(
            err.contains("unknown public key signature algorithm")
                && err.contains("PubkeyAcceptedAlgorithms"),
            "{err}"
        );
    }
}
