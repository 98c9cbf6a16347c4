//! What can go wrong while logging in to Lieutenant: one error type for the facade and its parts
//! ([`super::provider`], [`super::callback`]), which name it here rather than through `oidc`.

use std::net::SocketAddr;

use crate::lieutenant;

use super::store;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Lieutenant(#[from] lieutenant::Error),
    #[error(
        "Lieutenant at {api_url} announces no OIDC settings; set COMMODORE_OIDC_CLIENT and \
         COMMODORE_OIDC_DISCOVERY_URL (or oidc_client and oidc_discovery_url in the config file)"
    )]
    NoOidc { api_url: String },
    #[error("cannot read the identity provider's discovery document {url}")]
    Discovery { url: String, source: BoxError },
    #[error(
        "the identity provider {issuer} offers no device login (no device_authorization_endpoint); \
         log in with the browser instead: `kharonctl login`"
    )]
    NoDeviceFlow { issuer: String },
    #[error(
        "port {port} is in use by another program (a running `commodore login`, kubelogin or another \
         `kharonctl login`?); the identity provider only accepts http://localhost:{port} as the login \
         redirect, so stop that program and retry, or log in with `kharonctl login --device`"
    )]
    PortBusy { port: u16 },
    #[error("cannot listen on {addr} for the login callback")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error(
        "no login completed within {}; run the command again (or give more time with --timeout)",
        crate::duration::show(*after)
    )]
    Timeout { after: std::time::Duration },
    #[error(
        "the identity provider refused the login: {}{}",
        kharon_common::text::Escaped(error),
        description.as_ref().map(|d| format!(": {}", kharon_common::text::Escaped(d))).unwrap_or_default()
    )]
    Denied { error: String, description: Option<String> },
    #[error("{what} at the identity provider failed")]
    Token { what: &'static str, source: BoxError },
    #[error("the identity provider sent no id_token; Lieutenant needs one as its bearer token")]
    NoIdToken,
    #[error("the id_token from the identity provider does not verify")]
    IdToken { source: BoxError },
    #[error(transparent)]
    Store(#[from] store::Error),
    #[error(transparent)]
    StaticToken(#[from] super::static_token::Unreadable),
}
