//! `~`, `${VAR}` and `%` tokens, where ssh_config(5) allows them (TOKENS and ENVIRONMENT
//! VARIABLES sections), in OpenSSH's order: `~` first, then `${VAR}`, then `%x`
//! (ssh.c `tilde_expand_filename` + `default_client_percent_dollar_expand`).
//!
//! [`check`] runs at load, so a bad token is reported with every other bad line; the real
//! expansion runs per hop, when the values (`%h`, `%r`, ...) are known.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `HostName` accepts only `%h` (the alias) and `%%`.
pub(super) const HOST_NAME: &str = "h";
/// `ProxyCommand`.
pub(super) const COMMAND: &str = "hnpr";
/// `Match exec` (readconf.c `match_cfg_line`).
pub(super) const EXEC: &str = "CLdhiklnpru";
/// `IdentityFile`, `CertificateFile`, `IdentityAgent`, `UserKnownHostsFile`.
pub(super) const PATH: &str = "dhiknpru";
/// Tokens OpenSSH knows for paths that kharon does not compute (`%C` is a hash of the others,
/// `%j` the ProxyJump, `%l`/`%L` the local host name, `%T` the tun device).
const NOT_IMPLEMENTED: &str = "CjlLT";

/// Replaces `%x` tokens. `tokens` lists the letters allowed here; `value_of` gives their values.
pub(super) fn percent(
    value: &str,
    tokens: &str,
    value_of: &dyn Fn(char) -> String,
) -> Result<String, String> {
    percent_checked(value, tokens, &|t| Ok(value_of(t)))
}

/// Expands a `ProxyCommand` or (with `tokens` = [`EXEC`]) a `Match exec` command, which a shell
/// will run: every value substituted for a token is checked first ([`check_command_value`]), so
/// that a host or user name can never add shell syntax to the command. The config's own text is
/// the user's and is taken as written.
pub(super) fn command(raw: &str, tokens: &str, value_of: &dyn Fn(char) -> String) -> Result<String, String> {
    percent_checked(raw, tokens, &|t| {
        let value = value_of(t);
        check_command_value(t, &value)?;
        Ok(value)
    })
}

/// Whether `value` may replace token `%token` in a command line, by OpenSSH's rules for the
/// host and user names ssh(1) takes from its command line (ssh.c `valid_hostname`,
/// `valid_ruser`, added in 9.6 against the same injection): a host name (`%h`, `%n`, `%k`) must not
/// start with `-` or hold `'`, `` ` ``, `"`, `$`, `\`, `;`, `&`, `<`, `>`, `|`, `(`, `)`, `{`,
/// `}`, `,`, whitespace or control characters; a user name (`%r`) must not be empty or hold
/// `'`, `` ` ``, `"`, `;`, `&`, `<`, `>`, `|`, `(`, `)`, `{`, `}`, control characters, a `-`
/// after whitespace or a trailing `\`. Stricter than ssh for users: `$` is refused too, since
/// `sh` would expand `$VAR` and `${VAR}` and so change the command's words. `%p` is a number.
pub(super) fn check_command_value(token: char, value: &str) -> Result<(), String> {
    const HOST_META: &str = "'`\"$\\;&<>|(){},";
    const USER_META: &str = "'`\";&<>|(){}$";
    let refuse = |why: String| {
        Err(format!(
            "%{token} would be {value:?}, but {why}, so kharon does not run the command; fix the name where \
             it comes from (HostName, User, a ProxyJump entry or the cluster's jumphost)"
        ))
    };
    match token {
        'h' | 'n' | 'k' => {
            if value.starts_with('-') {
                return refuse("a host name must not start with '-'".to_owned());
            }
            if let Some(c) =
                value.chars().find(|&c| HOST_META.contains(c) || c.is_whitespace() || c.is_control())
            {
                return refuse(format!("a host name must not contain {c:?}"));
            }
        }
        'r' => {
            if value.is_empty() {
                return refuse("a user name must not be empty".to_owned());
            }
            if let Some(c) = value.chars().find(|&c| USER_META.contains(c) || c.is_control()) {
                return refuse(format!("a user name must not contain {c:?}"));
            }
            let chars: Vec<char> = value.chars().collect();
            if chars.windows(2).any(|w| w[0].is_whitespace() && w[1] == '-') {
                return refuse("a user name must not have a '-' after whitespace".to_owned());
            }
            if value.ends_with('\\') {
                return refuse("a user name must not end in '\\'".to_owned());
            }
        }
        _ => {}
    }
    Ok(())
}

fn percent_checked(
    value: &str,
    tokens: &str,
    value_of: &dyn Fn(char) -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some(t) if tokens.contains(t) => out.push_str(&value_of(t)?),
            Some(t) if tokens == PATH && NOT_IMPLEMENTED.contains(t) => {
                return Err(format!("token %{t} is not supported by kharon"));
            }
            Some(t) => return Err(format!("unknown token %{t} (this option accepts {})", list(tokens))),
            None => return Err("a lone % at the end; write %% for a literal %".to_owned()),
        }
    }
    Ok(out)
}

fn list(tokens: &str) -> String {
    std::iter::once("%%".to_owned())
        .chain(tokens.chars().map(|t| format!("%{t}")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Replaces `${VAR}` from `env`; a `$` not followed by `{` is literal, as in OpenSSH `dollar_expand`.
pub(super) fn dollar(value: &str, env: &mut dyn FnMut(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| "unterminated ${ (write ${NAME})".to_owned())?;
        let name = &after[..end];
        if !valid_env_name(name) {
            return Err(format!("invalid environment variable name ${{{name}}}"));
        }
        let found = env(name).ok_or_else(|| format!("${{{name}}} is not set in kharond's environment"))?;
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

pub(super) fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// `~` and `~/...`; `~user` would need the password database, so it is refused at load.
pub(super) fn tilde(value: &str, home: &Path) -> Result<String, String> {
    if value == "~" {
        return Ok(home.display().to_string());
    }
    if let Some(rest) = value.strip_prefix("~/") {
        return Ok(home.join(rest).display().to_string());
    }
    if value.starts_with('~') {
        return Err(format!("{value:?}: ~user paths are not supported; write the full path"));
    }
    Ok(value.to_owned())
}

/// Load-time validation of a value that will later go through [`percent`] (and [`dollar`] and
/// [`tilde`] if `paths`). Returns the environment variables it names, so that `load` can take
/// a snapshot of exactly those.
pub(super) fn check(value: &str, tokens: &str, paths: bool) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    if paths {
        tilde(value, Path::new("/"))?;
        dollar(value, &mut |name| {
            names.push(name.to_owned());
            Some(String::new())
        })?;
    }
    percent(value, tokens, &|_| String::new())?;
    Ok(names)
}

/// A path option: `~`, `${VAR}`, then `%` tokens. A relative result is taken relative to the
/// home directory: OpenSSH would use its working directory, which for a daemon means nothing.
pub(super) fn path(
    value: &str,
    home: &Path,
    env: &HashMap<String, String>,
    value_of: &dyn Fn(char) -> String,
) -> Result<PathBuf, String> {
    let value = tilde(value, home)?;
    let value = dollar(&value, &mut |name| env.get(name).cloned())?;
    let value = percent(&value, PATH, value_of)?;
    Ok(home.join(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: char) -> String {
        match t {
            'h' => "bastion.example".into(),
            'r' => "alice".into(),
            'p' => "2222".into(),
            other => format!("<{other}>"),
        }
    }

    #[test]
    fn percent_replaces_known_tokens_and_refuses_others() {
        assert_eq!(percent("%r@%h:%p 100%%", COMMAND, &values).unwrap(), "alice@bastion.example:2222 100%");
        assert_eq!(
            percent("%h-%x", HOST_NAME, &values).unwrap_err(),
            "unknown token %x (this option accepts %%, %h)"
        );
        assert_eq!(percent("%C", PATH, &values).unwrap_err(), "token %C is not supported by kharon");
        assert_eq!(
            percent("50%", PATH, &values).unwrap_err(),
            "a lone % at the end; write %% for a literal %"
        );
    }

    #[test]
    fn dollar_needs_braces_and_a_value() {
        let mut env = |n: &str| (n == "XDG_RUNTIME_DIR").then(|| "/run/user/1000".to_owned());
        assert_eq!(dollar("${XDG_RUNTIME_DIR}/agent $HOME", &mut env).unwrap(), "/run/user/1000/agent $HOME");
        assert_eq!(dollar("${NOPE}/x", &mut env).unwrap_err(), "${NOPE} is not set in kharond's environment");
        assert_eq!(dollar("${1X}", &mut env).unwrap_err(), "invalid environment variable name ${1X}");
        assert_eq!(dollar("${X", &mut env).unwrap_err(), "unterminated ${ (write ${NAME})");
    }

    #[test]
    fn tilde_and_relative_paths_are_under_home() {
        let home = Path::new("/home/u");
        let env = HashMap::new();
        assert_eq!(path("~/.ssh/id", home, &env, &values).unwrap(), Path::new("/home/u/.ssh/id"));
        assert_eq!(path("keys/%r", home, &env, &values).unwrap(), Path::new("/home/u/keys/alice"));
        assert_eq!(path("/abs", home, &env, &values).unwrap(), Path::new("/abs"));
        assert!(path("~bob/id", home, &env, &values).unwrap_err().contains("~user paths are not supported"));
    }

    #[test]
    fn check_collects_variable_names() {
        assert_eq!(check("${A}/x/${B_2}/%h", PATH, true).unwrap(), vec!["A", "B_2"]);
        assert!(check("%h.%d", HOST_NAME, false).is_err());
    }
}
