//! An error and its causes as one line for people, each said once.
//!
//! Many errors already put their cause into their own message (`"config file X: {source}"`) and
//! also return it from `source()`; printing the chain with `{:#}` then says the cause twice. Both
//! binaries print their last error through [`shown`]: the chain, escaped for a terminal.

/// `error`, then each cause that the text so far does not already contain, joined by ": ".
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

/// [`chain`] as a terminal may show it: every line escaped ([`crate::text`]), the lines a message
/// is made of kept (a list of matches, a hint below the error). Errors that carry a server's or
/// another program's text escape it where they take it in, so no newline of theirs survives to
/// here.
pub fn shown(error: &dyn std::error::Error) -> String {
    chain(error).split('\n').map(|line| crate::text::escape(line)).collect::<Vec<_>>().join("\n")
}

#[cfg(test)]
mod tests {
    use super::{chain, shown};

    #[derive(Debug, thiserror::Error)]
    #[error("config file x.toml: {source}")]
    struct Repeats {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach it")]
    struct Hides {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let e = Repeats { source: std::io::Error::other("line 1: bad") };
        assert_eq!(chain(&e), "config file x.toml: line 1: bad");
    }

    #[test]
    fn a_cause_the_message_leaves_out_is_added() {
        let e = Hides { source: std::io::Error::other("Connection refused") };
        assert_eq!(chain(&e), "cannot reach it: Connection refused");
    }

    #[test]
    fn shown_escapes_every_line_and_keeps_the_lines() {
        let e = Hides { source: std::io::Error::other("\u{1b}]0;title\u{7}\nhint: run it again") };
        assert_eq!(shown(&e), "cannot reach it: \\x1b]0;title\\x07\nhint: run it again");
    }
}
