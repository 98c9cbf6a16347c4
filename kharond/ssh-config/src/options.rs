//! Which values apply to one name: OpenSSH 9.2's walk over the config (readconf.c, "first
//! obtained value wins"), with `Match` evaluated, `HostName` applied and the host name
//! canonicalized between two passes, as ssh.c `main` does.
//!
//! # The two passes
//! The first pass matches `Host` patterns against the name as given. Then the host name is
//! settled (`HostName` with `%h`, lowercased, canonicalized: `canonical`). If canonicalization is
//! on, or any `Match` line names `final`, the config is read a second time *on top of* the first
//! pass's values (OpenSSH does not reset them, so the second pass only fills what is still
//! unset and adds IdentityFiles): `Host` patterns and `Match host` now see the final host name,
//! and `Match canonical` / `Match final` match. Measured with `ssh -G` (OpenSSH 9.2) and kept
//! that way by the `ssh_config_oracle` e2e test.
//!
//! # Matching a `Match`
//! `criteria` decides; this module gives it the subject as OpenSSH computes it at that line
//! (the HostName and User set so far) and runs `exec` commands through [`Machine`](super::Machine), with every
//! token value checked like a ProxyCommand's (`expand::command`). A line kharon cannot decide
//! for this name is an error for this name only (`Error::Invalid` with the line's file:line);
//! the caller refuses that jump host and no other.

use super::canonical::{self, Mode};
use super::criteria::{self, Condition, Criterion, Subject, Verdict};
use super::expand;
use super::jump::{JumpSpec, ProxyCommand};
use super::load::{Agent, Directive, HostPattern, Item, Setting};
use super::{AddressFamily, Algorithms, Error, Origin, SshConfig, StrictHostKeyChecking};
use std::time::Duration;

/// The values that apply to one name, each the first one obtained, with where it was written.
#[derive(Default)]
pub(super) struct Options<'c> {
    pub host_name: Option<(&'c str, &'c Origin)>,
    /// The host name ssh connects to (HostName applied, lowercased, canonicalized), set after
    /// the first pass.
    pub final_host: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    pub identity_files: Vec<(&'c str, &'c Origin)>,
    pub identities_only: Option<bool>,
    pub identity_agent: Option<(&'c Agent, &'c Origin)>,
    pub certificate_files: Vec<(&'c str, &'c Origin)>,
    pub jump: Option<&'c [JumpSpec]>,
    /// The line `jump` came from (for a `-J` list: the outer hop's ProxyJump line).
    pub jump_origin: Option<&'c Origin>,
    pub jump_none: bool,
    pub command: Option<(&'c ProxyCommand, &'c Origin)>,
    pub server_alive_interval: Option<Duration>,
    pub server_alive_count_max: Option<u32>,
    pub connect_timeout: Option<Option<Duration>>,
    pub strict_host_key_checking: Option<StrictHostKeyChecking>,
    pub user_known_hosts_files: Option<(&'c [String], &'c Origin)>,
    pub global_known_hosts_files: Option<&'c [String]>,
    pub host_key_alias: Option<&'c str>,
    pub address_family: Option<AddressFamily>,
    pub bind_address: Option<(&'c str, &'c Origin)>,
    pub bind_interface: Option<(&'c str, &'c Origin)>,
    pub algorithms: Algorithms,
    pub canonicalize: Option<(Mode, &'c Origin)>,
    pub canonical_domains: Option<&'c [String]>,
    pub canonicalize_max_dots: Option<u32>,
    pub canonicalize_fallback_local: Option<bool>,
    pub permitted_cnames: Option<&'c [(String, String)]>,
    pub use_keychain: Option<bool>,
    pub batch_mode: Option<(bool, &'c Origin)>,
    pub kbd_interactive: Option<bool>,
    pub password: Option<bool>,
    pub password_prompts: Option<u32>,
    pub preferred_authentications: Option<&'c [String]>,
    pub required_rsa_size: Option<u32>,
    /// `RekeyLimit`'s size (0: `default`) and its interval, each the first obtained: a line
    /// without an interval (or with `none`) leaves it to a later one, as in OpenSSH.
    pub rekey_data: Option<u64>,
    pub rekey_interval: Option<Duration>,
    /// Blocks that applied: where, and whether they name this host (a pattern other than a bare
    /// `*`, or a `Match host`/`originalhost`).
    pub blocks: Vec<(&'c Origin, bool)>,
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
            Setting::User(v) => first(&mut self.user, v.clone()),
            Setting::Port(v) => first(&mut self.port, *v),
            // The two lists accumulate over every matching block (ssh_config(5)); a path already
            // listed, as written, is not added again (readconf.c `add_identity_file`), which
            // matters when the second pass reads the same lines again.
            Setting::IdentityFile(v) => {
                if !self.identity_files.iter().any(|(seen, _)| seen == v) {
                    self.identity_files.push((v, origin));
                }
            }
            Setting::CertificateFile(v) => {
                if !self.certificate_files.iter().any(|(seen, _)| seen == v) {
                    self.certificate_files.push((v, origin));
                }
            }
            Setting::IdentitiesOnly(v) => first(&mut self.identities_only, *v),
            Setting::IdentityAgent(v) => first(&mut self.identity_agent, (v, origin)),
            // ProxyJump and ProxyCommand share one "first wins", with the asymmetry measured on
            // OpenSSH 9.2 (`ssh -G`): an earlier ProxyCommand (even `none`) hides later ProxyJump
            // lines, an earlier ProxyJump hides later ProxyCommand lines, but `ProxyJump none`
            // only hides later ProxyJump lines.
            Setting::ProxyJump(list) => {
                if self.command.is_none() && self.jump.is_none() && !self.jump_none {
                    match list {
                        Some(list) => {
                            self.jump = Some(list);
                            self.jump_origin = Some(origin);
                        }
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
            Setting::AddressFamily(v) => first(&mut self.address_family, *v),
            Setting::BindAddress(v) => first(&mut self.bind_address, (v.as_str(), origin)),
            Setting::BindInterface(v) => first(&mut self.bind_interface, (v.as_str(), origin)),
            Setting::Algorithms(category, list, as_given) => {
                self.algorithms.keep_first(*category, list, *as_given, origin)
            }
            Setting::CanonicalizeHostname(mode) => first(&mut self.canonicalize, (*mode, origin)),
            Setting::CanonicalDomains(v) => first(&mut self.canonical_domains, v.as_slice()),
            Setting::CanonicalizeMaxDots(v) => first(&mut self.canonicalize_max_dots, *v),
            Setting::CanonicalizeFallbackLocal(v) => first(&mut self.canonicalize_fallback_local, *v),
            Setting::CanonicalizePermittedCnames(v) => first(&mut self.permitted_cnames, v.as_slice()),
            Setting::UseKeychain(v) => first(&mut self.use_keychain, *v),
            Setting::BatchMode(v) => first(&mut self.batch_mode, (*v, origin)),
            Setting::KbdInteractiveAuthentication(v) => first(&mut self.kbd_interactive, *v),
            Setting::PasswordAuthentication(v) => first(&mut self.password, *v),
            Setting::NumberOfPasswordPrompts(v) => first(&mut self.password_prompts, *v),
            Setting::PreferredAuthentications(v) => first(&mut self.preferred_authentications, v.as_slice()),
            Setting::RequiredRsaSize(v) => first(&mut self.required_rsa_size, *v),
            Setting::RekeyLimit(data, interval) => {
                first(&mut self.rekey_data, *data);
                if let Some(interval) = interval {
                    first(&mut self.rekey_interval, *interval);
                }
            }
        }
    }

    /// Neither ProxyJump (not even `none`, as in OpenSSH 9.2) nor a ProxyCommand other than
    /// `none`: what `CanonicalizeHostname yes` needs.
    fn direct(&self) -> bool {
        self.jump.is_none() && !self.jump_none && matches!(self.command, None | Some((ProxyCommand::None, _)))
    }

    /// Where the hop is described: the first matching block that names it, else any.
    pub fn origin(&self) -> Option<Origin> {
        let specific = self.blocks.iter().find(|(_, specific)| *specific);
        specific.or(self.blocks.first()).map(|(origin, _)| (*origin).clone())
    }

    /// Whether a block names this host, as opposed to `Host *` or `Match all` and the like.
    pub fn named(&self) -> bool {
        self.blocks.iter().any(|(_, specific)| *specific)
    }
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

/// A `Match` that names hosts.
fn names_hosts(conditions: &[Condition]) -> bool {
    conditions.iter().any(|c| {
        !c.negated && matches!(&c.criterion, Criterion::Host(p) | Criterion::OriginalHost(p) if p != "*")
    })
}

/// One reading of the config.
struct Pass<'a> {
    /// What `Host` patterns match: the name as given, then the final host name.
    host: &'a str,
    /// The name as given (`Match originalhost`, `%n`).
    original: &'a str,
    final_pass: bool,
    /// The name as errors show it.
    shown: &'a str,
}

impl SshConfig {
    /// The options for `spec` (its `user@`/`:port` act like `ssh -l`/`-p`), reached through
    /// `given` when that is a non-empty `-J` list (which then replaces the host's own
    /// ProxyJump/ProxyCommand, as on ssh's command line). Runs `Match exec` commands and, for
    /// CanonicalizeHostname, name lookups.
    pub(super) fn options<'c>(
        &'c self,
        spec: &JumpSpec,
        given: Option<(&'c [JumpSpec], &'c Origin)>,
        shown: &str,
    ) -> Result<Options<'c>, Error> {
        let alias = spec.host.as_str();
        let mut options = Options { user: spec.user.clone(), port: spec.port, ..Options::default() };
        if let Some((list, origin)) = given.filter(|(list, _)| !list.is_empty()) {
            options.jump = Some(list);
            options.jump_origin = Some(origin);
        }

        let first_pass = Pass { host: alias, original: alias, final_pass: false, shown };
        self.walk(self.loaded.root, &first_pass, &mut true, false, &mut options)?;

        let host = match options.host_name {
            Some((value, origin)) => expand::percent(value, expand::HOST_NAME, &|_| alias.to_owned())
                .map_err(|e| invalid(origin, "HostName", shown, e))?,
            None => alias.to_owned(),
        };
        let mode = options.canonicalize.map(|(mode, _)| mode).unwrap_or_default();
        let rules = canonical::Rules {
            mode,
            domains: options.canonical_domains.unwrap_or_default(),
            max_dots: options.canonicalize_max_dots.unwrap_or(1),
            fallback_local: options.canonicalize_fallback_local.unwrap_or(true),
            permitted_cnames: options.permitted_cnames.unwrap_or_default(),
            direct: options.direct(),
            family: options.address_family.unwrap_or_default(),
        };
        let settled = canonical::host_name(&host, &rules, self.machine.as_ref());
        let host = match (settled, options.canonicalize) {
            (Ok(host), _) => host,
            (Err(e), Some((_, origin))) => return Err(invalid(origin, "CanonicalizeHostname", shown, e)),
            // Only `CanonicalizeFallbackLocal no` fails, and only with canonicalization on.
            (Err(_), None) => host.to_ascii_lowercase(),
        };
        options.final_host = Some(host.clone());

        if self.loaded.wants_final || mode != Mode::No {
            let second = Pass { host: &host, original: alias, final_pass: true, shown };
            self.walk(self.loaded.root, &second, &mut true, false, &mut options)?;
        }
        Ok(options)
    }

    /// readconf.c's `activep` walk. `never` is SSHCONF_NEVERMATCH: the file was included from a
    /// block that did not match, so none of its blocks may match either.
    fn walk<'c>(
        &'c self,
        file: usize,
        pass: &Pass<'_>,
        active: &mut bool,
        never: bool,
        options: &mut Options<'c>,
    ) -> Result<(), Error> {
        let Some(file) = self.loaded.files.get(file) else { return Ok(()) };
        for item in &file.items {
            match item {
                Item::Host { patterns, origin } => {
                    let matched = if never { None } else { host_matches(patterns, pass.host) };
                    *active = matched.is_some();
                    if let Some(specific) = matched {
                        options.blocks.push((origin, specific));
                    }
                }
                Item::Match { conditions, origin } => {
                    // OpenSSH still evaluates such a line (running its `exec`s), but the block
                    // cannot apply, so its outcome changes nothing: kharon runs nothing for it.
                    *active = !never && self.matches(conditions, origin, pass, options)?;
                    if *active {
                        options.blocks.push((origin, names_hosts(conditions)));
                    }
                }
                Item::Set(directive) if *active => options.apply(directive),
                Item::Set(_) => {}
                Item::Include(files) => {
                    // An included file's Host and Match lines must not end the including block.
                    let outer = *active;
                    for &included in files {
                        self.walk(included, pass, active, never || !outer, options)?;
                        *active = outer;
                    }
                }
            }
        }
        Ok(())
    }

    fn matches(
        &self,
        conditions: &[Condition],
        origin: &Origin,
        pass: &Pass<'_>,
        options: &Options<'_>,
    ) -> Result<bool, Error> {
        // readconf.c `match_cfg_line`: the HostName set so far (with %h) in the first pass,
        // the final host name in the second.
        let host = match (&options.final_host, options.host_name) {
            (Some(host), _) if pass.final_pass => host.clone(),
            (_, Some((value, _))) => expand::percent(value, expand::HOST_NAME, &|_| pass.host.to_owned())
                .unwrap_or_else(|_| value.to_owned()),
            _ => pass.host.to_owned(),
        };
        let user = options.user.clone().unwrap_or_else(|| self.local_user.clone());
        let subject = Subject {
            host: &host,
            original_host: pass.original,
            user: &user,
            local_user: &self.local_user,
            final_pass: pass.final_pass,
        };
        let port = options.port.unwrap_or(22).to_string();
        let key_alias = options.host_key_alias.unwrap_or(&host);
        let short_host = self.local_host.split('.').next().unwrap_or_default();
        let value_of = |token: char| match token {
            'C' => connection_hash(&self.local_host, &host, &port, &user),
            'L' => short_host.to_owned(),
            'd' => self.home.display().to_string(),
            'h' => host.clone(),
            'k' => key_alias.to_owned(),
            'l' => self.local_host.clone(),
            'n' => pass.original.to_owned(),
            'p' => port.clone(),
            'r' => user.clone(),
            'u' => self.local_user.clone(),
            'i' => self.uid.to_string(),
            _ => String::new(),
        };
        let mut exec = |raw: &str| -> Result<bool, String> {
            let command = expand::command(raw, expand::EXEC, &value_of)?;
            let result = self.machine.exec(&self.shell, &command, self.exec_timeout);
            tracing::debug!(%origin, host = pass.shown, command, ?result, "Match exec");
            result.map_err(|e| format!("{command:?}: {e}"))
        };
        let verdict = criteria::evaluate(conditions, &subject, &mut exec)
            .map_err(|e| invalid(origin, "Match exec", pass.shown, e))?;
        match verdict {
            Verdict::Applies => Ok(true),
            Verdict::Skip => Ok(false),
            Verdict::Undecidable(criterion) => {
                let name = criterion.trim_start_matches('!').split(' ').next().unwrap_or_default();
                Err(Error::Invalid {
                    origin: origin.clone(),
                    message: format!(
                        "Match {criterion}: kharon cannot evaluate this for {shown} ({why}), so it does not \
                         use {shown} (other jump hosts are not affected); remove the criterion, or change \
                         the line so that it does not apply to {shown}",
                        shown = pass.shown,
                        why = criteria::why_unsupported(name),
                    ),
                })
            }
        }
    }
}

fn invalid(origin: &Origin, option: &str, shown: &str, message: String) -> Error {
    Error::Invalid { origin: origin.clone(), message: format!("{option} for {shown}: {message}") }
}

/// OpenSSH `ssh_connection_hash` (`%C`): SHA-1 of local host, host, port and user, in hex.
fn connection_hash(local_host: &str, host: &str, port: &str, user: &str) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    for part in [local_host, host, port, user] {
        context.update(part.as_bytes());
    }
    context.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_hash_is_openssh_percent_c() {
        // printf %s vmbastion22alice | sha1sum
        assert_eq!(
            connection_hash("vm", "bastion", "22", "alice"),
            "df0ebfb102565ff6a9324007efa1b55fedc79d39"
        );
    }
}
