//! `kharonctl login-jump JUMPHOST`: answers for kharond what a jump host asks a person beyond a
//! key: a one-time password or another PAM prompt (keyboard-interactive), or a password. kharond
//! has no terminal; while a hop asks, `status` shows the question and connections through the
//! jump host wait for it, and after a login that failed for want of an answer they fail until
//! someone logs in with this command.
//!
//! Shows the question (the server's texts as kharond escaped them, escaped again here), reads one
//! answer per prompt, sends them and shows what follows: the next question (asked the same way),
//! the chain up, or why the login failed. On a terminal an answer is typed hidden unless the
//! server allows it to be shown (a user name); otherwise each answer is a line of standard input.
//! Answers are [`Secret`]s: never printed, wiped when dropped.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use kharon_common::secret::Secret;
use kharon_common::text::Escaped;
use kharon_proto::v1 as pb;
use kharon_proto::v1::jump_login_step::Step;

use crate::context::Context;
use crate::output;

/// Steps one login may take here, at most: questions and looks again after one that was answered
/// elsewhere. kharond asks at most 8 questions per hop; this is only the bound of the loop.
const MOST_STEPS: usize = 32;

#[derive(Debug, clap::Args)]
#[command(after_help = "Some jump hosts want more than your key: sshd with `AuthenticationMethods \
    publickey,keyboard-interactive` asks for a one-time password (or whatever its PAM stack asks) \
    after the key, and a jump host may take a password instead of a key it refused. ssh asks you at \
    its terminal; kharond has none. It shows the question in `kharonctl status` (state \"asking\") \
    and in its log, `kharonctl test` names it, and connections through that jump host wait for the \
    answer as long as the question is open (90 s; then they fail, and so do later ones until you \
    run this command). With SSH_ASKPASS set when kharond started (SSH_ASKPASS_REQUIRE as ssh(1) \
    reads it), that program asks you too; the first answer counts.\n\n\
    This command logs in: it answers the question open now, or dials the jump host and answers \
    what it asks, until the chain is up. On a terminal each answer is typed without echo (unless \
    the server allows echo); otherwise one answer is read per line of standard input. Answers are \
    sent once, to the hop that asked, and kharond neither logs nor keeps them.\n\n\
    Examples:\n  kharonctl login-jump bastion\n  oathtool --totp -b \"$SEED\" | kharonctl login-jump bastion\n\n\
    Exit codes: 0 the jump host's chain is up; 1 the login failed (wrong answers, no answer in time, \
    the jump host unreachable) or kharond routes through no such jump host; 2 standard input ended \
    before an answer; 3 kharond is not running.")]
pub struct Args {
    /// The jump host, as `kharonctl status` lists it
    #[arg(value_name = "JUMPHOST")]
    pub jumphost: String,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// Standard input ended before an answer: the command line's fault (exit 2), not kharond's.
#[derive(Debug, thiserror::Error)]
#[error("standard input ended before an answer to {prompt:?}")]
pub struct NoAnswer {
    prompt: String,
}

pub async fn run(args: Args, ctx: &Context) -> anyhow::Result<ExitCode> {
    let jumphost = args.jumphost;
    let mut daemon = ctx.daemon().await?;
    let mut step = daemon.jump_login(&jumphost).await?;
    let mut input = Input::new();
    for _ in 0..MOST_STEPS {
        match step.step {
            Some(Step::Question(question)) => {
                show(&question);
                let answers = match input.answers(&question) {
                    Ok(answers) => answers,
                    Err(e) if e.downcast_ref::<NoAnswer>().is_some() => {
                        eprintln!("kharonctl: {}", kharon_common::errors::shown(e.as_ref()));
                        return Ok(ExitCode::from(crate::exit::USAGE));
                    }
                    Err(e) => return Err(e),
                };
                step = match daemon.jump_answer(&jumphost, question.id, &answers).await {
                    Ok(next) => next,
                    // Answered through SSH_ASKPASS meanwhile, or expired: see where it stands.
                    Err(e) if e.is_stale() => {
                        eprintln!("{}; looking again", kharon_common::errors::shown(&e));
                        daemon.jump_login(&jumphost).await?
                    }
                    Err(e) => return Err(e.into()),
                };
            }
            Some(Step::Connected(_)) => {
                println!("jump host {} is connected", Escaped(&jumphost));
                return Ok(ExitCode::SUCCESS);
            }
            Some(Step::Failed(why)) => {
                anyhow::bail!("logging in to jump host {} failed: {}", Escaped(&jumphost), Escaped(&why));
            }
            None => anyhow::bail!("kharond's answer to the login said nothing"),
        }
    }
    anyhow::bail!("jump host {} was still asking after {MOST_STEPS} steps; giving up", Escaped(&jumphost))
}

/// Who asks, what the server wants and said, and until when, on standard error (standard output
/// stays for the result).
fn show(q: &pb::JumpQuestion) {
    eprintln!("jump host {}: {} wants {}", Escaped(&q.jumphost), Escaped(&q.hop), Escaped(&q.wants));
    for text in [&q.name, &q.instruction] {
        for line in text.lines().filter(|l| !l.is_empty()) {
            eprintln!("  {}", Escaped(line));
        }
    }
    if q.again {
        eprintln!("  it refused the previous answer; try again");
    }
    let left = u64::try_from((q.expires_at_ms - now_ms()).max(0) / 1000).unwrap_or(0);
    let askpass = if q.askpass.is_empty() {
        String::new()
    } else {
        format!("; SSH_ASKPASS {} asks too", Escaped(&q.askpass))
    };
    eprintln!("  (open for {} more{askpass})", output::age(left));
}

/// Where answers come from: the terminal, or lines of standard input.
struct Input {
    terminal: bool,
}

impl Input {
    fn new() -> Self {
        Input { terminal: std::io::stdin().is_terminal() }
    }

    /// One answer per prompt of `q`, in order.
    fn answers(&mut self, q: &pb::JumpQuestion) -> anyhow::Result<Vec<Secret>> {
        q.prompts.iter().map(|p| self.answer(p)).collect()
    }

    fn answer(&mut self, prompt: &pb::JumpPrompt) -> anyhow::Result<Secret> {
        // A PAM stack puts its messages on lines above the prompt itself.
        let mut lines: Vec<String> = prompt.text.lines().map(|l| Escaped(l).to_string()).collect();
        let last = lines.pop().unwrap_or_default();
        for line in &lines {
            eprintln!("{line}");
        }
        if self.terminal && !prompt.echo {
            // Read from the terminal itself, without echo.
            let answer =
                rpassword::prompt_password(&last).context("cannot read the answer on the terminal")?;
            return Ok(Secret::new(answer));
        }
        eprint!("{last}");
        if !self.terminal {
            eprintln!();
        }
        let _ = std::io::stderr().flush();
        // Room for a line at once: a growing buffer would leave freed copies of the answer.
        let mut buffer = String::with_capacity(256);
        let read = std::io::stdin().lock().read_line(&mut buffer);
        let line = Secret::new(buffer);
        read.context("cannot read the answer from standard input")?;
        if line.is_empty() {
            return Err(NoAnswer { prompt: last }.into());
        }
        Ok(Secret::from(line.trim_end_matches(['\r', '\n'])))
    }
}
