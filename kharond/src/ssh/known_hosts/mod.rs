//! Host key checks of one hop against OpenSSH known_hosts files, under `StrictHostKeyChecking`.
//!
//! Owns: reading the user and global known_hosts files (OpenSSH's format: any whitespace between
//! fields, comments, `@revoked` / `@cert-authority` markers, comma lists of patterns with `*`, `?`
//! and `!negation`, `[host]:port` names, hashed `|1|salt|hash` names), deciding known / unknown /
//! changed / revoked, and recording a new key under `accept-new`.
//! Knows nothing of sessions or sockets: `chain` calls [`check`] from russh's
//! `check_server_key` for each hop.
//!
//! Why not russh's `check_known_hosts_path`: it splits on single spaces only, has no wildcards,
//! ignores markers and reads one file (crates.md §1.2). The lines are tokenised here and only
//! the key and the hashed-name fields are decoded with `ssh_key`.
//!
//! The name looked up is [`Hop::known_hosts_name`] (`HostKeyAlias`, else `HostName`), as
//! `[name]:port` when the port is not 22; with `HostKeyAlias` the alias is used as is, without
//! the port, like OpenSSH's `get_hostfile_hostname_ipaddr`. Never the alias the user typed.

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use russh::keys::ssh_key::certificate::CertType;
use russh::keys::ssh_key::known_hosts::HostPatterns;
use russh::keys::{HashAlg, PublicKey, PublicKeyOrCertificate};

use super::config::{Hop, StrictHostKeyChecking, pattern};

/// Where a recorded key was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub file: PathBuf,
    pub line: usize,
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "host key of {name} is not known ({fingerprint}); StrictHostKeyChecking refuses unknown keys. \
         Check the fingerprint and record it by connecting once with `{record}`"
    )]
    Unknown { name: String, fingerprint: String, record: String },
    #[error(
        "HOST KEY OF {name} HAS CHANGED: it now presents {fingerprint}, but {recorded} records another \
         {algorithm} key. This may be an attack (or the host was reinstalled); refusing. If the change is \
         expected, remove the old key with `ssh-keygen -R {}` (or edit {recorded})",
        shell_quote(lookup)
    )]
    Changed { name: String, lookup: String, fingerprint: String, algorithm: String, recorded: Box<Line> },
    #[error("host key of {name} ({fingerprint}) is marked @revoked at {recorded}; refusing")]
    Revoked { name: String, fingerprint: String, recorded: Line },
    #[error("cannot record the host key of {name} in {}: {source}", path.display())]
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

/// Checks `key` presented by `hop` against its known_hosts files and applies its
/// `StrictHostKeyChecking`. A changed or revoked key is refused whatever the setting.
pub fn check(hop: &Hop, key: &PublicKeyOrCertificate, ctx: &Context<'_>) -> Result<Accepted, Error> {
    let lookup = lookup_name(hop);
    let files: Vec<&PathBuf> =
        hop.user_known_hosts_files.iter().chain(hop.global_known_hosts_files.iter()).collect();
    let entries: Vec<Entry> = files.iter().flat_map(|f| read_entries(f)).collect();
    let presented = key.public_key();
    let fingerprint = presented.fingerprint(HashAlg::Sha256).to_string();
    let matching: Vec<&Entry> = entries.iter().filter(|e| e.matches(&lookup)).collect();

    // Revocations win over everything (OpenSSH checks them first).
    if let Some(e) =
        matching.iter().find(|e| e.marker == Marker::Revoked && e.key.key_data() == presented.key_data())
    {
        return Err(Error::Revoked { name: hop.display(), fingerprint, recorded: e.line.clone() });
    }
    if let PublicKeyOrCertificate::Certificate(cert) = key {
        let ca_fps: Vec<_> = matching
            .iter()
            .filter(|e| e.marker == Marker::CertAuthority)
            .map(|e| e.key.fingerprint(HashAlg::Sha256))
            .collect();
        let principal_ok = cert.valid_principals().is_empty()
            || cert.valid_principals().iter().any(|p| p.eq_ignore_ascii_case(hop.known_hosts_name()));
        if cert.cert_type() == CertType::Host && principal_ok && cert.validate(ca_fps.iter()).is_ok() {
            let ca = cert.signature_key();
            if let Some(e) =
                matching.iter().find(|e| e.marker == Marker::CertAuthority && e.key.key_data() == ca)
            {
                return Ok(Accepted::Known(e.line.clone()));
            }
        }
        // Not vouched for by a CA: fall through and treat the certified key as a plain key.
    }
    let plain = matching.iter().filter(|e| e.marker == Marker::None);
    let mut changed = None;
    for e in plain {
        if e.key.key_data() == presented.key_data() {
            return Ok(Accepted::Known(e.line.clone()));
        }
        if e.key.algorithm() == presented.algorithm() && changed.is_none() {
            changed = Some(*e);
        }
    }
    if let Some(e) = changed {
        return Err(Error::Changed {
            name: hop.display(),
            lookup,
            fingerprint,
            algorithm: presented.algorithm().to_string(),
            recorded: Box::new(e.line.clone()),
        });
    }
    match hop.strict_host_key_checking {
        StrictHostKeyChecking::Yes => {
            Err(Error::Unknown { name: hop.display(), fingerprint, record: record_command(hop, ctx) })
        }
        StrictHostKeyChecking::No => {
            tracing::warn!(hop = %hop.display(), %fingerprint, "unknown host key accepted (StrictHostKeyChecking no)");
            Ok(Accepted::Unchecked)
        }
        StrictHostKeyChecking::AcceptNew => match hop.user_known_hosts_files.first() {
            // `UserKnownHostsFile none`: nothing to record into; OpenSSH connects anyway.
            None => Ok(Accepted::Unchecked),
            Some(path) => {
                record(path, &lookup, &presented).map_err(|source| Error::Record {
                    name: hop.display(),
                    path: path.clone(),
                    source,
                })?;
                tracing::info!(hop = %hop.display(), %fingerprint, file = %path.display(),
                    "new host key recorded (StrictHostKeyChecking accept-new)");
                Ok(Accepted::Recorded(path.clone()))
            }
        },
    }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker {
    None,
    Revoked,
    CertAuthority,
}

#[derive(Debug)]
struct Entry {
    marker: Marker,
    hosts: HostPatterns,
    key: PublicKey,
    line: Line,
}

impl Entry {
    fn matches(&self, name: &str) -> bool {
        match &self.hosts {
            HostPatterns::HashedName { salt, hash } => {
                let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
                ring::hmac::verify(&key, name.as_bytes(), hash).is_ok()
            }
            // OpenSSH `match_hostname`: a negated match rejects at once; otherwise any positive one.
            HostPatterns::Patterns(patterns) => {
                pattern::patterns_match(name, patterns.iter().map(String::as_str), true)
            }
        }
    }
}

/// Every usable line of one file. A missing file is empty; a line we cannot parse is skipped
/// with a debug log, as OpenSSH does.
fn read_entries(path: &Path) -> Vec<Entry> {
    // read_regular: a FIFO planted at the path must not hang the chain's dial.
    let read = kharon_shared::files::read_regular(path).and_then(|b| {
        String::from_utf8(b).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    });
    let text = match read {
        Ok(t) => t,
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(file = %path.display(), error = %e, "cannot read known_hosts file");
            }
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = Line { file: path.to_owned(), line: i + 1 };
        match parse_line(raw) {
            Ok(Some((marker, hosts, key))) => out.push(Entry { marker, hosts, key, line }),
            Ok(None) => {}
            Err(why) => tracing::debug!(at = %line, why, "skipping known_hosts line"),
        }
    }
    out
}

type Parsed = (Marker, HostPatterns, PublicKey);

fn parse_line(raw: &str) -> Result<Option<Parsed>, &'static str> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let mut fields = trimmed.split_whitespace();
    let mut first = fields.next().ok_or("empty")?;
    let marker = match first {
        "@revoked" => Marker::Revoked,
        "@cert-authority" => Marker::CertAuthority,
        m if m.starts_with('@') => return Err("unknown marker"),
        _ => Marker::None,
    };
    if marker != Marker::None {
        first = fields.next().ok_or("no host field")?;
    }
    let hosts: HostPatterns = first.parse().map_err(|_| "bad host field")?;
    let kind = fields.next().ok_or("no key type")?;
    let data = fields.next().ok_or("no key")?;
    let key = PublicKey::from_openssh(&format!("{kind} {data}")).map_err(|_| "bad or unsupported key")?;
    Ok(Some((marker, hosts, key)))
}

#[cfg(test)]
mod tests;
