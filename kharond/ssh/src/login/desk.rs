//! Where a jump host's question waits for a person's answer: one [`Desk`] per jump host (in its
//! slot), holding at most one open [`Question`] at a time, the way back for its [`Answers`], and
//! how long connections through that jump host are patient because of it.
//!
//! Owns: what a question shows (every text the server sent, escaped line by line and capped: it
//! is the server's, shown in logs, `status` and on the user's terminal), the one-time hand-over of
//! an answer (the first complete answer for the open question wins; every later one finds it
//! closed), and the patience rule ([`within`]). Knows nothing of SSH: `prompt` has the
//! conversation with the server and puts its questions here; `pool` and the daemon answer them.
//!
//! # Concurrency
//! `inner` is a std mutex held only for field updates, never across an `.await`. Every change is
//! announced on `changed`, which whoever waits for the next step of a login watches
//! ([`Pool::login`](super::Pool::login), [`Pool::answer`](super::Pool::answer)).

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use kharon_common::secret::Secret;
use kharon_common::text::{cap, escape};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// The most characters a question shows of one text of the server's (a name, an instruction, a
/// prompt); a PAM stack's messages fit many times over.
const SHOWN_CHARS: usize = 512;

/// The methods a question can be for, as SSH names them (`Question::method`).
pub const KEYBOARD_INTERACTIVE: &str = "keyboard-interactive";
pub const PASSWORD: &str = "password";

/// Numbers questions for the daemon's life: an answer names the question it answers, so an
/// answer typed for one never goes to the next.
static NEXT_QUESTION: AtomicU64 = AtomicU64::new(1);

/// One prompt of a question, as the server sent it (escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    /// Whether the answer may be shown while typed (a user name) or must not (a code, a password).
    pub echo: bool,
}

/// What a hop asks a person (RFC 4256 §3.2's request, or a password), as people see it: each of
/// the server's texts escaped line by line, its line breaks kept, capped at 512 characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Unique in the daemon's life; an answer names it.
    pub id: u64,
    /// The jump host whose chain asks (the name `kharonctl login-jump` takes).
    pub jumphost: String,
    /// Which hop asks: "hop 1/2 bastion (user@host:port, file:line)".
    pub hop: String,
    /// `keyboard-interactive` or `password`.
    pub method: &'static str,
    /// The methods the server accepted before it asked, as parts of several it requires (RFC 4252
    /// §5.1's partial success), e.g. `publickey`; empty when it asks instead.
    pub after: Vec<&'static str>,
    /// The keys it refused before it asked, when it asks instead of a key.
    pub refused_keys: Vec<String>,
    /// The request's name and instruction (keyboard-interactive), often empty.
    pub name: String,
    pub instruction: String,
    pub prompts: Vec<Prompt>,
    pub asked_at: SystemTime,
    pub expires_at: SystemTime,
    /// The server refused the answer to the question before this one.
    pub again: bool,
    /// The SSH_ASKPASS program that asks too, if one does.
    pub askpass: Option<String>,
}

/// What a question is made of, before the desk numbers and times it.
#[derive(Debug, Default)]
pub(crate) struct Asked {
    pub jumphost: String,
    pub hop: String,
    pub method: &'static str,
    pub after: Vec<&'static str>,
    pub refused_keys: Vec<String>,
    /// As the server sent them; escaped by [`Question`].
    pub name: String,
    pub instruction: String,
    pub prompts: Vec<(String, bool)>,
    pub again: bool,
    pub askpass: Option<String>,
}

/// A server's text as a question shows it: each line escaped, the line breaks between lines
/// kept (PAM puts its messages and the prompt on lines of their own), trailing ones dropped.
pub fn shown(text: &str) -> String {
    let capped = cap(text.trim_end_matches(['\r', '\n']), SHOWN_CHARS);
    capped
        .split('\n')
        .map(|line| escape(line.strip_suffix('\r').unwrap_or(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Question {
    fn new(asked: Asked, wait: Duration) -> Self {
        let asked_at = SystemTime::now();
        Question {
            id: NEXT_QUESTION.fetch_add(1, Ordering::Relaxed),
            jumphost: asked.jumphost,
            hop: asked.hop,
            method: asked.method,
            after: asked.after,
            refused_keys: asked.refused_keys,
            name: shown(&asked.name),
            instruction: shown(&asked.instruction),
            prompts: asked
                .prompts
                .iter()
                .map(|(text, echo)| Prompt { text: shown(text), echo: *echo })
                .collect(),
            asked_at,
            expires_at: asked_at + wait,
            again: asked.again,
            askpass: asked.askpass,
        }
    }

    /// What the server wants, in its terms: "keyboard-interactive after publickey", or
    /// "password (it refused agent key …)".
    pub fn wants(&self) -> String {
        if !self.after.is_empty() {
            return format!("{} after {}", self.method, self.after.join(", "));
        }
        if self.refused_keys.is_empty() {
            return self.method.to_owned();
        }
        format!("{} (it refused {})", self.method, self.refused_keys.join(", "))
    }
}

impl Question {
    /// What the hop wants and asks, without naming the hop (an error names it already), on one
    /// line: `wants keyboard-interactive after publickey and asks "Verification code: "`, every
    /// line break of the server's texts shown as `\n`.
    pub fn asks(&self) -> String {
        let one_line = |text: &str| escape(text).into_owned();
        let prompts: Vec<String> =
            self.prompts.iter().map(|p| format!("\"{}\"", one_line(&p.text))).collect();
        let mut text = format!("wants {} and asks {}", self.wants(), prompts.join(", "));
        let said: Vec<String> = [&self.name, &self.instruction]
            .into_iter()
            .filter(|t| !t.is_empty())
            .map(|t| one_line(t))
            .collect();
        if !said.is_empty() {
            text.push_str(&format!(" ({})", said.join(": ")));
        }
        if self.again {
            text.push_str("; it refused the previous answer");
        }
        text
    }
}

/// One line for logs and `status`: which hop asks what ([`Question::asks`]).
impl fmt::Display for Question {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.hop, self.asks())
    }
}

/// A person's answers to a question, one per prompt, in order. Each is a [`Secret`]: wiped when
/// dropped, never shown by `Debug`; there is no `Display`.
#[derive(Debug, Default)]
pub struct Answers(Vec<Secret>);

impl Answers {
    pub fn new(answers: Vec<Secret>) -> Self {
        Answers(answers)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The answers as the SSH library takes them (plain strings it frees without wiping: the
    /// limit of what can be wiped, docs/ssh-engine.md, "A jump host that asks a person").
    pub(crate) fn to_strings(&self) -> Vec<String> {
        self.0.iter().map(|a| a.as_str().to_owned()).collect()
    }
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("kharond knows no jump host {jumphost}")]
    Unknown { jumphost: String },
    #[error(
        "jump host {jumphost} has no open question {id}: it was answered already (perhaps through \
         SSH_ASKPASS), or it expired"
    )]
    NotOpen { jumphost: String, id: u64 },
    #[error("question {id} of jump host {jumphost} has {expected} prompt(s), and {got} answer(s) came")]
    Count { jumphost: String, id: u64, expected: usize, got: usize },
}

struct Open {
    question: Arc<Question>,
    /// Taken by the first complete answer: an answer is sent once.
    reply: Option<oneshot::Sender<Answers>>,
}

#[derive(Default)]
struct Inner {
    open: Option<Open>,
    /// Until when connections through this jump host wait: a question's end while it is open,
    /// and after an answer the time the rest of the login takes ([`within`]). Only moves on.
    patience: Option<Instant>,
    /// The login of the dial in progress failed for want of a person (nobody answered, the
    /// answers were refused): the pool stops dialling the chain until someone logs in.
    person_failed: bool,
}

/// One jump host's desk (see the module doc).
pub(crate) struct Desk {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

impl fmt::Debug for Desk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Desk").field("question", &self.question().map(|q| q.id)).finish_non_exhaustive()
    }
}

impl Default for Desk {
    fn default() -> Self {
        Desk { inner: Mutex::default(), changed: watch::Sender::new(0) }
    }
}

impl Desk {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Announces a change to whoever watches (the pool calls it when a dial ends, too).
    pub fn touch(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Resolves at every change after the call.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Puts `asked` up for `wait`: the question as shown, and where its answer arrives (closed
    /// without one when the question is replaced or the desk dropped).
    pub fn open(&self, asked: Asked, wait: Duration) -> (Arc<Question>, oneshot::Receiver<Answers>) {
        let question = Arc::new(Question::new(asked, wait));
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            inner.open = Some(Open { question: Arc::clone(&question), reply: Some(tx) });
            inner.patience = Some(later(inner.patience, Instant::now() + wait));
        }
        self.touch();
        (question, rx)
    }

    /// Takes `answers` for the open question `id`, once: they go to the hop that asked.
    pub fn answer(&self, jumphost: &str, id: u64, answers: Answers) -> Result<(), AnswerError> {
        let not_open = || AnswerError::NotOpen { jumphost: jumphost.to_owned(), id };
        let mut inner = self.lock();
        let open = inner.open.as_mut().filter(|o| o.question.id == id).ok_or_else(not_open)?;
        let expected = open.question.prompts.len();
        if answers.len() != expected {
            return Err(AnswerError::Count {
                jumphost: jumphost.to_owned(),
                id,
                expected,
                got: answers.len(),
            });
        }
        let reply = open.reply.take().ok_or_else(not_open)?;
        // The hop gave up on it meanwhile (expired): the answers are dropped, and so wiped.
        reply.send(answers).map_err(|_| not_open())
    }

    /// The hop is done with question `id` (answered or not); connections wait up to `patience`
    /// more for what follows.
    pub fn close(&self, id: u64, patience: Instant) {
        {
            let mut inner = self.lock();
            if inner.open.as_ref().is_some_and(|o| o.question.id == id) {
                inner.open = None;
            }
            inner.patience = Some(later(inner.patience, patience));
        }
        self.touch();
    }

    /// The question open now, if any.
    pub fn question(&self) -> Option<Arc<Question>> {
        self.lock().open.as_ref().map(|o| Arc::clone(&o.question))
    }

    /// Until when connections through this jump host wait for a person (see `Inner::patience`).
    pub fn patience(&self) -> Option<Instant> {
        self.lock().patience
    }

    /// A dial starts: nothing has failed for want of a person yet.
    pub fn dialling(&self) {
        self.lock().person_failed = false;
    }

    /// This dial's login failed for want of a person.
    pub fn person_failed(&self) {
        self.lock().person_failed = true;
    }

    /// Whether this dial's login failed for want of a person.
    pub fn failed_for_person(&self) -> bool {
        self.lock().person_failed
    }
}

fn later(a: Option<Instant>, b: Instant) -> Instant {
    a.map_or(b, |a| a.max(b))
}

/// How long past a question's end a wait gives the hop that asked it to close it ([`within`]).
const CLOSING: Duration = Duration::from_secs(1);

/// Runs `fut` until `deadline`, and past it for as long as `desk`'s jump host waits for a person
/// ([`Desk::patience`]: a question is open, or was answered moments ago and the server's verdict
/// and the rest of the chain are under way). `None` once the time is up. This is the one bound
/// that grows while a person is asked: every wait for a dial (the dial's own, and each
/// connection's) goes through it.
///
/// A question's end is its patience, and the hop's own timer closes it a moment later (prompt.rs),
/// which moves the patience on for what follows (the failed login, or the verdict on an answer
/// that came in the last instant). A wait that is still open at the end gives the hop
/// [`CLOSING`] to do so, once per question: without it, every connection waiting for the
/// question ended a few microseconds before the dial it waited for, with "the SSH handshake took
/// longer than" instead of what became of the question.
pub(crate) async fn within<F: Future>(desk: &Desk, deadline: Instant, fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let mut until = deadline;
    let mut closing = None;
    loop {
        if let Ok(out) = tokio::time::timeout_at(until, &mut fut).await {
            return Some(out);
        }
        match (desk.patience(), desk.question()) {
            (Some(patience), _) if patience > until => until = patience,
            (_, Some(open)) if closing != Some(open.id) => {
                closing = Some(open.id);
                until = Instant::now() + CLOSING;
            }
            _ => return None,
        }
    }
}

/// Why [`asking`] stopped waiting.
pub(crate) enum Stopped {
    /// `deadline` passed.
    Deadline,
    /// A hop asks a person this question.
    Asking(Arc<Question>),
}

/// Runs `fut` until `deadline`, or until a question is open on `desk` (at once if one is): for a
/// wait that reports a question instead of waiting for its answer (kharond's own checks).
pub(crate) async fn asking<F: Future>(desk: &Desk, deadline: Instant, fut: F) -> Result<F::Output, Stopped> {
    let mut fut = std::pin::pin!(fut);
    let mut changes = desk.watch();
    loop {
        if let Some(question) = desk.question() {
            return Err(Stopped::Asking(question));
        }
        tokio::select! {
            out = &mut fut => return Ok(out),
            () = tokio::time::sleep_until(deadline) => return Err(Stopped::Deadline),
            changed = changes.changed() => {
                if changed.is_err() {
                    // The desk is gone (it lives as long as the slot): only the deadline is left.
                    return tokio::time::timeout_at(deadline, fut).await.map_err(|_| Stopped::Deadline);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(prompts: &[&str]) -> Asked {
        Asked {
            jumphost: "j".into(),
            hop: "hop 1/1 j (u@h:22)".into(),
            method: "keyboard-interactive",
            after: vec!["publickey"],
            prompts: prompts.iter().map(|p| ((*p).to_owned(), false)).collect(),
            ..Default::default()
        }
    }

    fn answers(values: &[&str]) -> Answers {
        Answers::new(values.iter().map(|v| Secret::from(*v)).collect())
    }

    #[test]
    fn the_servers_text_is_escaped_line_by_line_and_capped() {
        assert_eq!(
            shown("Enter the code \x1b[31mnow\r\nPassword: \n"),
            "Enter the code \\x1b[31mnow\nPassword: "
        );
        assert_eq!(shown("a\u{202e}b"), "a\\u{202e}b");
        let long = shown(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), SHOWN_CHARS + 1, "capped, with an ellipsis");
        // One line in logs and errors: the server's line breaks shown, never made.
        let desk = Desk::default();
        let (q, _rx) = desk.open(asked(&["Token\nCode: "]), Duration::from_secs(5));
        let line = q.to_string();
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(
            line,
            "hop 1/1 j (u@h:22) wants keyboard-interactive after publickey and asks \"Token\\nCode: \""
        );
    }

    #[test]
    fn debug_never_shows_an_answer() {
        let shown = format!("{:?}", answers(&["123456"]));
        assert!(!shown.contains("123456"), "{shown}");
    }

    #[tokio::test]
    async fn an_answer_goes_to_its_question_once() {
        let desk = Desk::default();
        let (q, rx) = desk.open(asked(&["Code: "]), Duration::from_secs(5));
        let wrong = desk.answer("j", q.id + 1, answers(&["1"]));
        assert!(matches!(wrong, Err(AnswerError::NotOpen { .. })), "another question's id");
        let count = desk.answer("j", q.id, answers(&["1", "2"]));
        assert!(matches!(count, Err(AnswerError::Count { expected: 1, got: 2, .. })));
        desk.answer("j", q.id, answers(&["123456"])).expect("first answer");
        assert!(matches!(desk.answer("j", q.id, answers(&["654321"])), Err(AnswerError::NotOpen { .. })));
        let got = rx.await.expect("answer delivered");
        assert_eq!(got.to_strings(), ["123456"]);
        desk.close(q.id, Instant::now());
        assert!(desk.question().is_none());
    }

    #[tokio::test]
    async fn an_answer_after_the_hop_gave_up_is_refused() {
        let desk = Desk::default();
        let (q, rx) = desk.open(asked(&["Code: "]), Duration::from_secs(5));
        drop(rx);
        assert!(matches!(desk.answer("j", q.id, answers(&["1"])), Err(AnswerError::NotOpen { .. })));
    }

    #[tokio::test]
    async fn a_wait_lasts_while_a_person_is_asked_and_no_longer() {
        let ms = Duration::from_millis;
        let desk = Desk::default();
        let start = Instant::now();
        // Nobody asked: the deadline holds.
        assert!(within(&desk, start + ms(20), std::future::pending::<()>()).await.is_none());
        assert!(start.elapsed() < ms(1000));
        // A question open for 300 ms: the wait lasts until it ends, not longer.
        let start = Instant::now();
        let (q, _rx) = desk.open(asked(&["Code: "]), ms(300));
        assert!(within(&desk, start + ms(20), std::future::pending::<()>()).await.is_none());
        assert!(start.elapsed() >= ms(300) && start.elapsed() < ms(2000), "{:?}", start.elapsed());
        // Answered: the rest of the login gets its own time.
        desk.close(q.id, Instant::now() + ms(500));
        let done = within(&desk, Instant::now(), tokio::time::sleep(ms(100))).await;
        assert!(done.is_some());
    }

    #[tokio::test]
    async fn a_wait_at_a_questions_end_gets_what_became_of_it() {
        let ms = Duration::from_millis;
        let desk = Arc::new(Desk::default());
        let (q, _rx) = desk.open(asked(&["Code: "]), ms(100));
        // The hop closes its question a little after the question's end, and fails its login
        // then; a connection waiting for that login must see it fail, not run out of time.
        let hop = {
            let desk = Arc::clone(&desk);
            async move {
                tokio::time::sleep(ms(300)).await;
                desk.close(q.id, Instant::now() + ms(500));
                "nobody answered"
            }
        };
        let started = Instant::now();
        assert_eq!(within(&desk, started, hop).await, Some("nobody answered"));
        // A question nobody closes does not hold a wait for longer than one grace.
        let desk = Desk::default();
        let (_q, _rx) = desk.open(asked(&["Code: "]), ms(50));
        let started = Instant::now();
        assert!(within(&desk, started, std::future::pending::<()>()).await.is_none());
        assert!(started.elapsed() < ms(50) + CLOSING + ms(500), "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_reporting_wait_stops_at_the_question() {
        let desk = Arc::new(Desk::default());
        let deadline = Instant::now() + Duration::from_secs(10);
        let opener = {
            let desk = Arc::clone(&desk);
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let opened = desk.open(asked(&["Code: "]), Duration::from_secs(30));
                std::future::pending::<()>().await;
                drop(opened);
            }
        };
        match asking(&desk, deadline, opener).await {
            Err(Stopped::Asking(q)) => assert_eq!(q.prompts[0].text, "Code: "),
            _ => panic!("the question was not reported"),
        }
        assert!(Instant::now() < deadline);
    }
}
