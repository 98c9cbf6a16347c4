//! Whether a host certificate is good for a host, once an `@cert-authority` line for that host
//! names its CA: OpenSSH 9.2's `sshkey_cert_check_host` (type, validity window, principals,
//! critical options, `CASignatureAlgorithms`) plus the CA's signature itself, which russh leaves
//! to us (it checks only that the key inside the certificate signed the key exchange).
//!
//! Each failure is a sentence saying what did not match, for the error that names the CA line.

use std::time::{SystemTime, UNIX_EPOCH};

use russh::keys::HashAlg;
use russh::keys::ssh_key::Certificate;
use russh::keys::ssh_key::certificate::CertType;

use kharon_ssh_config::Algorithms;

/// The name a host certificate's principals are checked against, and where it came from.
#[derive(Debug, Clone, Copy)]
pub(super) struct Principal<'a> {
    pub name: &'a str,
    /// "HostKeyAlias" or "HostName".
    pub source: &'a str,
}

/// Checks `cert`, whose CA key an `@cert-authority` line for the host holds, at `now`.
pub(super) fn check(
    cert: &Certificate,
    principal: Principal<'_>,
    algorithms: &Algorithms,
    now: SystemTime,
) -> Result<(), String> {
    if cert.cert_type() != CertType::Host {
        return Err("it is a user certificate, not a host certificate".to_owned());
    }
    let now = now.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    if now < cert.valid_after() {
        return Err(format!("it is not valid before {}", kharon_common::time::rfc3339(cert.valid_after())));
    }
    if now >= cert.valid_before() {
        return Err(format!("it expired at {}", kharon_common::time::rfc3339(cert.valid_before())));
    }
    // No principals: valid for any host (ssh does not require one of a host certificate). The
    // comparison is exact, as ssh's strcmp; the host name is already lowercased.
    let principals = cert.valid_principals();
    if !principals.is_empty() && !principals.iter().any(|p| p == principal.name) {
        return Err(format!(
            "its principals ({}) do not include {:?}, the {} ssh checks them against",
            principals.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", "),
            principal.name,
            principal.source
        ));
    }
    if !cert.critical_options().is_empty() {
        // The server's text, quoted: it goes to logs and `status`.
        let names: Vec<String> = cert.critical_options().keys().map(|k| format!("{k:?}")).collect();
        return Err(format!(
            "it has critical options ({}), which ssh refuses in a host certificate",
            names.join(", ")
        ));
    }
    let signature = cert.signature().algorithm();
    let signature = signature.as_str();
    if let Err(allowed) = algorithms.ca_signature(signature) {
        return Err(format!(
            "its CA signed it with {signature}, which CASignatureAlgorithms ({allowed}) does not allow"
        ));
    }
    // The window and the CA are checked above; what can still fail is the signature itself.
    let ca = cert.signature_key().fingerprint(HashAlg::Sha256);
    cert.validate_at(now, [&ca]).map_err(|_| "its signature does not verify with the CA's key".to_owned())
}
