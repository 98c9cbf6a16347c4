//! Environment variable names, one per setting.

pub const CONFIG: &str = "KHARON_CONFIG";
pub const LISTEN: &str = "KHARON_LISTEN";
pub const INVENTORY: &str = "KHARON_INVENTORY";
pub const SSH_CONFIG: &str = "KHARON_SSH_CONFIG";
pub const CONTROL_SOCKET: &str = "KHARON_CONTROL_SOCKET";
pub const CACHE_DIR: &str = "KHARON_CACHE_DIR";
/// Go kharon's name for the Lieutenant URL; wins over commodore's.
pub const LIEUTENANT_URL: &str = "LIEUTENANT_URL";
/// Commodore's name for the Lieutenant URL, which commodore users already export.
pub const COMMODORE_API_URL: &str = "COMMODORE_API_URL";
pub const OIDC_CLIENT: &str = "COMMODORE_OIDC_CLIENT";
pub const OIDC_DISCOVERY_URL: &str = "COMMODORE_OIDC_DISCOVERY_URL";
/// commodore's static Lieutenant token (`--api-token` in commodore `cli/options.py`), for CI and
/// service accounts.
pub const API_TOKEN: &str = "COMMODORE_API_TOKEN";
pub const PASSBOLT_URL: &str = "KHARON_PASSBOLT_URL";
/// The variables taken from commodore's `.env`: those of commodore's options (`--api-url`,
/// `--api-token`, `--oidc-client`, `--oidc-discovery-url` in commodore `cli/options.py`) that
/// kharonctl has too. The others are ours or Go kharon's, which no `.env` convention covers.
pub const FROM_DOTENV: [&str; 4] = [COMMODORE_API_URL, API_TOKEN, OIDC_CLIENT, OIDC_DISCOVERY_URL];
