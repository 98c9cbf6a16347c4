//! `Ciphers`, `MACs`, `KexAlgorithms` and `HostKeyAlgorithms`: OpenSSH's list syntax, applied
//! to the algorithms kharon's SSH library (russh) implements.
//!
//! ssh_config(5): a plain list replaces the default; `+list` appends to it, `-list` removes
//! what matches its patterns (`*`, `?`), `^list` moves to its head. `ssh` refuses a name it does
//! not know, and so do we (a typo must not quietly change what is negotiated). A name OpenSSH
//! knows but russh lacks (`umac-128-etm@openssh.com`, `sntrup761x25519-sha512`, certificate and
//! security-key host key types) is skipped: what is left is still a subset of what the user
//! allowed. A list that leaves nothing kharon implements is an error naming file and line.

use std::borrow::Cow;

use russh::keys::ssh_key::Algorithm;
use russh::{cipher, kex, mac};

use super::pattern;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Category {
    Ciphers,
    Macs,
    Kex,
    HostKeys,
}

/// How a value changes the default list (ssh_config(5) "If the specified list begins with ...").
#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Replace,
    Append,
    Remove,
    Head,
}

/// kharon's cipher order when the config names none: AES-GCM first, the fastest with AES-NI
/// (crates.md §1.5), then russh's other defaults.
const DEFAULT_CIPHERS: &[&str] = &[
    "aes256-gcm@openssh.com",
    "aes128-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
];

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
        }
    }

    /// The `ssh -Q` argument that lists OpenSSH's names.
    fn query(self) -> &'static str {
        match self {
            Category::Ciphers => "cipher",
            Category::Macs => "mac",
            Category::Kex => "kex",
            Category::HostKeys => "HostKeyAlgorithms",
        }
    }

    fn openssh(self) -> &'static [&'static str] {
        match self {
            Category::Ciphers => OPENSSH_CIPHERS,
            Category::Macs => OPENSSH_MACS,
            Category::Kex => OPENSSH_KEX,
            Category::HostKeys => OPENSSH_HOST_KEYS,
        }
    }

    /// What russh implements, in its own order; never `none`.
    fn implemented(self) -> Vec<&'static str> {
        let names: Vec<&'static str> = match self {
            Category::Ciphers => cipher::ALL_CIPHERS.iter().map(|n| n.as_ref()).collect(),
            Category::Macs => mac::ALL_MAC_ALGORITHMS.iter().map(|n| n.as_ref()).collect(),
            Category::Kex => kex::ALL_KEX_ALGORITHMS.iter().map(|n| n.as_ref()).collect(),
            Category::HostKeys => HOST_KEYS.to_vec(),
        };
        names.into_iter().filter(|n| !matches!(*n, "none" | "clear")).collect()
    }

    /// kharon's list when the config says nothing.
    fn default_list(self) -> Vec<&'static str> {
        match self {
            Category::Ciphers => DEFAULT_CIPHERS.to_vec(),
            Category::Macs => borrowed(russh::Preferred::DEFAULT.mac).iter().map(|n| n.as_ref()).collect(),
            // The extension markers are not algorithms; `preferred` adds them back.
            Category::Kex => borrowed(russh::Preferred::DEFAULT.kex)
                .iter()
                .map(|n| n.as_ref())
                .filter(|n| !is_kex_extension(n))
                .collect(),
            Category::HostKeys => HOST_KEYS.to_vec(),
        }
    }
}

fn is_kex_extension(name: &str) -> bool {
    name.starts_with("ext-info-") || name.starts_with("kex-strict-")
}

/// One `Ciphers`/`MACs`/`KexAlgorithms`/`HostKeyAlgorithms` value applied to kharon's default:
/// the resulting list, and the names skipped because russh lacks them.
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
        return Err(format!(
            "leaves no {} that kharon implements; it has {}",
            category.what(),
            implemented.join(",")
        ));
    }
    Ok((unique, skipped))
}

/// The algorithm lists of one hop; `None` is kharon's default for that kind.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Algorithms {
    pub(super) ciphers: Option<Vec<&'static str>>,
    pub(super) macs: Option<Vec<&'static str>>,
    pub(super) kex: Option<Vec<&'static str>>,
    pub(super) host_keys: Option<Vec<&'static str>>,
}

impl Algorithms {
    /// Sets `category`'s list unless an earlier line already did (first obtained value wins).
    pub(super) fn keep_first(&mut self, category: Category, list: &[&'static str]) {
        let slot = match category {
            Category::Ciphers => &mut self.ciphers,
            Category::Macs => &mut self.macs,
            Category::Kex => &mut self.kex,
            Category::HostKeys => &mut self.host_keys,
        };
        if slot.is_none() {
            *slot = Some(list.to_vec());
        }
    }

    /// What russh offers the server. Every name here came from russh's own tables, so the
    /// conversions cannot fail; one that did would only shorten the list.
    pub fn preferred(&self) -> russh::Preferred {
        let list = |slot: &Option<Vec<&'static str>>, category: Category| {
            slot.clone().unwrap_or_else(|| category.default_list())
        };
        let mut kex: Vec<kex::Name> =
            list(&self.kex, Category::Kex).into_iter().filter_map(|n| kex::Name::try_from(n).ok()).collect();
        // What OpenSSH adds to every client proposal: extension negotiation, and strict key
        // exchange (the Terrapin fix).
        kex.extend([kex::EXTENSION_SUPPORT_AS_CLIENT, kex::EXTENSION_OPENSSH_STRICT_KEX_AS_CLIENT]);
        russh::Preferred {
            kex: Cow::Owned(kex),
            key: Cow::Owned(
                list(&self.host_keys, Category::HostKeys)
                    .into_iter()
                    .filter_map(|n| Algorithm::new(n).ok())
                    .collect(),
            ),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_key_names_are_russhs_defaults() {
        let russh: Vec<String> =
            borrowed(russh::Preferred::DEFAULT.key).iter().map(|a| a.as_str().to_owned()).collect();
        assert_eq!(russh, HOST_KEYS);
    }

    #[test]
    fn every_default_is_implemented_and_accepted_by_parse() {
        for category in [Category::Ciphers, Category::Macs, Category::Kex, Category::HostKeys] {
            let implemented = category.implemented();
            for name in category.default_list() {
                assert!(implemented.contains(&name), "{name} is not in russh's {category:?}");
                assert_eq!(parse(category, name), Ok((vec![name], Vec::new())));
            }
        }
    }
}
