//! Where a setting's value came from ([`Source`]), and a value together with it ([`Setting`]).

use std::fmt;
use std::path::PathBuf;

/// Where a setting's value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(&'static str),
    /// A variable commodore's `.env` file sets (and the real environment does not).
    DotEnv {
        var: &'static str,
        path: PathBuf,
    },
    Flag(&'static str),
    /// A listener handed over by systemd (or another manager speaking its protocol).
    SocketActivation,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Env(v) => write!(f, "env {v}"),
            Source::DotEnv { var, path } => write!(f, "{var} in {}", path.display()),
            Source::Flag(n) => write!(f, "flag {n}"),
            Source::SocketActivation => f.write_str("socket activation"),
        }
    }
}

/// A value and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

impl<T> Setting<T> {
    pub(crate) fn new(value: T, source: Source) -> Self {
        Self { value, source }
    }
}
