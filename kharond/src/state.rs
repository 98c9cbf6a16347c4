//! What the daemon knows while it runs: the routing in force ([`InForce`]: table and chains, and
//! their reloads), the proxy settings, and the registry of open connections with the counters
//! `Status` reports (`registry.rs`).
//!
//! It knows nothing of the SOCKS wire format or of gRPC. Every connection reads the routing once,
//! at routing time, through [`InForce::current`]; the invariant that makes that safe across a
//! reload is [`InForce`]'s.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::desktop::Logins;
use crate::observe::registry::Registry;
use crate::process::trim::TrimSettings;
use crate::proxy::credentials::Credentials;
use crate::routing::in_force::{InForce, ReloadError, ReloadOutcome, Trigger};

/// Settings of the SOCKS side, fixed at start.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// `[socks]` username and password, hashed at start.
    pub auth: Option<Credentials>,
    /// Without a password (and without `allow_other_users`): serve only clients of our own user.
    pub owner_only: Option<Arc<crate::proxy::owner::OwnerOnly>>,
    pub handshake_timeout: Duration,
    pub connect_timeout: Duration,
    /// Clients served at once; the listener's bound (listener.rs, fd_limit.rs).
    pub max_connections: usize,
    /// When the memory a burst of connections leaves is given back (`process::trim`).
    pub trim: TrimSettings,
}

/// The daemon's shared state; one `Arc<State>` is handed to every component.
pub struct State {
    /// The routing table and SSH chains in force, and their reloads.
    pub routes: Arc<InForce>,
    pub proxy: ProxySettings,
    /// The listener's real address (the configured port may have been 0).
    pub listen: std::net::SocketAddr,
    pub control_socket: std::path::PathBuf,
    /// Open connections, per-route totals and failures (bytes are counted there).
    pub registry: Registry,
    pub started_at: SystemTime,
    /// The jump hosts a person is logging in to now (`kharonctl login-jump`), whose questions
    /// need no desktop notification.
    pub logins: Arc<Logins>,
}

impl State {
    pub fn new(
        routes: InForce,
        proxy: ProxySettings,
        listen: std::net::SocketAddr,
        control_socket: std::path::PathBuf,
    ) -> Self {
        Self {
            routes: Arc::new(routes),
            proxy,
            listen,
            control_socket,
            registry: Registry::default(),
            started_at: SystemTime::now(),
            logins: Arc::default(),
        }
    }

    /// Reloads the routing ([`InForce::reload`]), then forgets the per-route totals of jump hosts
    /// the table in force does not have (unless a connection still uses them), which keeps them
    /// bounded. The table in force, not necessarily the one this reload installed: the totals
    /// follow what routes now, and a reload right behind this one may have installed another.
    pub async fn reload(&self, trigger: Trigger) -> Result<ReloadOutcome, ReloadError> {
        let outcome = self.routes.reload(trigger).await?;
        self.registry.retain_routes(self.routes.current().table().jumphosts());
        Ok(outcome)
    }
}
