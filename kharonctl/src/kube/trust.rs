//! Which certificates kharonctl trusts a cluster's HTTPS endpoints with, and what a refusal means
//! for the user: one place for every request kharonctl sends a cluster (`clusters ID login`'s
//! OAuth flow, `test`'s checks), so `test` cannot pass a server that `login` then refuses.
//!
//! Trusted: the system's roots (`SSL_CERT_FILE` and `SSL_CERT_DIR` honoured, as kubectl does on
//! Linux), plus the cluster's own CA when the inventory has one (`talosAPICertificateAuthorityData`,
//! which the kubeconfig entry hands kubectl as `certificate-authority-data`). Verified by reqwest's
//! rustls verifier (webpki), which is stricter than kubectl's Go verifier in one way people meet:
//! a CA certificate the server presents as its own (basic constraints `CA:TRUE`, the default of
//! `openssl req -x509`) is refused, even when that very certificate is trusted.

use base64::Engine as _;
use kharon_routing::inventory::{Cluster, fact};

/// The cluster's own CA (PEM) from its inventory fact, if it has a usable one.
pub fn cluster_ca(cluster: &Cluster) -> Option<Vec<u8>> {
    cluster_ca_fact(cluster)?.ok().map(|(_, pem)| pem)
}

/// The cluster's CA fact as its base64 text without whitespace (what a kubeconfig's
/// `certificate-authority-data` takes) and decoded; or why it does not decode. `None` without one.
pub fn cluster_ca_fact(cluster: &Cluster) -> Option<Result<(String, Vec<u8>), base64::DecodeError>> {
    let text: String = cluster.dynamic_fact_str(fact::TALOS_CA_DATA)?.split_whitespace().collect();
    Some(base64::engine::general_purpose::STANDARD.decode(&text).map(|pem| (text, pem)))
}

/// A client builder that trusts the system's roots and `ca_pem` (a cluster's CA), nothing else.
pub fn builder(ca_pem: Option<&[u8]>) -> Result<reqwest::ClientBuilder, reqwest::Error> {
    let mut builder = reqwest::Client::builder();
    if let Some(pem) = ca_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem)? {
            builder = builder.add_root_certificate(cert);
        }
    }
    Ok(builder)
}

/// What a certificate refusal in `error` (an error chain as one line) means and what to do, or
/// `None` when it is no certificate problem. `host` is the name the certificate was checked for.
/// Both `test` and `clusters ID login` say it, each adding that the other refuses it too.
pub fn explain(error: &str, host: &str, has_cluster_ca: bool) -> Option<String> {
    let roots = if has_cluster_ca {
        "the system's CAs, or the cluster's own CA from the inventory"
    } else {
        "the system's CAs, or those SSL_CERT_FILE or SSL_CERT_DIR name"
    };
    let why = if error.contains("CaUsedAsEndEntity") {
        "the server presents a CA certificate (basic constraints CA:TRUE) as its own; kharonctl \
         refuses that even when the CA is trusted: the server needs a certificate issued by that CA"
            .to_owned()
    } else if error.contains("UnknownIssuer") {
        format!("the server's certificate is not issued by a CA this machine trusts ({roots})")
    } else if error.contains("NotValidForName") {
        format!("the server's certificate is not valid for {host}")
    } else if error.contains("certificate expired") || error.contains("Expired") {
        "the server's certificate has expired".to_owned()
    } else if error.contains("invalid peer certificate") {
        "the server's certificate is refused".to_owned()
    } else {
        return None;
    };
    Some(why)
}

#[cfg(test)]
mod tests {
    use super::explain;

    #[test]
    fn certificate_refusals_are_said_in_words_once() {
        let ca = "error sending request for url (https://api.c.example/version): client error \
                  (Connect): invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))";
        let said = explain(ca, "api.c.example", false).unwrap();
        assert!(said.contains("CA certificate (basic constraints CA:TRUE) as its own"), "{said}");
        let unknown = "invalid peer certificate: UnknownIssuer";
        assert!(explain(unknown, "h", true).unwrap().contains("the cluster's own CA"));
        assert!(explain(unknown, "h", false).unwrap().contains("SSL_CERT_FILE"));
        assert!(
            explain("invalid peer certificate: NotValidForName", "api.x", false).unwrap().contains("api.x")
        );
        assert_eq!(explain("tcp connect error: Connection refused", "h", false), None);
    }
}
