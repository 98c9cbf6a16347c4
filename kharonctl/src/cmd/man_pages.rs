//! `kharonctl man-pages --output DIR`: writes kharonctl(1) and one page per subcommand
//! (kharonctl-status(1), kharonctl-clusters-shell(1), …), see [`kharon_common::man_pages`];
//! packages run it once at build time. kharond(1) comes from `kharond --man-pages DIR`. It needs no settings, so it runs before
//! they are loaded (`main`): a build sandbox without HOME, or a broken config file, cannot stop it.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples (man finds ~/.cargo/share/man when ~/.cargo/bin is on PATH):\n  \
    kharonctl man-pages --output ~/.cargo/share/man/man1\n  \
    kharond --man-pages ~/.cargo/share/man/man1\n  man kharonctl-status")]
pub struct Args {
    /// Directory to write the pages into (created if missing; existing pages are replaced)
    #[arg(long, short, value_name = "DIR")]
    output: PathBuf,
}

/// Runs before the settings are loaded (it needs none), so it reports its own errors: one line on
/// stderr and exit code 1, like every failed command.
pub fn run(args: &Args, cli: clap::Command) -> ExitCode {
    match kharon_common::man_pages::write(cli, &args.output) {
        Ok(written) => {
            for path in written {
                println!("{}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kharonctl: {}", kharon_common::errors::shown(&e));
            ExitCode::FAILURE
        }
    }
}
