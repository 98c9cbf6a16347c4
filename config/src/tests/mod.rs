//! Tests of the whole load, through [`Config::load_with`] and [`Config::load_resolving`]: each
//! setting from each place it may come from, its default, and the error a bad value gets. The
//! environment is a map (`HOME` a temporary directory), config files are written to temporary
//! directories, and a name in `listen` is resolved by a resolver that knows a few names ([`resolver`]),
//! but for one test of the system resolver with `localhost`.

use super::*;
use kharon_common::errors::chain;
use std::collections::HashMap;
use std::path::Path;

mod domains;
mod file;
mod limits;
mod listen;
mod merge;
mod services;

fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k| map.get(k).cloned()
}

fn write_config(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn base_env(dir: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("HOME", dir.display().to_string()),
        (env::CONTROL_SOCKET, dir.join("k.sock").display().to_string()),
        (env::CACHE_DIR, dir.join("cache").display().to_string()),
    ]
}

/// The environment of a load: [`base_env`] of `dir`, then `extra`.
fn env_in(dir: &Path, extra: &[(&'static str, String)]) -> impl Fn(&str) -> Option<String> + use<> {
    let mut pairs = base_env(dir);
    pairs.extend(extra.iter().cloned());
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env_of(&pairs)
}

fn load(overrides: &Overrides, extra: &[(&'static str, String)], dir: &Path) -> Result<Config, Error> {
    Config::load_with(overrides, &env_in(dir, extra))
}

/// A resolver that knows `names` only; nothing here reaches a real DNS server.
fn resolver(names: &[(&str, &[&str])]) -> impl Fn(&str, u16) -> std::io::Result<Vec<SocketAddr>> + use<> {
    let names: Vec<(String, Vec<std::net::IpAddr>)> = names
        .iter()
        .map(|(n, ips)| (n.to_string(), ips.iter().map(|ip| ip.parse().unwrap()).collect()))
        .collect();
    move |host, port| match names.iter().find(|(n, _)| n == host) {
        Some((_, ips)) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
        None => Err(std::io::Error::other("Name or service not known")),
    }
}

fn load_resolving(
    overrides: &Overrides,
    extra: &[(&'static str, String)],
    dir: &Path,
    resolve: &Resolver,
) -> Result<Config, Error> {
    Config::load_resolving(overrides, &env_in(dir, extra), None, resolve)
}

fn load_with_dotenv(
    overrides: &Overrides,
    extra: &[(&'static str, String)],
    dir: &Path,
    dotenv: &DotEnv,
) -> Result<Config, Error> {
    Config::load_resolving(overrides, &env_in(dir, extra), Some(dotenv), &resolver(&[]))
}
