//! `Ciphers`, `MACs`, `KexAlgorithms`, `HostKeyAlgorithms`, `PubkeyAcceptedAlgorithms` and
//! `CASignatureAlgorithms`: OpenSSH's list syntax, applied to the algorithms kharon's SSH library
//! (russh) implements.
//!
//! ssh_config(5): a plain list replaces the default; `+list` appends to it, `-list` removes
//! what matches its patterns (`*`, `?`), `^list` moves to its head. `ssh` refuses a name it does
//! not know, and so do we (a typo must not quietly change what is negotiated). A name OpenSSH
//! knows but russh lacks (`umac-128-etm@openssh.com`, `sntrup761x25519-sha512`, security-key
//! host key types) is skipped: what is left is still a subset of what the user allowed. A list
//! that leaves nothing kharon implements is an error naming file and line.
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
            Category::Macs => borrowed(russh::Preferred::DEFAULT.mac).iter().map(|n| n.as_ref()).collect(),
            // The extension markers are not algorithms; `preferred` adds them back.
            Category::Kex => borrowed(russh::Preferred::DEFAULT.kex)
                .iter()
                .map(|n| n.as_ref())
                .filter(|n| !is_kex_extension(n))
                .collect(),
            Category::HostKeys => DEFAULT_HOST_KEY_CERTS.iter().chain(HOST_KEYS).copied().collect(),
            Category::Pubkeys => pubkeys(),
            Category::CaSignatures => DEFAULT_CA_SIGNATURES.to_vec(),
        }
    }
}

fn pubkeys() -> Vec<&'static str> {
    PUBKEY_CERTS.iter().chain(HOST_KEYS).copied().collect()
}

/// The SSH name of an RSA signature with `hash` (`None`: SHA-1).
fn rsa_signature(hash: Option<HashAlg>) -> &'static str {
    match hash {
        Some(HashAlg::Sha512) => "rsa-sha2-512",
        Some(HashAlg::Sha256) => "rsa-sha2-256",
        _ => "ssh-rsa",
    }
}

fn is_kex_extension(name: &str) -> bool {
    name.starts_with("ext-info-") || name.starts_with("kex-strict-")
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
}

impl Algorithms {
    /// Sets `category`'s list unless an earlier line already did (first obtained value wins).
    /// `as_given`: see [`keeps_known_hosts_order`] (only host key lists use it).
    pub(super) fn keep_first(&mut self, category: Category, list: &[&'static str], as_given: bool) {
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
            if category == Category::HostKeys {
                self.host_keys_as_given = as_given;
            }
        }
    }

    /// Only `CASignatureAlgorithms` set, to `list` (tests of the host certificate checks).
    #[cfg(test)]
    pub(crate) fn with_ca_signatures(list: &[&'static str]) -> Self {
        Algorithms { ca_signatures: Some(list.to_vec()), ..Algorithms::default() }
    }

    /// Whether a host certificate's CA may have signed it with `algorithm` (an SSH signature
    /// name such as `rsa-sha2-512`) under `CASignatureAlgorithms`; if not, the list in force.
    pub fn ca_signature(&self, algorithm: &str) -> Result<(), String> {
        let list = self.ca_signatures.as_deref().unwrap_or(DEFAULT_CA_SIGNATURES);
        if list.contains(&algorithm) { Ok(()) } else { Err(list.join(",")) }
    }

    /// Whether a key (or certificate, with `certificate`) of `key` may sign in under
    /// `PubkeyAcceptedAlgorithms`, and with which RSA hash; `None` if the list excludes it.
    /// `server_rsa` is russh's choice from the server's list (`None`: `ssh-rsa`, or unknown),
    /// kept when it is accepted or no list was given; otherwise the first accepted of SHA-512,
    /// SHA-256 and SHA-1, as ssh tries them. The hash means nothing for other key types.
    pub fn pubkey_signature(
        &self,
        key: &Algorithm,
        certificate: bool,
        server_rsa: Option<HashAlg>,
    ) -> Option<Option<HashAlg>> {
        let Some(list) = &self.pubkeys else { return Some(server_rsa) };
        let accepted = |name: &str| {
            list.iter()
                .any(|n| if certificate { n.strip_suffix(CERT_SUFFIX) == Some(name) } else { *n == name })
        };
        match key {
            Algorithm::Rsa { .. } => [server_rsa, Some(HashAlg::Sha512), Some(HashAlg::Sha256), None]
                .into_iter()
                .find(|hash| accepted(rsa_signature(*hash))),
            other => accepted(other.as_str()).then_some(None),
        }
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

    #[test]
    fn without_a_pubkey_list_russhs_rsa_choice_and_every_key_type_stand() {
        let none = Algorithms::default();
        assert_eq!(none.pubkey_signature(&RSA, false, None), Some(None));
        assert_eq!(none.pubkey_signature(&RSA, false, Some(HashAlg::Sha256)), Some(Some(HashAlg::Sha256)));
        assert_eq!(none.pubkey_signature(&Algorithm::Ed25519, true, None), Some(None));
        // `+ssh-rsa`, the usual line for an old jump host, keeps everything.
        let plus = pubkeys("+ssh-rsa");
        assert_eq!(plus.pubkey_signature(&RSA, false, None), Some(None));
        assert_eq!(plus.pubkey_signature(&Algorithm::Ed25519, false, None), Some(None));
    }

    #[test]
    fn a_pubkey_list_picks_the_rsa_hash_and_excludes_key_types() {
        let sha256 = pubkeys("rsa-sha2-256,ssh-ed25519");
        assert_eq!(sha256.pubkey_signature(&RSA, false, Some(HashAlg::Sha512)), Some(Some(HashAlg::Sha256)));
        assert_eq!(sha256.pubkey_signature(&RSA, false, None), Some(Some(HashAlg::Sha256)));
        assert_eq!(sha256.pubkey_signature(&Algorithm::Ed25519, false, None), Some(None));
        let ecdsa = Algorithm::Ecdsa { curve: russh::keys::ssh_key::EcdsaCurve::NistP256 };
        assert_eq!(sha256.pubkey_signature(&ecdsa, false, None), None);
        // Certificates are named on their own.
        assert_eq!(sha256.pubkey_signature(&Algorithm::Ed25519, true, None), None);
        let certs = pubkeys("ssh-ed25519-cert-v01@openssh.com");
        assert_eq!(certs.pubkey_signature(&Algorithm::Ed25519, true, None), Some(None));
        assert_eq!(certs.pubkey_signature(&Algorithm::Ed25519, false, None), None);
        // No SHA-1 unless asked for.
        let no_sha1 = pubkeys("-ssh-rsa*");
        assert_eq!(no_sha1.pubkey_signature(&RSA, false, None), Some(Some(HashAlg::Sha512)));
        assert_eq!(pubkeys("ssh-rsa").pubkey_signature(&RSA, false, Some(HashAlg::Sha512)), Some(None));
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
