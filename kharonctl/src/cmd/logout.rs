//! `kharonctl logout`: forget the tokens kharonctl cached for the configured Lieutenant (or for
//! every Lieutenant with `--all`). Commodore's cache is never touched, not even the entries a
//! kharonctl login kept current there (they are commodore's login too); we say when it still holds
//! a token kharonctl would go on using.

use std::process::ExitCode;

use crate::context::Context;
use crate::lieutenant::oidc::commodore;
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
        for url in &urls {
            note_commodore(places.commodore_file.as_deref(), url);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let url = ctx.lieutenant_url();
    let mut file = match TokenFile::load(path) {
        Ok(file) => file,
        Err(e @ store::Error::Corrupt { .. }) => {
            eprintln!("warning: {}; removed it", kharon_common::text::Escaped(&e.damage()));
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
    note_commodore(places.commodore_file.as_deref(), url);
    Ok(ExitCode::SUCCESS)
}

/// Says so when commodore's cache still holds a token for `url`, which kharonctl would use.
fn note_commodore(commodore_file: Option<&std::path::Path>, url: &str) {
    let Some(theirs) = commodore_file else { return };
    let Some(entry) = commodore::lookup(theirs, url) else { return };
    println!(
        "note: commodore's cache {} still holds a token for {}; kharonctl goes on using it, and \
         refreshing it, while it or its refresh token is valid. kharonctl never removes commodore's \
         tokens: to log out of both, delete that entry (or the file) too",
        theirs.display(),
        kharon_common::text::Escaped(&entry.key)
    );
}

/// Removes `path`; whether it existed.
fn remove_file(path: &std::path::Path) -> anyhow::Result<bool> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot remove {}", path.display()))),
    }
}
