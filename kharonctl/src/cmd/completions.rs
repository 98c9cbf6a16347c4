//! `kharonctl completions bash|zsh|fish`: prints the registration script of clap_complete's dynamic
//! completion, the same one `COMPLETE=<shell> kharonctl` prints. The script calls kharonctl back on
//! every TAB, so subcommands, flags and cluster ids (from the local cache, see `crate::completion`)
//! are always those of the installed version. contrib/completions/README.md says where to put it.

use std::io::Write as _;
use std::process::ExitCode;

use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};

use crate::completion;
use crate::context::Context;

#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  eval \"$(kharonctl completions bash)\"     # in ~/.bashrc\n  \
    source <(kharonctl completions zsh)       # in ~/.zshrc\n  \
    kharonctl completions fish > ~/.config/fish/completions/kharonctl.fish")]
pub struct Args {
    /// The shell to print the script for
    #[arg(value_enum)]
    shell: Shell,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

pub async fn run(args: Args, _ctx: &Context) -> anyhow::Result<ExitCode> {
    let shell: &dyn EnvCompleter = match args.shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
    };
    let mut script = Vec::new();
    shell.write_registration(
        completion::VAR,
        completion::BIN,
        completion::BIN,
        &completion::completer(),
        &mut script,
    )?;
    std::io::stdout().lock().write_all(&script)?;
    Ok(ExitCode::SUCCESS)
}
