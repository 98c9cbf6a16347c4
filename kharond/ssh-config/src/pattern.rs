//! Wildcards: OpenSSH's `match_pattern` (`*`, `?`; used by `Host`, `IgnoreUnknown`, `Match` and,
//! outside the config, by known_hosts host patterns) and the glob(7) subset that `Include` needs
//! (`*`, `?`, `[...]`, one path component at a time).
//! Pure string functions; the only file access is [`glob`]'s directory listing.

use std::path::{Path, PathBuf};

/// OpenSSH `match_pattern` (`wildcard(text, pattern)`): `*` matches any run (also empty), `?`
/// exactly one character, everything else itself. Case-sensitive, like OpenSSH 9.2 (`ssh -G FOO`
/// does not match `Host foo`).
pub(crate) use kharon_common::wildcard::matches as wildcard;

/// OpenSSH `match_pattern_list` with lowercasing (used for `IgnoreUnknown`): a comma-separated
/// list, `!` negates, a negated hit wins over any positive one.
pub(super) fn list_matches(text: &str, list: &str) -> bool {
    list_match(text, list, true)
}

/// OpenSSH `match_pattern_list(text, list, lowercase)` (`== 1`): `lowercase` lowers the list's
/// patterns and, as `match_hostname` does for `Match host`, the text too.
pub(super) fn list_match(text: &str, list: &str, lowercase: bool) -> bool {
    patterns_match(text, list.split(','), lowercase)
}

/// `list_match` on a list already split at its commas (known_hosts keeps its host patterns so).
pub fn patterns_match<'p>(text: &str, patterns: impl IntoIterator<Item = &'p str>, lowercase: bool) -> bool {
    let text = if lowercase { text.to_ascii_lowercase() } else { text.to_owned() };
    let mut positive = false;
    for sub in patterns {
        let (negated, sub) = match sub.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, sub),
        };
        let sub = if lowercase { sub.to_ascii_lowercase() } else { sub.to_owned() };
        if wildcard(&text, &sub) {
            if negated {
                return false;
            }
            positive = true;
        }
    }
    positive
}

/// Whether `s` has glob(7) metacharacters.
pub(super) fn has_glob_meta(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// glob(7) on one file name: `*`, `?`, `[abc]`, `[a-z]`, `[!x]`. A leading `.` must be matched
/// literally, as glob(3) does, so `Include conf.d/*` skips editor dotfiles.
fn component_matches(name: &str, pattern: &str) -> bool {
    if name.starts_with('.') && !pattern.starts_with('.') {
        return false;
    }
    let name: Vec<char> = name.chars().collect();
    let tokens = glob_tokens(pattern);
    // Same single-backtrack-point loop as `wildcard`, with `?`/classes/literals as one-char tokens.
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < name.len() {
        match tokens.get(p) {
            Some(Token::Star) => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(token) if token.matches(name[t]) => {
                t += 1;
                p += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((sp, st)) => {
                p = sp + 1;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    tokens[p..].iter().all(|t| matches!(t, Token::Star))
}

enum Token {
    Star,
    Any,
    Char(char),
    /// `[...]`: negated, inclusive ranges.
    Class(bool, Vec<(char, char)>),
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Star => true,
            Token::Any => true,
            Token::Char(x) => *x == c,
            Token::Class(negated, ranges) => ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated,
        }
    }
}

fn glob_tokens(pattern: &str) -> Vec<Token> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '*' => tokens.push(Token::Star),
            '?' => tokens.push(Token::Any),
            '[' => {
                if let Some((token, len)) = class(&chars[i + 1..]) {
                    tokens.push(token);
                    i += 1 + len;
                    continue;
                }
                // An unclosed `[` is a literal, as in glob(3).
                tokens.push(Token::Char('['));
            }
            c => tokens.push(Token::Char(c)),
        }
        i += 1;
    }
    tokens
}

/// Parses the inside of `[...]` (starting after `[`); returns the class and how many characters
/// it used, including the closing `]`.
fn class(after_open: &[char]) -> Option<(Token, usize)> {
    let negated = matches!(after_open.first(), Some('!') | Some('^'));
    let skip = usize::from(negated);
    let body = &after_open[skip..];
    // A `]` right after the opening (or after `!`) is a member, not the end.
    let close = body.iter().skip(1).position(|&c| c == ']')? + 1;
    let members = &body[..close];
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < members.len() {
        if i + 2 < members.len() && members[i + 1] == '-' {
            ranges.push((members[i], members[i + 2]));
            i += 3;
        } else {
            ranges.push((members[i], members[i]));
            i += 1;
        }
    }
    Some((Token::Class(negated, ranges), skip + close + 1))
}

/// Expands an absolute glob pattern into the regular files it names, sorted like glob(3).
/// Unreadable directories simply contribute nothing, as with glob(3) without GLOB_ERR.
pub(super) fn glob(pattern: &Path) -> Vec<PathBuf> {
    let mut candidates = vec![PathBuf::new()];
    for component in pattern.components() {
        let part = component.as_os_str().to_string_lossy();
        if !has_glob_meta(&part) {
            candidates.iter_mut().for_each(|c| c.push(component));
            continue;
        }
        let mut next = Vec::new();
        for dir in &candidates {
            let Ok(entries) = std::fs::read_dir(dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name();
                if component_matches(&name.to_string_lossy(), &part) {
                    next.push(dir.join(name));
                }
            }
        }
        candidates = next;
    }
    let mut files: Vec<PathBuf> = candidates.into_iter().filter(|p| p.is_file()).collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wildcard_follows_openssh_match_pattern() {
        assert!(wildcard("bastion", "bastion"));
        assert!(wildcard("db1.prod", "*.prod"));
        assert!(wildcard("db1.prod", "db?.prod"));
        assert!(wildcard("", "*"));
        assert!(wildcard("a*b", "a*b"));
        assert!(!wildcard("db10.prod", "db?.prod"));
        assert!(!wildcard("Bastion", "bastion"), "OpenSSH matches Host patterns case-sensitively");
        assert!(wildcard("aaab", "*a*b"));
        assert!(!wildcard("aaac", "*a*b"));
    }

    #[test]
    fn ignore_unknown_lists_are_case_insensitive_with_negation() {
        assert!(list_matches("UseKeychain", "usekeychain,AddKeysToAgent"));
        assert!(list_matches("Foo", "f*"));
        assert!(!list_matches("Foo", "f*,!foo"));
        assert!(!list_matches("Bar", "foo"));
    }

    #[test]
    fn glob_components_skip_dotfiles_and_know_classes() {
        assert!(component_matches("10-work.conf", "*.conf"));
        assert!(!component_matches(".swp.conf", "*.conf"));
        assert!(component_matches(".hidden", ".h*"));
        assert!(component_matches("b", "[a-c]"));
        assert!(!component_matches("b", "[!a-c]"));
        assert!(component_matches("]", "[]]"));
        assert!(component_matches("[x", "[x"));
    }

    proptest! {
        #[test]
        fn a_pattern_matches_itself_without_metacharacters(s in "[a-z0-9.-]{0,20}") {
            prop_assert!(wildcard(&s, &s));
            prop_assert!(wildcard(&s, "*"));
        }

        #[test]
        fn matchers_never_panic(t in "\\PC{0,16}", p in "\\PC{0,16}") {
            let _ = wildcard(&t, &p);
            let _ = list_matches(&t, &p);
            let _ = list_match(&t, &p, false);
            let _ = component_matches(&t, &p);
        }
    }
}
