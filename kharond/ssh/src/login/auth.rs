//! Public-key authentication of one hop: the ssh-agent first, then key files.
//!
//! Owns: which keys are offered in which order, and the error a user can act on when none works.
//! Order, as OpenSSH (and bounded by sshd's `MaxAuthTries`; docs/ssh-engine.md, "Authentication"):
//! 1. agent keys (and agent certificates) matching an `IdentityFile` (its `.pub` or `-cert.pub`;
//!    an `IdentityFile` that is itself a public key, as 1Password's and Secretive's agents have it
//!    set up, names the agent key it holds: authfile.c `sshkey_load_public` reads the file first),
//! 2. with `IdentitiesOnly no`, the agent's other keys,
//! 3. unencrypted key files, with their `CertificateFile`/`-cert.pub` certificate when present.
//!
//! A key whose type `PubkeyAcceptedAlgorithms` excludes is skipped (and named in the error), and
//! that list picks the RSA signature hash, as in ssh.
//!
//! An encrypted key file that the agent does not hold cannot be used: the daemon cannot prompt,
//! so the error says to `ssh-add` it (on macOS the Keychain way, [`encrypted_advice`]). The agent socket comes from `IdentityAgent` or the daemon's
//! captured `SSH_AUTH_SOCK` (never this process's live environment).
//!
//! Keys are offered while the server still takes them. What it says of them is kept
//! ([`prompt::Verdict`]); when it wants more than a key (a one-time password after it, a password
//! instead of it), `prompt` finishes the login with a person.
//! Knows nothing of host keys or how the session's transport was made (`chain`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use russh::MethodKind;
use russh::client::{self, AuthResult};
use russh::keys::agent::AgentIdentity;
use russh::keys::agent::client::AgentClient;
use russh::keys::{Certificate, PrivateKey, PrivateKeyWithHashAlg, PublicKey};

use crate::login::prompt::{self, Person, Verdict};
use kharon_ssh_config::{Hop, IdentityAgent, SignatureRefusal};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `agent`: whether the hop has an agent to add it to; without one, `ssh-add` in a shell
    /// cannot help kharond. `keychain`: the hop's `UseKeychain` (macOS).
    #[error("{}", encrypted(path, *agent, *keychain))]
    Encrypted { path: PathBuf, agent: Agent, keychain: bool },
    #[error("no key was accepted for {user}; tried {}{}", tried_list(tried), agent_note(agent))]
    Rejected { user: String, tried: Vec<String>, agent: Option<String> },
    /// The session ended while keys were being tried; `refused` of them were offered and refused
    /// (the rest of `tried` never reached the server); `said` is the server's disconnect message,
    /// which the caller adds once the session has reported it.
    #[error("{}", interrupted(tried, *refused, said.as_deref()))]
    Interrupted { tried: Vec<String>, refused: usize, said: Option<String>, source: russh::Error },
    /// The server wanted more than a key; a person was asked for it, or could not be (prompt.rs).
    #[error(transparent)]
    Person(prompt::Error),
}

/// After refused keys, a server that hangs up is almost always sshd's `MaxAuthTries` ("Too many
/// authentication failures"): ssh fails the same way, and the fix is the same.
fn interrupted(tried: &[String], refused: usize, said: Option<&str>) -> String {
    let said = said.map(|s| format!(" ({s})")).unwrap_or_default();
    if refused == 0 {
        return format!("the server ended the session during authentication{said}");
    }
    format!(
        "the server ended the session after refusing {refused} key{}{said}: {}. sshd stops after MaxAuthTries keys; \
         name this host's key with IdentityFile and set IdentitiesOnly yes, as ssh needs too",
        if refused == 1 { "" } else { "s" },
        tried.join(", ")
    )
}

/// Which agent a hop has, for the advice on an encrypted key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// kharond's `SSH_AUTH_SOCK` or the hop's `IdentityAgent` socket.
    Some,
    /// `IdentityAgent none` in the ssh config.
    NoneConfigured,
    /// kharond was started without `SSH_AUTH_SOCK`.
    NoSocket,
}

fn encrypted(path: &Path, agent: Agent, keychain: bool) -> String {
    let shown = path.display();
    match agent {
        Agent::Some => encrypted_advice(path, keychain, cfg!(target_os = "macos")),
        Agent::NoneConfigured => format!(
            "{shown} is encrypted and the ssh config gives this hop no agent (IdentityAgent none); kharond \
             cannot prompt: let it use your agent, or use a key without a passphrase"
        ),
        Agent::NoSocket => format!(
            "{shown} is encrypted and kharond has no ssh-agent to use it (no SSH_AUTH_SOCK when it \
             started; it cannot prompt): start kharond from a shell whose agent holds the key \
             (`ssh-add {shown}` there; {})",
            service_agent_advice()
        ),
    }
}

/// How kharond running as a service gets the agent of the user's shell: the service manager that
/// started it decides. Every message about a missing or dead agent ends with it.
pub fn service_agent_advice() -> &'static str {
    if cfg!(target_os = "macos") {
        "as a launchd agent: run `kharonctl service-install` again from that shell"
    } else {
        "as a service: `systemctl --user import-environment SSH_AUTH_SOCK`, then `systemctl --user \
         restart kharond`"
    }
}

/// What to do about an encrypted key file the agent does not hold. On macOS the passphrase of a
/// key file can live in the user's Keychain (Apple's `UseKeychain`, here `keychain`), which only
/// Apple's ssh and ssh-add may read: `ssh-add --apple-load-keychain` loads every such key into the
/// agent, `--apple-use-keychain` adds one and keeps its passphrase there for the next login.
pub fn encrypted_advice(path: &Path, keychain: bool, macos: bool) -> String {
    let path = path.display();
    let advice = match (macos, keychain) {
        (false, _) => format!("add it to your agent with `ssh-add {path}`"),
        (true, false) => format!(
            "add it to your agent with `ssh-add --apple-use-keychain {path}`, which also keeps its \
             passphrase in your Keychain for `ssh-add --apple-load-keychain` after a restart"
        ),
        (true, true) => format!(
            "if its passphrase is in your Keychain (UseKeychain), load it into your agent with \
             `ssh-add --apple-load-keychain`; else add it with `ssh-add --apple-use-keychain {path}`"
        ),
    };
    format!("{path} is encrypted; {advice} (kharond cannot prompt)")
}

fn tried_list(tried: &[String]) -> String {
    if tried.is_empty() {
        "no key at all (no agent key, no IdentityFile found)".to_owned()
    } else {
        tried.join(", ")
    }
}

fn agent_note(agent: &Option<String>) -> String {
    agent.as_ref().map(|a| format!(" ({a})")).unwrap_or_default()
}

/// A key file we may offer: its path, and what we know of it without a passphrase.
struct KeyFile {
    path: PathBuf,
    public: Option<PublicKey>,
    cert: Option<Certificate>,
    /// The file is a public key (`IdentityFile ~/.ssh/key.pub`): only the agent can sign with it.
    public_only: bool,
}

/// What a login has found out so far: what was offered (for the error), what the server said.
#[derive(Default)]
struct Attempt {
    /// What was offered or skipped, each with why, in order.
    tried: Vec<String>,
    /// Keys the server refused outright (not as part of several methods).
    refused: usize,
    /// Why the agent could not be used, if it could not.
    agent_problem: Option<String>,
    /// Public keys the agent offered: a key file holding one of them needs no passphrase.
    agent_keys: Vec<PublicKey>,
    /// The first encrypted key file the agent does not hold.
    encrypted: Option<PathBuf>,
    verdict: Verdict,
}

impl Attempt {
    /// The session failed under the login: what was tried so far, and why.
    fn interrupted(&self, source: russh::Error) -> Error {
        Error::Interrupted { tried: self.tried.clone(), refused: self.refused, said: None, source }
    }

    /// What the server said of a key (`label`): authenticated (true), or refused.
    fn heard(&mut self, label: String, result: AuthResult) -> bool {
        match result {
            AuthResult::Success => true,
            AuthResult::Failure { remaining_methods, partial_success } => {
                self.refused += usize::from(!partial_success);
                self.verdict.heard(MethodKind::PublicKey, &label, remaining_methods, partial_success);
                self.tried.push(label);
                false
            }
        }
    }

    /// No key let the user in, and nobody is asked: the error that says what to do.
    fn failure(self, hop: &Hop, env: &HashMap<String, String>) -> Error {
        match self.encrypted {
            Some(path) => {
                let agent = match (agent_socket(hop, env), &hop.identity_agent) {
                    (Some(_), _) => Agent::Some,
                    (None, IdentityAgent::None) => Agent::NoneConfigured,
                    (None, _) => Agent::NoSocket,
                };
                Error::Encrypted { path, agent, keychain: hop.use_keychain }
            }
            None => Error::Rejected { user: hop.user.clone(), tried: self.tried, agent: self.agent_problem },
        }
    }
}

/// Authenticates `hop.user` on a freshly connected session: the agent's keys, then key files,
/// then (when no key reached the server) what it takes; what a person must answer goes to
/// `person`.
pub async fn authenticate<H>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    env: &HashMap<String, String>,
    person: &Person<'_>,
) -> Result<(), Error>
where
    H: client::Handler,
{
    let files = key_files(hop);
    let mut attempt = Attempt::default();
    if with_agent(handle, hop, env, &files, &mut attempt).await?
        || with_key_files(handle, hop, env, &files, &mut attempt).await?
        || ask_what_it_takes(handle, hop, &mut attempt).await?
    {
        return Ok(());
    }
    if attempt.verdict.beyond_keys(&hop.asking) {
        return prompt::finish(handle, hop, person, attempt.verdict).await.map_err(Error::Person);
    }
    Err(attempt.failure(hop, env))
}

/// Offers the agent's keys: those an `IdentityFile` names first, then (without `IdentitiesOnly`)
/// the rest. True once one let the user in.
async fn with_agent<H: client::Handler>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    env: &HashMap<String, String>,
    files: &[KeyFile],
    attempt: &mut Attempt,
) -> Result<bool, Error> {
    let Some(sock) = agent_socket(hop, env) else { return Ok(false) };
    let mut agent = match AgentClient::connect_uds(&sock).await {
        Ok(agent) => agent,
        Err(e) => {
            attempt.agent_problem = Some(format!("agent {} unusable: {e}", sock.display()));
            return Ok(false);
        }
    };
    let ids = match agent.request_identities().await {
        Ok(ids) => ids,
        Err(e) => {
            attempt.agent_problem = Some(format!("agent {} unusable: {e}", sock.display()));
            return Ok(false);
        }
    };
    let wanted = |id: &AgentIdentity| {
        let k = id.public_key();
        files.iter().any(|f| {
            f.public.as_ref().is_some_and(|p| p.key_data() == k.key_data())
                || f.cert.as_ref().is_some_and(|c| c.public_key() == k.key_data())
        })
    };
    let (mut ordered, rest): (Vec<_>, Vec<_>) = ids.into_iter().partition(|id| wanted(id));
    if !hop.identities_only {
        ordered.extend(rest);
    }
    if ordered.is_empty() {
        attempt.agent_problem = Some(format!("agent {} holds no usable key", sock.display()));
    }
    for id in ordered {
        if !attempt.verdict.keys_wanted() {
            break;
        }
        if offer_agent_key(handle, hop, &id, &mut agent, attempt).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Offers one of the agent's keys (or certificates). True if it let the user in.
async fn offer_agent_key<H: client::Handler>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    id: &AgentIdentity,
    agent: &mut AgentClient<tokio::net::UnixStream>,
    attempt: &mut Attempt,
) -> Result<bool, Error> {
    attempt.agent_keys.push(id.public_key().into_owned());
    let label = label(id);
    if let Some(bits) = hop.rsa_too_small(&id.public_key()) {
        attempt.tried.push(format!("{label} ({})", too_small(bits, hop)));
        return Ok(false);
    }
    let (algorithm, certificate) = match id {
        AgentIdentity::PublicKey { key, .. } => (key.algorithm(), false),
        AgentIdentity::Certificate { certificate, .. } => (certificate.algorithm(), true),
    };
    let hash =
        match signature(handle, hop, &algorithm, certificate).await.map_err(|e| attempt.interrupted(e))? {
            Ok(hash) => hash,
            Err(why) => {
                attempt.tried.push(format!("{label} ({why})"));
                return Ok(false);
            }
        };
    let result = match id {
        AgentIdentity::PublicKey { key, .. } => {
            handle.authenticate_publickey_with(&hop.user, key.clone(), hash, agent).await
        }
        AgentIdentity::Certificate { certificate, .. } => {
            handle.authenticate_certificate_with(&hop.user, certificate.clone(), hash, agent).await
        }
    };
    match result {
        Ok(result) => Ok(attempt.heard(label, result)),
        Err(e) => {
            // The agent declined or failed to sign; the session is still usable.
            tracing::debug!(hop = %hop.display(), error = %e, "agent could not sign");
            if handle.is_closed() {
                return Err(attempt.interrupted(russh::Error::Disconnect));
            }
            attempt.tried.push(format!("{label} (agent failed: {e})"));
            Ok(false)
        }
    }
}

/// Offers the key files that need no passphrase, in order. True once one let the user in.
async fn with_key_files<H: client::Handler>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    env: &HashMap<String, String>,
    files: &[KeyFile],
    attempt: &mut Attempt,
) -> Result<bool, Error> {
    for f in files {
        if !f.path.exists() || !attempt.verdict.keys_wanted() {
            continue;
        }
        let held = |attempt: &Attempt| {
            f.public.as_ref().is_some_and(|p| attempt.agent_keys.iter().any(|a| a.key_data() == p.key_data()))
        };
        if f.public_only {
            // Offered above if the agent holds it; there is no private key to read (ssh fails to
            // load it as one and moves on, too).
            if !held(attempt) {
                attempt.tried.push(format!(
                    "{} (a public key: only an agent that holds its private key can use it, and {})",
                    f.path.display(),
                    if agent_socket(hop, env).is_some() { "the agent does not" } else { "there is no agent" }
                ));
            }
            continue;
        }
        let key = match russh::keys::load_secret_key(&f.path, None) {
            Ok(k) => k,
            Err(russh::keys::Error::KeyIsEncrypted) => {
                if !held(attempt) && attempt.encrypted.is_none() {
                    attempt.encrypted = Some(f.path.clone());
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(file = %f.path.display(), error = %e, "cannot read key file");
                attempt.tried.push(format!("{} (unreadable: {e})", f.path.display()));
                continue;
            }
        };
        if offer_key_file(handle, hop, f, key, attempt).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Offers one key file's key (with its certificate when it has one). True if it let the user in.
async fn offer_key_file<H: client::Handler>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    file: &KeyFile,
    key: russh::keys::PrivateKey,
    attempt: &mut Attempt,
) -> Result<bool, Error> {
    if let Some(bits) = hop.rsa_too_small(key.public_key()) {
        attempt.tried.push(format!("{} ({})", file.path.display(), too_small(bits, hop)));
        return Ok(false);
    }
    let key = Arc::new(key);
    let cert = file.cert.as_ref().filter(|c| c.public_key() == key.public_key().key_data());
    let chosen = signature(handle, hop, &key.algorithm(), cert.is_some()).await;
    let hash = match chosen.map_err(|e| attempt.interrupted(e))? {
        Ok(hash) => hash,
        Err(why) => {
            attempt.tried.push(format!("{} ({why})", file.path.display()));
            return Ok(false);
        }
    };
    let result = match cert {
        Some(cert) => handle.authenticate_openssh_cert(&hop.user, key.clone(), cert.clone()).await,
        None => handle.authenticate_publickey(&hop.user, PrivateKeyWithHashAlg::new(key.clone(), hash)).await,
    };
    match result {
        Ok(result) => Ok(attempt.heard(file.path.display().to_string(), result)),
        Err(e) => Err(attempt.interrupted(e)),
    }
}

/// When no key reached the server, asks it what it takes, as ssh's first request ("none") does.
/// True if it let the user in with nothing.
async fn ask_what_it_takes<H: client::Handler>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    attempt: &mut Attempt,
) -> Result<bool, Error> {
    if attempt.verdict.heard_any() || handle.is_closed() {
        return Ok(false);
    }
    match handle.authenticate_none(hop.user.clone()).await {
        Ok(AuthResult::Success) => Ok(true),
        Ok(AuthResult::Failure { remaining_methods, partial_success }) => {
            attempt.verdict.heard(MethodKind::None, "none", remaining_methods, partial_success);
            Ok(false)
        }
        Err(e) => Err(attempt.interrupted(e)),
    }
}

/// Why ssh skips a small RSA key (sshconnect2.c `pubkey_prepare`, `sshkey_check_rsa_length`).
fn too_small(bits: u32, hop: &Hop) -> String {
    format!(
        "an RSA key of {bits} bits, fewer than RequiredRSASize {}; ssh skips it too",
        hop.required_rsa_size
    )
}

/// The RSA hash to sign in with a key of `algorithm` (meaningless for other types), or why the
/// key is not offered (`PubkeyAcceptedAlgorithms` and the server's `server-sig-algs`, as ssh
/// decides: `config::Algorithms::pubkey_signature`).
async fn signature<H: client::Handler>(
    handle: &client::Handle<H>,
    hop: &Hop,
    algorithm: &russh::keys::Algorithm,
    certificate: bool,
) -> Result<Result<Option<russh::keys::HashAlg>, SignatureRefusal>, russh::Error> {
    let server = handle.best_supported_rsa_hash().await?;
    let choice = hop.algorithms.pubkey_signature(algorithm, certificate, server);
    if let Err(why) = &choice {
        tracing::debug!(hop = %hop.display(), %algorithm, %why, "key skipped");
    }
    Ok(choice)
}

fn label(id: &AgentIdentity) -> String {
    let (kind, comment) = match id {
        AgentIdentity::PublicKey { comment, .. } => ("agent key", comment),
        AgentIdentity::Certificate { comment, .. } => ("agent certificate", comment),
    };
    let fp = id.public_key().fingerprint(russh::keys::HashAlg::Sha256);
    if comment.is_empty() { format!("{kind} {fp}") } else { format!("{kind} {comment} ({fp})") }
}

/// `IdentityAgent`: `SSH_AUTH_SOCK` from the daemon's captured environment, a path, or none.
fn agent_socket(hop: &Hop, env: &HashMap<String, String>) -> Option<PathBuf> {
    match &hop.identity_agent {
        IdentityAgent::None => None,
        IdentityAgent::Path(p) => Some(p.clone()),
        IdentityAgent::Env => env.get("SSH_AUTH_SOCK").filter(|s| !s.is_empty()).map(PathBuf::from),
    }
}

/// The hop's IdentityFiles with their public halves (from `.pub`, or from the file itself when
/// unencrypted) and certificates (`CertificateFile`, else `<file>-cert.pub`).
fn key_files(hop: &Hop) -> Vec<KeyFile> {
    let explicit: Vec<Certificate> =
        hop.certificate_files.iter().filter_map(|p| Certificate::read_file(p).ok()).collect();
    hop.identity_files
        .iter()
        .map(|path| {
            // authfile.c `sshkey_load_public`: the file itself if it is a public key, else `.pub`
            // beside it; then the private key's own public half.
            let own = russh::keys::load_public_key(path).ok();
            let public_only = own.is_some();
            let public =
                own.or_else(|| russh::keys::load_public_key(with_suffix(path, ".pub")).ok()).or_else(|| {
                    russh::keys::load_secret_key(path, None).ok().map(|k: PrivateKey| k.public_key().clone())
                });
            let cert = public.as_ref().and_then(|p| {
                explicit
                    .iter()
                    .find(|c| c.public_key() == p.key_data())
                    .cloned()
                    .or_else(|| Certificate::read_file(&with_suffix(path, "-cert.pub")).ok())
            });
            KeyFile { path: path.clone(), public, cert, public_only }
        })
        .collect()
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encrypted_key_is_advised_the_platforms_way_into_the_agent() {
        let key = Path::new("/home/me/.ssh/id_ed25519");
        let linux = encrypted_advice(key, true, false);
        assert_eq!(
            linux,
            "/home/me/.ssh/id_ed25519 is encrypted; add it to your agent with `ssh-add /home/me/.ssh/id_ed25519` \
             (kharond cannot prompt)"
        );
        let key = Path::new("/Users/me/.ssh/id_ed25519");
        let mac = encrypted_advice(key, false, true);
        assert!(mac.contains("`ssh-add --apple-use-keychain /Users/me/.ssh/id_ed25519`"), "{mac}");
        assert!(!mac.contains("UseKeychain"), "{mac}");
        let keychain = encrypted_advice(key, true, true);
        assert!(keychain.contains("`ssh-add --apple-load-keychain`"), "{keychain}");
        assert!(
            keychain.contains("(UseKeychain)") && keychain.ends_with("(kharond cannot prompt)"),
            "{keychain}"
        );
    }
}
