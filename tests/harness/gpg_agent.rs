//! A real `gpg-agent` with `enable-ssh-support`, as people use it instead of ssh-agent: an
//! unprotected ed25519 authentication key made with `gpg --quick-gen-key`, listed in `sshcontrol`,
//! so the agent's SSH socket offers it (no pinentry ever runs). Its own GnuPG home; the agent is
//! stopped on drop (`gpgconf --kill`, which asks this home's agent, and no other, to exit).

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct GpgAgent {
    home: tempfile::TempDir,
    socket: PathBuf,
    public: String,
}

fn gpg(home: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .arg("--homedir")
        .arg(home)
        .args(args)
        .env("GNUPGHOME", home)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e} (the e2e suite needs gnupg: .ci/run installs it)"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl GpgAgent {
    /// Starts an agent holding one fresh authentication key.
    pub fn start() -> Self {
        // Short path: the agent's sockets live in its home and must fit in sun_path.
        let home = tempfile::Builder::new().prefix("khgpg").tempdir_in("/tmp").expect("gnupg home");
        crate::set_mode(home.path(), 0o700);
        // Before the first gpg command: the agent it starts must serve SSH too.
        std::fs::write(home.path().join("gpg-agent.conf"), "enable-ssh-support\n").expect("gpg-agent.conf");
        let uid = "kharon test <kharon-test@example.invalid>";
        gpg(
            home.path(),
            "gpg",
            &["--batch", "--passphrase", "", "--quick-gen-key", uid, "ed25519", "auth", "never"],
        );
        let listing = gpg(home.path(), "gpg", &["--with-colons", "--with-keygrip", "-K", uid]);
        let keygrip = listing
            .lines()
            .find_map(|l| l.strip_prefix("grp:"))
            .and_then(|rest| rest.split(':').find(|f| !f.is_empty()))
            .expect("a keygrip")
            .to_owned();
        std::fs::write(home.path().join("sshcontrol"), format!("{keygrip}\n")).expect("sshcontrol");
        gpg(home.path(), "gpg-connect-agent", &["/bye"]);
        let socket = PathBuf::from(gpg(home.path(), "gpgconf", &["--list-dirs", "agent-ssh-socket"]).trim());
        let public = gpg(home.path(), "gpg", &["--export-ssh-key", uid]);
        let public = public.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        GpgAgent { home, socket, public }
    }

    /// The SSH_AUTH_SOCK of this agent.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Its key as an authorized_keys line.
    pub fn public_key(&self) -> &str {
        &self.public
    }
}

impl Drop for GpgAgent {
    fn drop(&mut self) {
        let _ = Command::new("gpgconf")
            .arg("--homedir")
            .arg(self.home.path())
            .args(["--kill", "gpg-agent"])
            .output();
    }
}
