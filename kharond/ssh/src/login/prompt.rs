//! Logins a person finishes: a hop that wants keyboard-interactive answers (a one-time password,
//! a PAM prompt; RFC 4256) or a password, after the key or instead of it.
//!
//! sshd asks for more than a key with `AuthenticationMethods publickey,keyboard-interactive`: it
//! takes the key as one of several methods it requires and says so with a partial success (RFC
//! 4252 §5.1), naming the methods that may follow. A server without that line may take a
//! password or keyboard-interactive instead of a key it refused. ssh asks the person at its
//! terminal then, or through SSH_ASKPASS when it has none (OpenSSH sshconnect2.c,
//! `input_userauth_info_req` and `userauth_passwd`). kharond has no terminal. Once `auth` has
//! offered the keys:
//!
//! 1. [`Verdict`] keeps what the server said of them: the methods it still takes, and what it
//!    accepted as part of several. Keys are offered while it still lists `publickey`.
//! 2. When it takes keyboard-interactive or a password, and the hop's ssh config lets ssh ask
//!    for it (`config::Asking`: `BatchMode`, `KbdInteractiveAuthentication`,
//!    `PasswordAuthentication`, the order of `PreferredAuthentications`, keyboard-interactive
//!    first by default), [`finish`] runs that method, and every prompt a person
//!    must answer becomes a question on the jump host's desk (`desk`): `Status` shows it,
//!    `kharonctl login-jump J` answers it, and the user's SSH_ASKPASS program asks it too when
//!    ssh's rules allow one (`askpass`). The first complete answer is sent, once. A request with
//!    no prompts (PAM's last round) gets the empty reply it asks for, as from ssh.
//! 3. Nothing is guessed: no empty answer for a question nobody answered. A question stays open
//!    `LoginSettings::answer_wait`; connections through the jump host wait for it meanwhile
//!    (`desk::within`). A refused answer is asked again, up to `NumberOfPasswordPrompts` times
//!    per method (3 unless set); a login that fails for want of an answer leaves
//!    the chain waiting for `kharonctl login-jump` (`pool`), so nobody is asked again and again
//!    by connections in the background.
//! 4. When the server wants what no person can give here (hostbased, GSSAPI, one more key), or
//!    what the ssh config does not let anyone be asked for, the error says what it wants and
//!    after what: "wants hostbased after publickey".

use std::collections::HashMap;
use std::time::Duration;

use russh::client::{self, KeyboardInteractiveAuthResponse};
use russh::{MethodKind, MethodSet};
use tokio::time::Instant;

use crate::login::askpass::Askpass;
use crate::login::desk::{Answers, Asked, Desk, KEYBOARD_INTERACTIVE, PASSWORD};
use kharon_ssh_config::{Asking, Hop};

/// Questions a person is asked in one login of one hop, at most.
const MAX_QUESTIONS: u32 = 8;
/// Keyboard-interactive requests in one login, with or without prompts, at most: a server that
/// keeps sending empty ones cannot hold the login forever.
const MAX_ROUNDS: u32 = 32;

/// Where a chain's questions go: its jump host's desk, and how long each stays open.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Asker<'a> {
    pub desk: &'a Desk,
    /// The name `kharonctl login-jump` takes.
    pub jumphost: &'a str,
    pub wait: Duration,
    /// Where each question is announced as it is asked ([`PoolSettings::questions`]).
    ///
    /// [`PoolSettings::questions`]: super::PoolSettings::questions
    pub announce: Option<&'a QuestionSender>,
}

/// Where the pool announces every question a hop asks a person.
pub type QuestionSender = tokio::sync::mpsc::UnboundedSender<std::sync::Arc<super::desk::Question>>;

/// One hop's side of it.
pub(crate) struct Person<'a> {
    pub asker: Asker<'a>,
    /// How questions and errors name the hop: "hop 1/2 bastion (user@host:port, file:line)".
    pub hop: String,
    /// kharond's environment at start, which SSH_ASKPASS is looked up in and runs with.
    pub env: &'a HashMap<String, String>,
    /// How long connections wait after an answer: the server's verdict and the rest of the chain.
    pub after_answer: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server wants a method no one may be asked for here, after the ones it accepted.
    #[error("{}", wants_text(after, wants, accepted_key.as_deref(), unable))]
    Wants { after: Vec<&'static str>, wants: Vec<&'static str>, accepted_key: Option<String>, unable: Unable },
    #[error(
        "nobody answered within {}: it {asks}; run `kharonctl login-jump {jumphost}` to answer it{}",
        humantime_secs(*waited),
        askpass_note(askpass.as_deref())
    )]
    Unanswered { jumphost: String, asks: String, waited: Duration, askpass: Option<String> },
    #[error(
        "it refused {attempts} answers to its {method} questions; run `kharonctl login-jump {jumphost}` to try again"
    )]
    Refused { jumphost: String, method: &'static str, attempts: u32 },
    #[error(
        "it asked more than {MAX_QUESTIONS} questions in one login; run `kharonctl login-jump {jumphost}` to try again"
    )]
    TooMany { jumphost: String },
    /// The session ended (sshd's `LoginGraceTime`, a dead link) during the method's exchange.
    #[error("the session ended during its {method} login")]
    Session { method: &'static str, source: russh::Error },
}

/// Why nobody is asked for what the server wants next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unable {
    /// No person can answer it (hostbased, GSSAPI, another key).
    Cannot,
    /// The hop's ssh config turns it off (`KbdInteractiveAuthentication no`, …).
    NotAllowed,
    /// `BatchMode yes`, at this file:line.
    Batch(String),
}

fn wants_text(after: &[&str], wants: &[&str], accepted_key: Option<&str>, unable: &Unable) -> String {
    let accepted = accepted_key.map(|k| format!("it accepted {k}, but ")).unwrap_or_default();
    let after = after.join(", ");
    if wants.is_empty() {
        return format!("{accepted}it offers no method to go on with after {after}");
    }
    let wants = wants.join(" or ");
    match unable {
        Unable::Batch(origin) => format!(
            "{accepted}it wants {wants} after {after}, and BatchMode yes ({origin}) lets nobody be asked for it, \
             as it keeps ssh from asking"
        ),
        Unable::NotAllowed => format!(
            "{accepted}it wants {wants} after {after}, which this hop's ssh config does not let anyone be asked \
             for (KbdInteractiveAuthentication, PasswordAuthentication, PreferredAuthentications, \
             NumberOfPasswordPrompts)"
        ),
        Unable::Cannot if wants == "publickey" => {
            format!(
                "{accepted}it wants publickey after {after}: one more key, and it accepted none of the others"
            )
        }
        Unable::Cannot => format!(
            "{accepted}it wants {wants} after {after}, which kharond cannot do (beyond keys, it answers \
             keyboard-interactive and password prompts only)"
        ),
    }
}

fn askpass_note(askpass: Option<&str>) -> String {
    askpass
        .map(|p| format!(" (SSH_ASKPASS {} asked too)", kharon_common::text::escape(p)))
        .unwrap_or_default()
}

/// "1m 30s", "2s".
fn humantime_secs(d: Duration) -> String {
    let secs = d.as_secs();
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m {s}s"),
    }
}

/// What the server said of the keys (module doc, step 1).
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// The methods it listed after its last answer; `None` before it answered any.
    methods: Option<MethodSet>,
    /// The methods it accepted as parts of several, in order.
    accepted: Vec<&'static str>,
    /// The key it accepted, as `auth` names it.
    accepted_key: Option<String>,
    /// The keys it refused.
    refused: Vec<String>,
}

fn askable(method: &MethodKind) -> bool {
    matches!(method, MethodKind::KeyboardInteractive | MethodKind::Password)
}

impl Verdict {
    /// Records the server's answer to `method` (`label`: which key, for a key) that did not end
    /// the login; whether more keys may still help (it still lists `publickey`).
    pub fn heard(&mut self, method: MethodKind, label: &str, remaining: MethodSet, partial: bool) -> bool {
        if remaining.is_empty() && !partial {
            // russh's answer when the session ended during the request (`wait_recv_reply` in
            // client/mod.rs), and it ends the session itself when a server lists nothing: not a
            // wish of the server's. The next request finds the session closed (sshd's
            // MaxAuthTries: `auth` then names the server's disconnect message).
            return true;
        }
        if partial {
            self.accepted.push(<&'static str>::from(&method));
            if method == MethodKind::PublicKey {
                self.accepted_key = Some(label.to_owned());
            }
        } else if method == MethodKind::PublicKey {
            self.refused.push(label.to_owned());
        }
        let more = remaining.contains(&MethodKind::PublicKey);
        self.methods = Some(remaining);
        more
    }

    /// Whether the server has said anything yet.
    pub fn heard_any(&self) -> bool {
        self.methods.is_some()
    }

    /// Whether keys are still worth offering.
    pub fn keys_wanted(&self) -> bool {
        self.methods.as_ref().is_none_or(|m| m.contains(&MethodKind::PublicKey))
    }

    /// Whether the keys were not the end of it: the server accepted one as part of several, or
    /// takes a method a person may be asked for (`asking`). Otherwise what `auth` says of the
    /// keys is the whole story.
    pub fn beyond_keys(&self, asking: &Asking) -> bool {
        !self.accepted.is_empty() || (asking.batch_mode.is_none() && self.next(asking).is_some())
    }

    /// The first method `asking` allows that the server takes.
    fn next(&self, asking: &Asking) -> Option<MethodKind> {
        let methods = self.methods.as_ref()?;
        asking.methods.iter().filter_map(|m| m.parse::<MethodKind>().ok()).find(|m| methods.contains(m))
    }
}

/// How one method's exchange ended, when it did not end the session.
enum Outcome {
    Done,
    Failed { remaining: MethodSet, partial: bool },
}

/// One hop's login past its keys.
struct Login {
    verdict: Verdict,
    /// Refused answers per method.
    refusals: HashMap<&'static str, u32>,
    questions: u32,
    rounds: u32,
    /// The server refused the previous answer.
    again: bool,
    /// A person was asked something in this login.
    asked: bool,
}

/// Finishes the login of `hop` after its keys as the server's `verdict` allows (module doc).
/// When it fails after a person was asked, the desk records it: the pool then waits for
/// `kharonctl login-jump` instead of dialling again by itself.
pub(crate) async fn finish<H: client::Handler>(
    handle: &mut client::Handle<H>,
    hop: &Hop,
    person: &Person<'_>,
    verdict: Verdict,
) -> Result<(), Error> {
    let mut login =
        Login { verdict, refusals: HashMap::new(), questions: 0, rounds: 0, again: false, asked: false };
    let result = login.run(handle, hop, person).await;
    if result.is_err() && login.asked {
        person.asker.desk.person_failed();
    }
    result
}

impl Login {
    async fn run<H: client::Handler>(
        &mut self,
        handle: &mut client::Handle<H>,
        hop: &Hop,
        person: &Person<'_>,
    ) -> Result<(), Error> {
        loop {
            let methods = self.verdict.methods.clone().unwrap_or_else(MethodSet::empty);
            let wants = || Error::Wants {
                after: self.verdict.accepted.clone(),
                wants: methods.iter().map(<&'static str>::from).collect(),
                accepted_key: self.verdict.accepted_key.clone(),
                unable: match &hop.asking.batch_mode {
                    Some(origin) => Unable::Batch(origin.to_string()),
                    None if methods.iter().any(askable) => Unable::NotAllowed,
                    None => Unable::Cannot,
                },
            };
            let method = match (&hop.asking.batch_mode, self.verdict.next(&hop.asking)) {
                (None, Some(method)) => method,
                _ => return Err(wants()),
            };
            let outcome = if method == MethodKind::Password {
                self.password(handle, hop, person).await?
            } else {
                self.keyboard_interactive(handle, hop, person).await?
            };
            let (remaining, partial) = match outcome {
                Outcome::Done => return Ok(()),
                Outcome::Failed { remaining, partial } => (remaining, partial),
            };
            let name = <&'static str>::from(&method);
            if partial {
                self.again = false;
            } else {
                let refused = self.refusals.entry(name).or_default();
                *refused += 1;
                if *refused >= hop.asking.attempts {
                    return Err(Error::Refused {
                        jumphost: person.asker.jumphost.to_owned(),
                        method: name,
                        attempts: *refused,
                    });
                }
                self.again = true;
                tracing::info!(jumphost = %person.asker.jumphost, hop = %person.hop, "the answer was refused; asking again");
            }
            self.verdict.heard(method, name, remaining, partial);
        }
    }

    async fn keyboard_interactive<H: client::Handler>(
        &mut self,
        handle: &mut client::Handle<H>,
        hop: &Hop,
        person: &Person<'_>,
    ) -> Result<Outcome, Error> {
        let session = |source| Error::Session { method: KEYBOARD_INTERACTIVE, source };
        let mut reply = handle
            .authenticate_keyboard_interactive_start(hop.user.clone(), None::<String>)
            .await
            .map_err(session)?;
        loop {
            match reply {
                KeyboardInteractiveAuthResponse::Success => return Ok(Outcome::Done),
                KeyboardInteractiveAuthResponse::Failure { remaining_methods, partial_success } => {
                    return Ok(Outcome::Failed { remaining: remaining_methods, partial: partial_success });
                }
                KeyboardInteractiveAuthResponse::InfoRequest { name, instructions, prompts } => {
                    self.rounds += 1;
                    if self.rounds > MAX_ROUNDS {
                        return Err(Error::TooMany { jumphost: person.asker.jumphost.to_owned() });
                    }
                    let answers = if prompts.is_empty() {
                        Answers::default()
                    } else {
                        let prompts = prompts.into_iter().map(|p| (p.prompt, p.echo)).collect();
                        self.ask(person, hop, KEYBOARD_INTERACTIVE, name, instructions, prompts).await?
                    };
                    reply = handle
                        .authenticate_keyboard_interactive_respond(answers.to_strings())
                        .await
                        .map_err(session)?;
                }
            }
        }
    }

    async fn password<H: client::Handler>(
        &mut self,
        handle: &mut client::Handle<H>,
        hop: &Hop,
        person: &Person<'_>,
    ) -> Result<Outcome, Error> {
        // ssh's own prompt for it (sshconnect2.c `userauth_passwd`).
        let prompt = format!("{}@{}'s password: ", hop.user, hop.known_hosts_name());
        let answers =
            self.ask(person, hop, PASSWORD, String::new(), String::new(), vec![(prompt, false)]).await?;
        let password = answers.to_strings().into_iter().next().unwrap_or_default();
        let result = handle
            .authenticate_password(hop.user.clone(), password)
            .await
            .map_err(|source| Error::Session { method: PASSWORD, source })?;
        Ok(match result {
            client::AuthResult::Success => Outcome::Done,
            client::AuthResult::Failure { remaining_methods, partial_success } => {
                Outcome::Failed { remaining: remaining_methods, partial: partial_success }
            }
        })
    }

    /// Puts one question on the desk and waits for its answer: from `kharonctl login-jump` or
    /// the SSH_ASKPASS program, whichever is first, for at most the person's time.
    async fn ask(
        &mut self,
        person: &Person<'_>,
        hop: &Hop,
        method: &'static str,
        name: String,
        instruction: String,
        prompts: Vec<(String, bool)>,
    ) -> Result<Answers, Error> {
        let jumphost = person.asker.jumphost;
        self.questions += 1;
        if self.questions > MAX_QUESTIONS {
            return Err(Error::TooMany { jumphost: jumphost.to_owned() });
        }
        self.asked = true;
        let askpass = Askpass::from_env(person.env);
        let asked = Asked {
            jumphost: jumphost.to_owned(),
            hop: person.hop.clone(),
            method,
            after: self.verdict.accepted.clone(),
            refused_keys: if self.verdict.accepted.is_empty() {
                self.verdict.refused.clone()
            } else {
                Vec::new()
            },
            name,
            instruction,
            prompts,
            again: self.again,
            askpass: askpass.as_ref().map(|a| a.program().to_owned()),
        };
        let desk = person.asker.desk;
        let wait = person.asker.wait;
        let (question, mut reply) = desk.open(asked, wait);
        if let Some(announce) = person.asker.announce {
            // Nobody listening (the daemon does not notify) is not an error.
            let _ = announce.send(std::sync::Arc::clone(&question));
        }
        let through = askpass_note(question.askpass.as_deref());
        tracing::warn!(
            "jump host {jumphost} asks a person: {question}; answer with `kharonctl login-jump {jumphost}` within {}{through}",
            humantime_secs(wait)
        );
        let deadline = Instant::now() + wait;
        // ssh's `user@host` for the prompt it shows (HostKeyAlias, else the host name).
        let login = format!("{}@{}", hop.user, hop.known_hosts_name());
        let mut asking = std::pin::pin!(async {
            match &askpass {
                Some(program) => Some(program.ask(person.env, &question, &login).await),
                None => None,
            }
        });
        let mut askpass_done = askpass.is_none();
        let answers = loop {
            tokio::select! {
                answers = &mut reply => break answers.ok(),
                asked = &mut asking, if !askpass_done => {
                    askpass_done = true;
                    match asked {
                        Some(Ok(answers)) => {
                            // Answered through kharonctl a moment before: that answer counts.
                            if let Err(e) = desk.answer(jumphost, question.id, answers) {
                                tracing::debug!("SSH_ASKPASS answered too late: {e}");
                            }
                        }
                        Some(Err(declined)) => tracing::info!(
                            "SSH_ASKPASS {} gave no answer: {}; the question stays open for `kharonctl \
                             login-jump {jumphost}`",
                            kharon_common::text::escape(question.askpass.as_deref().unwrap_or_default()),
                            kharon_common::errors::Chain(&declined)
                        ),
                        None => {}
                    }
                }
                () = tokio::time::sleep_until(deadline) => break None,
            }
        };
        desk.close(question.id, Instant::now() + person.after_answer);
        match answers {
            Some(answers) => {
                tracing::info!("jump host {jumphost}: question {} answered", question.id);
                Ok(answers)
            }
            None => Err(Error::Unanswered {
                jumphost: jumphost.to_owned(),
                asks: question.asks(),
                waited: wait,
                askpass: question.askpass.clone(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kharon_ssh_config::Origin;

    fn set(methods: &[MethodKind]) -> MethodSet {
        MethodSet::from(methods)
    }

    #[test]
    fn keys_go_on_while_the_server_takes_them_and_a_person_is_needed_beyond() {
        let asking = Asking::default();
        let mut v = Verdict::default();
        assert!(v.keys_wanted() && !v.heard_any() && !v.beyond_keys(&asking));
        // sshd without AuthenticationMethods, after a refused key: more keys, or a person.
        let more = v.heard(
            MethodKind::PublicKey,
            "agent key a",
            set(&[MethodKind::PublicKey, MethodKind::KeyboardInteractive]),
            false,
        );
        assert!(more && v.beyond_keys(&asking));
        // Not when the ssh config keeps ssh from asking: the refused keys are the whole story.
        let origin = Origin { file: "/home/u/.ssh/config".into(), line: 7 };
        let batch = Asking { batch_mode: Some(origin), ..Asking::default() };
        assert!(!v.beyond_keys(&batch));
        let no_kbd = Asking { methods: vec!["password"], ..Asking::default() };
        assert!(!v.beyond_keys(&no_kbd));
        // `publickey,keyboard-interactive`: the key is accepted as the first of two.
        let mut v = Verdict::default();
        let more =
            v.heard(MethodKind::PublicKey, "agent key a", set(&[MethodKind::KeyboardInteractive]), true);
        assert!(!more && !v.keys_wanted() && v.beyond_keys(&asking) && v.beyond_keys(&batch));
        assert_eq!(v.accepted, ["publickey"]);
        assert_eq!(v.accepted_key.as_deref(), Some("agent key a"));
        // Only keys, refused: nothing for a person.
        let mut v = Verdict::default();
        v.heard(MethodKind::PublicKey, "agent key a", set(&[MethodKind::PublicKey]), false);
        assert!(!v.beyond_keys(&asking));
        // A session that ended (MaxAuthTries) says nothing: the next key finds it closed.
        let mut v = Verdict::default();
        assert!(v.heard(MethodKind::PublicKey, "agent key a", MethodSet::empty(), false));
        assert!(!v.heard_any() && v.keys_wanted());
    }

    #[test]
    fn what_the_server_wants_is_named_after_what_it_accepted() {
        let e = Error::Wants {
            after: vec!["publickey"],
            wants: vec!["hostbased"],
            accepted_key: Some("agent key k (SHA256:x)".into()),
            unable: Unable::Cannot,
        };
        assert_eq!(
            e.to_string(),
            "it accepted agent key k (SHA256:x), but it wants hostbased after publickey, which kharond cannot do \
             (beyond keys, it answers keyboard-interactive and password prompts only)"
        );
        let e = Error::Wants {
            after: vec!["publickey"],
            wants: vec!["keyboard-interactive"],
            accepted_key: None,
            unable: Unable::Batch("/home/u/.ssh/config:7".into()),
        };
        assert_eq!(
            e.to_string(),
            "it wants keyboard-interactive after publickey, and BatchMode yes (/home/u/.ssh/config:7) lets nobody \
             be asked for it, as it keeps ssh from asking"
        );
        let e = Error::Unanswered {
            jumphost: "j".into(),
            asks: "wants keyboard-interactive after publickey and asks \"Code: \"".into(),
            waited: Duration::from_secs(90),
            askpass: None,
        };
        assert_eq!(
            e.to_string(),
            "nobody answered within 1m 30s: it wants keyboard-interactive after publickey and asks \"Code: \"; run \
             `kharonctl login-jump j` to answer it"
        );
    }
}
