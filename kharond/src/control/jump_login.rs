//! `JumpLogin` and `JumpAnswer`: a person logs in to a jump host whose chain asks for more than a
//! key (a one-time password or another PAM prompt, a password; the SSH engine's `prompt`), with
//! `kharonctl login-jump`. Converts between the proto messages and the engine's login steps, and
//! maps an answer that was not taken to its gRPC code.
//!
//! The answers are secrets from the moment they come off the request: moved out of it (no copy)
//! into [`ssh::Answers`], which wipe them when dropped, and handed to the engine, which sends them
//! once, to the hop that asked. Nothing here logs, keeps or repeats them; an error names the
//! question, never an answer. Only the daemon's own user gets this far (`caller`).
//!
//! Only the jump hosts of the routing table in force may be logged in to: a name kharond does not
//! route through would otherwise be dialled as an ssh_config alias of its own. While a call runs
//! (and a moment after), the jump host counts as attended: the questions that follow on the
//! person's terminal get no desktop notification (`desktop`).

use std::time::{SystemTime, UNIX_EPOCH};

use kharon_common::secret::Secret;
use kharon_proto::v1 as pb;
use tonic::Status;

use crate::state::State;
use kharon_ssh as ssh;

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)).unwrap_or(0)
}

/// A question as the control API carries it.
pub fn question(q: &ssh::Question) -> pb::JumpQuestion {
    pb::JumpQuestion {
        id: q.id,
        jumphost: q.jumphost.clone(),
        hop: q.hop.clone(),
        method: q.method.to_owned(),
        wants: q.wants(),
        name: q.name.clone(),
        instruction: q.instruction.clone(),
        prompts: q.prompts.iter().map(|p| pb::JumpPrompt { text: p.text.clone(), echo: p.echo }).collect(),
        asked_at_ms: unix_ms(q.asked_at),
        expires_at_ms: unix_ms(q.expires_at),
        again: q.again,
        askpass: q.askpass.clone().unwrap_or_default(),
        summary: q.to_string(),
    }
}

fn step(step: ssh::LoginStep) -> pb::JumpLoginStep {
    use pb::jump_login_step::Step;
    let step = match step {
        ssh::LoginStep::Asked(q) => Step::Question(question(&q)),
        ssh::LoginStep::Connected => Step::Connected(true),
        ssh::LoginStep::Failed(why) => Step::Failed(why),
    };
    pb::JumpLoginStep { step: Some(step) }
}

/// NOT_FOUND unless the routing table in force routes through `jumphost`.
fn routed(state: &State, jumphost: &str) -> Result<(), Status> {
    if state.routes.current().table().jumphosts().iter().any(|j| j == jumphost) {
        return Ok(());
    }
    Err(Status::not_found(format!(
        "kharond routes through no jump host {:?}; `kharonctl status` lists the jump hosts it uses",
        kharon_common::text::escape(jumphost)
    )))
}

/// `JumpLogin`: the question a hop asks now, or a dial and its first step.
pub async fn login(state: &State, jumphost: &str) -> Result<pb::JumpLoginStep, Status> {
    routed(state, jumphost)?;
    let _attended = state.logins.begin(jumphost);
    let generation = state.routes.current();
    match generation.pool.login(jumphost).await {
        Ok(s) => Ok(step(s)),
        Err(e) => Ok(step(ssh::LoginStep::Failed(kharon_common::errors::chain(&e)))),
    }
}

/// `JumpAnswer`: the answers to the hop that asked, once, and what follows.
pub async fn answer(state: &State, request: pb::JumpAnswerRequest) -> Result<pb::JumpLoginStep, Status> {
    let pb::JumpAnswerRequest { jumphost, question_id, answers } = request;
    let answers = ssh::Answers::new(answers.into_iter().map(Secret::from).collect());
    routed(state, &jumphost)?;
    let _attended = state.logins.begin(&jumphost);
    let generation = state.routes.current();
    match generation.pool.answer(&jumphost, question_id, answers).await {
        Ok(s) => Ok(step(s)),
        Err(e) => {
            let message = kharon_common::errors::chain(&e);
            Err(match e {
                ssh::AnswerError::Unknown { .. } => Status::not_found(message),
                ssh::AnswerError::NotOpen { .. } => Status::failed_precondition(message),
                ssh::AnswerError::Count { .. } => Status::invalid_argument(message),
            })
        }
    }
}
