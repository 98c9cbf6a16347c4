//! The service-manager files that run kharond in the background: what they contain and where they
//! go. Rendering is pure (inputs in, file texts out), so `--dry-run`, the tests and the static copies
//! in `contrib/` all see the same bytes; writing them and talking to the manager is
//! `cmd::service_install`'s job.
//!
//! - [`systemd`]: a user unit `kharond.service` (`Type=notify`), and with socket activation two
//!   socket units, one per file descriptor name kharond looks for in `LISTEN_FDNAMES`.
//! - [`launchd`]: a LaunchAgent plist; launchd needs absolute paths, so they are filled in here.

pub mod launchd;
pub mod systemd;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Which service manager to write files for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Platform {
    /// systemd user units
    Linux,
    /// a launchd agent
    Macos,
}

impl Platform {
    /// The platform this binary was built for.
    pub fn current() -> Self {
        if cfg!(target_os = "macos") { Platform::Macos } else { Platform::Linux }
    }
}

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

/// One file to install: where it goes and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: PathBuf,
    pub contents: String,
}

/// The files for `platform`, given the directory they go into.
pub fn render(platform: Platform, dir: &std::path::Path, inputs: &Inputs) -> Vec<File> {
    match platform {
        Platform::Linux => systemd::render(inputs)
            .into_iter()
            .map(|(name, contents)| File { path: dir.join(name), contents })
            .collect(),
        Platform::Macos => {
            vec![File { path: dir.join(launchd::FILE_NAME), contents: launchd::render(inputs) }]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    /// The inputs whose rendering is the packagers' copy in `contrib/` (placeholders: contrib/README.md).
    fn contrib_inputs(platform: Platform) -> Inputs {
        Inputs {
            kharond: PathBuf::from("@KHAROND@"),
            home: PathBuf::from("@HOME@"),
            agent: match platform {
                Platform::Linux => Agent::Socket("@SSH_AUTH_SOCK@".into()),
                Platform::Macos => Agent::Inherit,
            },
            listen: kharon_shared::config::DEFAULT_LISTEN.parse().expect("default listen address"),
            control_socket: "%t/kharon/kharond.sock".into(),
            socket_activation: platform == Platform::Linux,
        }
    }

    fn contrib_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../contrib")
    }

    fn contrib_files() -> Vec<File> {
        let mut files =
            render(Platform::Linux, &contrib_dir().join("systemd"), &contrib_inputs(Platform::Linux));
        files.extend(render(
            Platform::Macos,
            &contrib_dir().join("launchd"),
            &contrib_inputs(Platform::Macos),
        ));
        files
    }

    /// The static copies for packagers are exactly what service-install writes, placeholders aside.
    /// After changing a unit, regenerate them: `cargo test -p kharonctl -- --ignored regenerate_contrib`.
    #[test]
    fn contrib_units_match_generated_ones() {
        // KHARON_REGENERATE_CONTRIB=1 rewrites the packagers' copies after a unit changed; every
        // other run checks them.
        let regenerate = std::env::var_os("KHARON_REGENERATE_CONTRIB").is_some();
        for file in contrib_files() {
            if regenerate {
                std::fs::create_dir_all(file.path.parent().expect("parent")).expect("mkdir");
                std::fs::write(&file.path, &file.contents).expect("write");
            }
            let on_disk = std::fs::read_to_string(&file.path)
                .unwrap_or_else(|e| panic!("{}: {e}", file.path.display()));
            assert_eq!(
                on_disk,
                file.contents,
                "{} is stale; regenerate with KHARON_REGENERATE_CONTRIB=1 cargo test -p kharonctl contrib_units",
                file.path.display()
            );
        }
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
