//! An error and its causes as one line for people, each said once.
//!
//! Many errors already put their cause into their own message (`"config file X: {source}"`) and
//! also return it from `source()`; printing the chain with `{:#}` then says the cause twice. Both
//! binaries print their last error through [`chain`].

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

#[cfg(test)]
mod tests {
    use super::chain;

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
}
