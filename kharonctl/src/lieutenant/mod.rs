//! The Lieutenant API client (docs/lieutenant-and-oidc.md): discovery (`GET /`) and the inventory
//! (`GET /clusters`), returning `kharon_routing::inventory` types.
//!
//! Errors keep what the server said: Lieutenant answers `{"reason": "…"}` on every failure, and a
//! 401 is its own variant because the caller reacts to it (refresh, then log in again). The HTTP
//! client ignores `HTTP(S)_PROXY`: users export `HTTPS_PROXY=socks5h://…` pointing at kharond,
//! which must not carry its own inventory fetch (docs/dependencies.md, "reqwest 0.12"), and it follows
//! no redirects.
//!
//! [`oidc`]: logging in to Lieutenant (browser or device code) and keeping the tokens (0600).

pub mod oidc;

use std::time::Duration;

use kharon_routing::inventory::{self, Cluster};
use serde::Deserialize;

/// Connecting to Lieutenant or the IdP may take this long.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// One whole request may take this long (a large inventory is a few MB).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{url:?} is not a usable Lieutenant URL")]
    BadUrl { url: String, source: url::ParseError },
    #[error("cannot build the HTTP client")]
    Client(#[source] reqwest::Error),
    #[error("cannot reach Lieutenant at {url}")]
    Connect { url: String, source: reqwest::Error },
    #[error("Lieutenant at {url} rejected the token (401 {reason})")]
    Unauthorized { url: String, reason: String },
    #[error("Lieutenant at {url} answered {status}: {reason}")]
    Status { url: String, status: u16, reason: String },
    #[error("Lieutenant at {url} sent a reply that is not what the API describes")]
    Decode { url: String, source: serde_json::Error },
}

/// The HTTP client for Lieutenant and the IdP: no proxy from the environment, no redirects.
pub fn http_client() -> Result<reqwest::Client, Error> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .timeout(REQUEST_TIMEOUT)
        .user_agent(concat!("kharonctl/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(Error::Client)
}

/// `GET /`: if the server was configured with them, the OIDC settings for logging in.
#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    #[serde(default)]
    pub oidc: Option<OidcInfo>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct OidcInfo {
    #[serde(rename = "clientId", default)]
    pub client_id: String,
    #[serde(rename = "discoveryUrl", default)]
    pub discovery_url: String,
}

/// The `{"reason": …}` body of every Lieutenant error.
#[derive(Deserialize)]
struct Reason {
    reason: String,
}

/// A Lieutenant instance.
pub struct Lieutenant {
    /// The base URL with exactly one trailing slash, so joining never drops a path segment.
    base: url::Url,
    http: reqwest::Client,
}

impl Lieutenant {
    pub fn new(api_url: &str, http: reqwest::Client) -> Result<Self, Error> {
        let with_slash = format!("{}/", api_url.trim_end_matches('/'));
        let base =
            url::Url::parse(&with_slash).map_err(|source| Error::BadUrl { url: api_url.into(), source })?;
        Ok(Self { base, http })
    }

    fn endpoint(&self, path: &str) -> Result<url::Url, Error> {
        self.base.join(path).map_err(|source| Error::BadUrl { url: format!("{}{path}", self.base), source })
    }

    /// `GET /` (no authentication).
    pub async fn discover(&self) -> Result<Discovery, Error> {
        let url = self.base.clone();
        let bytes = self.get(url.clone(), None).await?;
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode { url: url.to_string(), source })
    }

    /// The URL of `GET /clusters`, with `?tenant=` when only one tenant's are asked for.
    pub fn clusters_url(&self, tenant: Option<&str>) -> Result<url::Url, Error> {
        let mut url = self.endpoint("clusters")?;
        if let Some(tenant) = tenant {
            url.query_pairs_mut().append_pair("tenant", tenant);
        }
        Ok(url)
    }

    /// `GET /clusters`, optionally only one tenant's, as the bearer's RBAC allows.
    pub async fn clusters(&self, bearer: &str, tenant: Option<&str>) -> Result<Vec<Cluster>, Error> {
        let url = self.clusters_url(tenant)?;
        let bytes = self.get(url.clone(), Some(bearer)).await?;
        inventory::parse_clusters(&bytes).map_err(|source| Error::Decode { url: url.to_string(), source })
    }

    async fn get(&self, url: url::Url, bearer: Option<&str>) -> Result<Vec<u8>, Error> {
        let shown = url.to_string();
        let mut request = self.http.get(url).header(reqwest::header::ACCEPT, "application/json");
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response =
            request.send().await.map_err(|source| Error::Connect { url: shown.clone(), source })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|source| Error::Connect { url: shown.clone(), source })?;
        if status.is_success() {
            return Ok(body.to_vec());
        }
        let reason = match serde_json::from_slice::<Reason>(&body) {
            Ok(r) => r.reason,
            Err(_) => {
                let text = String::from_utf8_lossy(&body);
                let text = text.trim();
                if text.is_empty() {
                    status.canonical_reason().unwrap_or("no reason given").to_owned()
                } else {
                    text.chars().take(200).collect()
                }
            }
        };
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(Error::Unauthorized { url: shown, reason });
        }
        Err(Error::Status { url: shown, status: status.as_u16(), reason })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_join_without_double_slashes_and_keep_base_paths() {
        let http = http_client().unwrap();
        for base in ["https://api.example/", "https://api.example"] {
            let l = Lieutenant::new(base, http.clone()).unwrap();
            assert_eq!(l.endpoint("clusters").unwrap().as_str(), "https://api.example/clusters");
        }
        let l = Lieutenant::new("https://gw.example/lieutenant", http).unwrap();
        assert_eq!(l.endpoint("clusters").unwrap().as_str(), "https://gw.example/lieutenant/clusters");
    }

    #[test]
    fn discovery_tolerates_missing_oidc_and_unknown_fields() {
        let d: Discovery = serde_json::from_str(r#"{"apiVersion":"v0.13.0","vault":{"addr":"x"}}"#).unwrap();
        assert!(d.oidc.is_none());
        assert!(serde_json::from_str::<Discovery>("{}").unwrap().oidc.is_none());
        let d: Discovery =
            serde_json::from_str(r#"{"apiVersion":"v1","oidc":{"clientId":"c","discoveryUrl":"u"}}"#)
                .unwrap();
        assert_eq!(d.oidc.unwrap().client_id, "c");
    }
}
