//! Host key checks of one hop against OpenSSH known_hosts files, under `StrictHostKeyChecking`,
//! as OpenSSH 9.2's `check_host_key` decides them.
//!
//! Owns: which known_hosts lines speak for a hop ([`KnownHosts`], read once per dial), what they
//! tell the key exchange ([`KnownHosts::hints`]: offer host certificates when a CA is known,
//! known key types first), deciding known / certified / unknown / changed / revoked, and
//! recording a new key under `accept-new`. `file` parses the files, `certificate` checks a host
//! certificate once a CA line vouches for its CA.
//! Knows nothing of sessions or sockets: `chain` loads [`KnownHosts`] before the handshake and
//! calls [`KnownHosts::check`] from russh's `check_server_key`.
//!
//! # Names
//! The name looked up is [`Hop::known_hosts_name`] (`HostKeyAlias`, else `HostName`), as
//! `[name]:port` when the port is not 22; with `HostKeyAlias` the alias is used as is, without
//! the port, like OpenSSH's `get_hostfile_hostname_ipaddr`. Never the alias the user typed. A
//! host on another port than 22, without HostKeyAlias, is also looked up by its bare name when
//! `[name]:port` finds nothing ("checking without port identifier" in `ssh -v`): there, only a
//! matching key or CA counts; a different key under the bare name is not a change.
//!
//! # Certificates
//! A certificate is accepted when an `@cert-authority` line for the host holds the key that
//! signed it and the certificate passes `certificate::check` (a host certificate, inside its
//! validity window, naming the host among its principals, no critical options, signed with an
//! algorithm `CASignatureAlgorithms` allows, and the signature verifies). Otherwise the key
//! inside it is checked as a plain key, as ssh does ("No matching CA found. Retry with plain
//! key"); if that fails too, the error says why the certificate was not accepted, naming the CA
//! line. `@revoked` applies to the certificate's key and to its CA.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use russh::keys::{HashAlg, PublicKey, PublicKeyOrCertificate};

use kharon_ssh_config::{Hop, KnownHostKeys, StrictHostKeyChecking};

mod certificate;
mod file;

pub use file::Line;
use file::{Entry, Marker};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "host key of {name} is not known ({fingerprint}); StrictHostKeyChecking refuses unknown keys. \
         Check the fingerprint and record it by connecting once with `{record}`"
    )]
    Unknown { name: String, fingerprint: String, record: String },
    #[error(
        "host certificate of {name} ({fingerprint}) is not accepted: {why}; and its key is not known by \
         itself, so StrictHostKeyChecking refuses it"
    )]
    Certificate { name: String, fingerprint: String, why: String },
    #[error(
        "HOST KEY OF {name} HAS CHANGED: it now presents {fingerprint}, but {recorded} records another \
         {algorithm} key. This may be an attack (or the host was reinstalled); refusing. If the change is \
         expected, remove the old key with `ssh-keygen -R {}` (or edit {recorded})",
        shell_quote(lookup)
    )]
    Changed { name: String, lookup: String, fingerprint: String, algorithm: String, recorded: Box<Line> },
    /// `what` says which key: the host key, a certificate's key or the CA that signed it.
    #[error("{what} of {name} is marked @revoked at {recorded}; refusing")]
    Revoked { name: String, what: String, recorded: Line },
    /// sshconnect2.c `verify_host_key_callback`: "Bad server host key: Invalid key length".
    #[error(
        "bad server host key of {name}: its RSA key has {bits} bits, fewer than RequiredRSASize {required} \
         (ssh refuses it too)"
    )]
    RsaTooSmall { name: String, bits: u32, required: u32 },
    #[error("cannot record the host key of {name} in {}", path.display())]
    Record { name: String, path: PathBuf, source: std::io::Error },
}

/// The outcome of a successful check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// A matching key (or a certificate signed by a matching `@cert-authority`) at this line.
    Known(Line),
    /// Unknown, recorded under `accept-new` in this file.
    Recorded(PathBuf),
    /// Unknown, accepted because `StrictHostKeyChecking no`.
    Unchecked,
}

/// What the hint command needs besides the hop (the ssh_config the chain came from).
#[derive(Debug, Clone)]
pub struct Context<'a> {
    pub ssh_config: &'a Path,
}

/// The known_hosts lines that speak for one hop (user files first, then global ones), read once
/// per dial: before the handshake for [`KnownHosts::hints`], during it for [`KnownHosts::check`].
#[derive(Debug, Clone)]
pub struct KnownHosts {
    /// The name looked up ([`lookup_name`]).
    lookup: String,
    /// Lines that match it.
    named: Vec<Entry>,
    /// Lines that match the bare host name, for a port other than 22 without HostKeyAlias.
    bare: Vec<Entry>,
}

impl KnownHosts {
    pub fn load(hop: &Hop) -> Self {
        let lookup = lookup_name(hop);
        let bare =
            (hop.host_key_alias.is_none() && hop.port != 22).then(|| hop.host_name.to_ascii_lowercase());
        let mut named = Vec::new();
        let mut bare_entries = Vec::new();
        for path in hop.user_known_hosts_files.iter().chain(&hop.global_known_hosts_files) {
            for entry in file::read(path) {
                if entry.matches(&lookup) {
                    named.push(entry);
                } else if bare.as_deref().is_some_and(|b| entry.matches(b)) {
                    bare_entries.push(entry);
                }
            }
        }
        KnownHosts { lookup, named, bare: bare_entries }
    }

    /// What the key exchange should offer this host (see `config::algorithms`): certificates if
    /// a CA line names it (with or without the port), and the types of its recorded keys. Only
    /// the `[name]:port` lines order the types, as in ssh's `order_hostkeyalgs`.
    pub fn hints(&self) -> KnownHostKeys {
        KnownHostKeys {
            certificate_authority: self
                .named
                .iter()
                .chain(&self.bare)
                .any(|e| e.marker == Marker::CertAuthority),
            plain: self
                .named
                .iter()
                .filter(|e| e.marker == Marker::None)
                .map(|e| e.key.algorithm())
                .collect(),
        }
    }

    /// Checks `key` presented by `hop` and applies its `StrictHostKeyChecking`. A changed or
    /// revoked key is refused whatever the setting.
    pub fn check(
        &self,
        hop: &Hop,
        key: &PublicKeyOrCertificate,
        ctx: &Context<'_>,
    ) -> Result<Accepted, Error> {
        let presented = key.public_key();
        let fingerprint = presented.fingerprint(HashAlg::Sha256).to_string();
        let name = hop.display();
        if let Some(bits) = hop.rsa_too_small(&presented) {
            return Err(Error::RsaTooSmall { name, bits, required: hop.required_rsa_size });
        }
        let all = || self.named.iter().chain(&self.bare);
        // Revocations win over everything (OpenSSH checks them first), for a certificate's CA too.
        if let Some(e) =
            all().find(|e| e.marker == Marker::Revoked && e.key.key_data() == presented.key_data())
        {
            let what = match key {
                PublicKeyOrCertificate::Certificate(_) => {
                    format!("the key of the host certificate ({fingerprint})")
                }
                PublicKeyOrCertificate::PublicKey { .. } => format!("the host key ({fingerprint})"),
            };
            return Err(Error::Revoked { name, what, recorded: e.line.clone() });
        }
        let mut certificate_problem = None;
        if let PublicKeyOrCertificate::Certificate(cert) = key {
            let ca = cert.signature_key();
            if let Some(e) = all().find(|e| e.marker == Marker::Revoked && e.key.key_data() == ca) {
                let what = format!(
                    "the CA ({}) that signed the host certificate",
                    e.key.fingerprint(HashAlg::Sha256)
                );
                return Err(Error::Revoked { name, what, recorded: e.line.clone() });
            }
            match self.certified(hop, cert) {
                Ok(line) => return Ok(Accepted::Known(line)),
                // Not vouched for: the key inside is checked as a plain key below.
                Err(why) => {
                    tracing::debug!(hop = %name, why, "host certificate not accepted; checking its key");
                    certificate_problem = Some(why);
                }
            }
        }
        fn plain(entries: &[Entry]) -> impl Iterator<Item = &Entry> {
            entries.iter().filter(|e| e.marker == Marker::None)
        }
        let mut changed = None;
        for e in plain(&self.named) {
            if e.key.key_data() == presented.key_data() {
                return Ok(Accepted::Known(e.line.clone()));
            }
            if e.key.algorithm() == presented.algorithm() && changed.is_none() {
                changed = Some(e);
            }
        }
        if let Some(e) = changed {
            return Err(Error::Changed {
                name,
                lookup: self.lookup.clone(),
                fingerprint,
                algorithm: presented.algorithm().to_string(),
                recorded: Box::new(e.line.clone()),
            });
        }
        if let Some(e) = plain(&self.bare).find(|e| e.key.key_data() == presented.key_data()) {
            return Ok(Accepted::Known(e.line.clone()));
        }
        match hop.strict_host_key_checking {
            StrictHostKeyChecking::Yes => Err(match certificate_problem {
                Some(why) => Error::Certificate { name, fingerprint, why },
                None => Error::Unknown { name, fingerprint, record: record_command(hop, ctx) },
            }),
            StrictHostKeyChecking::No => {
                tracing::warn!(hop = %name, %fingerprint, certificate = ?certificate_problem,
                    "unknown host key accepted (StrictHostKeyChecking no)");
                Ok(Accepted::Unchecked)
            }
            StrictHostKeyChecking::AcceptNew => match hop.user_known_hosts_files.first() {
                // `UserKnownHostsFile none`: nothing to record into; OpenSSH connects anyway.
                None => Ok(Accepted::Unchecked),
                Some(path) => {
                    record(path, &self.lookup, &presented).map_err(|source| Error::Record {
                        name: name.clone(),
                        path: path.clone(),
                        source,
                    })?;
                    tracing::info!(hop = %name, %fingerprint, file = %path.display(), certificate = ?certificate_problem,
                        "new host key recorded (StrictHostKeyChecking accept-new)");
                    Ok(Accepted::Recorded(path.clone()))
                }
            },
        }
    }

    /// The CA line that vouches for `cert`, or why none does. The `[name]:port` lines first;
    /// the bare name's only when those hold no line for the certificate's CA (ssh's retry
    /// "without port identifier" happens only when the first lookup found nothing).
    fn certified(&self, hop: &Hop, cert: &russh::keys::ssh_key::Certificate) -> Result<Line, String> {
        let ca = cert.signature_key();
        let is_ca = |e: &&Entry| e.marker == Marker::CertAuthority;
        // ssh lowercases both names (the host name already is).
        let name = hop.known_hosts_name().to_ascii_lowercase();
        let source = if hop.host_key_alias.is_some() { "HostKeyAlias" } else { "HostName" };
        let principal = certificate::Principal { name: &name, source };
        let signer = self.named.iter().find(|e| is_ca(e) && e.key.key_data() == ca);
        let signer = signer.or_else(|| self.bare.iter().find(|e| is_ca(e) && e.key.key_data() == ca));
        if let Some(e) = signer {
            return certificate::check(cert, principal, &hop.algorithms, SystemTime::now())
                .map(|()| e.line.clone())
                .map_err(|why| format!("the @cert-authority line at {} holds its CA, but {why}", e.line));
        }
        let others: Vec<String> =
            self.named.iter().chain(&self.bare).filter(is_ca).map(|e| e.line.to_string()).collect();
        if others.is_empty() {
            return Err(format!("no @cert-authority line names {}", self.lookup));
        }
        Err(format!(
            "it is signed by CA {}, and the @cert-authority line{} for {} at {} name{} other CAs",
            ca.fingerprint(HashAlg::Sha256),
            if others.len() == 1 { "" } else { "s" },
            self.lookup,
            others.join(", "),
            if others.len() == 1 { "s" } else { "" },
        ))
    }
}

/// Checks `key` presented by `hop` against its known_hosts files (see [`KnownHosts::check`]).
#[cfg(test)]
pub fn check(hop: &Hop, key: &PublicKeyOrCertificate, ctx: &Context<'_>) -> Result<Accepted, Error> {
    KnownHosts::load(hop).check(hop, key, ctx)
}

/// The name as written in known_hosts: `[name]:port` unless port 22 or a HostKeyAlias is set.
pub fn lookup_name(hop: &Hop) -> String {
    let name = hop.known_hosts_name().to_ascii_lowercase();
    if hop.host_key_alias.is_some() || hop.port == 22 { name } else { format!("[{name}]:{}", hop.port) }
}

/// An `ssh` command that reaches the same hop through the same ssh_config (so through the same
/// chain) and asks the user to confirm the key, which records it where kharond looks for it.
/// `--` ends the options: whatever the alias is, a user who pastes this runs no option of it.
fn record_command(hop: &Hop, ctx: &Context<'_>) -> String {
    format!(
        "ssh -F {} -o StrictHostKeyChecking=ask -p {} -l {} -- {} true",
        shell_quote(&ctx.ssh_config.display().to_string()),
        hop.port,
        shell_quote(&hop.user),
        shell_quote(&hop.alias)
    )
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./@:+=,%~".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn record(path: &Path, lookup: &str, key: &PublicKey) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let line = key.to_openssh().map_err(std::io::Error::other)?;
    // Drop the key's comment: known_hosts lines are "name type base64".
    let mut fields = line.split_whitespace();
    let (Some(kind), Some(data)) = (fields.next(), fields.next()) else {
        return Err(std::io::Error::other("cannot encode the host key"));
    };
    let mut file = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    // A file whose last line lacks its newline must not swallow ours.
    let needs_newline = std::fs::read(path).map(|b| b.last().is_some_and(|&c| c != b'\n')).unwrap_or(false);
    let prefix = if needs_newline { "\n" } else { "" };
    file.write_all(format!("{prefix}{lookup} {kind} {data}\n").as_bytes())
}

#[cfg(test)]
mod tests;
