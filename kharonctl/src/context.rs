//! What every subcommand gets: the merged settings (`shared::config`) and how to reach the daemon.

use kharon_shared::config::{Config, Overrides};

use crate::daemon::{self, Daemon};

pub struct Context {
    pub config: Config,
}

impl Context {
    pub fn load(overrides: &Overrides) -> Result<Self, kharon_shared::config::Error> {
        Ok(Self { config: Config::load(overrides)? })
    }

    pub async fn daemon(&self) -> Result<Daemon, daemon::Error> {
        Daemon::connect(&self.config.control_socket.value).await
    }
}
