//! Which cached token to send: kharonctl's and commodore's caches may each hold one for the same
//! Lieutenant, and neither may hide a better one in the other. The freshest usable
//! id_token wins; when neither is usable, they are refreshed in turn, the most recent login first.
//!
//! "Freshest" is the later `exp` of the id_token; one without `exp` (or not a JWT) is long-lived
//! ([`super::token`]) and so outlasts any dated one. On a tie ours wins: it is the cache we own.

use std::cmp::Ordering;
use std::fmt;
use std::path::PathBuf;
use std::time::SystemTime;

use super::token::{self, Tokens};

/// Which cache a token came from, shown in every message about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Ours {
        path: PathBuf,
    },
    Commodore {
        path: PathBuf,
    },
    /// commodore's static token ([`super::static_token`]): the variable it came from (as
    /// `COMMODORE_API_TOKEN`, or `COMMODORE_API_TOKEN in /p/.env`), and the file it named, if any.
    Static {
        from: String,
        file: Option<PathBuf>,
    },
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Ours { path } => write!(f, "kharonctl's cache {}", path.display()),
            Origin::Commodore { path } => write!(f, "commodore's cache {}", path.display()),
            Origin::Static { from, file: None } => f.write_str(from),
            Origin::Static { from, file: Some(file) } => {
                write!(f, "the file {} that {from} names", file.display())
            }
        }
    }
}

/// A token found in a cache.
#[derive(Debug, Clone)]
pub struct Cached {
    pub tokens: Tokens,
    pub origin: Origin,
}

/// `a`'s id_token against `b`'s: which expires later (no `exp` is never).
fn lasts(a: &Cached, b: &Cached) -> Ordering {
    match (token::expiry(a.tokens.id_token.as_str()), token::expiry(b.tokens.id_token.as_str())) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => x.cmp(&y),
    }
}

/// The usable id_token that lasts longest; on a tie the first of `found` (ours comes first).
pub fn freshest(found: &[Cached], now: SystemTime) -> Option<&Cached> {
    found.iter().filter(|c| !c.tokens.is_stale(now)).fold(None, |best, c| match best {
        Some(b) if lasts(c, b) != Ordering::Greater => Some(b),
        _ => Some(c),
    })
}

/// The order to try refreshing in: the id_token that lasts longest first (the latest login or
/// refresh, whose refresh token is the likeliest still to be good); ties keep `found`'s order.
pub fn by_recency(found: &[Cached]) -> Vec<&Cached> {
    let mut order: Vec<&Cached> = found.iter().collect();
    order.sort_by(|a, b| lasts(b, a));
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lieutenant::oidc::token::tests::jwt;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn ours(exp: Option<u64>) -> Cached {
        cached(exp, Origin::Ours { path: "/c/kharon/tokens.json".into() })
    }

    fn commodores(exp: Option<u64>) -> Cached {
        cached(exp, Origin::Commodore { path: "/c/commodore/token".into() })
    }

    fn cached(exp: Option<u64>, origin: Origin) -> Cached {
        let claims = match exp {
            Some(exp) => serde_json::json!({"exp": exp}),
            None => serde_json::json!({"sub": "a"}),
        };
        Cached {
            tokens: Tokens { id_token: jwt(claims).into(), refresh_token: None, access_token: None },
            origin,
        }
    }

    fn origin_of(c: Option<&Cached>) -> Option<&Origin> {
        c.map(|c| &c.origin)
    }

    #[test]
    fn a_stale_entry_of_ours_never_hides_a_fresh_one_of_commodores() {
        let found = [ours(Some(100)), commodores(Some(5_000))];
        let best = freshest(&found, at(1_000));
        assert!(matches!(origin_of(best), Some(Origin::Commodore { .. })));
        // Both fresh: the one that lasts longer, whichever cache it is in.
        let found = [ours(Some(2_000)), commodores(Some(5_000))];
        assert!(matches!(origin_of(freshest(&found, at(1_000))), Some(Origin::Commodore { .. })));
        let found = [ours(Some(5_000)), commodores(Some(2_000))];
        assert!(matches!(origin_of(freshest(&found, at(1_000))), Some(Origin::Ours { .. })));
        // A tie, and two long-lived ones: ours.
        let found = [ours(Some(5_000)), commodores(Some(5_000))];
        assert!(matches!(origin_of(freshest(&found, at(1_000))), Some(Origin::Ours { .. })));
        let found = [ours(None), commodores(None)];
        assert!(matches!(origin_of(freshest(&found, at(1_000))), Some(Origin::Ours { .. })));
        // Long-lived outlasts any date.
        let found = [ours(Some(u32::MAX as u64)), commodores(None)];
        assert!(matches!(origin_of(freshest(&found, at(1_000))), Some(Origin::Commodore { .. })));
        // Within the staleness margin counts as stale.
        let found = [ours(Some(1_005)), commodores(Some(1_009))];
        assert!(freshest(&found, at(1_000)).is_none());
        assert!(freshest(&[], at(0)).is_none());
    }

    #[test]
    fn refreshing_starts_with_the_latest_login() {
        let found = [ours(Some(100)), commodores(Some(900))];
        let order: Vec<_> = by_recency(&found).into_iter().map(|c| c.origin.clone()).collect();
        assert!(matches!(order[..], [Origin::Commodore { .. }, Origin::Ours { .. }]), "{order:?}");
        let found = [ours(Some(900)), commodores(Some(900))];
        let order: Vec<_> = by_recency(&found).into_iter().map(|c| c.origin.clone()).collect();
        assert!(matches!(order[..], [Origin::Ours { .. }, Origin::Commodore { .. }]), "{order:?}");
    }

    #[test]
    fn the_origin_names_the_cache_and_its_file() {
        assert_eq!(ours(None).origin.to_string(), "kharonctl's cache /c/kharon/tokens.json");
        assert_eq!(commodores(None).origin.to_string(), "commodore's cache /c/commodore/token");
    }
}
