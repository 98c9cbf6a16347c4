//! One known_hosts file as OpenSSH reads it: any whitespace between fields, comments,
//! `@revoked` / `@cert-authority` markers, comma lists of patterns with `*`, `?` and
//! `!negation`, `[host]:port` names, hashed `|1|salt|hash` names. A line that cannot be parsed
//! is skipped with a debug log, as ssh skips it.
//!
//! Why not russh's `check_known_hosts_path`: it splits on single spaces only, has no wildcards,
//! ignores markers and reads one file (docs/ssh-engine.md, "known_hosts"). The lines are tokenised here and only
//! the key and the hashed-name fields are decoded with `ssh_key`.

use std::fmt;
use std::path::{Path, PathBuf};

use russh::keys::PublicKey;
use russh::keys::ssh_key::known_hosts::HostPatterns;

use kharon_ssh_config::patterns_match;

/// Where a line is: for messages, and for `Accepted`.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Marker {
    None,
    Revoked,
    CertAuthority,
}

#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub marker: Marker,
    hosts: HostPatterns,
    pub key: PublicKey,
    pub line: Line,
}

impl Entry {
    /// Whether the line's host field names `name` (already lowercased, `[name]:port` form when
    /// the port is not 22).
    pub fn matches(&self, name: &str) -> bool {
        match &self.hosts {
            HostPatterns::HashedName { salt, hash } => {
                let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, salt);
                ring::hmac::verify(&key, name.as_bytes(), hash).is_ok()
            }
            // OpenSSH `match_hostname`: a negated match rejects at once; otherwise any positive one.
            HostPatterns::Patterns(patterns) => {
                patterns_match(name, patterns.iter().map(String::as_str), true)
            }
        }
    }
}

/// Every usable line of one file. A missing file is empty.
pub(super) fn read(path: &Path) -> Vec<Entry> {
    // read_regular: a FIFO planted at the path must not hang the chain's dial.
    let read = kharon_common::files::read_regular(path).and_then(|b| {
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
