//! The launchd agent (`~/Library/LaunchAgents/ch.vshn.kharond.plist`) that runs kharond in the
//! user's GUI session.
//!
//! launchd expands neither `~` nor variables, so the binary and the log file are absolute paths.
//! `SSH_AUTH_SOCK` is normally *not* set: launchd gives every agent in the session the system
//! ssh-agent's socket. Only a different agent (1Password, Secretive, …) is written in
//! ([`super::inputs::Agent::for_launchd`]). There is no socket activation here; kharond binds its own
//! sockets, and `KeepAlive` restarts it when it exits.

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
    dict.insert("KeepAlive".into(), true.into());
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
        assert_eq!(dict.get("KeepAlive").and_then(Value::as_boolean), Some(true));
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
}
