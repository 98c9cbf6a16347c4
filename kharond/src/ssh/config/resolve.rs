//! Answering questions about a loaded config: which values apply to a name (OpenSSH's top-down,
//! first-obtained-value-wins walk), and which hops reach a jump host.
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
use super::load::{Agent, Directive, HostPattern, Item, Setting};
use super::{
    Algorithms, Chain, Error, Hop, IdentityAgent, Origin, SshConfig, StrictHostKeyChecking, Transport,
};

/// Sent every 15 s when the config says nothing: OpenSSH's default (0, off) would let a dead
/// NAT mapping hang the pool's sessions until TCP gives up.
const DEFAULT_SERVER_ALIVE_INTERVAL: Duration = Duration::from_secs(15);
const DEFAULT_SERVER_ALIVE_COUNT_MAX: u32 = 3;
/// OpenSSH 9.2's `fill_default_options` list, in its order (`ssh -G` prints it).
const DEFAULT_IDENTITY_FILES: [&str; 7] =
    ["id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa"];
const DEFAULT_GLOBAL_KNOWN_HOSTS: [&str; 2] = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"];

/// The values that apply to one name, each the first one obtained, with where it was written.
#[derive(Default)]
struct Options<'c> {
    host_name: Option<(&'c str, &'c Origin)>,
    user: Option<&'c str>,
    port: Option<u16>,
    identity_files: Vec<(&'c str, &'c Origin)>,
    identities_only: Option<bool>,
    identity_agent: Option<(&'c Agent, &'c Origin)>,
    certificate_files: Vec<(&'c str, &'c Origin)>,
    jump: Option<&'c [JumpSpec]>,
    jump_none: bool,
    command: Option<(&'c ProxyCommand, &'c Origin)>,
    server_alive_interval: Option<Duration>,
    server_alive_count_max: Option<u32>,
    connect_timeout: Option<Option<Duration>>,
    strict_host_key_checking: Option<StrictHostKeyChecking>,
    user_known_hosts_files: Option<(&'c [String], &'c Origin)>,
    global_known_hosts_files: Option<&'c [String]>,
    host_key_alias: Option<&'c str>,
    algorithms: Algorithms,
    /// Host blocks that matched: where, and whether a pattern other than a bare `*` matched.
    blocks: Vec<(&'c Origin, bool)>,
}

fn first<T>(slot: &mut Option<T>, value: T) {
    if slot.is_none() {
        *slot = Some(value);
    }
}

impl<'c> Options<'c> {
    fn apply(&mut self, directive: &'c Directive) {
        let origin = &directive.origin;
        match &directive.setting {
            Setting::HostName(v) => first(&mut self.host_name, (v.as_str(), origin)),
            Setting::User(v) => first(&mut self.user, v.as_str()),
            Setting::Port(v) => first(&mut self.port, *v),
            // The two lists accumulate over every matching block (ssh_config(5)).
            Setting::IdentityFile(v) => self.identity_files.push((v, origin)),
            Setting::CertificateFile(v) => self.certificate_files.push((v, origin)),
            Setting::IdentitiesOnly(v) => first(&mut self.identities_only, *v),
            Setting::IdentityAgent(v) => first(&mut self.identity_agent, (v, origin)),
            // ProxyJump and ProxyCommand share one "first wins", with the asymmetry measured on
            // OpenSSH 9.2 (`ssh -G`): an earlier ProxyCommand (even `none`) hides later ProxyJump
            // lines, an earlier ProxyJump hides later ProxyCommand lines, but `ProxyJump none`
            // only hides later ProxyJump lines.
            Setting::ProxyJump(list) => {
                if self.command.is_none() && self.jump.is_none() && !self.jump_none {
                    match list {
                        Some(list) => self.jump = Some(list),
                        None => self.jump_none = true,
                    }
                }
            }
            Setting::ProxyCommand(command) => {
                if self.jump.is_none() {
                    first(&mut self.command, (command, origin));
                }
            }
            Setting::ServerAliveInterval(v) => first(&mut self.server_alive_interval, *v),
            Setting::ServerAliveCountMax(v) => first(&mut self.server_alive_count_max, *v),
            Setting::ConnectTimeout(v) => first(&mut self.connect_timeout, *v),
            Setting::StrictHostKeyChecking(v) => first(&mut self.strict_host_key_checking, *v),
            Setting::UserKnownHostsFile(v) => first(&mut self.user_known_hosts_files, (v.as_slice(), origin)),
            Setting::GlobalKnownHostsFile(v) => first(&mut self.global_known_hosts_files, v.as_slice()),
            Setting::HostKeyAlias(v) => first(&mut self.host_key_alias, v.as_str()),
            Setting::Algorithms(category, list) => self.algorithms.keep_first(*category, list),
        }
    }

    fn route(&self) -> Route<'c> {
        if let Some(list) = self.jump {
            return Route::Jump(list);
        }
        match self.command {
            None | Some((ProxyCommand::None, _)) => Route::Direct,
            Some((ProxyCommand::SshW { dest, via }, _)) => Route::SshW(dest, via.as_deref()),
            Some((ProxyCommand::Command(raw), origin)) => Route::Command(raw, origin),
        }
    }

    /// Where the hop is described: the first matching block that names it, else any.
    fn origin(&self) -> Option<Origin> {
        let specific = self.blocks.iter().find(|(_, specific)| *specific);
        specific.or(self.blocks.first()).map(|(origin, _)| (*origin).clone())
    }
}

/// How a host is reached according to its own config.
enum Route<'c> {
    Direct,
    Jump(&'c [JumpSpec]),
    SshW(&'c JumpSpec, Option<&'c [JumpSpec]>),
    Command(&'c str, &'c Origin),
}

/// OpenSSH readconf.c `Host`: the block applies if some pattern matches and no negated one does.
fn host_matches(patterns: &[HostPattern], host: &str) -> Option<bool> {
    let mut specific = None;
    for p in patterns {
        if super::pattern::wildcard(host, &p.pattern) {
            if p.negated {
                return None;
            }
            specific = Some(specific.unwrap_or(false) || p.pattern != "*");
        }
    }
    specific
}

impl SshConfig {
    fn lookup(&self, host: &str) -> Options<'_> {
        let mut options = Options::default();
        let mut active = true;
        self.walk(self.loaded.root, host, &mut active, false, &mut options);
        options
    }

    /// readconf.c's `activep` walk. `never` is SSHCONF_NEVERMATCH: the file was included from a
    /// block that did not match, so none of its blocks may match either.
    fn walk<'c>(
        &'c self,
        file: usize,
        host: &str,
        active: &mut bool,
        never: bool,
        options: &mut Options<'c>,
    ) {
        let Some(file) = self.loaded.files.get(file) else { return };
        for item in &file.items {
            match item {
                Item::Host { patterns, origin } => {
                    let matched = if never { None } else { host_matches(patterns, host) };
                    *active = matched.is_some();
                    if let Some(specific) = matched {
                        options.blocks.push((origin, specific));
                    }
                }
                Item::Set(directive) if *active => options.apply(directive),
                Item::Set(_) => {}
                Item::Include(files) => {
                    // An included file's Host lines must not end the including block.
                    let outer = *active;
                    for &included in files {
                        self.walk(included, host, active, never || !outer, options);
                        *active = outer;
                    }
                }
            }
        }
    }

    pub(super) fn resolve_chain(&self, jumphost: &str) -> Result<Chain, Error> {
        if !self.lookup(jumphost).blocks.iter().any(|(_, specific)| *specific) {
            return Err(Error::UnknownHost {
                alias: jumphost.to_owned(),
                file: self.path.clone(),
                suggestion: self.suggest(jumphost),
            });
        }
        let mut hops = Vec::new();
        self.build(&JumpSpec::alias(jumphost), None, &mut Vec::new(), &mut hops)?;
        Ok(Chain { jumphost: jumphost.to_owned(), hops })
    }

    /// Appends the hops up to and including `spec`. `given` is a `-J` list that replaces the
    /// host's own ProxyJump/ProxyCommand (see the module doc); `stack` holds the names being
    /// resolved, outermost first, to catch cycles.
    fn build(
        &self,
        spec: &JumpSpec,
        given: Option<&[JumpSpec]>,
        stack: &mut Vec<String>,
        hops: &mut Vec<Hop>,
    ) -> Result<(), Error> {
        if stack.contains(&spec.host) {
            let mut path = stack.clone();
            path.push(spec.host.clone());
            return Err(Error::Cycle { path });
        }
        stack.push(spec.host.clone());
        let options = self.lookup(&spec.host);
        let mut command = None;
        match (given.filter(|list| !list.is_empty()), options.route()) {
            (Some(list), route) => {
                if !matches!(route, Route::Direct) {
                    tracing::debug!(host = %spec.host, "own ProxyJump/ProxyCommand ignored: reached through a ProxyJump list, as ssh does");
                }
                self.through(list, stack, hops)?;
            }
            (None, Route::Direct) => {}
            (None, Route::Jump(list)) => self.through(list, stack, hops)?,
            (None, Route::SshW(dest, via)) => self.build(dest, via, stack, hops)?,
            (None, Route::Command(raw, origin)) => command = Some((raw, origin)),
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
        hops.push(self.hop(spec, &options, command)?);
        stack.pop();
        Ok(())
    }

    /// `a,b,c`: `c` reached through `a,b`, i.e. `ssh -J a,b c`.
    fn through(&self, list: &[JumpSpec], stack: &mut Vec<String>, hops: &mut Vec<Hop>) -> Result<(), Error> {
        match list.split_last() {
            Some((last, before)) => self.build(last, Some(before), stack, hops),
            None => Ok(()),
        }
    }

    fn hop(
        &self,
        spec: &JumpSpec,
        options: &Options<'_>,
        command: Option<(&str, &Origin)>,
    ) -> Result<Hop, Error> {
        let alias = spec.host.clone();
        // The alias may come from the inventory or a ProxyJump entry: quoted (and escaped) unless
        // it is a plain name, so an odd one cannot garble the message or the log line.
        let shown = if alias.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:[]@".contains(c)) {
            alias.clone()
        } else {
            format!("{alias:?}")
        };
        let invalid = |origin: &Origin, option: &str, message: String| Error::Invalid {
            origin: origin.clone(),
            message: format!("{option} for {shown}: {message}"),
        };
        // OpenSSH lowercases the final host name (the alias match itself is case-sensitive).
        let host_name = match options.host_name {
            Some((value, origin)) => expand::percent(value, expand::HOST_NAME, &|_| alias.clone())
                .map_err(|e| invalid(origin, "HostName", e))?,
            None => alias.clone(),
        }
        .to_ascii_lowercase();
        let port = spec.port.or(options.port).unwrap_or(22);
        let user = spec.user.as_deref().or(options.user).unwrap_or(&self.local_user).to_owned();
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
        let global_known_hosts_files = match options.global_known_hosts_files {
            // Checked at load: only `~` can appear, and tilde() cannot fail on what passed.
            Some(values) => values
                .iter()
                .map(|v| expand::tilde(v, &self.home).map(|p| self.home.join(p)))
                .collect::<Result<_, _>>()
                .unwrap_or_default(),
            None => DEFAULT_GLOBAL_KNOWN_HOSTS.iter().map(PathBuf::from).collect(),
        };
        let transport = match command {
            Some((raw, origin)) => Transport::Command(
                expand::command(raw, &value_of).map_err(|e| invalid(origin, "ProxyCommand", e))?,
            ),
            None => Transport::Tcp,
        };
        Ok(Hop {
            identity_files,
            identities_only: options.identities_only.unwrap_or(false),
            identity_agent,
            certificate_files: paths(&options.certificate_files, "CertificateFile")?,
            transport,
            server_alive_interval: options.server_alive_interval.unwrap_or(DEFAULT_SERVER_ALIVE_INTERVAL),
            server_alive_count_max: options.server_alive_count_max.unwrap_or(DEFAULT_SERVER_ALIVE_COUNT_MAX),
            connect_timeout: options.connect_timeout.flatten(),
            strict_host_key_checking: options.strict_host_key_checking.unwrap_or(StrictHostKeyChecking::Yes),
            user_known_hosts_files,
            global_known_hosts_files,
            host_key_alias,
            algorithms: options.algorithms.clone(),
            origin: options.origin(),
            alias,
            host_name,
            port,
            user,
        })
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
                Item::Set(_) => {}
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
