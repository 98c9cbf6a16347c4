//! `kharonctl man-pages --output DIR`: writes kharonctl(1) and one page per subcommand
//! (kharonctl-status(1), kharonctl-clusters-shell(1), …), rendered by clap_mangen from the same
//! clap definitions as `--help`, so they describe exactly the installed binary. A subcommand and
//! not a build step so that `cargo install` users can get them too; packages run it once at build
//! time. kharond(1) comes from `kharond --man-pages DIR`. It needs no settings, so it runs before
//! they are loaded (`main`): a build sandbox without HOME, or a broken config file, cannot stop it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;

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
    match write_pages(cli, &args.output) {
        Ok(written) => {
            for path in written {
                println!("{}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kharonctl: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Writes the page of `cli` and of every visible subcommand, recursively; returns their paths.
fn write_pages(cli: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    // Without this, clap adds a `help` subcommand that would get a page of its own.
    let mut cli = cli.disable_help_subcommand(true);
    // Sets each subcommand's display name (`kharonctl-status`), which names its page.
    cli.build();
    let mut written = Vec::new();
    write_tree(&cli, dir, &mut written)?;
    Ok(written)
}

fn write_tree(cmd: &clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    // Subcommands have no version of their own: every page names the release it documents.
    let man = clap_mangen::Man::new(cmd.clone())
        .source(format!("kharon {}", kharon_shared::VERSION))
        .manual("kharon manual");
    let path = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page).with_context(|| format!("cannot render {}", path.display()))?;
    kharon_shared::cache::write_atomic(&path, &page, 0o644)
        .with_context(|| format!("cannot write the man page {}", path.display()))?;
    written.push(path);
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_tree(sub, dir, written)?;
    }
    Ok(())
}
