//! Man pages rendered by clap_mangen from the same clap definitions as `--help`: one for the
//! command and one per visible subcommand, recursively (`kharonctl-clusters-shell(1)`). Both
//! binaries write theirs at run time (`kharond --man-pages DIR`, `kharonctl man-pages --output
//! DIR`) rather than at build time, so that `cargo install` users can get them too.

use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot render {}", path.display())]
    Render { path: PathBuf, source: std::io::Error },
    #[error("cannot write the man page {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Writes the page of `cli` and of every visible subcommand into `dir` (created if missing,
/// existing pages replaced); returns their paths.
pub fn write(cli: clap::Command, dir: &Path) -> Result<Vec<PathBuf>, Error> {
    // Without this, clap adds a `help` subcommand that would get a page of its own.
    let mut cli = cli.disable_help_subcommand(true);
    // Sets each subcommand's display name (`kharonctl-status`), which names its page.
    cli.build();
    let mut written = Vec::new();
    write_tree(&cli, dir, &mut written)?;
    Ok(written)
}

fn write_tree(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> Result<(), Error> {
    // Subcommands have no version of their own: every page names the release it documents.
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("kharon {}", crate::VERSION))
        .manual("kharon manual");
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).map_err(|source| Error::Render { path: path.clone(), source })?;
    crate::files::write_atomic(&path, &page, 0o644)
        .map_err(|source| Error::Write { path: path.clone(), source })?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, dir, written)?;
    }
    Ok(())
}
