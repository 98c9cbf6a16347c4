//! The process itself, set up once at start and asked about by `Status`; nothing here is on a
//! connection's path.
//!
//! - [`logging`]: where the log goes, and the cap on targets that could log secrets.
//! - [`malloc`]: allocator settings for the routed data path; [`memory`]: what the daemon holds;
//!   [`trim`]: the memory a burst of connections leaves, given back once it is over.
//! - [`fd_limit`]: the descriptor limit, raised at start, and how many connections fit in it.
//! - [`activation`]: listeners handed over by systemd (socket activation).
//! - [`backoff`]: waiting after a failed accept, for every listener.
//! - [`man_page`]: `kharond --man-pages`.
//!
//! Owns: the process's resources and settings. Must not know: routes, SSH or the control API.
//! The descriptor budget counts the relay's pipes and the listener's ceiling, the two numbers
//! it takes from elsewhere.

pub mod activation;
pub mod backoff;
pub mod fd_limit;
pub mod logging;
pub mod malloc;
pub mod man_page;
pub mod memory;
pub mod trim;
