//! A key exchange that found nothing in common with the server, told as ssh tells it.
//!
//! Owns: turning russh's `NoCommonAlgo` into the words of OpenSSH (ssherr.c: "no matching host
//! key type found", ..., and packet.c `sshpkt_vfatal`'s "Their offer: ..."), followed by what
//! kharond offered, which line of the ssh config chose that list (or that it was kharon's default,
//! which is ssh's), and what to add to the Host block when the server offers something kharon can
//! do but was not asked to (`HostKeyAlgorithms +ssh-rsa`, `KexAlgorithms
//! +diffie-hellman-group14-sha1`, ...): the same line ssh needs.
//! Knows nothing of sessions: `chain` hands the russh error and the hop over.

use kharon_ssh_config::{self, Hop};

/// No algorithm of one kind in common.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.describe())]
pub struct Mismatch {
    /// ssh's word for the kind of algorithm ("host key type").
    what: &'static str,
    /// The server's list, escaped (it is the server's text).
    theirs: Vec<String>,
    /// What kharond offered (extension markers left out).
    ours: Vec<String>,
    option: &'static str,
    /// file:line of the option that chose `ours`, `None` for kharon's default.
    origin: Option<String>,
    /// Names of `theirs` that kharon implements: a `+` line would make them negotiable.
    addable: Vec<String>,
}

impl Mismatch {
    /// The mismatch `error` describes, if it is one.
    pub fn from_russh(error: &russh::Error, hop: &Hop) -> Option<Self> {
        let russh::Error::NoCommonAlgo { kind, ours, theirs } = error else { return None };
        let (option, origin) = hop.algorithms.origin(kind);
        let theirs: Vec<String> = theirs.iter().map(|n| n.escape_debug().to_string()).collect();
        let addable = theirs.iter().filter(|n| kharon_ssh_config::implemented(kind, n)).cloned().collect();
        let what = match kind {
            russh::AlgorithmKind::Kex => "key exchange method",
            russh::AlgorithmKind::Key => "host key type",
            russh::AlgorithmKind::Cipher => "cipher",
            russh::AlgorithmKind::Mac => "MAC",
            russh::AlgorithmKind::Compression => "compression method",
        };
        Some(Mismatch {
            what,
            ours: ours.iter().filter(|n| !is_extension_marker(n)).cloned().collect(),
            theirs,
            option,
            origin: origin.map(ToString::to_string),
            addable,
        })
    }

    fn describe(&self) -> String {
        let from = match &self.origin {
            Some(origin) => format!("{} at {origin}", self.option),
            None => format!("kharon's default {}, which is ssh's", self.option),
        };
        let advice = if self.addable.is_empty() {
            "kharon's SSH library implements none of the server's".to_owned()
        } else {
            format!(
                "if you accept {}, add `{} +{}` to this host's block, as ssh needs too",
                if self.addable.len() == 1 { "it" } else { "them" },
                self.option,
                self.addable.join(",")
            )
        };
        format!(
            "no matching {} found. Their offer: {}; kharond offered {} ({from}); {advice}",
            self.what,
            self.theirs.join(","),
            self.ours.join(","),
        )
    }
}

/// `ext-info-c` and `kex-strict-c-v00@openssh.com` ride in the key exchange list without being
/// methods (RFC 8308 §2.1, OpenSSH PROTOCOL "strict key exchange").
fn is_extension_marker(name: &str) -> bool {
    name.starts_with("ext-info-") || name.starts_with("kex-strict-")
}
