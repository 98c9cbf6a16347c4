//! Kubeconfigs: building one entry (cluster + context + user, all named by the cluster id) from a
//! cluster's facts, merging entries into a user's kubeconfig without touching anything else, the
//! current and previous context, and writing files atomically with mode 0600.
//!
//! The document is kept as a [`serde_norway::Value`] so that fields this module does not know
//! (extensions, other tools' keys, future kubeconfig fields) survive a read–modify–write untouched;
//! only the three named lists, `current-context` and our preferences extension are edited.
//!
//! Authentication of an entry, first match wins (docs/kubeconfig.md, "Who the user is"):
//! 1. a *static* fact [`AUTH_INFO_FACT`] holding a kubeconfig `user` object (JSON), used as given;
//! 2. `oidcIssuer` + `oidcClientId`: the int128/kubelogin exec entry, exactly as kubelogin documents;
//! 3. OpenShift: an exec entry running this very `kharonctl` (`clusters ID token --exec-credential`);
//! 4. otherwise an empty user: the user brings their own credentials.
//!
//! # No code from a cluster
//! A user entry can run a program (`exec`, and `auth-provider` plugins that run commands), and
//! kubectl runs it as the engineer. Dynamic facts are what a cluster reports about itself, where a
//! customer may be cluster-admin (`kharon_routing::trust`), so none of their values becomes a
//! command, an argument list or an executed path:
//! - a *dynamic* [`AUTH_INFO_FACT`] is ignored, with a warning naming the cluster;
//! - the kubelogin entry's command and arguments are ours; only the issuer and the client id
//!   come from facts, a static fact winning over a dynamic one. A cluster may choose the issuer
//!   its engineers log in to (VSHN's Talos clusters publish it as a dynamic fact; the token goes to
//!   that cluster's own API server), within bounds ([`check_oidc`]): an `https` URL with a host
//!   name and nothing that kubelogin could read as more than that value. Anything else leaves the
//!   entry without a user, with a warning.
//!
//! Where a kubeconfig goes (stdout, `-o FILE`, `--merge`, each cluster's own file) is
//! [`destination`]; a user's kubeconfig is read, changed and written under kubectl's own lock
//! ([`lock`], [`edit`]). The OpenShift tokens the exec entry of case 3 hands out, and the web login that
//! gets them, are [`openshift_login`]; which certificates those requests (and `test`'s) trust is
//! [`trust`]. It knows nothing of where clusters come from
//! ([`crate::catalog`]) or of running kubectl (`cmd/`).

pub mod destination;
pub mod lock;
pub mod openshift_login;
pub mod trust;

use std::path::{Path, PathBuf};

use kharon_routing::inventory::{Cluster, Distribution, fact};
use serde_norway::{Mapping, Value};

use crate::context::Proxy;

/// A static or dynamic fact holding a kubeconfig `user` object (JSON), used as the user entry.
pub const AUTH_INFO_FACT: &str = "kubeconfigAuthInfo";
/// The exec API version kharonctl answers in when kubectl does not say (docs/kubeconfig.md).
pub const EXEC_API_V1: &str = "client.authentication.k8s.io/v1";
/// The exec API version of kubelogin's entry as Go kharon and VSHN's Talos template write it.
pub const EXEC_API_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";
/// Scopes kubelogin asks for, as Go kharon writes them (docs/kubeconfig.md, "The kubelogin entry").
pub const KUBELOGIN_SCOPES: &str = "email offline_access profile openid";
/// The preferences extension that remembers the previous context for `switch -` (Go-compatible).
pub const LAST_CONTEXT_EXTENSION: &str = "kharon.vshn.io/last-context";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read kubeconfig {}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("kubeconfig {} is not valid YAML", path.display())]
    Parse { path: PathBuf, source: serde_norway::Error },
    #[error("kubeconfig {} is not a mapping at the top level", path.display())]
    NotAMapping { path: PathBuf },
    #[error("kubeconfig {}: `{key}` is not a list", path.display())]
    NotAList { path: PathBuf, key: &'static str },
    #[error("cannot write kubeconfig {}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error(transparent)]
    Lock(#[from] lock::Error),
    #[error("cannot encode kubeconfig")]
    Encode(#[from] serde_norway::Error),
    #[error("no kubeconfig location: set KUBECONFIG or HOME")]
    NoDefaultPath,
    #[error("cannot find the path of kharonctl itself (for the exec entries): {0}")]
    NoExe(std::io::Error),
}

/// Why a fact's OIDC issuer or client id is not put into a kubelogin entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcError {
    #[error("the issuer is not an https URL with a host name (no user, query or fragment)")]
    Issuer,
    #[error(
        "the client id is empty, starts with '-', or has characters other than letters, digits and -._:@/"
    )]
    ClientId,
}

/// Why a cluster got no entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("{id}: no API URL fact (openshiftApiURL or talosApiURL)")]
    NoApiUrl { id: String },
    #[error("{id}: {AUTH_INFO_FACT} is not a JSON object")]
    BadAuthInfo { id: String },
}

/// What the built entries need from outside the inventory.
#[derive(Debug, Clone)]
pub struct Settings {
    /// kharond's SOCKS listener and the credentials it requires; routed clusters get
    /// `proxy-url: socks5://user:password@addr` ([`Proxy::url`]).
    pub proxy: Proxy,
    /// The absolute path of this kharonctl, for OpenShift exec entries.
    pub exe: PathBuf,
    /// The `--inventory` file, passed on to the exec entry so it finds the same clusters.
    pub inventory: Option<PathBuf>,
}

impl Settings {
    /// Entries pointing at kharond's SOCKS address `proxy`
    /// ([`Context::proxy_of`](crate::context::Context::proxy_of)) and at this very kharonctl,
    /// reading `inventory` (the catalog's file) when they run it.
    pub fn new(proxy: Proxy, inventory: Option<&Path>) -> Result<Self, Error> {
        let exe = std::env::current_exe().map_err(Error::NoExe)?;
        Ok(Self { proxy, exe, inventory: inventory.map(Path::to_owned) })
    }
}

/// One cluster's kubeconfig entry: `cluster` and `context` are named `name`, and so is `user`
/// unless `user_name` says otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub cluster: Value,
    pub user: Value,
    /// The user's name when it is not `name` (emergency credentials: Go kharon's `…/kharon-login`).
    pub user_name: Option<String>,
    /// Non-fatal problems (a malformed CA), for the caller to print.
    pub warnings: Vec<String>,
}

impl Entry {
    /// Prints the warnings on stderr, one line each.
    pub fn print_warnings(&self) {
        for w in &self.warnings {
            eprintln!("kharonctl: warning: {}", kharon_common::text::Escaped(w));
        }
    }
}

/// Builds a mapping keeping the given key order (kubectl's own order reads best).
fn map<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    let mut m = Mapping::new();
    for (k, v) in pairs {
        m.insert(Value::String(k.to_owned()), v);
    }
    Value::Mapping(m)
}

fn s(v: impl Into<String>) -> Value {
    Value::String(v.into())
}

/// A fact as text and whether it came from the dynamic facts: VSHN's static fact first.
fn fact_text<'a>(cluster: &'a Cluster, key: &str) -> Option<(&'a str, bool)> {
    cluster.fact_str(key).map(|v| (v, false)).or_else(|| cluster.dynamic_fact_str(key).map(|v| (v, true)))
}

/// The entry for one cluster, or why it has none.
pub fn entry(cluster: &Cluster, settings: &Settings) -> Result<Entry, EntryError> {
    let (c, mut warnings) = cluster_part(cluster, settings)?;
    let user = user(cluster, settings, &mut warnings)?;
    Ok(Entry { name: cluster.id.clone(), cluster: c, user, user_name: None, warnings })
}

/// Whether an OIDC issuer and client id may go into a kubelogin entry's arguments
/// (`--oidc-issuer-url=…`, `--oidc-client-id=…`): the issuer an `https` URL with a DNS host name
/// and nothing else than scheme, host, port and path (no user, query, fragment, nor a control or
/// space character anywhere), the client id plain (letters, digits, `-._:@/`, not starting with
/// `-`). Each is one argument after an `=`, so it cannot become an option by itself; the bounds
/// keep it one obvious value to whoever reads the kubeconfig, too.
pub fn check_oidc(issuer: &str, client_id: &str) -> Result<(), OidcError> {
    let plain = |s: &str| !s.is_empty() && s.len() <= 2048 && s.bytes().all(|b| b.is_ascii_graphic());
    let url = url::Url::parse(issuer).ok().filter(|_| plain(issuer));
    let good_issuer = url.is_some_and(|u| {
        u.scheme() == "https"
            && matches!(u.host(), Some(url::Host::Domain(_)))
            && u.username().is_empty()
            && u.password().is_none()
            && u.query().is_none()
            && u.fragment().is_none()
    });
    if !good_issuer {
        return Err(OidcError::Issuer);
    }
    let good_client = plain(client_id)
        && client_id.len() <= 255
        && !client_id.starts_with('-')
        && client_id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:@/".contains(&b));
    if !good_client {
        return Err(OidcError::ClientId);
    }
    Ok(())
}

/// The `cluster` part of a cluster's entry (server, CA, proxy-url) and non-fatal problems; other
/// users than the cluster's own (emergency credentials) go with it.
pub fn cluster_part(cluster: &Cluster, settings: &Settings) -> Result<(Value, Vec<String>), EntryError> {
    let id = cluster.id.clone();
    let server = cluster.api_url().ok_or_else(|| EntryError::NoApiUrl { id: id.clone() })?;
    let mut warnings = Vec::new();
    let mut c = map([("server", s(server))]);
    if let (Some(ca), Value::Mapping(m)) = (trust::cluster_ca_fact(cluster), &mut c) {
        match ca {
            Ok((text, _)) => {
                m.insert(s("certificate-authority-data"), s(text));
            }
            Err(e) => warnings.push(format!("{id}: {} is not base64 ({e}); left out", fact::TALOS_CA_DATA)),
        }
    }
    if cluster.jumphost().is_some()
        && let Value::Mapping(m) = &mut c
    {
        // socks5, not socks5h: kubectl rejects socks5h in proxy-url and socks5 already sends names
        // (docs/kubeconfig.md, "proxy-url"). client-go's SOCKS5 dialer takes the username and password
        // from the URL's userinfo, so a kharond that requires them gets them there.
        m.insert(s("proxy-url"), s(settings.proxy.url("socks5")));
    }
    Ok((c, warnings))
}

fn user(cluster: &Cluster, settings: &Settings, warnings: &mut Vec<String>) -> Result<Value, EntryError> {
    let id = &cluster.id;
    if cluster.dynamic_facts.contains_key(AUTH_INFO_FACT) {
        warnings.push(format!(
            "{id}: ignoring the dynamic fact {AUTH_INFO_FACT}: the cluster reports it itself, and a user \
             entry can run programs as you (only a static {AUTH_INFO_FACT}, set in Lieutenant, is used)"
        ));
    }
    if let Some(raw) = cluster.facts.get(AUTH_INFO_FACT) {
        let bad = || EntryError::BadAuthInfo { id: id.clone() };
        // Static facts are strings, so there the object arrives as JSON text (docs/kubeconfig.md).
        let object = match raw {
            serde_json::Value::String(text) => serde_json::from_str(text).map_err(|_| bad())?,
            other => other.clone(),
        };
        if !object.is_object() {
            return Err(bad());
        }
        return serde_norway::to_value(&object).map_err(|_| bad());
    }
    if let (Some((issuer, dynamic_issuer)), Some((client, dynamic_client))) =
        (fact_text(cluster, fact::OIDC_ISSUER), fact_text(cluster, fact::OIDC_CLIENT_ID))
    {
        match check_oidc(issuer, client) {
            Ok(()) => return Ok(kubelogin_user(issuer, client)),
            Err(e) => {
                let from = if dynamic_issuer || dynamic_client { "dynamic" } else { "static" };
                warnings.push(format!(
                    "{id}: no kubectl oidc-login entry from the {from} facts {} {:?} and {} {:?}: {e}; \
                     log in yourself",
                    fact::OIDC_ISSUER,
                    kharon_common::text::cap(issuer, kharon_common::text::MAX_CELL),
                    fact::OIDC_CLIENT_ID,
                    kharon_common::text::cap(client, kharon_common::text::MAX_CELL)
                ));
                return Ok(Value::Mapping(Mapping::new()));
            }
        }
    }
    if cluster.distribution() == Distribution::OpenShift {
        let mut args = vec![s("clusters")];
        if let Some(inventory) = &settings.inventory {
            args.extend([s("--inventory"), s(inventory.display().to_string())]);
        }
        args.extend([s(cluster.id.as_str()), s("token"), s("--exec-credential")]);
        return Ok(map([(
            "exec",
            map([
                ("apiVersion", s(EXEC_API_V1)),
                ("command", s(settings.exe.display().to_string())),
                ("args", Value::Sequence(args)),
                // May open a browser for the web login; never reads stdin.
                ("interactiveMode", s("IfAvailable")),
                ("provideClusterInfo", Value::Bool(false)),
            ]),
        )]));
    }
    Ok(Value::Mapping(Mapping::new()))
}

/// The int128/kubelogin exec entry (its README; docs/kubeconfig.md): `kubectl oidc-login get-token …`.
pub fn kubelogin_user(issuer: &str, client_id: &str) -> Value {
    map([(
        "exec",
        map([
            ("apiVersion", s(EXEC_API_V1BETA1)),
            ("command", s("kubectl")),
            (
                "args",
                Value::Sequence(vec![
                    s("oidc-login"),
                    s("get-token"),
                    s(format!("--oidc-issuer-url={issuer}")),
                    s(format!("--oidc-client-id={client_id}")),
                    s(format!("--oidc-extra-scope={KUBELOGIN_SCOPES}")),
                ]),
            ),
            ("interactiveMode", s("IfAvailable")),
            ("provideClusterInfo", Value::Bool(false)),
        ]),
    )])
}

/// A kubeconfig document; unknown keys and entries are carried through untouched.
#[derive(Debug, Clone, PartialEq)]
pub struct Kubeconfig {
    doc: Mapping,
}

const LISTS: [&str; 3] = ["clusters", "contexts", "users"];

impl Default for Kubeconfig {
    fn default() -> Self {
        Self::new()
    }
}

impl Kubeconfig {
    pub fn new() -> Self {
        let Value::Mapping(doc) = map([
            ("apiVersion", s("v1")),
            ("kind", s("Config")),
            ("clusters", Value::Sequence(vec![])),
            ("contexts", Value::Sequence(vec![])),
            ("users", Value::Sequence(vec![])),
            ("current-context", s("")),
            ("preferences", Value::Mapping(Mapping::new())),
        ]) else {
            unreachable!("map() builds a mapping")
        };
        Self { doc }
    }

    /// A kubeconfig with `entries` and `current` as its current context.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a Entry>, current: Option<&str>) -> Self {
        let mut k = Self::new();
        for e in entries {
            k.upsert(e);
        }
        if let Some(current) = current {
            k.doc.insert(s("current-context"), s(current));
        }
        k
    }

    /// Parses `text`; `path` only names the file in errors. An empty file is an empty kubeconfig.
    pub fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        if text.trim().is_empty() {
            return Ok(Self::new());
        }
        let value: Value =
            serde_norway::from_str(text).map_err(|source| Error::Parse { path: path.to_owned(), source })?;
        let doc = match value {
            Value::Mapping(m) => m,
            Value::Null => return Ok(Self::new()),
            _ => return Err(Error::NotAMapping { path: path.to_owned() }),
        };
        for key in LISTS {
            match doc.get(key) {
                None | Some(Value::Null | Value::Sequence(_)) => {}
                Some(_) => return Err(Error::NotAList { path: path.to_owned(), key }),
            }
        }
        Ok(Self { doc })
    }

    /// Reads `path`; a missing file is an empty kubeconfig.
    pub fn load(path: &Path) -> Result<Self, Error> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::new()),
            Err(source) => Err(Error::Read { path: path.to_owned(), source }),
        }
    }

    fn list_mut(&mut self, key: &'static str) -> &mut Vec<Value> {
        let slot = self.doc.entry(s(key)).or_insert(Value::Sequence(vec![]));
        if !matches!(slot, Value::Sequence(_)) {
            // `parse` rejects non-lists, so this only replaces an explicit `null`.
            *slot = Value::Sequence(vec![]);
        }
        match slot {
            Value::Sequence(list) => list,
            _ => unreachable!("just made a sequence"),
        }
    }

    #[cfg(test)]
    fn list(&self, key: &str) -> &[Value] {
        match self.doc.get(key) {
            Some(Value::Sequence(list)) => list,
            _ => &[],
        }
    }

    /// Replaces the named entry of `key` in place, or appends it; other entries are not touched.
    fn put(&mut self, key: &'static str, name: &str, body_key: &str, body: Value) {
        let item = map([("name", s(name)), (body_key, body)]);
        let list = self.list_mut(key);
        match list.iter_mut().find(|e| e.get("name").and_then(Value::as_str) == Some(name)) {
            Some(slot) => *slot = item,
            None => list.push(item),
        }
    }

    /// Adds or replaces one cluster's cluster, context and user.
    pub fn upsert(&mut self, entry: &Entry) {
        let name = entry.name.as_str();
        let user = entry.user_name.as_deref().unwrap_or(name);
        self.put("clusters", name, "cluster", entry.cluster.clone());
        self.put("contexts", name, "context", map([("cluster", s(name)), ("user", s(user))]));
        self.put("users", user, "user", entry.user.clone());
    }

    /// The named entry of a list (`clusters`, `contexts` or `users`), whole.
    #[cfg(test)]
    pub fn item(&self, key: &str, name: &str) -> Option<&Value> {
        self.list(key).iter().find(|e| e.get("name").and_then(Value::as_str) == Some(name))
    }

    pub fn current_context(&self) -> Option<&str> {
        self.doc.get("current-context").and_then(Value::as_str).filter(|c| !c.is_empty())
    }

    /// Makes `name` current and remembers the previous current context for [`Self::last_context`].
    pub fn switch_to(&mut self, name: &str) {
        if let Some(previous) = self.current_context().map(str::to_owned)
            && previous != name
        {
            self.set_last_context(&previous);
        }
        self.doc.insert(s("current-context"), s(name));
    }

    /// The context before the last [`Self::switch_to`] (Go kharon's preferences extension).
    pub fn last_context(&self) -> Option<&str> {
        self.last_context_extension()?
            .get("extension")?
            .get("spec")?
            .get("lastContext")?
            .as_str()
            .filter(|c| !c.is_empty())
    }

    fn last_context_extension(&self) -> Option<&Value> {
        let Some(Value::Sequence(exts)) = self.doc.get("preferences")?.get("extensions") else {
            return None;
        };
        exts.iter().find(|e| e.get("name").and_then(Value::as_str) == Some(LAST_CONTEXT_EXTENSION))
    }

    fn set_last_context(&mut self, context: &str) {
        let ext = map([
            ("name", s(LAST_CONTEXT_EXTENSION)),
            (
                "extension",
                map([
                    ("apiVersion", s("kharon.vshn.io/v1beta1")),
                    ("kind", s("LastContext")),
                    ("spec", map([("lastContext", s(context))])),
                ]),
            ),
        ]);
        let prefs = self.doc.entry(s("preferences")).or_insert(Value::Mapping(Mapping::new()));
        if !matches!(prefs, Value::Mapping(_)) {
            *prefs = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(prefs) = prefs else { return };
        let exts = prefs.entry(s("extensions")).or_insert(Value::Sequence(vec![]));
        if !matches!(exts, Value::Sequence(_)) {
            *exts = Value::Sequence(vec![]);
        }
        let Value::Sequence(exts) = exts else { return };
        match exts.iter_mut().find(|e| e.get("name").and_then(Value::as_str) == Some(LAST_CONTEXT_EXTENSION))
        {
            Some(slot) => *slot = ext,
            None => exts.push(ext),
        }
    }

    pub fn to_yaml(&self) -> Result<String, Error> {
        Ok(serde_norway::to_string(&self.doc)?)
    }

    /// Replaces `path` atomically (temp file in the same directory, then rename) with mode 0600,
    /// under kubectl's lock on it ([`lock`]).
    pub fn write_locked(&self, path: &Path) -> Result<(), Error> {
        let _lock = lock::acquire(path)?;
        self.write(path)
    }

    /// Replaces `path` atomically (temp file in the same directory, then rename) with mode 0600;
    /// for a file only kharonctl writes, or under [`lock`]. A symbolic link (a dotfile manager's `~/.kube/config`) is written through: the file it
    /// points to is replaced the same way, in its own directory, and the link stays a link.
    pub fn write(&self, path: &Path) -> Result<(), Error> {
        let yaml = self.to_yaml()?;
        let write = || {
            let target = through_links(path)?;
            kharon_common::files::write_private(&target, yaml.as_bytes())
        };
        write().map_err(|source| Error::Write { path: path.to_owned(), source })
    }
}

/// Reads the kubeconfig at `path` (a missing file is an empty one), lets `change` edit it, and
/// writes it back, all under kubectl's lock on it ([`lock`]), so that a `kubectl config …` running
/// at the same time neither loses its change nor has it overwritten. `change` may fail; the file
/// is then left as it was.
pub fn edit<T, E: From<Error>>(
    path: &Path,
    change: impl FnOnce(&mut Kubeconfig) -> Result<T, E>,
) -> Result<T, E> {
    let _lock = lock::acquire(path).map_err(Error::from)?;
    let mut k = Kubeconfig::load(path)?;
    let done = change(&mut k)?;
    k.write(path)?;
    Ok(done)
}

/// The file at the end of `path`'s symbolic links, or `path` when it is none (or does not exist
/// yet). A relative link is read from the link's own directory, as the kernel reads it; more than
/// 40 links in a row (the kernel's own limit) is an error, as a loop would be.
fn through_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_owned();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if target.is_relative() => dir.join(target),
                    _ => target,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// The kubeconfig kubectl edits by default: the first entry of `KUBECONFIG`, else `~/.kube/config`.
pub fn default_path(kubeconfig_var: Option<&str>, home: Option<&Path>) -> Result<PathBuf, Error> {
    if let Some(first) =
        kubeconfig_var.and_then(|v| std::env::split_paths(v).find(|p| !p.as_os_str().is_empty()))
    {
        return Ok(first);
    }
    home.map(|h| h.join(".kube/config")).ok_or(Error::NoDefaultPath)
}

/// The per-cluster kubeconfig `shell`, `kubectl` and `oc` use: one file per cluster, so two shells
/// for two clusters never share (and never fight over) a current context.
pub fn cluster_file(cache_dir: &Path, id: &str) -> PathBuf {
    cache_dir.join("kube").join(format!("{}.kubeconfig", file_stem(id)))
}

/// A cluster id as a file name: ids come from Lieutenant, so one holding `/` or `..` must not
/// reach outside our directory. Real ids (`c-…`, DNS labels) come through unchanged.
pub fn file_stem(id: &str) -> String {
    let stem: String = id
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' })
        .collect();
    if stem.is_empty() || stem.starts_with('.') { format!("_{stem}") } else { stem }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Settings {
        Settings {
            proxy: Proxy { addr: "127.0.0.1:12000".parse().unwrap(), auth: None },
            exe: "/usr/bin/kharonctl".into(),
            inventory: None,
        }
    }

    fn cluster(v: serde_json::Value) -> Cluster {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn routed_openshift_cluster_gets_proxy_and_exec() {
        let c = cluster(serde_json::json!({
            "id": "c-a", "tenant": "t",
            "facts": {"distribution": "openshift4", "jumphost": "jump"},
            "dynamicFacts": {"openshiftApiURL": "https://api.a.example:6443"}
        }));
        let e = entry(&c, &settings()).unwrap();
        let yaml = serde_norway::to_string(&e.cluster).unwrap();
        assert_eq!(yaml, "server: https://api.a.example:6443\nproxy-url: socks5://127.0.0.1:12000\n");
        let exec = e.user.get("exec").unwrap();
        assert_eq!(exec.get("command").unwrap().as_str(), Some("/usr/bin/kharonctl"));
        let args: Vec<_> =
            exec.get("args").unwrap().as_sequence().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(args, ["clusters", "c-a", "token", "--exec-credential"]);
    }

    #[test]
    fn a_proxy_that_requires_a_password_gets_it_in_the_proxy_url() {
        let c = cluster(serde_json::json!({
            "id": "c-a", "tenant": "t", "facts": {"jumphost": "jump"},
            "dynamicFacts": {"openshiftApiURL": "https://api.a.example:6443"}
        }));
        let auth = kharon_config::SocksAuth { username: "kh".into(), password: "p@ss/1".into() };
        let mut with_auth = settings();
        with_auth.proxy.auth = Some(auth);
        let e = entry(&c, &with_auth).unwrap();
        assert_eq!(
            e.cluster.get("proxy-url").unwrap().as_str(),
            Some("socks5://kh:p%40ss%2F1@127.0.0.1:12000")
        );
        // A direct cluster has no proxy-url, so no password either.
        let direct = cluster(serde_json::json!({
            "id": "c-d", "tenant": "t", "dynamicFacts": {"openshiftApiURL": "https://api.d.example:6443"}
        }));
        assert!(entry(&direct, &with_auth).unwrap().cluster.get("proxy-url").is_none());
    }

    #[test]
    fn direct_talos_cluster_gets_ca_and_kubelogin() {
        let c = cluster(serde_json::json!({
            "id": "c-t", "tenant": "t", "facts": {"distribution": "talos"},
            "dynamicFacts": {"talosApiURL": "https://api.t.example:6443",
                "talosAPICertificateAuthorityData": "LS0tLS1CRUdJTg==",
                "oidcIssuer": "https://id.example/realms/x", "oidcClientId": "kube"}
        }));
        let e = entry(&c, &settings()).unwrap();
        assert!(e.cluster.get("proxy-url").is_none());
        assert_eq!(e.cluster.get("certificate-authority-data").unwrap().as_str(), Some("LS0tLS1CRUdJTg=="));
        let yaml = serde_norway::to_string(&e.user).unwrap();
        assert_eq!(
            yaml,
            "exec:\n  apiVersion: client.authentication.k8s.io/v1beta1\n  command: kubectl\n  args:\n  \
             - oidc-login\n  - get-token\n  - --oidc-issuer-url=https://id.example/realms/x\n  \
             - --oidc-client-id=kube\n  - --oidc-extra-scope=email offline_access profile openid\n  \
             interactiveMode: IfAvailable\n  provideClusterInfo: false\n"
        );
    }

    /// What a cluster reports about itself never becomes a program kubectl runs.
    #[test]
    fn a_dynamic_auth_info_never_reaches_the_kubeconfig_and_a_static_one_does() {
        let exec = serde_json::json!({"exec": {"apiVersion": EXEC_API_V1, "command": "/bin/sh",
            "args": ["-c", "touch /tmp/pwned"]}});
        let c = cluster(serde_json::json!({
            "id": "c-x", "tenant": "t", "facts": {"distribution": "rancher"},
            "dynamicFacts": {"openshiftApiURL": "https://api.x.example:6443", AUTH_INFO_FACT: exec}
        }));
        let e = entry(&c, &settings()).unwrap();
        assert_eq!(e.user, Value::Mapping(Mapping::new()));
        assert!(!serde_norway::to_string(&e.user).unwrap().contains("/bin/sh"));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(
            e.warnings[0].starts_with("c-x: ignoring the dynamic fact kubeconfigAuthInfo"),
            "{:?}",
            e.warnings
        );
        // An OpenShift cluster still gets our own exec entry, not the cluster's.
        let mut openshift = c.clone();
        openshift.facts.insert("distribution".into(), "openshift4".into());
        let e = entry(&openshift, &settings()).unwrap();
        assert_eq!(e.user["exec"]["command"].as_str(), Some("/usr/bin/kharonctl"));
        // The same object set by VSHN as a static fact is used as given.
        let mut vshn = c.clone();
        vshn.dynamic_facts.remove(AUTH_INFO_FACT);
        vshn.facts.insert(AUTH_INFO_FACT.into(), serde_json::Value::String(exec.to_string()));
        let e = entry(&vshn, &settings()).unwrap();
        assert_eq!(e.user["exec"]["command"].as_str(), Some("/bin/sh"));
        assert!(e.warnings.is_empty());
    }

    #[test]
    fn the_oidc_issuer_and_client_id_are_bounded_and_a_static_fact_wins() {
        for (issuer, client) in [
            ("https://id.example/realms/x", "kube"),
            ("https://id.example:8443/", "cluster-1.example:kube@x/y"),
        ] {
            assert_eq!(check_oidc(issuer, client), Ok(()), "{issuer} {client}");
        }
        for issuer in [
            "http://id.example/realms/x",
            "https://10.0.0.1/realms/x",
            "https://[::1]/",
            "https://user:pw@id.example/",
            "https://id.example/?x=1",
            "https://id.example/#f",
            "https://id.example/ --oidc-client-secret=x",
            "https://id.example/\nx",
            "-https://id.example/",
            "file:///etc/passwd",
            "",
        ] {
            assert_eq!(check_oidc(issuer, "kube"), Err(OidcError::Issuer), "{issuer:?}");
        }
        for client in
            ["", "-x", "--oidc-issuer-url=https://evil.example", "a b", "a=b", "kübe", &"a".repeat(256)]
        {
            assert_eq!(check_oidc("https://id.example/", client), Err(OidcError::ClientId), "{client:?}");
        }
        let talos = |dynamic: serde_json::Value, facts: serde_json::Value| {
            let mut c =
                cluster(serde_json::json!({"id": "c-t", "tenant": "t", "facts": {"distribution": "talos"},
                "dynamicFacts": {"talosApiURL": "https://api.t.example:6443"}}));
            for (k, v) in dynamic.as_object().unwrap() {
                c.dynamic_facts.insert(k.clone(), v.clone());
            }
            for (k, v) in facts.as_object().unwrap() {
                c.facts.insert(k.clone(), v.clone());
            }
            entry(&c, &settings()).unwrap()
        };
        let hostile = talos(
            serde_json::json!({"oidcIssuer": "http://evil.example/", "oidcClientId": "kube"}),
            serde_json::json!({}),
        );
        assert_eq!(hostile.user, Value::Mapping(Mapping::new()));
        assert!(
            hostile.warnings[0].contains("from the dynamic facts oidcIssuer \"http://evil.example/\""),
            "{:?}",
            hostile.warnings
        );
        let vshn = talos(
            serde_json::json!({"oidcIssuer": "https://evil.example/", "oidcClientId": "evil"}),
            serde_json::json!({"oidcIssuer": "https://id.vshn.example/realms/x", "oidcClientId": "kube"}),
        );
        let args: Vec<&str> =
            vshn.user["exec"]["args"].as_sequence().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(args.contains(&"--oidc-issuer-url=https://id.vshn.example/realms/x"), "{args:?}");
        assert!(args.contains(&"--oidc-client-id=kube"), "{args:?}");
    }

    #[test]
    fn auth_info_fact_is_used_as_given() {
        let c = cluster(serde_json::json!({
            "id": "c-x", "tenant": "t",
            "facts": {AUTH_INFO_FACT: "{\"token\": \"abc\"}"},
            "dynamicFacts": {"openshiftApiURL": "https://api.x.example:6443"}
        }));
        assert_eq!(entry(&c, &settings()).unwrap().user.get("token").unwrap().as_str(), Some("abc"));
        let bad = cluster(serde_json::json!({
            "id": "c-x", "tenant": "t", "facts": {AUTH_INFO_FACT: "[1]"},
            "dynamicFacts": {"openshiftApiURL": "https://api.x.example:6443"}
        }));
        assert!(matches!(entry(&bad, &settings()), Err(EntryError::BadAuthInfo { .. })));
        let none = cluster(serde_json::json!({"id": "c-n", "tenant": "t"}));
        assert!(matches!(entry(&none, &settings()), Err(EntryError::NoApiUrl { .. })));
    }

    #[test]
    fn merge_keeps_other_entries_and_remembers_last_context() {
        let text = "apiVersion: v1\nkind: Config\nx-unknown: {keep: me}\ncurrent-context: mine\n\
                    clusters:\n- name: mine\n  \
                    cluster: {server: 'https://mine:6443', extensions: [{name: e}]}\n\
                    contexts:\n- name: mine\n  context: {cluster: mine, user: me, namespace: ns}\n\
                    users:\n- name: me\n  user: {token: t}\n";
        let path = Path::new("test");
        let mut k = Kubeconfig::parse(text, path).unwrap();
        let before = k.clone();
        let c = cluster(serde_json::json!({"id": "c-a", "tenant": "t",
            "dynamicFacts": {"openshiftApiURL": "https://api.a:6443"}}));
        k.upsert(&entry(&c, &settings()).unwrap());
        k.switch_to("c-a");
        for (list, name) in [("clusters", "mine"), ("contexts", "mine"), ("users", "me")] {
            assert_eq!(k.item(list, name), before.item(list, name));
        }
        assert_eq!(k.doc.get("x-unknown"), before.doc.get("x-unknown"));
        assert_eq!(k.current_context(), Some("c-a"));
        assert_eq!(k.last_context(), Some("mine"));
        let again = Kubeconfig::parse(&k.to_yaml().unwrap(), path).unwrap();
        assert_eq!(again, k);
        assert!(Kubeconfig::parse("- a", path).is_err());
        assert!(Kubeconfig::parse("clusters: 3", path).is_err());
    }

    /// A dotfile manager's symlinked kubeconfig stays a link; its target gets the merge.
    #[test]
    fn writing_a_symlinked_kubeconfig_replaces_its_target_and_keeps_the_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let dotfiles = dir.path().join("dotfiles/kube");
        std::fs::create_dir_all(&dotfiles).unwrap();
        let real = dotfiles.join("config");
        std::fs::write(&real, "apiVersion: v1\nkind: Config\nx-mine: keep\n").unwrap();
        let home_kube = dir.path().join("home/.kube");
        std::fs::create_dir_all(&home_kube).unwrap();
        let link = home_kube.join("config");
        std::os::unix::fs::symlink("../../dotfiles/kube/config", &link).unwrap();
        // A link to a link, too.
        let outer = dir.path().join("outer");
        std::os::unix::fs::symlink(&link, &outer).unwrap();

        let mut k = Kubeconfig::load(&outer).unwrap();
        let c = cluster(serde_json::json!({"id": "c-a", "tenant": "t",
            "dynamicFacts": {"openshiftApiURL": "https://api.a:6443"}}));
        k.upsert(&entry(&c, &settings()).unwrap());
        k.write(&outer).unwrap();

        for l in [&outer, &link] {
            assert!(
                std::fs::symlink_metadata(l).unwrap().file_type().is_symlink(),
                "{} is no link now",
                l.display()
            );
        }
        let text = std::fs::read_to_string(&real).unwrap();
        assert!(text.contains("c-a") && text.contains("x-mine: keep"), "{text}");
        assert_eq!(std::fs::metadata(&real).unwrap().permissions().mode() & 0o777, 0o600);
        let left: Vec<_> = std::fs::read_dir(&home_kube).unwrap().collect();
        assert_eq!(left.len(), 1, "no temp file beside the link");

        // A dangling link is written through too (creating its target); a loop is an error.
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("made/by/write"), &dangling).unwrap();
        Kubeconfig::new().write(&dangling).unwrap();
        assert!(dir.path().join("made/by/write").is_file());
        let a = dir.path().join("loop-a");
        std::os::unix::fs::symlink(dir.path().join("loop-b"), &a).unwrap();
        std::os::unix::fs::symlink(&a, dir.path().join("loop-b")).unwrap();
        let err = kharon_common::errors::chain(&Kubeconfig::new().write(&a).unwrap_err());
        assert!(err.contains("too many levels of symbolic links"), "{err}");
    }

    #[test]
    fn cluster_ids_stay_inside_the_directory() {
        assert_eq!(file_stem("c-green-1"), "c-green-1");
        assert_eq!(file_stem("../x"), "_.._x");
        assert_eq!(file_stem(".."), "_..");
        assert_eq!(file_stem(""), "_");
        assert_eq!(cluster_file(Path::new("/c"), "a/b"), Path::new("/c/kube/a_b.kubeconfig"));
    }

    #[test]
    fn default_path_prefers_kubeconfig_variable() {
        assert_eq!(default_path(Some("/a:/b"), Some(Path::new("/h"))).unwrap(), Path::new("/a"));
        assert_eq!(default_path(None, Some(Path::new("/h"))).unwrap(), Path::new("/h/.kube/config"));
        assert!(default_path(Some(""), None).is_err());
    }
}
