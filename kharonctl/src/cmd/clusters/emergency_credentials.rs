//! `kharonctl clusters NAME emergency-credentials [-o FILE] [--merge]`: the cluster's emergency
//! token in a kubeconfig, for when its normal login is broken (docs/emergency-credentials.md).
//!
//! The steps, and who does them: the cluster (API URL, CA) from the cached inventory, no
//! Lieutenant call; kharond's listen address (for `proxy-url`) from `Status`; the key, passphrase
//! and TOTP here ([`crate::emergency::key`], hidden prompts); the Passbolt login and bucket list
//! ([`crate::emergency::passbolt`]); each bucket's object downloaded by kharond through its routing, and
//! decrypted here ([`crate::emergency`]). The kubeconfig is built whole and written atomically,
//! 0600, with the same rules as `kharonctl kubeconfig` (stdout, `-o FILE`, `--merge`); nothing is
//! written unless at least one token decrypted.
//!
//! Names: cluster and context `emergency-credentials/<i>/<cluster-id>`, one `i` per distinct
//! token, user `emergency-credentials/<i>/<cluster-id>/kharon-login`: Go kharon's names, so that a
//! merge replaces the token Go kharon wrote instead of leaving it beside ours.

use kharon_common::text::Escaped;
use std::io::{IsTerminal as _, Read as _};
use std::path::Path;
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use kharon_routing::inventory::Cluster;
use serde_norway::{Mapping, Value};

use crate::cmd::clusters::run::Run;
use crate::daemon::Daemon;
use crate::emergency::openpgp::{Passphrase, PrivateKey};
use crate::emergency::passbolt;
use crate::emergency::{self, key};
use crate::kube;

const PASSPHRASE_ENVS: [&str; 2] = ["KHARON_PASSBOLT_PASSPHRASE", "EMR_PASSPHRASE"];
const TOTP_ENVS: [&str; 2] = ["KHARON_PASSBOLT_TOTP", "EMR_TOTP_TOKEN"];

/// `--help` of the command (the variant in `Action` points here).
pub const LONG_ABOUT: &str = "Fetch the cluster's emergency credentials and write a kubeconfig that uses them.\n\n\
        For when the cluster's normal login is broken (identity provider down, say). It needs no \
        Lieutenant: the cluster's API URL and CA come from the cached inventory. It logs in to \
        Passbolt with your OpenPGP key (passphrase, and a TOTP code if your account has MFA), reads \
        the bucket list from the resource `emergency-cedentials-buckets`, has kharond download the \
        cluster's object from every bucket (through the cluster's jump host when the storage is \
        routed), and decrypts the token meant for your key. kharond must be running.\n\n\
        Your Passbolt private key, first found wins:\n  \
        1. the file passbolt_key in kharon's config directory (0600);\n  \
        2. passbolt_key in emergency-credentials-receive's config.yaml ($EMR_CONFIG_DIR, \
        $XDG_CONFIG_HOME/emergency-credentials-receive, ~/.config/emergency-credentials-receive);\n  \
        3. KHARON_PASSBOLT_KEY (the armored key itself);\n  \
        4. pasted on standard input (from <passbolt>/app/settings/keys); kept in 1. after the login worked.\n\
        The passphrase comes from KHARON_PASSBOLT_PASSPHRASE (or EMR_PASSPHRASE), the TOTP code from \
        KHARON_PASSBOLT_TOTP (or EMR_TOTP_TOKEN); otherwise both are asked for on the terminal, hidden. \
        They are never stored.\n\n\
        The kubeconfig (printed, written with -o, or merged with --merge as `kharonctl kubeconfig` does) \
        has one context `emergency-credentials/<i>/<cluster-id>` per token, with proxy-url pointing at \
        kharond when the cluster is routed. It says when the token expires.";

/// Examples under `--help`.
pub const EXAMPLES: &str = "Examples:\n  kharonctl clusters c-example-1 emergency-credentials --merge\n  \
    kharonctl clusters c-example-1 emergency-credentials -o em.kubeconfig\n  \
    KUBECONFIG=em.kubeconfig kubectl get nodes\n  \
    KHARON_PASSBOLT_TOTP=123456 kharonctl clusters c-example-1 emergency-credentials -o em.kubeconfig";

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub destination: crate::kube::destination::Destination,
    // The help text is clap's: a bare URL reads better on a terminal than a Markdown link.
    #[allow(rustdoc::bare_urls)]
    /// Passbolt base URL [env: KHARON_PASSBOLT_URL] [config: passbolt_url] [default: https://cloud.passbolt.com/vshn]
    #[arg(long, value_name = "URL")]
    pub passbolt_url: Option<String>,
}

pub async fn run(args: Args, run: &Run<'_>) -> anyhow::Result<ExitCode> {
    let cluster = run.one()?;
    let id = cluster.id.as_str();
    if cluster.api_url().is_none() {
        anyhow::bail!(
            "{id} has no API URL fact (openshiftApiURL or talosApiURL), so there is nothing to connect to"
        );
    }
    let passbolt_url = match args.passbolt_url {
        Some(url) => check_url(&url)?,
        None => run.ctx.config.passbolt_url.value.clone(),
    };
    // The daemon first: it downloads the objects and its listener goes into proxy-url. Without it,
    // asking for secrets would be wasted.
    let mut daemon = run.ctx.daemon().await?;
    let status = daemon.status().await?;
    // Reached as `kharonctl clusters NAME kubeconfig` reaches it: a listener on all addresses via
    // loopback, with the SOCKS password it requires.
    let proxy = run.ctx.proxy_of(&status).map_err(anyhow::Error::msg)?;

    let mut session = passbolt_login(&passbolt_url).await?;
    let tokens = fetch_tokens(&mut daemon, &mut session, id).await?;

    let settings = args.destination.settings(kube::Settings::new(proxy, run.catalog.inventory_file())?);
    let entries = kubeconfig_entries(cluster, &settings, &tokens)?;
    let written_to = args.destination.output.clone();
    let merged = args.destination.merge;
    crate::kube::destination::emit(&entries, args.destination)?;
    report_tokens(&entries, &tokens, written_to.as_deref(), merged);
    Ok(ExitCode::SUCCESS)
}

/// Logs in to Passbolt with the user's key (found, or pasted and then stored once the login
/// worked), its passphrase and the TOTP code.
async fn passbolt_login(passbolt_url: &str) -> anyhow::Result<passbolt::Session> {
    let getenv = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let config_dir = kharon_common::paths::config_file()?
        .parent()
        .map(std::path::Path::to_owned)
        .context("kharon's config file has no directory")?;
    let places = key::Places::new(&config_dir, &getenv);
    let (armored, origin) = match key::find(&places, &getenv)? {
        Some(found) => found,
        None => (paste_key(passbolt_url)?, key::Origin::Pasted),
    };
    let private = unlocked_key(&armored, &origin)?;

    let totp: passbolt::TotpSource = Box::new(|| {
        secret_input(&TOTP_ENVS, "Passbolt TOTP code: ")
            .map(|p| p.expose().to_owned())
            .map_err(|e| e.to_string())
    });
    let mut session = passbolt::Session::new(passbolt_url, private, totp)?;
    session.login().await.context("Passbolt login failed")?;
    if origin == key::Origin::Pasted {
        key::store(&places.own, &armored)?;
        eprintln!("Stored your Passbolt key in {} (mode 0600) for next time.", places.own.display());
    }
    Ok(session)
}

/// The Passbolt private key parsed from `armored`, unlocked with its passphrase when it has one.
fn unlocked_key(armored: &str, origin: &key::Origin) -> anyhow::Result<PrivateKey> {
    let mut private =
        PrivateKey::parse(armored).with_context(|| format!("the Passbolt key from {origin}"))?;
    if private.is_protected() {
        let passphrase = secret_input(&PASSPHRASE_ENVS, "Passphrase of your Passbolt key: ")?;
        private.unlock(passphrase).map_err(|_| {
            anyhow::anyhow!(
                "the passphrase (from {}) does not unlock the Passbolt key from {origin}; nothing was sent to Passbolt",
                source_of(&PASSPHRASE_ENVS)
            )
        })?;
    }
    Ok(private)
}

/// Reads the bucket list from Passbolt and has kharond fetch the cluster's object from every bucket;
/// returns the tokens the user's key decrypts, and fails when there is none.
async fn fetch_tokens(
    daemon: &mut Daemon,
    session: &mut passbolt::Session,
    id: &str,
) -> anyhow::Result<Vec<emergency::Token>> {
    let secret = session
        .secret_by_name(emergency::BUCKETS_RESOURCE)
        .await
        .context("cannot read the emergency credentials' bucket list from Passbolt")?;
    let buckets = emergency::parse_buckets(&secret)?;

    eprintln!(
        "Fetching the emergency credentials of {} from {} through kharond…",
        Escaped(id),
        crate::output::count(buckets.len() as u64, "bucket")
    );
    let outcome = emergency::collect(daemon, session.key(), &buckets, id).await;
    for failure in &outcome.failures {
        eprintln!("kharonctl: bucket {}", Escaped(&failure.to_string()));
    }
    if outcome.tokens.is_empty() {
        anyhow::bail!(
            "no bucket gave an emergency token for {id} that your key decrypts ({} tried, see above); \
             no kubeconfig written",
            crate::output::count(buckets.len() as u64, "bucket")
        );
    }
    Ok(outcome.tokens)
}

/// One kubeconfig entry per token, named as Go kharon names them (the module header); prints the
/// warnings about the cluster's part.
fn kubeconfig_entries(
    cluster: &Cluster,
    settings: &kube::Settings,
    tokens: &[emergency::Token],
) -> anyhow::Result<Vec<kube::Entry>> {
    let id = cluster.id.as_str();
    let (cluster_part, warnings) = kube::cluster_part(cluster, settings)?;
    for w in &warnings {
        eprintln!("kharonctl: warning: {}", Escaped(w));
    }
    Ok(tokens
        .iter()
        .enumerate()
        .map(|(i, t)| kube::Entry {
            name: format!("emergency-credentials/{i}/{id}"),
            cluster: cluster_part.clone(),
            user: token_user(&t.token),
            user_name: Some(format!("emergency-credentials/{i}/{id}/kharon-login")),
            warnings: Vec::new(),
        })
        .collect())
}

/// Prints on stderr where each entry's token comes from and when it expires, and how to use the
/// kubeconfig just written or merged.
fn report_tokens(
    entries: &[kube::Entry],
    tokens: &[emergency::Token],
    written_to: Option<&Path>,
    merged: bool,
) {
    let now = SystemTime::now();
    for (entry, token) in entries.iter().zip(tokens) {
        let line =
            format!("{}: token from bucket {}, {}", entry.name, token.bucket, expiry_text(&token.token, now));
        eprintln!("{}", Escaped(&line));
    }
    if let Some(first) = entries.first() {
        match (written_to, merged) {
            (_, true) => eprintln!("Use it: kubectl --context '{}' get nodes", Escaped(&first.name)),
            (Some(path), false) => eprintln!("Use it: KUBECONFIG={} kubectl get nodes", path.display()),
            (None, false) => {}
        }
    }
}

fn check_url(url: &str) -> anyhow::Result<String> {
    match url::Url::parse(url) {
        Ok(u)
            if matches!(u.scheme(), "http" | "https")
                && u.has_host()
                && u.query().is_none()
                && u.fragment().is_none() =>
        {
            Ok(url.to_owned())
        }
        _ => anyhow::bail!("--passbolt-url {url:?} is not an http(s) URL without query or fragment"),
    }
}

fn token_user(token: &str) -> Value {
    let mut m = Mapping::new();
    m.insert(Value::String("token".into()), Value::String(token.to_owned()));
    Value::Mapping(m)
}

/// "expires 2026-12-24T10:00:00Z (in 29d 23h)", or why there is no date.
fn expiry_text(token: &str, now: SystemTime) -> String {
    let Some(exp) = crate::lieutenant::oidc::token::expiry(token) else {
        return "no expiry in the token (not a JWT with exp)".to_owned();
    };
    let at = kharon_common::time::rfc3339(exp.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0));
    match exp.duration_since(now) {
        Ok(left) => format!("expires {at} (in {})", crate::output::age(left.as_secs())),
        Err(_) => format!("EXPIRED at {at}: ask for the credentials to be renewed"),
    }
}

/// A secret from the first set variable of `envs`, else asked for on the terminal without echo.
fn secret_input(envs: &[&str], prompt: &str) -> anyhow::Result<Passphrase> {
    for name in envs {
        if let Ok(v) = std::env::var(name)
            && !v.is_empty()
        {
            return Ok(Passphrase::new(v));
        }
    }
    // rpassword reads /dev/tty, so this also works while the key is piped in.
    rpassword::prompt_password(prompt)
        .map(Passphrase::new)
        .map_err(|e| anyhow::anyhow!("cannot ask on the terminal ({e}); set {} instead", envs.join(" or ")))
}

fn source_of(envs: &[&str]) -> String {
    envs.iter()
        .find(|n| std::env::var(n).is_ok_and(|v| !v.is_empty()))
        .map(|n| format!("env {n}"))
        .unwrap_or_else(|| "the prompt".to_owned())
}

/// The key pasted on standard input, up to end of input.
fn paste_key(passbolt_url: &str) -> anyhow::Result<String> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!(
            "No Passbolt key found. Paste your private key from {}/app/settings/keys, then press Ctrl+D:",
            passbolt_url.trim_end_matches('/')
        );
    }
    let mut text = String::new();
    stdin.lock().read_to_string(&mut text).context("cannot read the Passbolt key from standard input")?;
    if !text.contains("BEGIN PGP PRIVATE KEY BLOCK") {
        anyhow::bail!(
            "no Passbolt key: none stored in kharon's config directory, none in emergency-credentials-receive's \
             config, KHARON_PASSBOLT_KEY unset, and standard input held no armored private key"
        );
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn expiry_is_a_date_and_a_duration() {
        let jwt = crate::lieutenant::oidc::token::tests::jwt(serde_json::json!({"exp": 1_767_225_600}));
        let now = UNIX_EPOCH + Duration::from_secs(1_767_225_600 - 2 * 86_400 - 3600);
        assert_eq!(expiry_text(&jwt, now), "expires 2026-01-01T00:00:00Z (in 2d 1h)");
        let later = UNIX_EPOCH + Duration::from_secs(1_767_225_600 + 1);
        assert!(expiry_text(&jwt, later).starts_with("EXPIRED at 2026-01-01T00:00:00Z"));
        assert!(expiry_text("opaque", now).starts_with("no expiry"));
    }
}
