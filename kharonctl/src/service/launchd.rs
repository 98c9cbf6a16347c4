//! The launchd agent (`~/Library/LaunchAgents/ch.vshn.kharond.plist`) that runs kharond in the
//! user's GUI session.
//!
//! launchd expands neither `~` nor variables, so the binary and the log file are absolute paths.
//! `SSH_AUTH_SOCK` is normally *not* set: launchd gives every agent in the session the system
//! ssh-agent's socket. Only a different agent (1Password, Secretive, …) is written in
//! ([`super::inputs::Agent::for_launchd`]). There is no socket activation here; kharond binds its own
//! sockets. `RunAtLoad` starts it at login and `KeepAlive` `SuccessfulExit` = false restarts it when
//! it fails (exits non-zero or is killed by a signal), like the systemd unit's `Restart=on-failure`:
//! a kharond that was stopped on purpose (it exits 0 on SIGTERM) stays stopped.
//!
//! launchctl is driven the way launchctl(1) documents since macOS 10.11: `bootstrap gui/UID PLIST`
//! and `bootout gui/UID/LABEL`, never the deprecated `load`/`unload` ([`start_steps`], pure).

use plist::{Dictionary, Value};

use super::inputs::{Agent, Inputs};

pub const LABEL: &str = "ch.vshn.kharond";
pub const FILE_NAME: &str = "ch.vshn.kharond.plist";

/// The log file below the home directory: stdout and stderr of kharond.
pub const LOG_FILE: &str = "Library/Logs/kharond.log";

/// The plist as XML.
pub fn render(inputs: &Inputs) -> String {
    let log = inputs.home.join(LOG_FILE).to_string_lossy().into_owned();
    let mut dict = Dictionary::new();
    dict.insert("Label".into(), LABEL.into());
    dict.insert(
        "ProgramArguments".into(),
        Value::Array(vec![inputs.kharond.to_string_lossy().into_owned().into()]),
    );
    dict.insert("RunAtLoad".into(), true.into());
    let mut keep_alive = Dictionary::new();
    keep_alive.insert("SuccessfulExit".into(), false.into());
    dict.insert("KeepAlive".into(), Value::Dictionary(keep_alive));
    // The proxy sits in the path of the user's browser and kubectl: no background throttling.
    dict.insert("ProcessType".into(), "Interactive".into());
    // Only in the GUI session, where launchd provides the user's ssh-agent.
    dict.insert("LimitLoadToSessionType".into(), "Aqua".into());
    dict.insert("StandardOutPath".into(), log.clone().into());
    dict.insert("StandardErrorPath".into(), log.into());
    if let Agent::Socket(sock) = &inputs.agent {
        let mut env = Dictionary::new();
        env.insert("SSH_AUTH_SOCK".into(), sock.clone().into());
        dict.insert("EnvironmentVariables".into(), Value::Dictionary(env));
    }
    let mut out = Vec::new();
    // Writing a dictionary of strings and booleans into a Vec cannot fail.
    if let Err(e) = Value::Dictionary(dict).to_writer_xml(&mut out) {
        return format!("<!-- cannot render plist: {e} -->\n");
    }
    let mut text = String::from_utf8_lossy(&out).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// One step of (re)starting the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Run `launchctl` with these arguments.
    Launchctl(Vec<String>),
    /// Wait, bounded, until the service has left the domain: `bootout` returns before launchd has
    /// removed it, and a `bootstrap` meanwhile fails ("Bootstrap failed: 5: Input/output error").
    AwaitBootout,
}

/// `gui/UID`: the user's GUI login session, where the agent runs.
pub fn domain(uid: u32) -> String {
    format!("gui/{uid}")
}

/// `gui/UID/LABEL`: the agent in that session.
pub fn service_target(uid: u32) -> String {
    format!("{}/{LABEL}", domain(uid))
}

/// What (re)starts the agent whose plist is at `plist`, given whether launchd has it loaded now
/// and whether the plist just changed. Loaded and unchanged: `kickstart` (starts it if it is not
/// running, leaves a running one alone). Otherwise the loaded copy, which launchd keeps however the
/// file changes, is booted out first, then the service is enabled (a disabled one cannot be
/// bootstrapped) and the plist bootstrapped into the session.
pub fn start_steps(uid: u32, plist: &str, loaded: bool, changed: bool) -> Vec<Step> {
    let target = service_target(uid);
    let run = |args: &[&str]| Step::Launchctl(args.iter().map(|a| (*a).to_owned()).collect());
    if loaded && !changed {
        return vec![run(&["kickstart", &target])];
    }
    let mut steps = Vec::new();
    if loaded {
        steps.push(run(&["bootout", &target]));
        steps.push(Step::AwaitBootout);
    }
    steps.push(run(&["enable", &target]));
    steps.push(run(&["bootstrap", &domain(uid), plist]));
    steps
}

/// What stops the agent and removes it from the session (the plist stays where it is).
pub fn stop_args(uid: u32) -> Vec<String> {
    vec!["bootout".to_owned(), service_target(uid)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn inputs(agent: Agent) -> Inputs {
        Inputs {
            kharond: PathBuf::from("/opt/homebrew/bin/kharond"),
            home: PathBuf::from("/Users/me"),
            agent,
            listen: "127.0.0.1:12000".parse().expect("addr"),
            control_socket: String::new(),
            socket_activation: false,
        }
    }

    fn parse(text: &str) -> Dictionary {
        plist::from_bytes(text.as_bytes()).expect("valid plist")
    }

    #[test]
    fn plist_has_absolute_paths_and_keeps_running() {
        let dict = parse(&render(&inputs(Agent::Inherit)));
        assert_eq!(dict.get("Label").and_then(Value::as_string), Some(LABEL));
        let args = dict.get("ProgramArguments").and_then(Value::as_array).expect("args");
        assert_eq!(args[0].as_string(), Some("/opt/homebrew/bin/kharond"));
        assert_eq!(dict.get("RunAtLoad").and_then(Value::as_boolean), Some(true));
        // Restarted when it fails, not when it was stopped on purpose (launchd.plist(5)).
        let keep_alive = dict.get("KeepAlive").and_then(Value::as_dictionary).expect("KeepAlive dict");
        assert_eq!(keep_alive.get("SuccessfulExit").and_then(Value::as_boolean), Some(false));
        assert_eq!(keep_alive.len(), 1);
        for key in ["StandardOutPath", "StandardErrorPath"] {
            assert_eq!(dict.get(key).and_then(Value::as_string), Some("/Users/me/Library/Logs/kharond.log"));
        }
        assert!(dict.get("EnvironmentVariables").is_none());
    }

    #[test]
    fn a_non_launchd_agent_is_written_in() {
        let dict = parse(&render(&inputs(Agent::Socket("/Users/me/.1password/agent.sock".into()))));
        let env = dict.get("EnvironmentVariables").and_then(Value::as_dictionary).expect("env");
        assert_eq!(
            env.get("SSH_AUTH_SOCK").and_then(Value::as_string),
            Some("/Users/me/.1password/agent.sock")
        );
    }

    fn args(step: &Step) -> Vec<String> {
        match step {
            Step::Launchctl(args) => args.clone(),
            Step::AwaitBootout => vec!["<await bootout>".to_owned()],
        }
    }

    #[test]
    fn agent_is_bootstrapped_into_the_gui_domain_never_loaded() {
        let plist = "/Users/me/Library/LaunchAgents/ch.vshn.kharond.plist";
        let fresh: Vec<Vec<String>> = start_steps(501, plist, false, true).iter().map(args).collect();
        assert_eq!(fresh, [vec!["enable", "gui/501/ch.vshn.kharond"], vec!["bootstrap", "gui/501", plist]]);
        // A changed plist: launchd keeps the copy it loaded, so out with it first, and wait.
        let changed: Vec<Vec<String>> = start_steps(501, plist, true, true).iter().map(args).collect();
        assert_eq!(
            changed,
            [
                vec!["bootout", "gui/501/ch.vshn.kharond"],
                vec!["<await bootout>"],
                vec!["enable", "gui/501/ch.vshn.kharond"],
                vec!["bootstrap", "gui/501", plist],
            ]
        );
        // Loaded and unchanged: make sure it runs, without killing a running one (no -k).
        let same: Vec<Vec<String>> = start_steps(501, plist, true, false).iter().map(args).collect();
        assert_eq!(same, [vec!["kickstart", "gui/501/ch.vshn.kharond"]]);
        // Not loaded although unchanged (booted out by hand): bootstrapped again.
        assert_eq!(start_steps(501, plist, false, false), start_steps(501, plist, false, true));
        assert_eq!(stop_args(501), ["bootout", "gui/501/ch.vshn.kharond"]);
        let every = [fresh, changed, same].concat();
        assert!(every.iter().all(|a| a[0] != "load" && a[0] != "unload"), "{every:?}");
    }
}
