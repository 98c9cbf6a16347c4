//! Why a load fails ([`Error`]): each names the setting, its value, where it came from and what to
//! do; and why a domain entry is refused ([`DomainError`]).

use std::net::SocketAddr;
use std::path::PathBuf;

use kharon_common::paths;

use crate::defaults::{RELOAD_DEADLINE_SECS, TIMEOUT_SECS};
use crate::source::Source;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read config file {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {}", path.display())]
    Parse { path: PathBuf, source: Box<toml::de::Error> },
    #[error(
        "{setting} (from {origin}): {value:?} is not an address; expected IP:PORT or NAME:PORT such as \
         127.0.0.1:12000 or localhost:12000"
    )]
    BadAddress { setting: &'static str, origin: Source, value: String },
    #[error(
        "{setting} (from {origin}): cannot resolve the host name in {value:?} ({reason}); use an IP \
         address such as 127.0.0.1:12000, or a name from /etc/hosts"
    )]
    Unresolvable { setting: &'static str, origin: Source, value: String, reason: String },
    #[error(
        "{setting} = {value} (from {origin}) is out of range; it must be between {} and {} seconds",
        TIMEOUT_SECS.start(),
        TIMEOUT_SECS.end()
    )]
    BadDuration { setting: &'static str, origin: Source, value: u64 },
    #[error(
        "ssh_window = {value:?} (from {origin}): expected adaptive, openssh, or a size between 256K and \
         16M (such as 4M)"
    )]
    BadWindow { origin: Source, value: String },
    #[error(
        "reload_deadline_secs = {value} (from {origin}) is out of range; it must be between {} and {} seconds",
        RELOAD_DEADLINE_SECS.start(),
        RELOAD_DEADLINE_SECS.end()
    )]
    BadReloadDeadline { origin: Source, value: u64 },
    #[error("max_connections (from {origin}) must be at least 1; remove it to serve as many as fit")]
    NoConnections { origin: Source },
    #[error(
        "listen address {addr} (from {origin}) is not loopback; anyone on that network could use \
         the proxy. Set [socks] username and password in the config file, or {}",
        loopback_advice(origin, *addr)
    )]
    OpenListener { addr: SocketAddr, origin: Source },
    #[error(
        "listen address {name} (from {origin}) resolves to {addr}, which is not loopback; anyone on \
         that network could use the proxy. Set [socks] username and password in the config file, or \
         listen on 127.0.0.1 or a name that resolves to loopback only (localhost)"
    )]
    OpenListenerName { name: String, addr: SocketAddr, origin: Source },
    #[error("{setting} (from {origin}): {value:?} is not an http(s) URL")]
    BadUrl { setting: &'static str, origin: Source, value: String },
    #[error(
        "{setting} (from {origin}): {value:?} has a space or control character in it (a stray one from \
         copying?); a URL has none, so remove it"
    )]
    UrlWhitespace { setting: &'static str, origin: Source, value: String },
    #[error("[socks] in {}: username and password must both be set and non-empty", path.display())]
    HalfAuth { path: PathBuf },
    #[error("dynamic_domains (from {origin}): {value:?} cannot be a zone for dynamic names")]
    DynamicDomain { origin: Source, value: String, source: Box<DomainError> },
    #[error("provider_domains (from {origin}): {value:?} cannot be a provider's domain")]
    ProviderDomain { origin: Source, value: String, source: Box<DomainError> },
    #[error(transparent)]
    Paths(#[from] paths::Error),
}

/// Why a `dynamic_domains` or `provider_domains` entry is refused.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    #[error(transparent)]
    Name(#[from] kharon_routing::inventory::SuffixError),
    #[error(transparent)]
    Refused(#[from] kharon_routing::trust::Refusal),
    #[error(
        "it lies in {zone}, a zone of dynamic_domains, where any cluster's dynamic names may route; \
         remove it from one of the two lists"
    )]
    InZone { zone: String },
}

/// How to get back to loopback, in the terms of where the address came from.
fn loopback_advice(origin: &Source, addr: SocketAddr) -> String {
    match origin {
        Source::SocketActivation => {
            format!("set ListenStream=127.0.0.1:{} in the socket unit", addr.port())
        }
        _ => "listen on 127.0.0.1".to_owned(),
    }
}
