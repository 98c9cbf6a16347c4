//! Telling the person at the desktop that a jump host asks them something (a one-time password,
//! a password: the SSH engine's questions). kharond runs in the background, with no terminal:
//! without this, a question waits unseen while connections through the jump host wait for it,
//! unless the person runs `kharonctl status` or reads the log.
//!
//! - [`message`]: what a notification says: the jump host (its name escaped and capped: it comes
//!   from the inventory), what it asks for, and `kharonctl login-jump JUMPHOST`, the command that
//!   answers it.
//! - [`session`]: whether a desktop session exists, and how a notification reaches it
//!   (freedesktop notifications over the session bus; Notification Center on macOS).
//!
//! # When
//! The SSH engine announces each question once, as it opens, however many connections wait for
//! it (`kharon_ssh::PoolSettings::questions`); [`run`] shows each one, unless someone else does:
//! - the user's SSH_ASKPASS program asks it too (its own window shows it);
//! - a person is logging in to that jump host with `kharonctl login-jump` ([`Logins`]): their
//!   terminal shows what follows (the next prompt of a PAM stack, a refused answer's retry);
//! - `desktop_notifications = false` in the config file, or no desktop session: the daemon then
//!   announces nothing (start.rs), and `status` and the log remain.
//!
//! Owns: those rules and the text. Must not know: the proxy protocols, the routing.

pub mod message;
pub mod session;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use kharon_common::errors::Chain;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use kharon_ssh as ssh;
pub use session::Session;

/// How long after a person's `kharonctl login-jump` call ends its jump host still counts as
/// attended: the call returns the next question as it opens, and the notification for it is
/// looked at a moment later.
const ATTENDED_AFTER: Duration = Duration::from_secs(5);

/// The jump hosts a person is logging in to through `kharonctl login-jump` right now (each
/// `JumpLogin` and `JumpAnswer` call, and `ATTENDED_AFTER` past its end). Holds only jump
/// hosts of the routing table (control/jump_login.rs checks first), and forgets each once it is
/// no longer attended.
#[derive(Debug)]
pub struct Logins {
    jumphosts: Mutex<HashMap<String, Attended>>,
    /// `ATTENDED_AFTER`, shorter in tests.
    after: Duration,
}

impl Default for Logins {
    fn default() -> Self {
        Logins { jumphosts: Mutex::default(), after: ATTENDED_AFTER }
    }
}

#[derive(Debug, Clone, Copy)]
struct Attended {
    /// Calls in progress.
    calls: usize,
    /// When the last call ended.
    ended: Option<Instant>,
}

impl Logins {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Attended>> {
        self.jumphosts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call of a person's login to `jumphost` starts; it ends when the guard is dropped.
    pub fn begin(&self, jumphost: &str) -> LoginCall<'_> {
        let mut jumphosts = self.lock();
        let now = Instant::now();
        jumphosts.retain(|_, a| a.attended(now, self.after));
        jumphosts.entry(jumphost.to_owned()).or_insert(Attended { calls: 0, ended: None }).calls += 1;
        LoginCall { logins: self, jumphost: jumphost.to_owned() }
    }

    /// Whether a person is logging in to `jumphost` (see the type's doc).
    pub fn attended(&self, jumphost: &str) -> bool {
        self.lock().get(jumphost).is_some_and(|a| a.attended(Instant::now(), self.after))
    }
}

impl Attended {
    fn attended(&self, now: Instant, after: Duration) -> bool {
        self.calls > 0 || self.ended.is_some_and(|ended| now < ended + after)
    }
}

/// One call of a person's login in progress ([`Logins::begin`]).
#[derive(Debug)]
pub struct LoginCall<'a> {
    logins: &'a Logins,
    jumphost: String,
}

impl Drop for LoginCall<'_> {
    fn drop(&mut self) {
        if let Some(a) = self.logins.lock().get_mut(&self.jumphost) {
            a.calls = a.calls.saturating_sub(1);
            a.ended = Some(Instant::now());
        }
    }
}

/// Why a question is not shown, if it is not.
fn shown_elsewhere(question: &ssh::Question, logins: &Logins) -> Option<&'static str> {
    if question.askpass.is_some() {
        return Some("SSH_ASKPASS asks it");
    }
    if logins.attended(&question.jumphost) {
        return Some("a person is logging in to it with kharonctl login-jump");
    }
    None
}

/// Shows every question announced on `questions` on the desktop of `session` (see `# When`),
/// one after the other, until the SSH engine is gone. A failure is logged at INFO once, with the
/// way to stop trying, and at DEBUG after that.
pub async fn run(
    logins: Arc<Logins>,
    mut questions: UnboundedReceiver<Arc<ssh::Question>>,
    session: Session,
) {
    let mut failed_before = false;
    while let Some(question) = questions.recv().await {
        let jumphost = kharon_common::text::escape(&question.jumphost).into_owned();
        if let Some(why) = shown_elsewhere(&question, &logins) {
            tracing::debug!(%jumphost, question = question.id, "no desktop notification: {why}");
            continue;
        }
        let notification = message::for_question(&question, SystemTime::now());
        match session.show(&notification).await {
            Ok(()) => tracing::debug!(%jumphost, question = question.id, "desktop notification shown"),
            Err(e) if !failed_before => {
                failed_before = true;
                tracing::info!(
                    %jumphost,
                    "cannot show a desktop notification of the question: {}; `kharonctl status` shows it \
                     (desktop_notifications = false in the config file stops trying)",
                    Chain(&e)
                );
            }
            Err(e) => {
                tracing::debug!(%jumphost, "cannot show a desktop notification of the question: {}", Chain(&e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(askpass: Option<&str>) -> ssh::Question {
        ssh::Question {
            id: 7,
            jumphost: "j".into(),
            hop: "hop 1/1 j (u@h:22)".into(),
            method: ssh::KEYBOARD_INTERACTIVE,
            after: vec!["publickey"],
            refused_keys: Vec::new(),
            name: String::new(),
            instruction: String::new(),
            prompts: Vec::new(),
            asked_at: SystemTime::now(),
            expires_at: SystemTime::now() + Duration::from_secs(90),
            again: false,
            askpass: askpass.map(str::to_owned),
        }
    }

    #[test]
    fn a_question_is_shown_unless_askpass_or_a_login_in_progress_shows_it() {
        let logins = Logins { after: Duration::from_millis(300), ..Logins::default() };
        assert_eq!(shown_elsewhere(&question(None), &logins), None);
        assert!(shown_elsewhere(&question(Some("/usr/bin/ksshaskpass")), &logins).is_some());
        let call = logins.begin("j");
        assert!(shown_elsewhere(&question(None), &logins).is_some());
        assert!(!logins.attended("other"));
        drop(call);
        // The question that follows an answer opens before the call returns: still attended.
        assert!(logins.attended("j"));
        std::thread::sleep(Duration::from_millis(400));
        assert!(!logins.attended("j"));
        assert_eq!(shown_elsewhere(&question(None), &logins), None);
    }

    #[test]
    fn overlapping_calls_keep_it_attended_and_ended_ones_are_forgotten() {
        let logins = Logins { after: Duration::from_millis(100), ..Logins::default() };
        let first = logins.begin("j");
        let second = logins.begin("j");
        drop(first);
        std::thread::sleep(Duration::from_millis(200));
        assert!(logins.attended("j"), "one call still runs");
        drop(second);
        std::thread::sleep(Duration::from_millis(200));
        let _other = logins.begin("k");
        assert_eq!(logins.lock().len(), 1, "j is forgotten: {:?}", logins.lock());
    }
}
