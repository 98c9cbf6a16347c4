//! An error and its causes as one line for people.
//!
//! The convention of every kharon crate: an error's message says what failed and never repeats
//! its cause; the cause is its `source()`. So `{e}` alone says only the outermost step, and
//! whatever shows an error to a person (the binaries' last line, a log line, a gRPC status, a
//! string kept for `kharonctl status`) prints the whole chain: [`Chain`] in a format string or a
//! tracing field, [`chain`] for a `String`, [`shown`] for a terminal. An error that keeps a cause
//! in the middle of its own sentence (advice after it) formats that cause's chain itself and does
//! not return it from `source()`.

use std::fmt;

/// An error and each of its causes, joined by ": ", for format strings and tracing fields
/// (`warn!(error = %Chain(&e))`). A cause with an empty message adds nothing.
#[derive(Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            if !text.is_empty() {
                write!(f, ": {text}")?;
            }
            next = cause.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `error`, then each cause, joined by ": " ([`Chain`] as a `String`).
pub fn chain(error: &dyn std::error::Error) -> String {
    Chain(error).to_string()
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
    use super::{Chain, chain, shown};

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config file x.toml")]
    struct Read {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start")]
    struct Start {
        source: Read,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot reach it")]
    struct Hides {
        source: std::io::Error,
    }

    #[test]
    fn a_nested_chain_says_each_message_once_in_order() {
        let e = Start { source: Read { source: std::io::Error::other("line 1: bad") } };
        assert_eq!(chain(&e), "cannot start: cannot read config file x.toml: line 1: bad");
        assert_eq!(Chain(&e).to_string(), chain(&e));
        // The message alone is the outermost step only.
        assert_eq!(e.to_string(), "cannot start");
    }

    #[test]
    fn a_cause_whose_text_the_message_contains_is_still_printed() {
        // The old rule dropped a cause whose text appeared earlier in the line.
        let e = Read { source: std::io::Error::other("config file") };
        assert_eq!(chain(&e), "cannot read config file x.toml: config file");
        let e = Start { source: Read { source: std::io::Error::other("cannot read config file x.toml") } };
        assert_eq!(chain(&e), "cannot start: cannot read config file x.toml: cannot read config file x.toml");
    }

    #[test]
    fn a_cause_without_text_adds_nothing() {
        let e = Hides { source: std::io::Error::other("") };
        assert_eq!(chain(&e), "cannot reach it");
    }

    #[test]
    fn shown_escapes_every_line_and_keeps_the_lines() {
        let e = Hides { source: std::io::Error::other("\u{1b}]0;title\u{7}\nhint: run it again") };
        assert_eq!(shown(&e), "cannot reach it: \\x1b]0;title\\x07\nhint: run it again");
    }
}
