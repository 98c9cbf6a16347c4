//! What a desktop notification says when a jump host asks a person: which jump host, what it
//! asks for, and the command that answers it, with the time left. Pure text, the same on every
//! system.
//!
//! The jump host's name comes from the inventory, which is not ours to trust: the routing table
//! admits only plain ssh_config aliases (`kharon_routing::inventory::check_jumphost`), and what a
//! notification shows of a name is checked again here. Any character but ASCII letters, digits,
//! `-`, `_` and `.` is shown as an escape (`\x3c`), so no control character, line break or markup
//! (`<b>`, `&amp;`: a freedesktop server may render the body's markup) reaches the desktop, and a
//! name shows at most [`SHOWN_CHARS`] characters. Nothing the jump host's server said (its
//! prompt, its instruction) is shown: `kharonctl login-jump` shows it, on a terminal.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use kharon_common::text::cap;
use kharon_ssh as ssh;

/// The most characters of a jump host's name a notification shows; a longer one is cut, with an
/// ellipsis.
pub const SHOWN_CHARS: usize = 64;

/// One notification, as every desktop takes it: a title, a body, and how long it stays up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub title: String,
    pub body: String,
    /// Until the question expires: a notification left after that would ask for an answer nobody
    /// takes any more.
    pub expires_in: Duration,
}

/// A jump host's name as a notification shows it (see the module doc).
pub fn shown_jumphost(name: &str) -> String {
    let mut out = String::new();
    for c in cap(name, SHOWN_CHARS).chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '…') {
            out.push(c);
        } else if u32::from(c) < 0x80 {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
    out
}

/// What the question asks for, in a person's words.
fn asks_for(method: &str) -> &'static str {
    if method == ssh::PASSWORD { "a password" } else { "a one-time password" }
}

/// "1m 30s", "45s": the time a question has left, in whole seconds (never "0s": a question
/// announced has at least a moment left).
fn left(d: Duration) -> String {
    let secs = d.as_secs().max(1);
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m {s}s"),
    }
}

/// The notification for `question`, asked of a person at `now`.
pub fn for_question(question: &ssh::Question, now: SystemTime) -> Notification {
    let jumphost = shown_jumphost(&question.jumphost);
    let expires_in = question.expires_at.duration_since(now).unwrap_or_default();
    Notification {
        title: format!("Jump host {jumphost} asks for {}", asks_for(question.method)),
        body: format!(
            "Run `kharonctl login-jump {jumphost}` within {} to answer it; connections through {jumphost} \
             wait until then.",
            left(expires_in)
        ),
        expires_in,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(jumphost: &str, method: &'static str) -> (ssh::Question, SystemTime) {
        let asked_at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let question = ssh::Question {
            id: 1,
            jumphost: jumphost.to_owned(),
            hop: format!("hop 1/1 {jumphost} (u@h:22)"),
            method,
            after: vec!["publickey"],
            refused_keys: Vec::new(),
            name: String::new(),
            instruction: String::new(),
            prompts: vec![ssh::Prompt { text: "Verification code: ".into(), echo: false }],
            asked_at,
            expires_at: asked_at + Duration::from_secs(90),
            again: false,
            askpass: None,
        };
        (question, asked_at)
    }

    #[test]
    fn it_names_the_jump_host_what_it_asks_for_and_the_command() {
        let (q, at) = question("acme-rma1-bastion", ssh::KEYBOARD_INTERACTIVE);
        let n = for_question(&q, at);
        assert_eq!(n.title, "Jump host acme-rma1-bastion asks for a one-time password");
        assert_eq!(
            n.body,
            "Run `kharonctl login-jump acme-rma1-bastion` within 1m 30s to answer it; connections through \
             acme-rma1-bastion wait until then."
        );
        assert_eq!(n.expires_in, Duration::from_secs(90));
        let (q, at) = question("j", ssh::PASSWORD);
        let n = for_question(&q, at + Duration::from_secs(75));
        assert_eq!(n.title, "Jump host j asks for a password");
        assert!(n.body.contains("within 15s"), "{}", n.body);
        assert_eq!(n.expires_in, Duration::from_secs(15));
        // Announced late: never a negative or zero time.
        let n = for_question(&q, at + Duration::from_secs(600));
        assert!(n.body.contains("within 1s"), "{}", n.body);
        assert_eq!(n.expires_in, Duration::ZERO);
    }

    #[test]
    fn a_hostile_name_reaches_the_desktop_escaped_and_capped() {
        assert_eq!(shown_jumphost("management4.rma1.example-net_2"), "management4.rma1.example-net_2");
        assert_eq!(
            shown_jumphost("j\n<b>x</b>&amp;\u{1b}[31m\u{202e}"),
            "j\\x0a\\x3cb\\x3ex\\x3c\\x2fb\\x3e\\x26amp\\x3b\\x1b\\x5b31m\\u{202e}"
        );
        let long = shown_jumphost(&"a".repeat(10_000));
        assert_eq!(long, format!("{}…", "a".repeat(SHOWN_CHARS)));
        let (q, at) = question("-rf <i>", ssh::KEYBOARD_INTERACTIVE);
        let n = for_question(&q, at);
        assert!(n.title.starts_with("Jump host -rf\\x20\\x3ci\\x3e asks"), "{}", n.title);
        for text in [&n.title, &n.body] {
            assert!(
                !text.contains(['<', '>', '&', '\n']) && !text.contains(kharon_common::text::needs_escape)
            );
        }
    }
}
