//! The guard against an update that would wipe the routes: Lieutenant answering `[]` (a tenant
//! binding that expired, a token of the wrong account) or a small part of what it used to (a
//! filter, `--tenant` against a cache of every tenant) is more often a mistake than a decision,
//! and written as is, it sends every host of the lost clusters direct without a word.
//!
//! [`RULE`]: an answer is refused when it has no clusters while the cache has some, or when it
//! would stop routing more than half of the clusters the cache routes (a routed cluster is one
//! with at least one route in the table; it stops being routed when the answer lacks it or gives
//! it no route). `--allow-shrink` writes it all the same. The refusal says what came from where
//! (URL, tenant, account, token) against what the cache holds, and leaves the cache and kharond
//! as they are.

use std::collections::BTreeSet;
use std::path::PathBuf;

use kharon_common::text::Escaped;

use crate::output::count;

/// The rule as a literal, for `concat!` in `--help`.
macro_rules! rule {
    () => {
        "an answer with no clusters while the cache has some, or one that would stop routing more than \
         half of the clusters the cache routes"
    };
}
pub(crate) use rule;

/// The rule, as `--help`, README and the refusal state it.
pub const RULE: &str = rule!();

/// At most this many lost cluster ids are named; the rest are counted.
const NAMED: usize = 5;

/// What an answer would lose against the cache it replaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shrink {
    pub old_clusters: usize,
    pub old_routed: usize,
    pub new_clusters: usize,
    pub new_routed: usize,
    /// The cache's routed clusters the answer no longer routes, sorted.
    pub lost: Vec<String>,
}

/// Whether replacing a cache of `old_clusters` (routing `old_routed`) by an answer of
/// `new_clusters` (routing `new_routed`) breaks [`RULE`].
pub fn judge(
    old_clusters: usize,
    old_routed: &BTreeSet<String>,
    new_clusters: usize,
    new_routed: &BTreeSet<String>,
) -> Option<Shrink> {
    let lost: Vec<String> = old_routed.difference(new_routed).cloned().collect();
    let emptied = new_clusters == 0 && old_clusters > 0;
    if !emptied && lost.len() * 2 <= old_routed.len() {
        return None;
    }
    Some(Shrink {
        old_clusters,
        old_routed: old_routed.len(),
        new_clusters,
        new_routed: new_routed.len(),
        lost,
    })
}

/// Where an answer came from, as far as kharonctl knows.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The `/clusters` URL asked, with its `?tenant=`.
    pub url: String,
    pub tenant: Option<String>,
    /// Who the token says it belongs to (`preferred_username`, `email` or `sub`).
    pub account: Option<String>,
    /// Where the token came from ("kharonctl's cache …", "COMMODORE_API_TOKEN", a login).
    pub token: String,
}

/// An update refused by [`judge`].
#[derive(Debug, thiserror::Error)]
#[error("{}", refusal(self))]
pub struct Refused {
    pub shrink: Shrink,
    pub answer: Answer,
    pub cache: PathBuf,
    /// How old the cache is, as people read it.
    pub cache_age: String,
}

fn refusal(r: &Refused) -> String {
    let (s, a) = (&r.shrink, &r.answer);
    let scope = match &a.tenant {
        Some(t) => format!("only tenant {} (--tenant)", Escaped(t)),
        None => "every tenant the token may see".to_owned(),
    };
    let account = a.account.as_ref().map(|who| format!(" as {}", Escaped(who))).unwrap_or_default();
    let named: Vec<String> = s.lost.iter().take(NAMED).map(|id| Escaped(id).to_string()).collect();
    let more = s.lost.len().saturating_sub(NAMED);
    let lost = if more > 0 { format!("{}, and {more} more", named.join(", ")) } else { named.join(", ") };
    let why = if s.new_clusters == 0 {
        "An empty answer most often means the token belongs to another account, or its access to \
         the tenants expired."
    } else {
        "A part of the clusters most often means a filter (--tenant) or an account that sees fewer \
         tenants."
    };
    format!(
        "refusing to replace the inventory cache {cache}: Lieutenant answered {url} with {new} \
         ({new_routed} routed; {scope}; token{account} from {token}), where the cache from {age} ago \
         has {old} ({old_routed} routed). Written, it would stop routing {lost_count} of those {old_routed} \
         ({lost}), and their hosts would go direct. The rule: {RULE}. The cache and kharond are \
         unchanged. {why} If the answer is right (the clusters are gone), run `kharonctl update \
         --allow-shrink`; if not, check the account (`kharonctl logout`, then `kharonctl update` \
         logs in again) and the tenant (--tenant)",
        cache = r.cache.display(),
        url = Escaped(&a.url),
        new = count(s.new_clusters as u64, "cluster"),
        new_routed = s.new_routed,
        token = Escaped(&a.token),
        age = r.cache_age,
        old = count(s.old_clusters as u64, "cluster"),
        old_routed = s.old_routed,
        lost_count = s.lost.len(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn an_empty_answer_is_refused_when_the_cache_had_clusters() {
        let shrink = judge(5, &ids(&["a", "b"]), 0, &ids(&[])).unwrap();
        assert_eq!(shrink.lost, vec!["a", "b"]);
        // Even a cache that routed nothing: all its clusters would be gone.
        assert!(judge(3, &ids(&[]), 0, &ids(&[])).is_some());
        // Nothing to lose: the first update, or an empty cache.
        assert_eq!(judge(0, &ids(&[]), 0, &ids(&[])), None);
    }

    #[test]
    fn losing_more_than_half_of_the_routed_clusters_is_refused() {
        let old = ids(&["a", "b", "c", "d"]);
        assert_eq!(judge(4, &old, 2, &ids(&["a", "b"])), None, "half is not more than half");
        let shrink = judge(4, &old, 5, &ids(&["a", "x", "y", "z"])).unwrap();
        assert_eq!(
            (shrink.lost.len(), shrink.new_routed),
            (3, 4),
            "new clusters do not make up for lost ones"
        );
        assert!(judge(1, &ids(&["a"]), 1, &ids(&[])).is_some(), "the only routed cluster lost its route");
        assert_eq!(judge(4, &old, 40, &ids(&["a", "b", "c", "d", "e"])), None, "growth is fine");
    }

    #[test]
    fn the_refusal_says_what_came_from_where_against_what_the_cache_holds() {
        let many: Vec<String> = (0..7).map(|i| format!("c-{i}")).collect();
        let old: BTreeSet<String> = many.iter().cloned().collect();
        let refused = Refused {
            shrink: judge(9, &old, 0, &ids(&[])).unwrap(),
            answer: Answer {
                url: "https://api.example/clusters?tenant=t-x".into(),
                tenant: Some("t-x".into()),
                account: Some("alice\u{1b}[2J".into()),
                token: "kharonctl's cache /c/tokens.json".into(),
            },
            cache: "/c/inventory.json".into(),
            cache_age: "2h 3m".into(),
        };
        let text = refused.to_string();
        for part in [
            "refusing to replace the inventory cache /c/inventory.json",
            "answered https://api.example/clusters?tenant=t-x with 0 clusters (0 routed; only tenant t-x (--tenant)",
            "token as alice\\x1b[2J from kharonctl's cache /c/tokens.json",
            "the cache from 2h 3m ago has 9 clusters (7 routed)",
            "stop routing 7 of those 7 (c-0, c-1, c-2, c-3, c-4, and 2 more)",
            "An empty answer",
            "`kharonctl update --allow-shrink`",
            RULE,
        ] {
            assert!(text.contains(part), "{part:?} missing:\n{text}");
        }
    }
}
