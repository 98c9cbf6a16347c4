//! A desktop's session bus and notification server, private to one scenario: a real
//! `dbus-daemon --session` on a Unix socket in a temporary directory, and
//! `tests/fixtures/notification_daemon.py` (PyPI `jeepney`) owning `org.freedesktop.Notifications`
//! on it, recording every `Notify` call. A kharond started with [`DesktopBus::address`] as its
//! `DBUS_SESSION_BUS_ADDRESS` runs in this desktop session, as one started from a desktop login.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long the bus and the server may take to come up.
const STARTUP: Duration = Duration::from_secs(15);

pub struct DesktopBus {
    dir: tempfile::TempDir,
    bus: Child,
    server: Child,
    address: String,
}

/// The first line `child` prints, within [`STARTUP`].
fn first_line(child: &mut Child, what: &str) -> String {
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("{what}: no stdout"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(STARTUP).unwrap_or_else(|_| panic!("{what} said nothing within {STARTUP:?}"));
    line.trim().to_owned()
}

impl DesktopBus {
    pub fn start() -> DesktopBus {
        let dir = tempfile::Builder::new().prefix("khbus").tempdir_in("/tmp").expect("bus dir");
        let mut bus = Command::new("dbus-daemon")
            .arg("--session")
            .arg("--nofork")
            .arg("--print-address=1")
            .arg(format!("--address=unix:path={}", dir.path().join("bus").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("run dbus-daemon (apt-get install dbus)");
        let address = first_line(&mut bus, "dbus-daemon");
        assert!(address.starts_with("unix:path="), "dbus-daemon printed {address:?}");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/notification_daemon.py");
        let mut server = Command::new("python3")
            .arg(script)
            .arg(&address)
            .arg(dir.path().join("notifications.jsonl"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("run the notification server (pip install jeepney)");
        let ready = first_line(&mut server, "the notification server");
        assert_eq!(ready, "ready", "the notification server did not take its name");
        DesktopBus { dir, bus, server, address }
    }

    /// `DBUS_SESSION_BUS_ADDRESS` for a process in this session.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Every `Notify` call the server got, in order: `app_name`, `app_icon`, `summary`, `body`,
    /// `actions`, `hints` and `expire_timeout` as sent.
    pub fn notifications(&self) -> Vec<serde_json::Value> {
        let text = std::fs::read_to_string(self.dir.path().join("notifications.jsonl")).unwrap_or_default();
        text.lines().map(|line| serde_json::from_str(line).expect("a recorded notification")).collect()
    }
}

impl Drop for DesktopBus {
    fn drop(&mut self) {
        for child in [&mut self.server, &mut self.bus] {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
