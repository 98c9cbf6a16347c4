//! The one `*`/`?` matcher of the workspace: OpenSSH's `match_pattern` for kharond's ssh config and
//! known_hosts, and cluster id filters for kharonctl. Pure string function.

/// Whether all of `text` matches `pattern`: `*` matches any run (also empty), `?` exactly one
/// character, everything else itself, case-sensitively. Iterative with one backtrack point (the
/// last `*` and where it started matching): linear in practice and never recursive, so hostile
/// patterns from a config file or the command line cannot blow the stack.
pub fn matches(text: &str, pattern: &str) -> bool {
    let text: Vec<char> = text.chars().collect();
    let pattern: Vec<char> = pattern.chars().collect();
    let (mut t, mut p) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            // `*` before a literal comparison, as OpenSSH does: a `*` in the text is no reason to
            // give up the pattern's star.
            Some('*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == '?' || c == text[t] => {
                t += 1;
                p += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn stars_and_question_marks_match_whole_texts() {
        assert!(matches("c-foo-1", "c-*"));
        assert!(matches("c-foo-1", "c-???-1"));
        assert!(matches("c-foo-1", "*-1"));
        assert!(matches("c-a-b-1", "c-*-*-1"));
        assert!(matches("", "*"));
        assert!(!matches("d-foo", "c-*"));
        assert!(!matches("c-ab", "c-?"));
        assert!(!matches("foo-1", "foo"));
        assert!(!matches("db10.prod", "db?.prod"));
    }

    #[test]
    fn a_star_in_the_text_does_not_end_the_patterns_star() {
        assert!(matches("*a", "*"));
        assert!(matches("x*y", "x*"));
    }
}
