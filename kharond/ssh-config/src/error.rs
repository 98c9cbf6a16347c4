//! What goes wrong in an ssh_config, and where: every error about one line carries its
//! [`Origin`] (file:line).

use std::path::PathBuf;

/// Where a directive or `Host` block was written, for "file:line" errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file.display(), self.line)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read ssh config {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{origin}: {message}")]
    Invalid { origin: Origin, message: String },
    /// Resolving a hop needs the very same resolution again (the same name, port, user and
    /// jump list: all a `ssh` command line has), so ssh would start ssh after ssh without end.
    /// `origin` is the ProxyJump (or ProxyCommand) line that closes the loop.
    #[error(
        "{origin}: ProxyJump cycle: {}: {} is reached through itself, so ssh would start ssh after ssh \
         without end; break the loop in one of these lines",
        path.join(" -> "),
        path.last().map(String::as_str).unwrap_or_default()
    )]
    Cycle { origin: Origin, path: Vec<String> },
    /// ssh.c `main`'s own check ("jumphost loop via %s"): the last ProxyJump entry is the
    /// destination itself, the same host name, port and user.
    #[error(
        "{origin}: ProxyJump for {alias}: jumphost loop via {via}: that is {hop} itself (the same host, \
         port and user), which ssh refuses too"
    )]
    JumpLoop { origin: Origin, alias: String, via: String, hop: String },
    /// Every bad line of a config, in file order; one error per line when displayed, each with
    /// its causes (not a `source()`: there are several).
    #[error("{}", many(.0))]
    Many(Vec<Error>),
}

fn many(errors: &[Error]) -> String {
    errors
        .iter()
        .flat_map(Error::iter)
        .map(|e| kharon_common::errors::chain(e))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Error {
    /// The single errors, flattening [`Error::Many`].
    pub fn iter(&self) -> Box<dyn Iterator<Item = &Error> + '_> {
        match self {
            Error::Many(errors) => Box::new(errors.iter().flat_map(Error::iter)),
            single => Box::new(std::iter::once(single)),
        }
    }

    /// The file:line the error is about, if it is about one line.
    pub fn origin(&self) -> Option<&Origin> {
        match self {
            Error::Invalid { origin, .. } | Error::Cycle { origin, .. } | Error::JumpLoop { origin, .. } => {
                Some(origin)
            }
            _ => None,
        }
    }
}
