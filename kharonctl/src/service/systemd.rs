//! systemd user units for kharond.
//!
//! `kharond.service` runs the daemon with `Type=notify`: kharond sends `READY=1` once its listener
//! and control socket accept connections, so `systemctl --user start` returns when it can be used.
//! With socket activation, systemd creates the sockets and hands them over in `LISTEN_FDS`. Each
//! socket unit names *all* of its descriptors with one `FileDescriptorName=` (systemd.socket(5)),
//! so the two sockets live in two units, `kharond.socket` (name `socks`) and
//! `kharond-control.socket` (name `control`), and kharond tells them apart by `LISTEN_FDNAMES`.
//!
//! Values are escaped for unit files: `%` starts a specifier and is doubled, and a path with
//! spaces or quotes is quoted (systemd.service(5), "Command lines").

use super::inputs::{Agent, Inputs};

pub const SERVICE: &str = "kharond.service";
pub const SOCKS_SOCKET: &str = "kharond.socket";
pub const CONTROL_SOCKET: &str = "kharond-control.socket";

/// Every file name `service-install` may have written, for uninstalling.
pub const ALL: [&str; 3] = [SERVICE, SOCKS_SOCKET, CONTROL_SOCKET];

/// The file descriptor names kharond looks for in `LISTEN_FDNAMES`.
pub const FD_SOCKS: &str = "socks";
pub const FD_CONTROL: &str = "control";

const HEADER: &str = "# Written by `kharonctl service-install`; run it again after moving kharond.\n\
# Packagers: contrib/systemd/ holds this file with @PLACEHOLDERS@ (contrib/README.md).\n";

/// (file name, contents) of each unit, the service first.
pub fn render(inputs: &Inputs) -> Vec<(&'static str, String)> {
    let mut units = vec![(SERVICE, service(inputs))];
    if inputs.socket_activation {
        units.push((SOCKS_SOCKET, socks_socket(inputs)));
        units.push((CONTROL_SOCKET, control_socket(inputs)));
    }
    units
}

fn service(inputs: &Inputs) -> String {
    let mut unit = String::from(HEADER);
    unit.push_str(
        "[Unit]\n\
         Description=kharon: SOCKS5 proxy routing cluster hosts through SSH jump hosts\n\
         Documentation=https://github.com/vshn/kharon-rs\n",
    );
    if inputs.socket_activation {
        unit.push_str(&format!("Requires={SOCKS_SOCKET} {CONTROL_SOCKET}\n"));
        unit.push_str(&format!("After={SOCKS_SOCKET} {CONTROL_SOCKET}\n"));
    }
    unit.push_str(
        "\n[Service]\n\
         # kharond sends READY=1 once the listener and the control socket accept connections\n\
         Type=notify\n",
    );
    unit.push_str(&format!("ExecStart={}\n", exec_path(&inputs.kharond.to_string_lossy())));
    match &inputs.agent {
        Agent::Gnome => unit.push_str("# GNOME's ssh-agent (gcr)\nEnvironment=SSH_AUTH_SOCK=%t/gcr/ssh\n"),
        Agent::Socket(sock) => unit.push_str(&format!(
            "# the ssh-agent of the shell that ran service-install\nEnvironment={}\n",
            quote(&format!("SSH_AUTH_SOCK={sock}"))
        )),
        Agent::Inherit => {}
    }
    unit.push_str(
        "# two descriptors per client (16,384 at most) plus a reserve; a user manager grants at most\n\
         # its own hard limit (systemd then sets the closest it may), and kharond logs what fits\n\
         LimitNOFILE=65536\n\
         Restart=on-failure\n\
         RestartSec=2s\n\
         # stderr goes to the journal; kharond sees JOURNAL_STREAM and leaves timestamps to it\n\
         SyslogIdentifier=kharond\n\
         \n[Install]\n\
         WantedBy=default.target\n",
    );
    unit
}

fn socks_socket(inputs: &Inputs) -> String {
    format!(
        "{HEADER}[Unit]\n\
         Description=kharon SOCKS5 listener (socket activation of {SERVICE})\n\
         PartOf={SERVICE}\n\
         \n[Socket]\n\
         ListenStream={listen}\n\
         FileDescriptorName={FD_SOCKS}\n\
         Service={SERVICE}\n\
         \n[Install]\n\
         WantedBy=sockets.target\n",
        listen = inputs.listen,
    )
}

fn control_socket(inputs: &Inputs) -> String {
    format!(
        "{HEADER}[Unit]\n\
         Description=kharon control socket for kharonctl (socket activation of {SERVICE})\n\
         PartOf={SERVICE}\n\
         \n[Socket]\n\
         ListenStream={path}\n\
         FileDescriptorName={FD_CONTROL}\n\
         Service={SERVICE}\n\
         # only the user may talk to the daemon\n\
         SocketMode=0600\n\
         DirectoryMode=0700\n\
         \n[Install]\n\
         WantedBy=sockets.target\n",
        path = inputs.control_socket,
    )
}

/// Doubles `%` so systemd does not read a specifier.
pub fn escape_specifiers(value: &str) -> String {
    value.replace('%', "%%")
}

/// A value in double quotes with `\` and `"` escaped, specifiers escaped.
fn quote(value: &str) -> String {
    let escaped = escape_specifiers(value).replace('\\', "\\\\").replace('"', "\\\"");
    format!("\"{escaped}\"")
}

/// The executable of `ExecStart=`: bare when it can be, quoted when it has spaces or quotes.
fn exec_path(path: &str) -> String {
    if path.chars().any(|c| c.is_whitespace() || matches!(c, '"' | '\'' | '\\' | ';')) {
        quote(path)
    } else {
        escape_specifiers(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn inputs(agent: Agent, socket_activation: bool) -> Inputs {
        Inputs {
            kharond: PathBuf::from("/opt/kharon/bin/kharond"),
            home: PathBuf::from("/home/u"),
            agent,
            listen: "127.0.0.1:12000".parse().expect("addr"),
            control_socket: "%t/kharon/kharond.sock".into(),
            socket_activation,
        }
    }

    #[test]
    fn service_runs_the_binary_with_notify_and_restart() {
        let units = render(&inputs(Agent::Gnome, false));
        assert_eq!(units.len(), 1);
        let (name, text) = &units[0];
        assert_eq!(*name, SERVICE);
        for line in [
            "Type=notify",
            "ExecStart=/opt/kharon/bin/kharond",
            "Environment=SSH_AUTH_SOCK=%t/gcr/ssh",
            "LimitNOFILE=65536",
            "Restart=on-failure",
            "WantedBy=default.target",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("Requires="), "{text}");
    }

    #[test]
    fn socket_activation_names_each_socket() {
        let units = render(&inputs(Agent::Inherit, true));
        let names: Vec<&str> = units.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, [SERVICE, SOCKS_SOCKET, CONTROL_SOCKET]);
        assert!(units[0].1.contains("Requires=kharond.socket kharond-control.socket\n"));
        assert!(!units[0].1.contains("SSH_AUTH_SOCK"));
        assert!(units[1].1.contains("ListenStream=127.0.0.1:12000\nFileDescriptorName=socks\n"));
        assert!(units[2].1.contains("ListenStream=%t/kharon/kharond.sock\nFileDescriptorName=control\n"));
        assert!(units[2].1.contains("SocketMode=0600\n"));
    }

    #[test]
    fn odd_paths_are_escaped() {
        let mut odd = inputs(Agent::Socket("/tmp/ssh %x/\"agent\"".into()), false);
        odd.kharond = PathBuf::from("/home/u/my tools/100%/kharond");
        let text = &render(&odd)[0].1;
        assert!(text.contains("ExecStart=\"/home/u/my tools/100%%/kharond\"\n"), "{text}");
        assert!(text.contains("Environment=\"SSH_AUTH_SOCK=/tmp/ssh %%x/\\\"agent\\\"\"\n"), "{text}");
    }
}
