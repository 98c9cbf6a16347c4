//! What will fail before any connection finds out, from the chains the pool resolved (nothing is
//! dialled): checked at start and after every reload, logged, and shown by `reload` and `status`.
//!
//! - A jump host whose first hop no `Host` block names and whose name does not resolve. ssh
//!   connects such a name with the defaults and fails on it; most often it is a typo in the
//!   inventory or a renamed `Host` block, so the closest Host name is suggested. A name DNS says
//!   does not exist is reported; one that could not be looked up (no network, DNS not answering)
//!   only when a Host name is close to it, since a correct name behind a VPN that is down would
//!   otherwise be reported too. Later hops are resolved by the hop before them, not here.
//! - No way to authenticate: no ssh-agent (no `SSH_AUTH_SOCK`, or one nothing answers on) and no
//!   key file that works without one (missing, or encrypted, which only an agent can use).
//!
//! Knows nothing of how the findings are shown (`control`, kharonctl) or when they are made
//! (`main`, the reload in `state`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use futures::StreamExt as _;

use kharon_ssh_config::{Hop, IdentityAgent, Transport};

/// Name lookups run at once at most this many.
const LOOKUPS_AT_ONCE: usize = 16;
/// All lookups together may take this long; what has not answered by then is not reported (a
/// reload's answer waits for them).
const LOOKUPS_DEADLINE: Duration = Duration::from_secs(5);
/// Jump hosts named in one credentials finding at most; the rest are counted.
const NAMED_AT_MOST: usize = 3;

/// A jump host whose first hop cannot be reached by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unresolved {
    pub jumphost: String,
    /// The whole sentence, with the closest Host name or what to do.
    pub reason: String,
}

/// What a check found, and when.
#[derive(Debug, Clone)]
pub struct Findings {
    pub at: SystemTime,
    pub unresolved: Vec<Unresolved>,
    /// Why no jump host can authenticate, if so.
    pub credentials: Option<String>,
}

impl Default for Findings {
    fn default() -> Self {
        Self { at: SystemTime::now(), unresolved: Vec::new(), credentials: None }
    }
}

impl Findings {
    /// One WARN line per finding.
    pub fn log(&self) {
        for u in &self.unresolved {
            tracing::warn!("jump host {}: {}", u.jumphost, u.reason);
        }
        if let Some(why) = &self.credentials {
            tracing::warn!("{why}");
        }
    }
}

/// Checks the chains the pool resolved (jump host and its hops) with kharond's own `agent`, if
/// any; `ssh_config` is the file a missing Host block would go into.
pub async fn run(resolved: &[(String, Vec<Hop>)], agent: Option<&str>, ssh_config: &Path) -> Findings {
    let credentials = credentials_in(resolved, agent).await;
    let unresolved = unresolved(resolved, ssh_config).await;
    Findings { at: SystemTime::now(), unresolved, credentials }
}

/// How long kharond's agent may take to accept before it counts as not answering.
const AGENT_CONNECT: Duration = Duration::from_secs(2);

/// Only the credentials part of [`run`] (`Test`'s agent check): why jump hosts will refuse
/// kharond, if they will. [`credentials`] for `chains`, with kharond's `agent` asked whether it answers (off the async
/// threads' way: a connect, bounded) and key files read on a blocking thread.
pub async fn credentials_in(chains: &[(String, Vec<Hop>)], agent: Option<&str>) -> Option<String> {
    let answers = match agent {
        None => None,
        Some(socket) => {
            Some(match tokio::time::timeout(AGENT_CONNECT, tokio::net::UnixStream::connect(socket)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {AGENT_CONNECT:?}")),
            })
        }
    };
    let chains = chains.to_vec();
    let agent = agent.map(str::to_owned);
    tokio::task::spawn_blocking(move || credentials(&chains, agent.as_deref().zip(answers)))
        .await
        .unwrap_or_default()
}

/// How a name lookup ended, as far as this check cares.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Lookup {
    Found,
    /// DNS says the name does not exist (NXDOMAIN, or no address).
    NoSuchName(String),
    /// No answer either way (offline, DNS not answering).
    Unknown(String),
}

fn lookup(name: &str) -> Lookup {
    let hints =
        dns_lookup::AddrInfoHints { socktype: libc::SOCK_STREAM, ..dns_lookup::AddrInfoHints::default() };
    match dns_lookup::getaddrinfo(Some(name), Some("22"), Some(hints)) {
        Ok(_) => Lookup::Found,
        Err(e) => {
            let kind = e.kind();
            let text = std::io::Error::from(e).to_string();
            // std's prefix says nothing the sentence around it does not.
            let text =
                text.strip_prefix("failed to lookup address information: ").unwrap_or(&text).to_owned();
            match kind {
                dns_lookup::LookupErrorKind::NoName | dns_lookup::LookupErrorKind::NoData => {
                    Lookup::NoSuchName(text)
                }
                _ => Lookup::Unknown(text),
            }
        }
    }
}

/// The first hops no Host block names, reached over TCP by a name (not an address), looked up
/// concurrently within [`LOOKUPS_DEADLINE`].
async fn unresolved(chains: &[(String, Vec<Hop>)], ssh_config: &Path) -> Vec<Unresolved> {
    let candidates: Vec<(String, Hop)> = chains
        .iter()
        .filter_map(|(jumphost, hops)| Some((jumphost.clone(), hops.first()?.clone())))
        .filter(|(_, hop)| {
            !hop.named
                && matches!(hop.transport, Transport::Tcp)
                && hop.host_name.parse::<std::net::IpAddr>().is_err()
        })
        .collect();
    let lookups = futures::stream::iter(candidates)
        .map(|(jumphost, hop)| async move {
            let name = hop.host_name.clone();
            let found = tokio::task::spawn_blocking(move || lookup(&name)).await.ok()?;
            judge(&jumphost, &hop, &found, ssh_config)
        })
        .buffer_unordered(LOOKUPS_AT_ONCE)
        .filter_map(std::future::ready);
    let mut found = Vec::new();
    let collect = async {
        futures::pin_mut!(lookups);
        while let Some(u) = lookups.next().await {
            found.push(u);
        }
    };
    let _ = tokio::time::timeout(LOOKUPS_DEADLINE, collect).await;
    found.sort_by(|a, b| a.jumphost.cmp(&b.jumphost));
    found
}

/// The finding for one unnamed first hop and how its lookup ended, if it is one.
fn judge(jumphost: &str, hop: &Hop, found: &Lookup, ssh_config: &Path) -> Option<Unresolved> {
    let (why, definite) = match found {
        Lookup::Found => return None,
        Lookup::NoSuchName(why) => (why, true),
        Lookup::Unknown(why) => (why, false),
    };
    if !definite && hop.suggestion.is_none() {
        return None;
    }
    let which =
        if hop.alias == jumphost { "it".to_owned() } else { format!("its first hop {:?}", hop.alias) };
    let name = if hop.host_name == hop.alias { "the name".to_owned() } else { hop.host_name.clone() };
    let fix = match &hop.suggestion {
        Some(close) => format!("did you mean {close:?}?"),
        None => {
            "add a Host block for it (HostName, User, Port), or fix the cluster's jumphost fact".to_owned()
        }
    };
    Some(Unresolved {
        jumphost: jumphost.to_owned(),
        reason: format!(
            "no Host block in {} names {which} and {name} does not resolve ({why}), so connections \
             through it will fail; {fix}",
            ssh_config.display(),
        ),
    })
}

/// Why no jump host of `chains` could authenticate, if that is so: kharond has no ssh-agent that
/// answers, and some jump host's hops have no agent of their own and no key file usable without
/// one. With no jump hosts yet (no inventory) there is nothing to authenticate to: the reload
/// that brings them (`kharonctl update`) says it.
/// `agent`: kharond's agent socket and whether it answered.
fn credentials(chains: &[(String, Vec<Hop>)], agent: Option<(&str, Result<(), String>)>) -> Option<String> {
    if let Some((socket, answered)) = agent {
        return answered.err().map(|e| {
            format!(
                "kharond's ssh-agent does not answer (SSH_AUTH_SOCK {socket}: {e}): the agent it was \
                 started with is gone, so jump hosts get only key files without a passphrase. {}",
                restart_advice()
            )
        });
    }
    let mut checked: HashMap<PathBuf, KeyFile> = HashMap::new();
    let mut usable = |files: &[PathBuf]| {
        files.iter().any(|f| *checked.entry(f.clone()).or_insert_with(|| key_file(f)) == KeyFile::Usable)
    };
    let stuck: Vec<&str> = chains
        .iter()
        .filter(|(_, hops)| {
            hops.iter().any(|hop| {
                !matches!(&hop.identity_agent, IdentityAgent::Path(p) if p.exists())
                    && !usable(&hop.identity_files)
            })
        })
        .map(|(jumphost, _)| jumphost.as_str())
        .collect();
    if stuck.is_empty() {
        return None;
    }
    let encrypted: Vec<String> = checked
        .iter()
        .filter(|(_, k)| **k == KeyFile::Encrypted)
        .map(|(p, _)| p.display().to_string())
        .collect();
    let keys = if encrypted.is_empty() {
        "no key file exists (its IdentityFile, or ~/.ssh/id_ed25519 and the other defaults)".to_owned()
    } else {
        format!("its key files are encrypted ({}), which only an agent can use", encrypted.join(", "))
    };
    let named: Vec<&str> = stuck.iter().take(NAMED_AT_MOST).copied().collect();
    let more = stuck.len().saturating_sub(NAMED_AT_MOST);
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    let noun = if stuck.len() == 1 { "jump host" } else { "jump hosts" };
    let who = format!("{noun} {}{more}", named.join(", "));
    Some(format!(
        "kharond has no ssh-agent (SSH_AUTH_SOCK was not set when it started) and {keys}: {who} will \
         refuse it. {}",
        restart_advice()
    ))
}

fn restart_advice() -> String {
    format!(
        "Start kharond from a shell whose ssh-agent holds your key ({})",
        crate::login::auth::service_agent_advice()
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyFile {
    Usable,
    Encrypted,
    /// Missing or unreadable.
    Absent,
}

fn key_file(path: &Path) -> KeyFile {
    if !path.exists() {
        return KeyFile::Absent;
    }
    match russh::keys::load_secret_key(path, None) {
        Ok(_) => KeyFile::Usable,
        Err(russh::keys::Error::KeyIsEncrypted) => KeyFile::Encrypted,
        Err(_) => KeyFile::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(alias: &str, host: &str, named: bool, suggestion: Option<&str>, files: Vec<PathBuf>) -> Hop {
        Hop {
            alias: alias.to_owned(),
            host_name: host.to_owned(),
            port: 22,
            user: "tester".to_owned(),
            identity_files: files,
            identities_only: false,
            identity_agent: IdentityAgent::Env,
            certificate_files: Vec::new(),
            transport: Transport::Tcp,
            server_alive_interval: Duration::from_secs(15),
            server_alive_count_max: 3,
            connect_timeout: None,
            rekey_limit: Default::default(),
            address_family: Default::default(),
            bind: None,
            use_keychain: false,
            asking: Default::default(),
            required_rsa_size: 1024,
            strict_host_key_checking: kharon_ssh_config::StrictHostKeyChecking::Yes,
            user_known_hosts_files: Vec::new(),
            global_known_hosts_files: Vec::new(),
            host_key_alias: None,
            algorithms: Default::default(),
            origin: None,
            suggestion: suggestion.map(str::to_owned),
            named,
        }
    }

    #[test]
    fn an_unnamed_name_that_does_not_exist_is_reported_with_the_closest_host() {
        let config = Path::new("/home/u/.ssh/config");
        let typo = hop("jump-tyr", "jump-tyr", false, Some("jump-tyrr"), vec![]);
        let nx = Lookup::NoSuchName("Name or service not known".into());
        let u = judge("jump-tyr", &typo, &nx, config).unwrap();
        assert!(u.reason.contains("did you mean \"jump-tyrr\"?"), "{}", u.reason);
        assert_eq!(
            u.reason,
            "no Host block in /home/u/.ssh/config names it and the name does not resolve (Name or service \
             not known), so connections through it will fail; did you mean \"jump-tyrr\"?"
        );
        // Offline: only a likely typo is said; a name with nothing close may be right.
        let offline = Lookup::Unknown("Temporary failure in name resolution".into());
        assert!(judge("jump-tyr", &typo, &offline, config).is_some());
        let plain = hop("bastion.example", "bastion.example", false, None, vec![]);
        assert!(judge("bastion.example", &plain, &offline, config).is_none());
        let said = judge("bastion.example", &plain, &nx, config).unwrap().reason;
        assert!(said.contains("add a Host block"), "{said}");
        assert!(judge("x", &plain, &Lookup::Found, config).is_none());
    }

    #[tokio::test]
    async fn named_hosts_addresses_and_resolving_names_are_never_reported() {
        let config = Path::new("/c");
        let chains = vec![
            ("a".to_owned(), vec![hop("a", "no-such-host.invalid", true, None, vec![])]),
            ("b".to_owned(), vec![hop("b", "127.0.0.1", false, None, vec![])]),
            ("c".to_owned(), vec![hop("c", "localhost", false, None, vec![])]),
        ];
        assert_eq!(unresolved(&chains, config).await, Vec::new());
    }

    #[tokio::test]
    async fn no_agent_and_no_usable_key_file_is_said_with_the_jump_hosts() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("id_missing");
        let chains = vec![("jump-a".to_owned(), vec![hop("jump-a", "h", true, None, vec![missing.clone()])])];
        let why = credentials_in(&chains, None).await.unwrap();
        assert!(why.contains("no ssh-agent") && why.contains("jump host jump-a"), "{why}");
        // A key file usable without an agent is enough.
        let key = dir.path().join("id_plain");
        let pair = russh::keys::PrivateKey::random(
            &mut russh::keys::key::safe_rng(),
            russh::keys::Algorithm::Ed25519,
        )
        .unwrap();
        std::fs::write(&key, pair.to_openssh(russh::keys::ssh_key::LineEnding::LF).unwrap().as_bytes())
            .unwrap();
        let chains = vec![("jump-a".to_owned(), vec![hop("jump-a", "h", true, None, vec![missing, key])])];
        assert_eq!(credentials_in(&chains, None).await, None);
        // An agent that answers is enough; one that does not is said.
        let listening = dir.path().join("agent.sock");
        let _agent = tokio::net::UnixListener::bind(&listening).unwrap();
        assert_eq!(credentials_in(&[], Some(listening.to_str().unwrap())).await, None);
        let gone = dir.path().join("gone.sock").display().to_string();
        let why = credentials_in(&chains, Some(&gone)).await.unwrap();
        assert!(why.contains("does not answer"), "{why}");
        // No jump hosts yet: nothing to authenticate to, nothing to say.
        assert_eq!(credentials_in(&[], None).await, None);
    }
}
