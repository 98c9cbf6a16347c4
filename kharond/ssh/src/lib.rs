//! The SSH engine: from a cluster's `jumphost` alias to a direct-tcpip channel at the last hop.
//!
//! # Public surface
//! Everything a daemon needs, and nothing of how it is done (every module is private):
//! - configured: [`PoolSettings`] (the ssh_config file, HOME, the environment, the connect timeout)
//!   and [`Pool::new`], which reads the ssh_config;
//! - prepared: [`Pool::validate`] at start, and a reload's two halves, [`Pool::prepare`] (slow,
//!   changes nothing: [`Prepared`]) and [`Pool::next`] (quick: the next generation of the pool,
//!   sharing the sessions of unchanged chains, and what it refused: [`Installed`]);
//! - dialled: [`Pool::connect`] gives a [`Tunnel`], a byte stream to the target through the chain,
//!   whose [`Tunnel::report`] tells how it came to be ([`DialReport`]: when the session was up, how
//!   long each hop took), without the sessions themselves;
//! - reported: [`Pool::status`] ([`ChainHealth`] per jump host), [`Pool::round_trips`],
//!   [`Pool::preflight`] ([`Findings`]: what will fail before a connection does), and the
//!   [`Error`] of a failed connect with the [`std::io::ErrorKind`] it means for the client;
//! - answered by a person: a hop's [`Question`] (in [`ChainHealth`], and from [`Pool::login`] as
//!   a [`LoginStep`]), [`Pool::answer`] with the [`Answers`] ([`AnswerError`] when not taken);
//!   [`Pool::connect`]'s [`Patience`] says whether a connection waits for them; each question is
//!   also sent, as it opens, to [`PoolSettings::questions`] ([`QuestionSender`]).
//!
//! # The map
//! Four parts, each a folder whose `mod.rs` says what it owns; ssh_config itself is read by the
//! crate kharon-ssh-config, which gives each jump host its [`kharon_ssh_config::Chain`] of hops.
//! - `sessions`: the pool of shared sessions, one per jump host, and what a connection gets of
//!   them (a channel as a [`Tunnel`]); dialling a chain hop by hop, keepalive and the sleep
//!   detector, what `Status` shows. The only part the daemon calls.
//! - `login`: is this server the jump host (known_hosts), and is the user let in (agent, key
//!   files, and what a person must answer).
//! - `transport`: what a session runs over: the first hop's TCP connection or `ProxyCommand`,
//!   and a later hop's channel of the hop before it.
//! - `flow`: how much a path's sessions let the far side send: windows, packet sizes, and the
//!   measurements they follow.
//!
//! `error` holds every failure and the [`std::io::ErrorKind`] it means for the client.
//!
//! The engine knows nothing of SOCKS: failures carry an [`std::io::ErrorKind`] so the caller can
//! pick a reply code. Their messages never repeat their cause (`kharon_common::errors`): whoever
//! shows one, here (a log line, a `Status` string) or in the daemon, prints its whole chain.

mod error;
mod flow;
mod login;
mod sessions;
mod settings;
mod transport;

pub use error::Error;
pub use login::auth::service_agent_advice;
pub use login::desk::{AnswerError, Answers, KEYBOARD_INTERACTIVE, PASSWORD, Prompt, Question};
pub use login::prompt::QuestionSender;
pub use sessions::health::{ChainHealth, ChannelRefusal, HopSummary, Refusal, Stamped};
pub use sessions::keepalive::SleepClock;
pub use sessions::pool::{Installed, LoginStep, Patience, Pool, PoolSettings, Prepared};
pub use sessions::preflight::{Findings, Unresolved};
pub use sessions::report::{DialReport, HopTiming};
pub use sessions::slot::ChainState;
pub use sessions::tunnel::Tunnel;
pub use settings::{
    AdaptiveSettings, FlowSettings, LoginSettings, MeterSettings, SessionSettings, Settings,
    TransportSettings, WindowPolicy,
};
