//! Which hops reach a jump host: the [`Chain`], each hop built from the values `options` found for
//! it.
//!
//! # Jump lists, as ssh(1) runs them
//! OpenSSH turns `ProxyJump a,b` (for target `t`) into `ssh -J a -W [t]:port b`: `b` is reached
//! through `a`, and the command-line `-J` overrides `b`'s own ProxyJump/ProxyCommand, while `a`,
//! the first entry, is reached however *its* config says (recursively). We build exactly that:
//! the first entry of a list is resolved with its own ProxyJump/ProxyCommand, later entries
//! only take their HostName/User/Port/keys/... from the config. A user@ or :port in the list
//! overrides the config, like `ssh -l`/`-p`.
//!
//! A consequence: a non-`ssh -W` ProxyCommand can only ever apply to the first hop, because a
//! hop that uses one has no hops before it, and a later list entry's ProxyCommand is ignored
//! (as ssh ignores it). `build` still checks this, so a future change cannot break the engine's
//! assumption that only hop 0 may need a child process.

use std::path::PathBuf;
use std::time::Duration;

use super::expand;
use super::jump::{JumpSpec, ProxyCommand};
use super::load::{Agent, Item};
use super::options::Options;
use super::{
    Asking, Bind, Chain, Error, Hop, IdentityAgent, Origin, RekeyLimit, SshConfig, StrictHostKeyChecking,
    Transport,
};

/// The first hop's source: `BindAddress`, else `BindInterface`, as `ssh_create_socket` picks.
fn bind(options: &Options<'_>) -> Option<(Bind, Origin)> {
    match (options.bind_address, options.bind_interface) {
        (Some((address, origin)), _) => Some((Bind::Address(address.to_owned()), origin.clone())),
        (None, Some((interface, origin))) => Some((Bind::Interface(interface.to_owned()), origin.clone())),
        (None, None) => None,
    }
}

/// `RekeyLimit`: a size of 0 (`default`) and an interval of 0 are ssh's defaults.
fn rekey_limit(options: &Options<'_>) -> RekeyLimit {
    RekeyLimit {
        data: options.rekey_data.filter(|&bytes| bytes != 0),
        interval: options.rekey_interval.filter(|interval| !interval.is_zero()),
    }
}

/// Sent every 15 s when the config says nothing: OpenSSH's default (0, off) would let a dead
/// NAT mapping hang the pool's sessions until TCP gives up.
const DEFAULT_SERVER_ALIVE_INTERVAL: Duration = Duration::from_secs(15);
const DEFAULT_SERVER_ALIVE_COUNT_MAX: u32 = 3;
/// OpenSSH 9.2's `fill_default_options` list, in its order (`ssh -G` prints it).
const DEFAULT_IDENTITY_FILES: [&str; 7] =
    ["id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa"];
const DEFAULT_GLOBAL_KNOWN_HOSTS: [&str; 2] = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"];
/// OpenSSH's `SSH_RSA_MINIMUM_MODULUS_SIZE`, `RequiredRSASize`'s default (readconf.c).
const DEFAULT_REQUIRED_RSA_SIZE: u32 = 1024;

/// How a host is reached according to its own config, with the line that says so.
enum Route<'c> {
    Direct,
    Jump(&'c [JumpSpec], &'c Origin),
    SshW(&'c JumpSpec, Option<&'c [JumpSpec]>, &'c Origin),
    Command(&'c str, &'c Origin),
}

fn route<'c>(options: &Options<'c>) -> Route<'c> {
    if let (Some(list), Some(origin)) = (options.jump, options.jump_origin) {
        return Route::Jump(list, origin);
    }
    match options.command {
        None | Some((ProxyCommand::None, _)) => Route::Direct,
        Some((ProxyCommand::SshW { dest, via }, origin)) => Route::SshW(dest, via.as_deref(), origin),
        Some((ProxyCommand::Command(raw), origin)) => Route::Command(raw, origin),
    }
}

/// One resolution under way, for the cycle check: everything a `ssh` command line for the hop
/// holds (the name looked up, the port and user it resolved to, the `-J` list), which decides
/// everything that follows. Two hops with the same name but another port or user (one bastion
/// behind two NAT ports, `ProxyJump os1,os1:2222`) are two hops, not a cycle.
#[derive(PartialEq)]
struct Visit {
    alias: String,
    port: u16,
    user: String,
    given: Option<Vec<JumpSpec>>,
    /// The spec as written, for the message.
    shown: String,
}

/// `[user@]host[:port]` as a ProxyJump entry writes it.
fn written(spec: &JumpSpec) -> String {
    let user = spec.user.as_deref().map(|u| format!("{u}@")).unwrap_or_default();
    let port = spec.port.map(|p| format!(":{p}")).unwrap_or_default();
    shown(&format!("{user}{}{port}", spec.host))
}

/// The alias as messages show it: it may come from the inventory or a ProxyJump entry, so it is
/// quoted (and escaped) unless it is a plain name, and an odd one cannot garble a log line.
fn shown(alias: &str) -> String {
    if alias.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:[]@".contains(c)) {
        alias.to_owned()
    } else {
        format!("{alias:?}")
    }
}

impl SshConfig {
    pub(super) fn resolve_chain(&self, jumphost: &str) -> Result<Chain, Error> {
        let mut hops = Vec::new();
        self.build(&JumpSpec::alias(jumphost), None, None, &mut Vec::new(), &mut hops)?;
        Ok(Chain { jumphost: jumphost.to_owned(), hops })
    }

    /// Appends the hops up to and including `spec`. `given` is a `-J` list that replaces the
    /// host's own ProxyJump/ProxyCommand (see the module doc), with its line; `via` is the line
    /// that named `spec`; `stack` holds the resolutions under way, outermost first, to catch
    /// cycles.
    fn build<'c>(
        &'c self,
        spec: &JumpSpec,
        given: Option<(&'c [JumpSpec], &'c Origin)>,
        via: Option<&'c Origin>,
        stack: &mut Vec<Visit>,
        hops: &mut Vec<Hop>,
    ) -> Result<(), Error> {
        let shown = shown(&spec.host);
        let options = self.options(spec, given, &shown)?;
        let port = options.port.unwrap_or(22);
        let user = options.user.clone().unwrap_or_else(|| self.local_user.clone());
        let visit = Visit {
            alias: spec.host.clone(),
            port,
            user: user.clone(),
            given: given.map(|(list, _)| list.to_vec()).filter(|list| !list.is_empty()),
            shown: written(spec),
        };
        if let (Some(start), Some(origin)) = (stack.iter().position(|v| *v == visit), via) {
            let path = stack[start..].iter().chain([&visit]).map(|v| v.shown.clone()).collect();
            return Err(Error::Cycle { origin: origin.clone(), path });
        }
        stack.push(visit);
        let mut command = None;
        match route(&options) {
            Route::Direct => {}
            Route::Jump(list, origin) => {
                let host = options.final_host.as_deref().unwrap_or(&spec.host);
                if let Some(last) = list.last()
                    && last.host == host
                    && last.port.unwrap_or(22) == port
                    && last.user.as_deref().unwrap_or(&user) == user
                {
                    return Err(Error::JumpLoop {
                        origin: origin.clone(),
                        alias: shown,
                        via: last.host.clone(),
                        hop: format!("{user}@{host}:{port}"),
                    });
                }
                self.through(list, origin, stack, hops)?
            }
            Route::SshW(dest, list, origin) => {
                self.build(dest, list.map(|l| (l, origin)), Some(origin), stack, hops)?
            }
            Route::Command(raw, origin) => command = Some((raw, origin)),
        }
        if let (Some((_, origin)), false) = (command, hops.is_empty()) {
            return Err(Error::Invalid {
                origin: origin.clone(),
                message: format!(
                    "ProxyCommand for {}: only the first hop of a chain can use a ProxyCommand other than \
                     `ssh -W %h:%p HOST`",
                    spec.host
                ),
            });
        }
        hops.push(self.hop(spec, &options, command, &shown)?);
        stack.pop();
        Ok(())
    }

    /// `a,b,c`: `c` reached through `a,b`, i.e. `ssh -J a,b c`.
    fn through<'c>(
        &'c self,
        list: &'c [JumpSpec],
        origin: &'c Origin,
        stack: &mut Vec<Visit>,
        hops: &mut Vec<Hop>,
    ) -> Result<(), Error> {
        match list.split_last() {
            Some((last, before)) => self.build(last, Some((before, origin)), Some(origin), stack, hops),
            None => Ok(()),
        }
    }

    fn hop(
        &self,
        spec: &JumpSpec,
        options: &Options<'_>,
        command: Option<(&str, &Origin)>,
        shown: &str,
    ) -> Result<Hop, Error> {
        let alias = spec.host.clone();
        let invalid = |origin: &Origin, option: &str, message: String| Error::Invalid {
            origin: origin.clone(),
            message: format!("{option} for {shown}: {message}"),
        };
        // Settled by `options`: HostName applied, lowercased, canonicalized.
        let host_name = options.final_host.clone().unwrap_or_else(|| alias.to_ascii_lowercase());
        // A ProxyJump entry's user@ and :port were set before the walk, like `ssh -l`/`-p`.
        let port = options.port.unwrap_or(22);
        let user = options.user.clone().unwrap_or_else(|| self.local_user.clone());
        let host_key_alias = options.host_key_alias.map(str::to_owned);
        let value_of = |token: char| match token {
            'h' => host_name.clone(),
            'n' => alias.clone(),
            'p' => port.to_string(),
            'r' => user.clone(),
            'u' => self.local_user.clone(),
            'd' => self.home.display().to_string(),
            'i' => self.uid.to_string(),
            'k' => host_key_alias.clone().unwrap_or_else(|| alias.clone()),
            _ => String::new(),
        };
        let path = |value: &str, origin: &Origin, option: &str| {
            expand::path(value, &self.home, &self.env, &value_of).map_err(|e| invalid(origin, option, e))
        };
        let paths = |values: &[(&str, &Origin)], option: &str| -> Result<Vec<PathBuf>, Error> {
            let mut out: Vec<PathBuf> = Vec::new();
            for (value, origin) in values {
                let p = path(value, origin, option)?;
                // OpenSSH drops duplicates, so a key named in two matching blocks is tried once.
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            Ok(out)
        };

        let mut identity_files = paths(&options.identity_files, "IdentityFile")?;
        if identity_files.is_empty() {
            identity_files = DEFAULT_IDENTITY_FILES.iter().map(|f| self.home.join(".ssh").join(f)).collect();
        }
        let identity_agent = match options.identity_agent {
            None | Some((Agent::Env, _)) => IdentityAgent::Env,
            Some((Agent::None, _)) => IdentityAgent::None,
            Some((Agent::Path(value), origin)) => IdentityAgent::Path(path(value, origin, "IdentityAgent")?),
        };
        let user_known_hosts_files = match options.user_known_hosts_files {
            Some((values, origin)) => {
                let values: Vec<(&str, &Origin)> = values.iter().map(|v| (v.as_str(), origin)).collect();
                paths(&values, "UserKnownHostsFile")?
            }
            None => ["known_hosts", "known_hosts2"].iter().map(|f| self.home.join(".ssh").join(f)).collect(),
        };
        let global_known_hosts_files = self.global_known_hosts(options);
        let transport = match command {
            Some((raw, origin)) => Transport::Command(
                expand::command(raw, expand::COMMAND, &value_of)
                    .map_err(|e| invalid(origin, "ProxyCommand", e))?,
            ),
            None => Transport::Tcp,
        };
        Ok(Hop {
            identity_files,
            identities_only: options.identities_only.unwrap_or(false),
            use_keychain: options.use_keychain.unwrap_or(false),
            asking: asking(options),
            required_rsa_size: options.required_rsa_size.unwrap_or(DEFAULT_REQUIRED_RSA_SIZE),
            identity_agent,
            certificate_files: paths(&options.certificate_files, "CertificateFile")?,
            transport,
            address_family: options.address_family.unwrap_or_default(),
            bind: bind(options),
            server_alive_interval: options.server_alive_interval.unwrap_or(DEFAULT_SERVER_ALIVE_INTERVAL),
            server_alive_count_max: options.server_alive_count_max.unwrap_or(DEFAULT_SERVER_ALIVE_COUNT_MAX),
            connect_timeout: options.connect_timeout.flatten(),
            rekey_limit: rekey_limit(options),
            strict_host_key_checking: options.strict_host_key_checking.unwrap_or(StrictHostKeyChecking::Yes),
            user_known_hosts_files,
            global_known_hosts_files,
            host_key_alias,
            algorithms: options.algorithms.clone(),
            origin: options.origin(),
            suggestion: if options.named() { None } else { self.suggest(&alias) },
            named: options.named(),
            alias,
            host_name,
            port,
            user,
        })
    }

    /// `GlobalKnownHostsFile`, else OpenSSH's two system-wide files.
    fn global_known_hosts(&self, options: &Options<'_>) -> Vec<PathBuf> {
        match options.global_known_hosts_files {
            // Checked at load: only `~` can appear, and tilde() cannot fail on what passed.
            Some(values) => values
                .iter()
                .map(|v| expand::tilde(v, &self.home).map(|p| self.home.join(p)))
                .collect::<Result<_, _>>()
                .unwrap_or_default(),
            None => DEFAULT_GLOBAL_KNOWN_HOSTS.iter().map(PathBuf::from).collect(),
        }
    }

    /// Explicit Host names in file order: patterns that are neither negated nor wildcards.
    pub(super) fn explicit_hosts(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut seen = vec![false; self.loaded.files.len()];
        self.collect_hosts(self.loaded.root, &mut seen, &mut out);
        out
    }

    fn collect_hosts(&self, file: usize, seen: &mut [bool], out: &mut Vec<String>) {
        match seen.get_mut(file) {
            Some(flag) if !*flag => *flag = true,
            _ => return,
        }
        let Some(file) = self.loaded.files.get(file) else { return };
        for item in &file.items {
            match item {
                Item::Host { patterns, .. } => {
                    for p in patterns {
                        if !p.negated && !p.pattern.contains(['*', '?']) && !out.contains(&p.pattern) {
                            out.push(p.pattern.clone());
                        }
                    }
                }
                Item::Include(files) => files.iter().for_each(|&f| self.collect_hosts(f, seen, out)),
                Item::Match { .. } | Item::Set(_) => {}
            }
        }
    }

    /// The closest explicit Host name, if it is close enough to be a typo (or differs only in
    /// case, which matters because matching is case-sensitive).
    fn suggest(&self, alias: &str) -> Option<String> {
        let wanted = alias.to_lowercase();
        self.hosts()
            .into_iter()
            .map(|host| (edit_distance(&wanted, &host.to_lowercase()), host))
            .filter(|(distance, _)| *distance <= (wanted.chars().count() / 4).max(2))
            .min_by_key(|(distance, _)| *distance)
            .map(|(_, host)| host)
    }
}

/// Levenshtein distance; names are short, so the simple two-row version is plenty.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &cb) in b.iter().enumerate() {
            current[j + 1] =
                (previous[j] + usize::from(ca != cb)).min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

/// What a person may be asked for this hop ([`Asking`]): ssh's defaults as the options change
/// them.
fn asking(options: &Options<'_>) -> Asking {
    let defaults = Asking::default();
    let attempts = options.password_prompts.unwrap_or(defaults.attempts);
    let allowed = |method: &&str| match *method {
        "keyboard-interactive" => options.kbd_interactive.unwrap_or(true),
        _ => options.password.unwrap_or(true),
    };
    let order: Vec<&'static str> = match options.preferred_authentications {
        Some(preferred) => {
            preferred.iter().filter_map(|m| defaults.methods.iter().copied().find(|p| p == m)).collect()
        }
        None => defaults.methods.clone(),
    };
    let mut methods: Vec<&'static str> = Vec::new();
    for method in order {
        if allowed(&method) && attempts > 0 && !methods.contains(&method) {
            methods.push(method);
        }
    }
    Asking {
        batch_mode: options.batch_mode.filter(|(on, _)| *on).map(|(_, origin)| origin.clone()),
        methods,
        attempts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("bastion", "bastion"), 0);
        assert_eq!(edit_distance("bastoin", "bastion"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("jump1", "jump2"), 1);
    }
}
