//! Commodore's `.env` file (docs/lieutenant-and-oidc.md, "The API URL"): commodore loads one before
//! it reads its options (commodore `commodore/cli/__init__.py`, `main`:
//! `load_dotenv(dotenv_path=find_dotenv(usecwd=True))`), and its users keep `COMMODORE_API_URL`
//! there, one per project. kharonctl finds the same file and parses it with `dotenvy`;
//! `kharon_config` decides what its variables count for (below the real environment).
//!
//! Which file, as python-dotenv's `find_dotenv(usecwd=True)` picks it: the first `.env` in the
//! working directory or one of its parents, up to `/`, that is a regular file or a FIFO
//! (`_walk_to_root`, `_is_file_or_fifo`). `PYTHON_DOTENV_DISABLED` set to `1`, `true`, `t`, `yes`
//! or `y` (any case) turns `.env` off for commodore (`_load_dotenv_disabled`), and so for us. A FIFO
//! is found but not read: nothing may be writing it, and reading would then block every command.
//!
//! A statement that does not parse is skipped, as python-dotenv skips it with a warning; the last
//! assignment of a variable counts, as in python-dotenv's dict. Neither the statement nor a value
//! is ever shown: a `.env` often holds secrets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kharon_config::DotEnv;

/// The file name python-dotenv looks for.
const FILE_NAME: &str = ".env";

/// What may be wrong with a `.env`; each is a warning, never the end of a command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {} (commodore's .env); its variables are not used", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error(
        "{} (commodore's .env): {count} statement(s) that do not parse were skipped, as commodore \
         skips them",
        path.display()
    )]
    Statements { path: PathBuf, count: usize },
}

/// The `.env` found from `cwd`, and what was wrong with it.
#[derive(Debug, Default)]
pub struct Found {
    pub dotenv: Option<DotEnv>,
    pub warnings: Vec<Error>,
}

/// Whether `PYTHON_DOTENV_DISABLED` (its value) turns `.env` off.
pub fn disabled(value: Option<&str>) -> bool {
    value.is_some_and(|v| ["1", "true", "t", "yes", "y"].contains(&v.to_lowercase().as_str()))
}

/// The `.env` python-dotenv would pick for a program started in `cwd`.
pub fn find(cwd: &Path) -> Option<PathBuf> {
    cwd.ancestors().map(|dir| dir.join(FILE_NAME)).find(|candidate| {
        std::fs::metadata(candidate)
            .is_ok_and(|meta| meta.is_file() || std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()))
    })
}

/// Finds and reads the `.env` for `cwd` (none when `disabled`).
pub fn load(cwd: &Path, disabled: bool) -> Found {
    if disabled {
        return Found::default();
    }
    let Some(path) = find(cwd) else { return Found::default() };
    let bytes = match kharon_common::files::read_regular(&path) {
        Ok(bytes) => bytes,
        Err(source) => return Found { dotenv: None, warnings: vec![Error::Read { path, source }] },
    };
    let (vars, skipped) = parse(&bytes);
    let warnings =
        if skipped > 0 { vec![Error::Statements { path: path.clone(), count: skipped }] } else { Vec::new() };
    Found { dotenv: Some(DotEnv { path, vars }), warnings }
}

/// The variables `bytes` assigns, and how many statements did not parse.
fn parse(bytes: &[u8]) -> (BTreeMap<String, String>, usize) {
    let mut vars = BTreeMap::new();
    let mut skipped = 0;
    for item in dotenvy::from_read_iter(bytes) {
        match item {
            Ok((name, value)) => {
                vars.insert(name, value);
            }
            Err(_) => skipped += 1,
        }
    }
    (vars, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_env_upward_from_the_working_directory_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("project/sub/deeper");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(dir.path().join(".env"), "COMMODORE_API_URL=http://outer.example\n").unwrap();
        assert_eq!(find(&deep), Some(dir.path().join(".env")));
        std::fs::write(dir.path().join("project/.env"), "COMMODORE_API_URL=http://inner.example\n").unwrap();
        assert_eq!(find(&deep), Some(dir.path().join("project/.env")));
        // A directory named .env is not a file: the search goes on past it.
        std::fs::create_dir(dir.path().join("project/sub/.env")).unwrap();
        assert_eq!(find(&deep), Some(dir.path().join("project/.env")));

        let found = load(&deep, false);
        let dotenv = found.dotenv.unwrap();
        assert_eq!(dotenv.path, dir.path().join("project/.env"));
        assert_eq!(dotenv.vars["COMMODORE_API_URL"], "http://inner.example");
        assert!(found.warnings.is_empty());
        assert!(load(&deep, true).dotenv.is_none());
    }

    #[test]
    fn python_dotenv_disabled_takes_its_truthy_values() {
        for on in ["1", "true", "True", "T", "yes", "Y"] {
            assert!(disabled(Some(on)), "{on}");
        }
        for off in ["0", "false", "", "no", "on"] {
            assert!(!disabled(Some(off)), "{off}");
        }
        assert!(!disabled(None));
    }

    #[test]
    fn values_parse_as_python_dotenv_writes_them_and_the_last_assignment_wins() {
        let text = "# commodore\nexport COMMODORE_API_URL=\"http://a.example/\"  # trailing comment\n\
                    COMMODORE_OIDC_CLIENT='syn'\nCOMMODORE_OIDC_CLIENT=syn-2\n\nEMPTY=\n";
        let (vars, skipped) = parse(text.as_bytes());
        assert_eq!(skipped, 0);
        assert_eq!(vars["COMMODORE_API_URL"], "http://a.example/");
        assert_eq!(vars["COMMODORE_OIDC_CLIENT"], "syn-2");
        assert_eq!(vars["EMPTY"], "");
    }

    #[test]
    fn a_statement_that_does_not_parse_is_skipped_with_a_warning_that_shows_no_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".env");
        std::fs::write(&path, "COMMODORE_API_URL=http://a.example\nnot a statement secret-value\nB=2\n")
            .unwrap();
        let found = load(dir.path(), false);
        let dotenv = found.dotenv.unwrap();
        assert_eq!(dotenv.vars["COMMODORE_API_URL"], "http://a.example");
        assert_eq!(dotenv.vars["B"], "2");
        let warning = found.warnings.iter().map(|w| w.to_string()).collect::<Vec<_>>().join("\n");
        assert!(warning.contains(&path.display().to_string()), "{warning}");
        assert!(warning.contains("1 statement(s) that do not parse were skipped"), "{warning}");
        assert!(!warning.contains("secret-value"), "{warning}");
    }

    #[test]
    fn a_fifo_is_found_but_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join(".env");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR).unwrap();
        assert_eq!(find(dir.path()), Some(fifo.clone()));
        let found = load(dir.path(), false);
        assert!(found.dotenv.is_none());
        let warning = kharon_common::errors::chain(&found.warnings[0]);
        assert!(warning.contains(&format!("cannot read {}", fifo.display())), "{warning}");
    }
}
