//! Whether kharond runs in a desktop session, and how a notification reaches it: a child process
//! of the desktop's own tools, with a fixed argument list (never a shell; the texts are arguments
//! of their own, never part of a command or a script) and a bounded wait.
//!
//! - Linux and other freedesktop systems: a session bus (`DBUS_SESSION_BUS_ADDRESS` in kharond's
//!   environment, as a desktop login and systemd's user manager set it) and its notification
//!   server, called with `org.freedesktop.Notifications.Notify` (Desktop Notifications
//!   Specification 1.2, "org.freedesktop.Notifications.Notify"). Through `notify-send` (libnotify,
//!   on most desktops), else `busctl --user call` (systemd's, which takes each value of the call
//!   as an argument as it is). Without a session bus (a server, an ssh login) nothing is tried.
//! - macOS: Notification Center, through `osascript`'s `display notification` (AppleScript's
//!   Standard Additions), the texts handed to the script's `run` handler as its arguments. Only in
//!   a GUI login: `launchctl managername` says `Aqua` there (launchd's session types, launchctl(1)).

use std::collections::HashMap;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use kharon_common::text::{cap, escape};

use super::message::Notification;

/// How long a notification program may take: a D-Bus call on a live desktop answers in
/// milliseconds; a hung session bus must not hold the next question's notification for long.
const CHILD_WAIT: Duration = Duration::from_secs(10);
/// The most a failure's message shows of what the program said.
const SAID_CHARS: usize = 300;
/// The icon freedesktop servers show beside it: the icon theme's name for a password prompt
/// (Icon Naming Specification, "Status Icons").
const ICON: &str = "dialog-password";
/// The application name a notification server files it under.
const APP_NAME: &str = "kharon";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "neither notify-send (libnotify: package libnotify-bin or libnotify) nor busctl (systemd) is on \
         kharond's PATH"
    )]
    NoProgram,
    #[error("cannot run {program}")]
    Spawn { program: &'static str, source: std::io::Error },
    #[error("{program} failed ({status}){}", said_note(said))]
    Failed { program: &'static str, status: ExitStatus, said: String },
    #[error("{program} did not finish within {}s", CHILD_WAIT.as_secs())]
    Timeout { program: &'static str },
    #[error(
        "kharond runs outside a GUI login (launchctl managername says {0:?}): Notification Center is not there"
    )]
    NotGui(String),
}

fn said_note(said: &str) -> String {
    if said.is_empty() { String::new() } else { format!(": {said}") }
}

/// The kind of desktop session kharond runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    /// A freedesktop session bus.
    Freedesktop,
    /// macOS; whether it is a GUI login is asked when the first notification is shown.
    MacOs,
}

impl Session {
    /// The session kharond's environment at start names, if any.
    pub fn detect(env: &HashMap<String, String>) -> Option<Session> {
        if cfg!(target_os = "macos") {
            return Some(Session::MacOs);
        }
        env.get("DBUS_SESSION_BUS_ADDRESS")
            .filter(|address| !address.trim().is_empty())
            .map(|_| Session::Freedesktop)
    }

    /// Shows `notification` on the desktop.
    pub async fn show(self, notification: &Notification) -> Result<(), Error> {
        match self {
            Session::Freedesktop => {
                for (program, args) in
                    [("notify-send", notify_send(notification)), ("busctl", busctl(notification))]
                {
                    match run(program, &args).await {
                        Err(Error::Spawn { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                        }
                        done => return done.map(|_| ()),
                    }
                }
                Err(Error::NoProgram)
            }
            Session::MacOs => {
                let manager = run("launchctl", &["managername".to_owned()]).await?;
                if manager.trim() != "Aqua" {
                    return Err(Error::NotGui(escape(manager.trim()).into_owned()));
                }
                run("osascript", &osascript(notification)).await.map(|_| ())
            }
        }
    }
}

/// Milliseconds for a notification's expiry, within what the specification's `int32` takes; at
/// least one second (0 would mean "never expires" to a freedesktop server).
fn expire_ms(notification: &Notification) -> u128 {
    notification.expires_in.as_millis().clamp(1000, i32::MAX as u128)
}

/// `notify-send`'s arguments: options first, then `--` and the two texts, so no text is ever
/// read as an option.
fn notify_send(n: &Notification) -> Vec<String> {
    vec![
        format!("--app-name={APP_NAME}"),
        "--urgency=normal".to_owned(),
        format!("--icon={ICON}"),
        format!("--expire-time={}", expire_ms(n)),
        "--".to_owned(),
        n.title.clone(),
        n.body.clone(),
    ]
}

/// `busctl`'s arguments: the call's signature, then each value as one argument, taken as it is
/// (app_name, replaces_id, app_icon, summary, body, no actions, one hint: urgency normal, the
/// expiry).
fn busctl(n: &Notification) -> Vec<String> {
    let fixed = [
        "--user",
        "call",
        "--timeout=5",
        "org.freedesktop.Notifications",
        "/org/freedesktop/Notifications",
        "org.freedesktop.Notifications",
        "Notify",
        "susssasa{sv}i",
        APP_NAME,
        "0",
        ICON,
    ];
    let mut args: Vec<String> = fixed.iter().map(|a| (*a).to_owned()).collect();
    args.extend([n.title.clone(), n.body.clone()]);
    args.extend(["0", "1", "urgency", "y", "1"].map(str::to_owned));
    args.push(expire_ms(n).to_string());
    args
}

/// `osascript`'s arguments: a fixed script whose `run` handler gets the title and the body as its
/// arguments (`item 1 of argv`), so neither is ever read as AppleScript.
fn osascript(n: &Notification) -> Vec<String> {
    let script =
        ["on run argv", "display notification (item 2 of argv) with title (item 1 of argv)", "end run"];
    let mut args = Vec::new();
    for line in script {
        args.extend(["-e".to_owned(), line.to_owned()]);
    }
    args.extend([n.title.clone(), n.body.clone()]);
    args
}

/// Runs `program` with `args` (no shell), for at most [`CHILD_WAIT`]; what it printed on
/// success.
async fn run(program: &'static str, args: &[String]) -> Result<String, Error> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A wait that times out drops the child, which ends it.
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| Error::Spawn { program, source })?;
    let output = tokio::time::timeout(CHILD_WAIT, child.wait_with_output())
        .await
        .map_err(|_| Error::Timeout { program })?
        .map_err(|source| Error::Spawn { program, source })?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        let said = escape(&cap(said.trim(), SAID_CHARS)).into_owned();
        return Err(Error::Failed { program, status: output.status, said });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notification() -> Notification {
        Notification {
            title: "-t title \"'$(x)".into(),
            body: "body; `y` <b>".into(),
            expires_in: Duration::from_secs(90),
        }
    }

    #[test]
    fn each_text_is_one_argument_of_its_own_after_the_options() {
        let n = notification();
        let args = notify_send(&n);
        let end = args.iter().position(|a| a == "--").expect("an end of options");
        assert_eq!(&args[end + 1..], [n.title.clone(), n.body.clone()]);
        assert!(args[..end].contains(&"--expire-time=90000".to_owned()), "{args:?}");

        let args = busctl(&n);
        assert_eq!(args[7], "susssasa{sv}i");
        assert_eq!(
            &args[8..],
            ["kharon", "0", ICON, &n.title, &n.body, "0", "1", "urgency", "y", "1", "90000"]
        );

        let args = osascript(&n);
        assert_eq!(&args[args.len() - 2..], [n.title.clone(), n.body.clone()]);
        let script: Vec<&String> = args.iter().skip(1).step_by(2).take(3).collect();
        assert!(script.iter().all(|line| !line.contains(&n.title) && !line.contains(&n.body)), "{args:?}");
    }

    #[test]
    fn the_expiry_is_at_least_a_second_and_fits_an_int32() {
        let mut n = notification();
        n.expires_in = Duration::ZERO;
        assert_eq!(expire_ms(&n), 1000);
        n.expires_in = Duration::from_secs(u64::MAX);
        assert_eq!(expire_ms(&n), i32::MAX as u128);
    }

    #[test]
    fn a_session_bus_is_a_desktop_session_and_nothing_else_is() {
        let env =
            |pairs: &[(&str, &str)]| pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        if cfg!(target_os = "macos") {
            assert_eq!(Session::detect(&env(&[])), Some(Session::MacOs));
            return;
        }
        assert_eq!(Session::detect(&env(&[])), None);
        assert_eq!(Session::detect(&env(&[("DBUS_SESSION_BUS_ADDRESS", "")])), None);
        assert_eq!(Session::detect(&env(&[("DISPLAY", ":0")])), None);
        let bus = [("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus")];
        assert_eq!(Session::detect(&env(&bus)), Some(Session::Freedesktop));
    }

    #[tokio::test]
    async fn a_failing_program_is_named_with_what_it_said_escaped() {
        let err = run("sh", &["-c".into(), "printf 'no bus\\033[31m' >&2; exit 3".into()]).await.unwrap_err();
        assert_eq!(err.to_string(), "sh failed (exit status: 3): no bus\\x1b[31m");
        let err = run("kharon-no-such-program", &[]).await.unwrap_err();
        assert!(matches!(&err, Error::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound));
    }
}
