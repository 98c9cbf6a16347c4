//! The settings a binary takes as flags ([`Overrides`]): each binary parses its own (this crate
//! knows nothing of clap) and hands them over.

use std::path::PathBuf;

/// Values given on the command line. `None` means "not given".
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub listen: Option<String>,
    pub inventory: Option<PathBuf>,
    pub ssh_config: Option<PathBuf>,
    pub control_socket: Option<PathBuf>,
    pub lieutenant_url: Option<String>,
    pub oidc_client: Option<String>,
    pub oidc_discovery_url: Option<String>,
}
