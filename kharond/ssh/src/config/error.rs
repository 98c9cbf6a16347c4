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
    #[error("ProxyJump cycle: {}", path.join(" -> "))]
    Cycle { path: Vec<String> },
    /// Every bad line of a config, in file order; one error per line when displayed, each with
    /// its causes (not a `source()`: there are several).
    #[error("{}", many(.0))]
    Many(Vec<Error>),
}

fn many(errors: &[Error]) -> String {
    errors
        .iter()
        .flat_map(Error::iter)
        .map(|e| kharon_shared::errors::chain(e))
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
            Error::Invalid { origin, .. } => Some(origin),
            _ => None,
        }
    }
}
