//! The identity provider side of the login, on `openidconnect` (docs/lieutenant-and-oidc.md): discovery, the
//! authorization code exchange with PKCE, the device grant (RFC 8628) and refreshing.
//!
//! Every request goes through the caller's `reqwest` client, which ignores `*_PROXY` (users point
//! `HTTPS_PROXY` at kharond itself) and follows no redirects (the oauth2 docs' SSRF advice; both in
//! docs/dependencies.md, "reqwest 0.12").

use std::time::Duration;

use openidconnect::core::{
    CoreAuthDisplay, CoreAuthenticationFlow, CoreClaimName, CoreClaimType, CoreClient, CoreClientAuthMethod,
    CoreDeviceAuthorizationResponse, CoreGrantType, CoreJsonWebKey, CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm, CoreResponseMode, CoreResponseType, CoreSubjectIdentifierType,
    CoreTokenResponse, CoreTokenType,
};
use openidconnect::{
    AdditionalProviderMetadata, AuthType, AuthorizationCode, ClientId, CsrfToken, DeviceAuthorizationUrl,
    EndpointMaybeSet, EndpointNotSet, EndpointSet, IssuerUrl, Nonce, OAuth2TokenResponse, PkceCodeChallenge,
    PkceCodeVerifier, ProviderMetadata, RedirectUrl, RefreshToken, Scope, TokenResponse,
};
use serde::{Deserialize, Serialize};

use super::callback::REDIRECT_URI;
use super::error::Error;
use super::token::{Details, Grant, Tokens};

/// The discovery document path, appended when a discovery URL lacks it (OpenID Connect Discovery 1.0 §4).
const WELL_KNOWN: &str = "/.well-known/openid-configuration";
/// The scopes commodore asks for; `openid` is added by the library.
const SCOPES: [&str; 2] = ["email", "profile"];

/// The one field we need beyond the core metadata: where the device flow starts, if offered.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct DeviceMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    device_authorization_endpoint: Option<DeviceAuthorizationUrl>,
}
impl AdditionalProviderMetadata for DeviceMetadata {}

type Metadata = ProviderMetadata<
    DeviceMetadata,
    CoreAuthDisplay,
    CoreClientAuthMethod,
    CoreClaimName,
    CoreClaimType,
    CoreGrantType,
    CoreJweContentEncryptionAlgorithm,
    CoreJweKeyManagementAlgorithm,
    CoreJsonWebKey,
    CoreResponseMode,
    CoreResponseType,
    CoreSubjectIdentifierType,
>;

/// What `from_provider_metadata` yields: authorization URL set, token and userinfo URLs as the
/// metadata had them.
type DiscoveredClient = CoreClient<
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointMaybeSet,
    EndpointMaybeSet,
>;

/// A discovered provider and our client id at it.
pub struct Provider {
    metadata: Metadata,
    client_id: String,
    http: reqwest::Client,
}

/// What the browser must be sent to, and what the callback and exchange need to check.
pub struct Authorization {
    pub url: url::Url,
    pub state: CsrfToken,
    nonce: Nonce,
    verifier: PkceCodeVerifier,
}

/// The issuer a discovery URL belongs to: the URL without the well-known suffix.
pub fn issuer_of(discovery_url: &str) -> &str {
    discovery_url.trim_end_matches('/').trim_end_matches(WELL_KNOWN).trim_end_matches('/')
}

fn boxed<E: std::error::Error + Send + Sync + 'static>(e: E) -> Box<dyn std::error::Error + Send + Sync> {
    Box::new(e)
}

impl Provider {
    /// Fetches the discovery document (and the signing keys) and checks that its `issuer` matches.
    pub async fn discover(
        discovery_url: &str,
        client_id: &str,
        http: reqwest::Client,
    ) -> Result<Self, Error> {
        let discovery_err = |source| Error::Discovery { url: discovery_url.to_owned(), source };
        let issuer =
            IssuerUrl::new(issuer_of(discovery_url).to_owned()).map_err(|e| discovery_err(boxed(e)))?;
        let metadata = Metadata::discover_async(issuer, &http).await.map_err(|e| discovery_err(boxed(e)))?;
        Ok(Self { metadata, client_id: client_id.to_owned(), http })
    }

    pub fn issuer(&self) -> &str {
        self.metadata.issuer().as_str()
    }

    fn client(&self) -> DiscoveredClient {
        CoreClient::from_provider_metadata(self.metadata.clone(), ClientId::new(self.client_id.clone()), None)
            // A public client: client_id in the form body, never an Authorization header.
            .set_auth_type(AuthType::RequestBody)
    }

    /// The authorization URL: code flow, PKCE S256, a random `state` and `nonce`.
    pub fn authorize(&self) -> Result<Authorization, Error> {
        let redirect = RedirectUrl::new(REDIRECT_URI.to_owned())
            .map_err(|e| Error::Token { what: "login", source: boxed(e) })?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let client = self.client().set_redirect_uri(redirect);
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in SCOPES {
            request = request.add_scope(Scope::new(scope.to_owned()));
        }
        let (url, state, nonce) = request.url();
        Ok(Authorization { url, state, nonce, verifier })
    }

    /// Trades the callback's code for tokens and verifies the id_token (signature, issuer,
    /// audience, expiry, nonce) before we ever store it.
    pub async fn exchange_code(&self, auth: Authorization, code: String) -> Result<Grant, Error> {
        let redirect = RedirectUrl::new(REDIRECT_URI.to_owned())
            .map_err(|e| Error::Token { what: "login", source: boxed(e) })?;
        let client = self.client().set_redirect_uri(redirect);
        let reply = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| Error::Token { what: "code exchange", source: boxed(e) })?
            .set_pkce_verifier(auth.verifier)
            .request_async(&self.http)
            .await
            .map_err(|e| Error::Token { what: "code exchange", source: boxed(e) })?;
        self.verified(reply, Some(&auth.nonce))
    }

    /// Starts the device flow: what to show the user.
    pub async fn device_start(&self) -> Result<CoreDeviceAuthorizationResponse, Error> {
        let Some(endpoint) = self.metadata.additional_metadata().device_authorization_endpoint.clone() else {
            return Err(Error::NoDeviceFlow { issuer: self.issuer().to_owned() });
        };
        let client = self.client().set_device_authorization_url(endpoint);
        let mut request = client.exchange_device_code();
        for scope in SCOPES {
            request = request.add_scope(Scope::new(scope.to_owned()));
        }
        request
            .request_async(&self.http)
            .await
            .map_err(|e| Error::Token { what: "device authorization", source: boxed(e) })
    }

    /// Polls the token endpoint until the user has approved the device code, or `timeout`.
    pub async fn device_finish(
        &self,
        details: &CoreDeviceAuthorizationResponse,
        timeout: Duration,
    ) -> Result<Grant, Error> {
        let Some(endpoint) = self.metadata.additional_metadata().device_authorization_endpoint.clone() else {
            return Err(Error::NoDeviceFlow { issuer: self.issuer().to_owned() });
        };
        let client = self.client().set_device_authorization_url(endpoint);
        let reply = client
            .exchange_device_access_token(details)
            .map_err(|e| Error::Token { what: "device login", source: boxed(e) })?
            .request_async(&self.http, tokio::time::sleep, Some(timeout))
            .await
            .map_err(|e| Error::Token { what: "device login", source: boxed(e) })?;
        // No nonce in the device grant; signature, issuer, audience and expiry are still checked.
        self.verified(reply, None)
    }

    /// Trades a refresh token for fresh tokens. The reply's id_token is used as is (Lieutenant
    /// verifies it); a reply without a refresh token keeps the old one (the caller merges).
    pub async fn refresh(&self, refresh_token: &str) -> Result<Grant, Error> {
        let client = self.client();
        let token = RefreshToken::new(refresh_token.to_owned());
        let reply = client
            .exchange_refresh_token(&token)
            .map_err(|e| Error::Token { what: "refresh", source: boxed(e) })?
            .request_async(&self.http)
            .await
            .map_err(|e| Error::Token { what: "refresh", source: boxed(e) })?;
        tokens_of(&reply)
    }

    fn verified(&self, reply: CoreTokenResponse, nonce: Option<&Nonce>) -> Result<Grant, Error> {
        let id_token = reply.id_token().ok_or(Error::NoIdToken)?;
        let client = self.client();
        let verifier = client.id_token_verifier();
        let checked = match nonce {
            Some(nonce) => id_token.claims(&verifier, nonce).map(|_| ()),
            None => id_token.claims(&verifier, |_: Option<&Nonce>| Ok(())).map(|_| ()),
        };
        checked.map_err(|e| Error::IdToken { source: boxed(e) })?;
        tokens_of(&reply)
    }
}

fn tokens_of(reply: &CoreTokenResponse) -> Result<Grant, Error> {
    let id_token = reply.id_token().ok_or(Error::NoIdToken)?;
    let tokens = Tokens {
        id_token: id_token.to_string().into(),
        refresh_token: reply.refresh_token().map(|t| t.secret().as_str().into()),
        access_token: Some(reply.access_token().secret().as_str().into()),
    };
    // The library reads `token_type` case-insensitively and names it in lower case; providers
    // (and so commodore's cache) write `Bearer` (RFC 6750 §4).
    let token_type = match reply.token_type() {
        CoreTokenType::Bearer => "Bearer".to_owned(),
        other => other.as_ref().to_owned(),
    };
    let details = Details {
        token_type,
        expires_in: reply.expires_in().map(|d| d.as_secs()),
        scope: reply.scopes().map(|scopes| scopes.iter().map(|s| s.as_str().to_owned()).collect()),
    };
    Ok(Grant { tokens, details })
}

#[cfg(test)]
mod tests {
    #[test]
    fn issuer_is_the_discovery_url_without_the_well_known_suffix() {
        use super::issuer_of;
        assert_eq!(
            issuer_of("https://id.example/realms/x/.well-known/openid-configuration"),
            "https://id.example/realms/x"
        );
        assert_eq!(issuer_of("https://id.example/realms/x/"), "https://id.example/realms/x");
        assert_eq!(issuer_of("http://127.0.0.1:4000"), "http://127.0.0.1:4000");
    }
}
