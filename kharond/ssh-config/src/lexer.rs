//! One ssh_config line → keyword and arguments, with OpenSSH's rules (readconf.c `strdelim`,
//! misc.c `argv_split`): `Keyword value`, `Keyword=value` and `Keyword = value`; `"` and `'` quote;
//! `\` escapes a quote, a backslash or (unquoted) a space; `#` starts a comment only at the start
//! of a word. Knows nothing of what keywords mean.

/// A line that holds a directive.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Line<'a> {
    /// As written (callers compare case-insensitively).
    pub keyword: &'a str,
    /// The raw text after the keyword and its separator. `ProxyCommand` hands this to the shell
    /// unchanged, and `ProxyJump` parses it itself, as OpenSSH does.
    pub rest: &'a str,
    /// `rest` split into words, quotes removed.
    pub args: Vec<String>,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum LexError {
    /// A keyword with nothing after it (the keyword, as written).
    NoArgument(String),
    /// A line that starts with `=`.
    NoKeyword,
    /// An unclosed `"` or `'`.
    Quotes,
}

impl std::fmt::Display for LexError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LexError::NoArgument(keyword) => return write!(f, "{keyword}: missing argument"),
            LexError::NoKeyword => "missing keyword before '='",
            LexError::Quotes => "unbalanced quotes",
        })
    }
}

const BLANK: [char; 2] = [' ', '\t'];

/// `Ok(None)` for blank and comment lines.
pub(super) fn split(line: &str) -> Result<Option<Line<'_>>, LexError> {
    // OpenSSH strips trailing whitespace (and a form feed) before anything else.
    let line = line.trim_end_matches([' ', '\t', '\r', '\n', '\x0c']);
    let s = line.trim_start_matches(BLANK);
    if s.is_empty() || s.starts_with('#') {
        return Ok(None);
    }
    let end = s.find([' ', '\t', '=']).unwrap_or(s.len());
    let keyword = &s[..end];
    if keyword.is_empty() {
        return Err(LexError::NoKeyword);
    }
    // At most one `=`, with blanks on either side.
    let mut rest = s[end..].trim_start_matches(BLANK);
    if let Some(after) = rest.strip_prefix('=') {
        rest = after.trim_start_matches(BLANK);
    }
    if rest.is_empty() {
        return Err(LexError::NoArgument(keyword.to_owned()));
    }
    let args = words(rest)?;
    if args.is_empty() {
        // Only a comment after the keyword.
        return Err(LexError::NoArgument(keyword.to_owned()));
    }
    Ok(Some(Line { keyword, rest, args }))
}

/// misc.c `argv_split(s, .., terminate_on_comment = 1)`.
pub(super) fn words(s: &str) -> Result<Vec<String>, LexError> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if BLANK.contains(&chars[i]) {
            i += 1;
            continue;
        }
        if chars[i] == '#' {
            break;
        }
        let mut word = String::new();
        let mut quote: Option<char> = None;
        while i < chars.len() {
            let c = chars[i];
            if c == '\\' {
                match chars.get(i + 1) {
                    Some(&next) if matches!(next, '\'' | '"' | '\\') || (quote.is_none() && next == ' ') => {
                        word.push(next);
                        i += 2;
                    }
                    // Unknown escapes stay as written (Windows-ish paths, regexes in commands).
                    _ => {
                        word.push(c);
                        i += 1;
                    }
                }
                continue;
            }
            match quote {
                None if BLANK.contains(&c) => break,
                None if c == '"' || c == '\'' => quote = Some(c),
                Some(q) if q == c => quote = None,
                _ => word.push(c),
            }
            i += 1;
        }
        if quote.is_some() {
            return Err(LexError::Quotes);
        }
        out.push(word);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parsed(line: &str) -> (String, String, Vec<String>) {
        let l = split(line).unwrap().unwrap();
        (l.keyword.to_owned(), l.rest.to_owned(), l.args)
    }

    #[test]
    fn keyword_separators_follow_openssh() {
        for line in ["Port 2200", "Port=2200", "Port = 2200", "  Port\t=\t2200  ", "Port 2200\r"] {
            assert_eq!(parsed(line), ("Port".into(), "2200".into(), vec!["2200".into()]), "{line:?}");
        }
    }

    #[test]
    fn quotes_escapes_and_comments() {
        assert_eq!(parsed(r#"IdentityFile "~/my keys/id" # home"#).2, vec!["~/my keys/id"]);
        assert_eq!(parsed(r"IdentityFile ~/my\ keys/id").2, vec!["~/my keys/id"]);
        assert_eq!(parsed("Host a'b c'd e#f").2, vec!["ab cd", "e#f"]);
        assert_eq!(parsed(r"X a\qb").2, vec![r"a\qb"]);
        assert_eq!(split("# Port 22"), Ok(None));
        assert_eq!(split("   "), Ok(None));
    }

    #[test]
    fn broken_lines_are_errors() {
        assert_eq!(split("Port"), Err(LexError::NoArgument("Port".into())));
        assert_eq!(split("Port # nothing"), Err(LexError::NoArgument("Port".into())));
        assert_eq!(split("= 22"), Err(LexError::NoKeyword));
        assert_eq!(split("HostName \"x"), Err(LexError::Quotes));
    }

    #[test]
    fn rest_keeps_the_raw_command() {
        let l = split("ProxyCommand=  nc -X 5 -x 'proxy:1080' %h %p").unwrap().unwrap();
        assert_eq!(l.rest, "nc -X 5 -x 'proxy:1080' %h %p");
    }

    proptest! {
        #[test]
        fn never_panics(line in "\\PC{0,40}") {
            let _ = split(&line);
        }
    }
}
