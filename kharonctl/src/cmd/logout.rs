//! `kharonctl logout`: forget the tokens kharonctl cached for the configured Lieutenant (or for
//! every Lieutenant with `--all`). Commodore's own cache is never touched; we say if it still holds
//! a token kharonctl would use.

use std::process::ExitCode;

use crate::context::Context;
use crate::lieutenant::oidc::store::{self, TokenFile};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Remove the tokens of every Lieutenant, not just the configured one
    #[arg(long)]
    pub all: bool,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let places = ctx.oidc_places();
    let path = &places.token_file;
    if args.all {
        let urls: Vec<String> =
            TokenFile::load(path).map(|f| f.urls().map(str::to_owned).collect()).unwrap_or_default();
        if remove_file(path)? {
            let which = if urls.is_empty() { String::new() } else { format!(" ({})", urls.join(", ")) };
            println!("removed {}{which}", path.display());
        } else {
            println!("no cached tokens ({} does not exist)", path.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let url = ctx.lieutenant_url();
    let mut file = match TokenFile::load(path) {
        Ok(file) => file,
        Err(e @ store::Error::Corrupt { .. }) => {
            eprintln!("warning: {}", kharon_shared::errors::shown(&e));
            remove_file(path)?;
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e.into()),
    };
    if file.remove(url) {
        file.save(path)?;
        println!("removed the cached tokens for {url} from {}", path.display());
    } else {
        println!("no cached tokens for {url} in {}", path.display());
    }
    if let Some(commodore) = &places.commodore_file
        && store::commodore_lookup(commodore, url).is_some()
    {
        println!(
            "note: commodore's token cache {} still holds a token for {url}; kharonctl uses it \
             until it expires",
            commodore.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes `path`; whether it existed.
fn remove_file(path: &std::path::Path) -> anyhow::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot remove {}", path.display()))),
    }
}
