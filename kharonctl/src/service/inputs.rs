//! What the service files depend on ([`Inputs`]), and which ssh-agent kharond is pointed at
//! ([`Agent`]): the one thing in them that depends on the desktop. [`super::systemd`] and
//! [`super::launchd`] render from these; they sit in their own file so that the renderers do not
//! depend on the `service` facade that dispatches to them.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Where kharond finds the user's ssh-agent when the service manager starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    /// GNOME's gcr agent, `$XDG_RUNTIME_DIR/gcr/ssh` (systemd spells it `%t/gcr/ssh`).
    Gnome,
    /// The agent socket the user's shell has now.
    Socket(String),
    /// Nothing to set: no agent known (Linux), or launchd provides `SSH_AUTH_SOCK` itself (macOS).
    Inherit,
}

impl Agent {
    /// Picks the agent for a systemd unit: GNOME's when the desktop is GNOME or its socket exists,
    /// else the current `SSH_AUTH_SOCK`.
    pub fn for_systemd(getenv: &dyn Fn(&str) -> Option<String>) -> Self {
        let gnome_desktop = getenv("XDG_CURRENT_DESKTOP")
            .is_some_and(|d| d.split(':').any(|part| part.eq_ignore_ascii_case("gnome")));
        let gcr_socket =
            getenv("XDG_RUNTIME_DIR").is_some_and(|dir| PathBuf::from(dir).join("gcr/ssh").exists());
        if gnome_desktop || gcr_socket {
            return Agent::Gnome;
        }
        match getenv("SSH_AUTH_SOCK") {
            Some(sock) => Agent::Socket(sock),
            None => Agent::Inherit,
        }
    }

    /// Picks the agent for a launchd agent. launchd hands every agent in the GUI session the
    /// system ssh-agent's `SSH_AUTH_SOCK` (`/private/tmp/com.apple.launchd.*/Listeners`), so it is
    /// only set when the user runs another agent (1Password, Secretive, a Homebrew ssh-agent …).
    pub fn for_launchd(getenv: &dyn Fn(&str) -> Option<String>) -> Self {
        match getenv("SSH_AUTH_SOCK") {
            Some(sock) if !is_launchd_agent(&sock) => Agent::Socket(sock),
            _ => Agent::Inherit,
        }
    }
}

/// Whether `sock` is where a hand-started `ssh-agent` puts its socket, `ssh-XXXXXXXXXX/agent.PID`
/// in the temporary folder (`/tmp` on Linux, the per-user `$TMPDIR` on macOS): a new random
/// folder at every login, so a service pointed at it loses its agent at the next one.
pub fn is_per_login_agent(sock: &str) -> bool {
    let path = std::path::Path::new(sock);
    let file = path.file_name().and_then(|f| f.to_str()).unwrap_or_default();
    let dir = path.parent().and_then(|d| d.file_name()).and_then(|d| d.to_str()).unwrap_or_default();
    dir.starts_with("ssh-") && file.starts_with("agent.")
}

fn is_launchd_agent(sock: &str) -> bool {
    let sock = sock.strip_prefix("/private").unwrap_or(sock);
    sock.starts_with("/tmp/com.apple.launchd.") && sock.ends_with("/Listeners")
}

/// Everything the files depend on.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// Absolute path of the kharond binary.
    pub kharond: PathBuf,
    /// The user's home directory (launchd log files live below it).
    pub home: PathBuf,
    pub agent: Agent,
    /// The SOCKS listen address for the socket unit.
    pub listen: SocketAddr,
    /// The control socket in systemd notation, e.g. `%t/kharon/kharond.sock`.
    pub control_socket: String,
    pub socket_activation: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn gnome_desktop_uses_gcr_agent() {
        let getenv = env(&[("XDG_CURRENT_DESKTOP", "ubuntu:GNOME"), ("SSH_AUTH_SOCK", "/tmp/agent")]);
        assert_eq!(Agent::for_systemd(&getenv), Agent::Gnome);
    }

    #[test]
    fn gcr_socket_means_gnome_agent() {
        let run = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(run.path().join("gcr")).expect("mkdir");
        std::fs::write(run.path().join("gcr/ssh"), "").expect("touch");
        let dir = run.path().display().to_string();
        let getenv = env(&[("XDG_RUNTIME_DIR", &dir), ("XDG_CURRENT_DESKTOP", "KDE")]);
        assert_eq!(Agent::for_systemd(&getenv), Agent::Gnome);
    }

    #[test]
    fn other_desktops_keep_the_current_agent() {
        let getenv = env(&[("XDG_CURRENT_DESKTOP", "KDE"), ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1")]);
        assert_eq!(Agent::for_systemd(&getenv), Agent::Socket("/tmp/ssh-x/agent.1".into()));
        assert_eq!(Agent::for_systemd(&env(&[])), Agent::Inherit);
    }

    #[test]
    fn a_hand_started_agent_is_recognised_on_both_platforms() {
        assert!(is_per_login_agent("/tmp/ssh-XXXXabcd1234/agent.4242"));
        assert!(is_per_login_agent(
            "/var/folders/5d/q8hk1m1d0b52lmfn62lw0t1h0000gn/T/ssh-Ab12Cd34/agent.777"
        ));
        assert!(!is_per_login_agent("/private/tmp/com.apple.launchd.AbC123/Listeners"));
        assert!(!is_per_login_agent("/run/user/1000/gcr/ssh"));
        assert!(!is_per_login_agent("/Users/me/.1password/agent.sock"));
    }

    #[test]
    fn launchd_agent_is_inherited_other_agents_are_set() {
        let launchd = env(&[("SSH_AUTH_SOCK", "/private/tmp/com.apple.launchd.AbC123/Listeners")]);
        assert_eq!(Agent::for_launchd(&launchd), Agent::Inherit);
        let secretive = "/Users/me/Library/Containers/com.maxgoedjen.Secretive.SecretAgent/Data/socket.ssh";
        assert_eq!(
            Agent::for_launchd(&env(&[("SSH_AUTH_SOCK", secretive)])),
            Agent::Socket(secretive.into())
        );
    }
}
