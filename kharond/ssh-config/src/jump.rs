//! Jump specifications: a `ProxyJump` list of `[user@]host[:port]` / `ssh://[user@]host[:port]`
//! (OpenSSH `parse_jump`), and spotting a `ProxyCommand` that only runs `ssh -W %h:%p HOST`,
//! which is a jump to HOST that kharon can make natively instead of spawning `ssh`.

use super::lexer;

/// One hop as named in ProxyJump (or an `ssh -W` ProxyCommand). `user`/`port`, when given,
/// override what the config says for `host`, as `ssh -l`/`-p` do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct JumpSpec {
    pub user: Option<String>,
    /// The name looked up in the config (an alias, or a real host name).
    pub host: String,
    pub port: Option<u16>,
}

impl JumpSpec {
    pub(super) fn alias(host: &str) -> Self {
        JumpSpec { user: None, host: host.to_owned(), port: None }
    }
}

/// A parsed `ProxyCommand`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ProxyCommand {
    /// `ProxyCommand none`: connect directly (and ignore later ProxyJump lines).
    None,
    /// `ssh [-q -x -T -N -a -A -C -v] [-l user] [-p port] [-J jumps] -W %h:%p [--] [user@]host`,
    /// the options also after the host (as ssh reads them) unless `--` came first.
    SshW { dest: JumpSpec, via: Option<Vec<JumpSpec>> },
    /// Anything else, kept verbatim for `sh -c` (tokens still unexpanded).
    Command(String),
}

pub(super) fn parse_port(s: &str) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(port) if port > 0 => Ok(port),
        _ => Err(format!("bad port {s:?} (expected 1-65535)")),
    }
}

/// A ProxyJump value: `none`, or a comma list, first hop first. `#` ends it, as in OpenSSH.
pub(super) fn parse_list(raw: &str) -> Result<Option<Vec<JumpSpec>>, String> {
    let raw = raw.split('#').next().unwrap_or_default().trim();
    if raw.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    raw.split(',').map(|entry| parse_spec(entry.trim())).collect::<Result<Vec<_>, _>>().map(Some)
}

pub(super) fn parse_spec(s: &str) -> Result<JumpSpec, String> {
    let invalid = |why: &str| format!("invalid jump host {s:?}: {why}");
    if s.is_empty() {
        return Err("empty entry in the jump host list".to_owned());
    }
    let rest = match s.get(..6) {
        Some(scheme) if scheme.eq_ignore_ascii_case("ssh://") => {
            // OpenSSH `parse_ssh_uri`: a path other than "/" is an error.
            let rest = &s[6..];
            rest.strip_suffix('/').unwrap_or(rest)
        }
        _ => s,
    };
    let (user, host_port) = match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    };
    if user == Some("") {
        return Err(invalid("empty user name before '@'"));
    }
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or_else(|| invalid("missing ']'"))?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or_else(|| invalid("expected ':' after ']'"))?)),
        }
    } else {
        match host_port.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() || host.contains(|c: char| c.is_whitespace() || matches!(c, '/' | ',' | '"' | '\'')) {
        return Err(invalid("bad host name"));
    }
    let port = port.map(parse_port).transpose().map_err(|e| invalid(&e))?;
    Ok(JumpSpec { user: user.map(str::to_owned), host: host.to_owned(), port })
}

pub(super) fn parse_proxy_command(raw: &str) -> ProxyCommand {
    // OpenSSH compares with "none" exactly.
    if raw == "none" {
        return ProxyCommand::None;
    }
    match ssh_w(raw) {
        Some((dest, via)) => ProxyCommand::SshW { dest, via },
        None => ProxyCommand::Command(raw.to_owned()),
    }
}

/// Recognises the `ssh -W` forms; `None` means "run it as a command". Deliberately narrow:
/// whatever we do not understand is left to the real `ssh` (still correct, only slower), so a
/// first hop never silently loses a flag. Later hops can't use a command, see `chain`.
fn ssh_w(raw: &str) -> Option<(JumpSpec, Option<Vec<JumpSpec>>)> {
    // Shell syntax beyond plain words and quotes means the shell has work to do.
    const SHELL: [char; 17] =
        ['$', '`', ';', '|', '&', '<', '>', '(', ')', '{', '}', '*', '?', '~', '!', '\\', '\n'];
    if raw.contains(SHELL) {
        return None;
    }
    let words = lexer::words(raw).ok()?;
    let mut words = words.iter().map(String::as_str).peekable();
    if words.peek() == Some(&"exec") {
        words.next();
    }
    let argv0 = words.next()?;
    if argv0 != "ssh" && !argv0.ends_with("/ssh") {
        return None;
    }
    let (mut forward, mut user, mut port, mut via, mut dest) = (None, None, None, None, None);
    let mut terminated = false;
    while let Some(word) = words.next() {
        if dest.is_some() && (terminated || word == "--" || !word.starts_with('-')) {
            // ssh reads options after the destination too (`ssh jump -W %h:%p`), but a word
            // that is not one starts a remote command.
            return None;
        }
        if word == "--" {
            terminated = true;
            dest = Some(words.next()?);
            continue;
        }
        let Some(flags) = word.strip_prefix('-').filter(|f| !f.is_empty()) else {
            dest = Some(word);
            continue;
        };
        for (i, flag) in flags.char_indices() {
            match flag {
                // Quiet, no X11, no tty, no command, no/with agent forwarding, compression, verbose:
                // none of them changes where or how the jump host is reached.
                'q' | 'x' | 'T' | 'N' | 'a' | 'A' | 'C' | 'v' => {}
                'W' | 'l' | 'p' | 'J' => {
                    let attached = &flags[i + 1..];
                    let value = if attached.is_empty() { words.next()? } else { attached };
                    match flag {
                        'W' => forward = Some(value),
                        'l' => user = Some(value),
                        'p' => port = Some(value),
                        _ => via = Some(value),
                    }
                    break;
                }
                _ => return None,
            }
        }
    }
    if !matches!(forward, Some("%h:%p" | "[%h]:%p")) {
        return None;
    }
    let dest = dest?;
    if [Some(dest), user, port, via].iter().flatten().any(|w| w.contains('%')) {
        return None;
    }
    let is_uri = dest.get(..6).is_some_and(|s| s.eq_ignore_ascii_case("ssh://"));
    if !is_uri && dest.contains(':') {
        // `ssh host:22` is not a port for ssh; leave such oddities to ssh.
        return None;
    }
    let mut spec = parse_spec(dest).ok()?;
    if let Some(user) = user {
        if spec.user.is_some() {
            return None;
        }
        spec.user = Some(user.to_owned());
    }
    if let Some(port) = port {
        if spec.port.is_some() {
            return None;
        }
        spec.port = Some(parse_port(port).ok()?);
    }
    let via = match via {
        // `-J none` would mean "ignore the config's ProxyJump": rare, left to ssh.
        Some(list) => Some(parse_list(list).ok()??),
        None => None,
    };
    Some((spec, via))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(user: Option<&str>, host: &str, port: Option<u16>) -> JumpSpec {
        JumpSpec { user: user.map(str::to_owned), host: host.to_owned(), port }
    }

    #[test]
    fn jump_specs() {
        assert_eq!(parse_spec("bastion"), Ok(spec(None, "bastion", None)));
        assert_eq!(parse_spec("bob@b:2200"), Ok(spec(Some("bob"), "b", Some(2200))));
        assert_eq!(parse_spec("ssh://bob@b:2200/"), Ok(spec(Some("bob"), "b", Some(2200))));
        assert_eq!(parse_spec("[::1]:22"), Ok(spec(None, "::1", Some(22))));
        assert_eq!(parse_spec("a@b@c"), Ok(spec(Some("a@b"), "c", None)));
        assert_eq!(
            parse_spec("b:0").unwrap_err(),
            "invalid jump host \"b:0\": bad port \"0\" (expected 1-65535)"
        );
        assert_eq!(parse_spec("@b").unwrap_err(), "invalid jump host \"@b\": empty user name before '@'");
        assert_eq!(parse_list("NONE # no jump"), Ok(None));
        assert_eq!(parse_list("a, b").unwrap().unwrap().len(), 2);
        assert_eq!(parse_list("a,,b").unwrap_err(), "empty entry in the jump host list");
    }

    #[test]
    fn ssh_w_forms_become_jumps() {
        for raw in [
            "ssh -W %h:%p -- j1",
            "ssh -W %h:%p j1",
            "ssh -W '[%h]:%p' j1",
            "ssh -W [%h]:%p j1",
            "exec /usr/bin/ssh -qxT -W%h:%p j1",
            "ssh -q -W \"%h:%p\" j1",
            "ssh j1 -W %h:%p",
            "ssh -q j1 -W [%h]:%p",
        ] {
            assert_eq!(
                parse_proxy_command(raw),
                ProxyCommand::SshW { dest: spec(None, "j1", None), via: None },
                "{raw}"
            );
        }
        assert_eq!(
            parse_proxy_command("ssh -l bob -p 2222 -J a,b -W %h:%p j1"),
            ProxyCommand::SshW {
                dest: spec(Some("bob"), "j1", Some(2222)),
                via: Some(vec![spec(None, "a", None), spec(None, "b", None)])
            }
        );
    }

    #[test]
    fn other_commands_stay_commands() {
        for raw in [
            "nc -X 5 -x proxy:1080 %h %p",
            "ssh -W %h:%p -F ~/.ssh/other j1",
            "ssh -W 10.0.0.1:22 j1",
            "ssh -W %h:%p j1 nc",
            "ssh -i key -W %h:%p j1",
            "ssh -W %h:%p $JUMP",
            "ssh -W %h:%p j1:2222",
            "ssh -W %h:%p %r@j1",
            "ssh j1 -W %h:%p extra",
            "ssh -- j1 -W %h:%p",
            "ssh j1 -- -W %h:%p",
            "ssh j1 nc %h %p",
        ] {
            assert_eq!(parse_proxy_command(raw), ProxyCommand::Command(raw.to_owned()), "{raw}");
        }
        assert_eq!(parse_proxy_command("none"), ProxyCommand::None);
    }
}
