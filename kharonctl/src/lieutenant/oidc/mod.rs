//! Logging in to Lieutenant with OpenID Connect, and keeping the tokens (docs/lieutenant-and-oidc.md).
//!
//! [`Auth`] answers one question, "which bearer do I send?", in commodore's order: commodore's
//! static token `COMMODORE_API_TOKEN` when it is set and not expired ([`static_token`]); else, over
//! both caches, the freshest usable id_token of ours and commodore's for the same API URL
//! ([`choice`]); when neither is usable, a refresh of each in turn, the latest login first;
//! failing all that, an interactive login. After Lieutenant rejects a token (401),
//! [`Auth::after_rejection`] refreshes once, then logs in again, then gives up. Tokens from a
//! login or a refresh go to our cache, and to commodore's when it exists, so that one login
//! serves both tools ([`commodore`]).
//!
//! - [`token`]: what we keep of a token response, and when an id_token is stale.
//! - [`store`]: our 0600 token cache. [`commodore`]: commodore's, read and kept current.
//! - [`choice`]: which cached token wins, and the cache each came from, as messages name it.
//! - [`static_token`]: `COMMODORE_API_TOKEN`, read as commodore reads it.
//! - [`provider`]: the IdP through `openidconnect`: discovery, code exchange, device grant, refresh.
//! - [`callback`]: the one-shot `http://localhost:18000` redirect server (the browser itself:
//!   [`crate::browser`]).
//! - `error`: what can go wrong, one type for the whole login (its own file so that the parts above
//!   share it without depending on this facade).
//!
//! Progress goes to stderr, and every message about a token names its cache file; tokens never
//! appear.

pub mod callback;
pub mod choice;
pub mod commodore;
mod error;
pub mod provider;
pub mod static_token;
pub mod store;
pub mod token;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use kharon_common::errors::chain;
use kharon_common::text::Escaped;

use crate::lieutenant::Lieutenant;
use choice::{Cached, Origin};
pub use error::Error;
use provider::Provider;
use store::TokenFile;
use token::Grant;

/// Default time a user has to finish logging in (kubelogin's default: 180 s), as the `--timeout`
/// flags of `login` and `update` take it.
pub const DEFAULT_LOGIN_TIMEOUT: &str = "3m";

/// How an interactive login happens.
#[derive(Debug, Clone)]
pub struct LoginOptions {
    /// Device grant instead of the browser redirect.
    pub device: bool,
    /// How long the user has.
    pub timeout: Duration,
}

/// Where tokens live and how to open a browser; the caller reads these from the environment.
#[derive(Debug, Clone)]
pub struct Places {
    /// Our token cache.
    pub token_file: PathBuf,
    /// Commodore's token cache: read, and kept current after a login or refresh when it exists.
    pub commodore_file: Option<PathBuf>,
    /// `KHARON_BROWSER`, then `BROWSER`: the command that opens a URL.
    pub kharon_browser: Option<String>,
    pub browser: Option<String>,
}

/// OIDC settings given by the user; each wins over what Lieutenant announces. The static token
/// wins over every login.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub client_id: Option<String>,
    pub discovery_url: Option<String>,
    pub api_token: Option<static_token::Given>,
}

/// How the current token was obtained, which decides what to try after a 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    None,
    /// commodore's static token: nothing else is tried after a 401.
    Static,
    Cached,
    Refreshed,
    LoggedIn,
}

/// Which bearer to send to one Lieutenant, and how to get a better one.
pub struct Auth<'a> {
    api_url: String,
    lieutenant: &'a Lieutenant,
    overrides: Overrides,
    http: reqwest::Client,
    places: Places,
    options: LoginOptions,
    provider: Option<Provider>,
    current: Option<Cached>,
    stage: Stage,
    /// What is wrong with our token cache when it cannot be read: said once, and the next token
    /// kept replaces the file without another word.
    damaged: Option<String>,
}

impl<'a> Auth<'a> {
    pub fn new(
        api_url: &str,
        lieutenant: &'a Lieutenant,
        http: reqwest::Client,
        overrides: Overrides,
        places: Places,
        options: LoginOptions,
    ) -> Self {
        Self {
            api_url: api_url.to_owned(),
            lieutenant,
            overrides,
            http,
            places,
            options,
            provider: None,
            current: None,
            stage: Stage::None,
            damaged: None,
        }
    }

    /// A bearer for Lieutenant: the freshest cached one, a refreshed one, or one from an
    /// interactive login.
    pub async fn bearer(&mut self) -> Result<String, Error> {
        if let Some(given) = self.overrides.api_token.clone() {
            match static_token::resolve(&given)? {
                Some(found) if !found.tokens.is_stale(SystemTime::now()) => {
                    eprintln!("using the token for {} from {}", Escaped(&self.api_url), found.origin);
                    return Ok(self.settle(found, Stage::Static));
                }
                Some(found) => {
                    let when = token::expiry(found.tokens.id_token.as_str())
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map_or_else(
                            || "some time ago".to_owned(),
                            |d| kharon_common::time::rfc3339(d.as_secs()),
                        );
                    eprintln!(
                        "the token in {} expired at {when}; like commodore, kharonctl goes on with its own login",
                        found.origin
                    );
                }
                None => eprintln!("{} holds no token; it is ignored", Escaped(&given.from)),
            }
        }
        let found = self.cached();
        // With nothing else cached, the login line says it; otherwise it is said here, once.
        if let Some(damage) = &self.damaged
            && !found.is_empty()
        {
            eprintln!("warning: {damage}; it is replaced when kharonctl next keeps a token");
        }
        if let Some(best) = choice::freshest(&found, SystemTime::now()) {
            if matches!(best.origin, Origin::Commodore { .. }) {
                eprintln!("using the token for {} from {}", Escaped(&self.api_url), best.origin);
            }
            return Ok(self.settle(best.clone(), Stage::Cached));
        }
        for candidate in choice::by_recency(&found) {
            if let Some(fresh) = self.try_refresh(candidate, "has expired").await {
                self.keep(&fresh)?;
                return Ok(self.settle(self.ours(fresh), Stage::Refreshed));
            }
        }
        eprintln!("logging in: {}", self.why_login(&found));
        self.login().await
    }

    /// The issuer of the current token (its `iss`), once [`Auth::bearer`] found one.
    pub fn issuer(&self) -> Option<String> {
        token::issuer(self.current.as_ref()?.tokens.id_token.as_str())
    }

    /// Who the current token says it belongs to ([`token::account`]).
    pub fn account(&self) -> Option<String> {
        token::account(self.current.as_ref()?.tokens.id_token.as_str())
    }

    /// Whether the current token is commodore's static one, which no refresh or login replaces.
    pub fn is_static(&self) -> bool {
        self.stage == Stage::Static
    }

    /// Where the current token came from, for messages: its cache, a refresh of it, or a login.
    pub fn origin(&self) -> String {
        match (&self.current, self.stage) {
            (None, _) => "nowhere yet".to_owned(),
            (Some(c), Stage::Refreshed) => format!("a refresh, kept in {}", c.origin),
            (Some(c), Stage::LoggedIn) => format!("a login just now, kept in {}", c.origin),
            (Some(c), _) => c.origin.to_string(),
        }
    }

    /// Lieutenant rejected the current bearer: a better one, or `None` when a fresh login's token
    /// was rejected too (then more logins will not help).
    pub async fn after_rejection(&mut self) -> Result<Option<String>, Error> {
        match self.stage {
            Stage::Cached => {
                if let Some(current) = self.current.clone() {
                    if let Some(fresh) = self.try_refresh(&current, "was rejected by Lieutenant").await {
                        self.keep(&fresh)?;
                        return Ok(Some(self.settle(self.ours(fresh), Stage::Refreshed)));
                    }
                    eprintln!(
                        "logging in: Lieutenant rejected the token for {} from {}, and it cannot be refreshed",
                        Escaped(&self.api_url),
                        current.origin
                    );
                }
                self.login().await.map(Some)
            }
            Stage::None | Stage::Refreshed => {
                eprintln!("Lieutenant rejected the refreshed token; logging in again");
                self.login().await.map(Some)
            }
            Stage::LoggedIn | Stage::Static => Ok(None),
        }
    }

    /// An interactive login (browser or device code); the tokens are cached.
    pub async fn login(&mut self) -> Result<String, Error> {
        let grant =
            if self.options.device { self.device_login().await? } else { self.browser_login().await? };
        self.keep(&grant)?;
        eprintln!("logged in to {}", Escaped(&self.api_url));
        Ok(self.settle(self.ours(grant), Stage::LoggedIn))
    }

    fn settle(&mut self, cached: Cached, stage: Stage) -> String {
        let bearer = cached.tokens.id_token.as_str().to_owned();
        self.current = Some(cached);
        self.stage = stage;
        bearer
    }

    /// Tokens just obtained, as the entry of our cache they were written to.
    fn ours(&self, grant: Grant) -> Cached {
        Cached { tokens: grant.tokens, origin: Origin::Ours { path: self.places.token_file.clone() } }
    }

    /// The tokens both caches hold for this Lieutenant: ours first, then commodore's. An
    /// unreadable cache of ours is skipped, and what is wrong with it kept in `damaged`.
    fn cached(&mut self) -> Vec<Cached> {
        let mut found = Vec::new();
        let path = &self.places.token_file;
        match TokenFile::load(path) {
            Ok(file) => {
                if let Some(tokens) = file.get(&self.api_url) {
                    found
                        .push(Cached { tokens: tokens.clone(), origin: Origin::Ours { path: path.clone() } });
                }
            }
            Err(e) => self.damaged = Some(Escaped(&e.damage()).to_string()),
        }
        if let Some(path) = &self.places.commodore_file
            && let Some(entry) = commodore::lookup(path, &self.api_url)
        {
            found.push(Cached { tokens: entry.tokens, origin: Origin::Commodore { path: path.clone() } });
        }
        found
    }

    /// Why an interactive login is needed, given what the caches held.
    fn why_login(&self, found: &[Cached]) -> String {
        let url = Escaped(&self.api_url);
        if !found.is_empty() {
            let caches: Vec<String> = found.iter().map(|c| c.origin.to_string()).collect();
            return format!("no token for {url} in {} can be used or refreshed", caches.join(" or "));
        }
        if let Some(damage) = &self.damaged {
            let theirs = match &self.places.commodore_file {
                Some(theirs) => format!(", and commodore's cache {} has none for {url}", theirs.display()),
                None => String::new(),
            };
            return format!("{damage}{theirs}; the login replaces it");
        }
        let ours = self.places.token_file.display();
        match &self.places.commodore_file {
            Some(theirs) => format!(
                "there is no token for {url} in kharonctl's cache {ours}, nor in commodore's cache {}",
                theirs.display()
            ),
            None => format!("there is no token for {url} in kharonctl's cache {ours}"),
        }
    }

    /// Refreshes `current`, saying which token from which cache and why; `None` (with a note why)
    /// if there is no usable refresh token or the provider refuses it.
    async fn try_refresh(&mut self, current: &Cached, why: &str) -> Option<Grant> {
        let what = format!("the token for {} in {}", Escaped(&self.api_url), current.origin);
        let Some(refresh_token) = current.tokens.refresh_token.clone() else {
            eprintln!("{what} {why}, and there is no refresh token to renew it with");
            return None;
        };
        // A JWT refresh token (Keycloak) that has expired is not worth a round trip.
        if token::expiry(&refresh_token).is_some_and(|exp| exp <= SystemTime::now()) {
            eprintln!("{what} {why}, and its refresh token has expired too");
            return None;
        }
        eprintln!("{what} {why}; refreshing it");
        let result = match self.provider().await {
            Ok(provider) => provider.refresh(&refresh_token).await,
            Err(e) => Err(e),
        };
        match result {
            Ok(fresh) => {
                Some(Grant { tokens: current.tokens.clone().refreshed(fresh.tokens), details: fresh.details })
            }
            Err(e) => {
                eprintln!("cannot refresh the token from {}: {}", current.origin, Escaped(&chain(&e)));
                None
            }
        }
    }

    /// Writes tokens just obtained to our cache, and to commodore's when it exists (a failure
    /// there is a warning: our cache has them).
    fn keep(&self, grant: &Grant) -> Result<(), Error> {
        let path = &self.places.token_file;
        let mut file = TokenFile::load(path).unwrap_or_else(|e| {
            // Said already when it was first read.
            if self.damaged.is_none() {
                eprintln!("warning: {}; replacing it", Escaped(&e.damage()));
            }
            TokenFile::default()
        });
        file.put(&self.api_url, grant.tokens.clone());
        file.save(path)?;
        let Some(theirs) = &self.places.commodore_file else { return Ok(()) };
        match commodore::keep_current(theirs, &self.api_url, grant, SystemTime::now()) {
            Ok(commodore::Kept::Updated { keys }) => eprintln!(
                "updated the token for {} in commodore's cache {} too (commodore needs no login of its own)",
                Escaped(&keys.join(", ")),
                theirs.display()
            ),
            Ok(commodore::Kept::NoCache) => {}
            Err(e) => eprintln!("warning: {}", Escaped(&chain(&e))),
        }
        Ok(())
    }

    /// The provider, discovered once: client id and discovery URL from the overrides, else from
    /// Lieutenant's `GET /`.
    async fn provider(&mut self) -> Result<&Provider, Error> {
        if self.provider.is_none() {
            let (mut client_id, mut discovery_url) =
                (self.overrides.client_id.clone(), self.overrides.discovery_url.clone());
            if client_id.is_none() || discovery_url.is_none() {
                let announced = self.lieutenant.discover().await?.oidc;
                let announced = announced.filter(|o| !o.client_id.is_empty() && !o.discovery_url.is_empty());
                let Some(oidc) = announced else {
                    return Err(Error::NoOidc { api_url: self.api_url.clone() });
                };
                client_id.get_or_insert(oidc.client_id);
                discovery_url.get_or_insert(oidc.discovery_url);
            }
            let (Some(client_id), Some(discovery_url)) = (client_id, discovery_url) else {
                return Err(Error::NoOidc { api_url: self.api_url.clone() });
            };
            let provider = Provider::discover(&discovery_url, &client_id, self.http.clone()).await?;
            self.provider = Some(provider);
        }
        self.provider.as_ref().ok_or(Error::NoOidc { api_url: self.api_url.clone() })
    }

    async fn browser_login(&mut self) -> Result<Grant, Error> {
        // Bind first: a busy port should fail before a browser tab opens for nothing.
        let callback = callback::Callback::bind().await?;
        let (kharon_browser, browser) = (self.places.kharon_browser.clone(), self.places.browser.clone());
        let timeout = self.options.timeout;
        let api_url = self.api_url.clone();
        let provider = self.provider().await?;
        let auth = provider.authorize()?;
        eprintln!(
            "log in to {} in your browser; if it does not open, visit this URL:\n\n    {}\n",
            Escaped(&api_url),
            Escaped(auth.url.as_str())
        );
        if let Err(e) = crate::browser::open(auth.url.as_str(), kharon_browser.or(browser).as_deref()) {
            eprintln!("(cannot start a browser: {e}; open the URL above yourself)");
        }
        let code = callback.wait_for_code(auth.state.secret(), timeout).await?;
        provider.exchange_code(auth, code).await
    }

    async fn device_login(&mut self) -> Result<Grant, Error> {
        let timeout = self.options.timeout;
        let provider = self.provider().await?;
        let details = provider.device_start().await?;
        let uri = details.verification_uri().to_string();
        // From the identity provider: shown, never interpreted by the terminal.
        eprintln!(
            "to log in, open {} on any device and enter the code: {}",
            Escaped(&uri),
            Escaped(details.user_code().secret())
        );
        if let Some(complete) = details.verification_uri_complete() {
            eprintln!("(or open {} directly)", Escaped(complete.secret()));
        }
        eprintln!("waiting up to {} for the login to complete…", crate::duration::show(timeout));
        provider.device_finish(&details, timeout).await
    }
}
