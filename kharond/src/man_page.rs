//! `kharond --man-pages DIR`: writes kharond(1), rendered by clap_mangen from the same clap
//! definition as `--help`. A flag of the installed binary rather than a build step, so that
//! `cargo install` users can get the page too; `kharonctl man-pages` writes kharonctl's.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

/// Writes the page and prints its path; a failure is one line on stderr and exit code 1.
pub fn run(cli: clap::Command, dir: &Path) -> ExitCode {
    match write(cli, dir) {
        Ok(path) => {
            println!("{}", path.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kharond: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the page into `dir` (created if missing) and returns its path.
fn write(cli: clap::Command, dir: &Path) -> anyhow::Result<PathBuf> {
    let man = clap_mangen::Man::new(cli)
        .source(format!("kharon {}", kharon_shared::VERSION))
        .manual("kharon manual");
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).with_context(|| format!("cannot render {}", path.display()))?;
    kharon_shared::cache::write_atomic(&path, &page, 0o644)
        .with_context(|| format!("cannot write the man page {}", path.display()))?;
    Ok(path)
}
