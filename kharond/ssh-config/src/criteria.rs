//! `Match` lines (ssh_config(5) "Match", OpenSSH 9.2 readconf.c `match_cfg_line`): their
//! criteria parsed at load, and the decision, per host and pass, whether the block applies.
//!
//! Criteria are ANDed left to right, `!` negates one. `all` matches always (alone, or after at
//! most one other criterion, as OpenSSH allows), `canonical` and `final` only in the second pass
//! (see `options`), `host` and `originalhost` are host pattern lists matched case-insensitively,
//! `user` and `localuser` pattern lists matched as written, and `exec` runs a command, but only
//! while every criterion before it has matched, as OpenSSH does.
//!
//! Criteria that would need kharon to guess (`tagged`, `localnetwork`, `version`,
//! `sessiontype`, `command`, anything unknown) make the block [`Verdict::Undecidable`] for a
//! host when nothing else on the line already rules the host out; the caller refuses that host
//! only. Knows nothing of files, processes or options: the caller gives the subject and runs
//! `exec`.

use super::pattern;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Criterion {
    All,
    Canonical,
    Final,
    Host(String),
    OriginalHost(String),
    User(String),
    LocalUser(String),
    /// The command as written (tokens unexpanded).
    Exec(String),
    /// A criterion kharon cannot evaluate: its name as written, and its argument.
    Unsupported {
        name: String,
        arg: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Condition {
    pub negated: bool,
    pub criterion: Criterion,
}

/// Criteria OpenSSH (9.2 or later) knows and kharon cannot evaluate, with the reason.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("tagged", "it matches the tag ssh is started with (-P), which a tunnel does not have"),
    ("localnetwork", "it depends on the local network addresses at the moment ssh starts"),
    ("version", "it compares OpenSSH's own version, which kharon is not"),
    ("sessiontype", "it depends on the kind of ssh session (shell, subsystem), which a tunnel does not have"),
    ("command", "it matches the remote command, which a tunnel does not have"),
];

/// Why `name` cannot be evaluated, for the refusal message.
pub(super) fn why_unsupported(name: &str) -> &'static str {
    UNSUPPORTED
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(name))
        .map(|(_, why)| *why)
        .unwrap_or("it is not a Match criterion kharon knows")
}

/// A `Match` line's words (quotes removed, comment dropped) → its conditions. Errors are the
/// lines OpenSSH itself refuses ("Bad Match condition"), so they fail the file as any bad line.
pub(super) fn parse(args: &[String]) -> Result<Vec<Condition>, String> {
    let mut out = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        let (negated, name) = match word.strip_prefix('!') {
            Some(rest) => (true, rest),
            None => (false, word.as_str()),
        };
        let lower = name.to_ascii_lowercase();
        let criterion = match lower.as_str() {
            "all" => {
                if out.len() > 1 || words.next().is_some() {
                    return Err(format!("Match: '{word}' cannot be combined with other Match criteria"));
                }
                Criterion::All
            }
            "canonical" => Criterion::Canonical,
            "final" => Criterion::Final,
            _ => {
                let arg = words.next().cloned();
                let needs = || format!("Match: missing argument for {name}");
                match lower.as_str() {
                    "host" => Criterion::Host(arg.ok_or_else(needs)?),
                    "originalhost" => Criterion::OriginalHost(arg.ok_or_else(needs)?),
                    "user" => Criterion::User(arg.ok_or_else(needs)?),
                    "localuser" => Criterion::LocalUser(arg.ok_or_else(needs)?),
                    "exec" => Criterion::Exec(arg.ok_or_else(needs)?),
                    _ => Criterion::Unsupported { name: name.to_owned(), arg },
                }
            }
        };
        out.push(Condition { negated, criterion });
    }
    if out.is_empty() {
        return Err("Match needs at least one criterion (e.g. Match host NAME, or Match all)".to_owned());
    }
    Ok(out)
}

/// Whether a line names `final` (so OpenSSH makes a second pass, whatever the line's outcome).
pub(super) fn wants_final(conditions: &[Condition]) -> bool {
    conditions.iter().any(|c| c.criterion == Criterion::Final)
}

/// What a `Match` is evaluated against, as OpenSSH computes it at that line.
pub(super) struct Subject<'a> {
    /// `Match host`: the HostName set so far (tokens expanded), else the name being looked up;
    /// in the second pass, the final (canonical) host name.
    pub host: &'a str,
    /// `Match originalhost`: the name as given.
    pub original_host: &'a str,
    /// `Match user`: the User set so far, else the local user.
    pub user: &'a str,
    pub local_user: &'a str,
    pub final_pass: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Applies,
    Skip,
    /// The block applies unless this criterion (as written, with its argument) is false.
    Undecidable(String),
}

/// Evaluates a line. `exec` runs a command (as written) and says whether it exited 0; it is
/// only called while everything before it matched and nothing undecidable came first.
pub(super) fn evaluate(
    conditions: &[Condition],
    subject: &Subject<'_>,
    exec: &mut dyn FnMut(&str) -> Result<bool, String>,
) -> Result<Verdict, String> {
    let mut result = true;
    let mut undecidable: Option<String> = None;
    for Condition { negated, criterion } in conditions {
        let matched = match criterion {
            Criterion::All => true,
            Criterion::Canonical | Criterion::Final => subject.final_pass,
            Criterion::Host(list) => pattern::list_match(subject.host, list, true),
            Criterion::OriginalHost(list) => pattern::list_match(subject.original_host, list, true),
            Criterion::User(list) => pattern::list_match(subject.user, list, false),
            Criterion::LocalUser(list) => pattern::list_match(subject.local_user, list, false),
            Criterion::Exec(command) => {
                if !result {
                    continue;
                }
                if undecidable.is_some() {
                    // Whether ssh would run it depends on the undecidable criterion before it.
                    continue;
                }
                exec(command)?
            }
            Criterion::Unsupported { name, arg } => {
                if undecidable.is_none() {
                    let bang = if *negated { "!" } else { "" };
                    undecidable = Some(match arg {
                        Some(arg) => format!("{bang}{name} {arg}"),
                        None => format!("{bang}{name}"),
                    });
                }
                continue;
            }
        };
        if matched == *negated {
            result = false;
        }
    }
    Ok(match (result, undecidable) {
        (false, _) => Verdict::Skip,
        (true, Some(criterion)) => Verdict::Undecidable(criterion),
        (true, None) => Verdict::Applies,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(s: &str) -> Result<Vec<Condition>, String> {
        parse(&s.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
    }

    fn subject(final_pass: bool) -> Subject<'static> {
        Subject {
            host: "Bastion.Example",
            original_host: "bastion",
            user: "ops",
            local_user: "alice",
            final_pass,
        }
    }

    fn verdict(s: &str, final_pass: bool) -> Verdict {
        let mut never = |_: &str| -> Result<bool, String> { panic!("no exec expected") };
        evaluate(&line(s).unwrap(), &subject(final_pass), &mut never).unwrap()
    }

    #[test]
    fn syntax_follows_match_cfg_line() {
        assert!(line("all").is_ok());
        assert!(line("final all").is_ok(), "one criterion may precede all");
        assert!(line("canonical final all").unwrap_err().contains("cannot be combined"));
        assert!(line("all host x").unwrap_err().contains("cannot be combined"));
        assert_eq!(line("host").unwrap_err(), "Match: missing argument for host");
        assert!(line("").is_err());
        assert_eq!(
            line("!Tagged x").unwrap(),
            [Condition {
                negated: true,
                criterion: Criterion::Unsupported { name: "Tagged".into(), arg: Some("x".into()) }
            }]
        );
    }

    #[test]
    fn criteria_are_anded_and_negatable() {
        assert_eq!(verdict("host bastion.example", false), Verdict::Applies, "host lowercased");
        assert_eq!(verdict("host BASTION.*", false), Verdict::Applies, "patterns lowercased");
        assert_eq!(verdict("originalhost bastion user ops", false), Verdict::Applies);
        assert_eq!(verdict("originalhost bastion user Ops", false), Verdict::Skip, "user is case-sensitive");
        assert_eq!(verdict("!localuser alice", false), Verdict::Skip);
        assert_eq!(verdict("host *,!bastion.example", false), Verdict::Skip, "a negated pattern wins");
        assert_eq!(verdict("!all", false), Verdict::Skip);
    }

    #[test]
    fn final_and_canonical_match_only_in_the_second_pass() {
        assert_eq!(verdict("final", false), Verdict::Skip);
        assert_eq!(verdict("canonical", true), Verdict::Applies);
        assert_eq!(verdict("!final", true), Verdict::Skip);
        assert!(wants_final(&line("host x final").unwrap()));
        assert!(!wants_final(&line("canonical").unwrap()));
    }

    #[test]
    fn unsupported_criteria_decide_only_when_nothing_else_does() {
        assert_eq!(verdict("tagged foo", false), Verdict::Undecidable("tagged foo".into()));
        assert_eq!(verdict("host other tagged foo", false), Verdict::Skip);
        assert_eq!(verdict("tagged foo host other", false), Verdict::Skip, "a later false criterion decides");
        assert_eq!(
            verdict("!localnetwork 10.0.0.0/8 user ops", false),
            Verdict::Undecidable("!localnetwork 10.0.0.0/8".into())
        );
        assert_eq!(verdict("frobnicate", false), Verdict::Undecidable("frobnicate".into()));
        assert_eq!(why_unsupported("LocalNetwork"), UNSUPPORTED[1].1);
    }

    #[test]
    fn exec_runs_only_while_the_line_still_matches() {
        let mut ran = Vec::new();
        let mut exec = |cmd: &str| -> Result<bool, String> {
            ran.push(cmd.to_owned());
            Ok(cmd == "yes")
        };
        let eval = |s: &str, exec: &mut dyn FnMut(&str) -> Result<bool, String>| {
            evaluate(&line(s).unwrap(), &subject(false), exec).unwrap()
        };
        assert_eq!(eval("exec yes", &mut exec), Verdict::Applies);
        assert_eq!(eval("!exec yes", &mut exec), Verdict::Skip);
        assert_eq!(eval("host other exec yes", &mut exec), Verdict::Skip);
        assert_eq!(eval("tagged x exec yes", &mut exec), Verdict::Undecidable("tagged x".into()));
        assert_eq!(eval("exec no exec yes", &mut exec), Verdict::Skip);
        assert_eq!(ran, ["yes", "yes", "no"]);
        let mut failing = |_: &str| -> Result<bool, String> { Err("boom".into()) };
        assert_eq!(evaluate(&line("exec x").unwrap(), &subject(false), &mut failing), Err("boom".into()));
    }
}
