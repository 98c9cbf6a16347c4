//! The service-manager files that run kharond in the background: what they contain and where they
//! go. Rendering is pure (inputs in, file texts out), so `--dry-run`, the tests and the static copies
//! in `contrib/` all see the same bytes; writing them and talking to the manager is
//! `cmd::service_install`'s job.
//!
//! - [`systemd`]: a user unit `kharond.service` (`Type=notify`), and with socket activation two
//!   socket units, one per file descriptor name kharond looks for in `LISTEN_FDNAMES`.
//! - [`launchd`]: a LaunchAgent plist; launchd needs absolute paths, so they are filled in here.
//! - [`Inputs`] and [`Agent`] (in `inputs.rs`): what both render from.

mod inputs;
pub mod launchd;
pub mod systemd;

use std::path::PathBuf;

pub use inputs::{Agent, Inputs, is_per_login_agent};

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

    /// The inputs whose rendering is the packagers' copy in `contrib/` (placeholders: contrib/README.md).
    fn contrib_inputs(platform: Platform) -> Inputs {
        Inputs {
            kharond: PathBuf::from("@KHAROND@"),
            home: PathBuf::from("@HOME@"),
            agent: match platform {
                Platform::Linux => Agent::Socket("@SSH_AUTH_SOCK@".into()),
                Platform::Macos => Agent::Inherit,
            },
            listen: kharon_config::DEFAULT_LISTEN.parse().expect("default listen address"),
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
}
