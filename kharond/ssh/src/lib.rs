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
//!   [`Pool::connect`]'s [`Patience`] says whether a connection waits for them.
//!
//! # Layout
//! - [`config`]: ssh_config (Include, Host and Match blocks, canonicalization, ProxyJump,
//!   `ProxyCommand ssh -W`) → [`config::Chain`].
//! - [`pool`]: one shared session set per chain, opened on first use; the only entry point the
//!   daemon uses ([`Pool::connect`], [`Pool::status`], [`Pool::prepare`] and [`Pool::install`]).
//!   [`slot`]: one jump host's chain and session. [`health`]: what `Status` shows of them.
//!   [`error`]: every failure and the [`std::io::ErrorKind`] it means for the client.
//! - [`keepalive`]: keeping sessions alive and honest: ServerAlive settings, the sleep detector
//!   (CLOCK_BOOTTIME against CLOCK_MONOTONIC when something happens, no timer), probing suspect
//!   sessions.
//! - [`chain`]: dials a chain hop by hop (TCP or ProxyCommand, then direct-tcpip + handshake).
//!   [`negotiation`]: a key exchange with nothing in common, in ssh's words.
//! - [`auth`]: agent first, then key files; an encrypted key without an agent → "run `ssh-add`".
//! - [`prompt`]: what a person must finish after (or instead of) the keys: keyboard-interactive
//!   (a one-time password, PAM) and password. [`desk`]: where a hop's question waits for the
//!   answer, and how long connections wait for it. [`askpass`]: asking through the user's
//!   SSH_ASKPASS program, as ssh does without a terminal.
//! - [`known_hosts`]: host key and host certificate checks under `StrictHostKeyChecking`, and
//!   which host key algorithms to offer.
//! - [`preflight`]: what will fail, found before a connection does: jump hosts no Host block names
//!   whose name does not resolve, and no ssh-agent with no key file usable without one.
//! - [`tcp`]: the first hop's TCP connection as ssh makes it (`AddressFamily`, `BindAddress`,
//!   `BindInterface`).
//! - [`proxy_command`]: a `ProxyCommand` child process as the first hop's transport.
//! - [`tunnel`]: one channel as a byte stream, pumped so a slow reader cannot stall its session.
//! - [`window`]: the receive window a path wants, from its measured round trip and delivery rate
//!   (delay-based, BBR/LEDBAT style); [`meter`]: measures a jump host's path with SSH pings while
//!   its channels carry data, and keeps its window, which the last hop's channels are re-opened
//!   to at every window adjust (the vendored russh asks the session's handler for it).
//! - [`quickack`]: the first hop's TCP stream, ACKing at once (sshd leaves Nagle on).
//! - [`gather`]: the first hop's transport as russh sees it: a large read buffer, and writes
//!   gathered until the session waits for input.
//!
//! The engine knows nothing of SOCKS: failures carry an [`std::io::ErrorKind`] so the caller can
//! pick a reply code. Their messages never repeat their cause (`kharon_shared::errors`): whoever
//! shows one, here (a log line, a `Status` string) or in the daemon, prints its whole chain.

mod askpass;
mod auth;
mod carrier;
mod chain;
mod desk;
mod error;
mod gather;
mod health;
mod keepalive;
mod known_hosts;
mod meter;
mod negotiation;
mod packets;
mod pool;
mod preflight;
mod prompt;
mod proxy_command;
mod quickack;
mod report;
mod slot;
mod tcp;
mod tunnel;
mod window;

pub use auth::service_agent_advice;
pub use desk::{AnswerError, Answers, Prompt, Question};
pub use error::Error;
pub use health::{ChainHealth, ChannelRefusal, HopSummary, Refusal, Stamped};
pub use pool::{Installed, LoginStep, Patience, Pool, PoolSettings, Prepared};
pub use preflight::{Findings, Unresolved};
pub use report::{DialReport, HopTiming};
pub use slot::ChainState;
pub use tunnel::Tunnel;
