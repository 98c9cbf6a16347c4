//! kharond's command line: the flags, their help and the exit codes `--help` lists. What the flags
//! mean is [`kharon_config`]'s business: they are handed over as its [`Overrides`].

use std::path::PathBuf;

use clap::Parser;
use kharon_config::Overrides;

#[derive(Parser, Debug)]
#[command(
    name = "kharond",
    version = kharon_common::VERSION,
    about = "Local SOCKS5 proxy that routes cluster hosts through their SSH jump hosts",
    long_about = "kharond listens for SOCKS5 clients (curl, kubectl, oc, browsers) and connects each \
        destination either directly or, when its name matches a cluster's domains, through that \
        cluster's SSH jump host chain from ~/.ssh/config. Routing comes from the Lieutenant \
        inventory cache (`kharonctl update`; until the first one every host goes direct) or from a \
        /clusters JSON file (--inventory). \
        kharonctl talks to it over the control socket.",
    after_help = "Examples:\n  kharond --inventory contrib/examples/inventory.json\n  \
        HTTPS_PROXY=socks5h://127.0.0.1:12000 curl https://api.c-example.vshnmanaged.net:6443/version\n  \
        browser proxy auto-config URL: http://localhost:12000/proxy.pac\n\n\
        Exit codes: 0 stopped cleanly; 1 failed while running; 2 bad settings, inventory or ssh config; \
        3 listen address or control socket already in use.\n\n\
        Logging: RUST_LOG (e.g. RUST_LOG=kharond=debug) or -v/-vv."
)]
pub struct Cli {
    // The help text is clap's, printed as written: `<config dir>` is a placeholder, not HTML.
    #[allow(rustdoc::invalid_html_tags)]
    /// Config file (TOML) [env: KHARON_CONFIG] [default: <config dir>/kharon/config.toml]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    // The help text is clap's, printed as written: `[socks]` names the config section, not a link.
    #[allow(rustdoc::broken_intra_doc_links)]
    /// SOCKS5 listen address, IP:PORT or NAME:PORT (localhost:12000); non-loopback needs [socks] username/password [env: KHARON_LISTEN] [default: 127.0.0.1:12000]
    #[arg(long, value_name = "HOST:PORT")]
    pub listen: Option<String>,
    /// Route by this Lieutenant /clusters JSON file instead of the local cache [env: KHARON_INVENTORY]
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// ssh_config to read jump host chains from [env: KHARON_SSH_CONFIG] [default: ~/.ssh/config]
    #[arg(long, value_name = "FILE")]
    pub ssh_config: Option<PathBuf>,
    /// Control socket path [env: KHARON_CONTROL_SOCKET] [default: $XDG_RUNTIME_DIR/kharon/kharond.sock]
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,
    /// More logging: -v debug for kharond, -vv debug for everything
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Write the kharond(1) man page into DIR and exit (kharonctl man-pages writes kharonctl's)
    #[arg(long, value_name = "DIR")]
    pub man_pages: Option<PathBuf>,
}

impl Cli {
    /// The flags that are settings, for [`kharon_config::Config::load`].
    pub fn overrides(&self) -> Overrides {
        Overrides {
            config: self.config.clone(),
            listen: self.listen.clone(),
            inventory: self.inventory.clone(),
            ssh_config: self.ssh_config.clone(),
            control_socket: self.control_socket.clone(),
            ..Overrides::default()
        }
    }

    /// The command as clap knows it: for the man page, which is written from the same definition.
    pub fn command() -> clap::Command {
        <Self as clap::CommandFactory>::command()
    }
}
