//! `kharond --man-pages DIR`: writes kharond(1) ([`kharon_common::man_pages`]); `kharonctl
//! man-pages` writes kharonctl's.

use std::path::Path;
use std::process::ExitCode;

/// Writes the page and prints its path; a failure is one line on stderr and exit code 1.
pub fn run(cli: clap::Command, dir: &Path) -> ExitCode {
    match kharon_common::man_pages::write(cli, dir) {
        Ok(written) => {
            written.iter().for_each(|path| println!("{}", path.display()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kharond: {}", kharon_common::errors::shown(&e));
            ExitCode::FAILURE
        }
    }
}
