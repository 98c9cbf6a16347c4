//! The splice pipes of the direct path: a small shared pool, so a pipe exists only while data
//! moves through it.
//!
//! A pipe is leased for one fill/drain cycle and given back once it is empty. An idle connection
//! therefore holds no pipe at all: its two sockets are its only descriptors, and the pipe's ring
//! and pages belong to whichever connection has data next. Two bounds keep the daemon's
//! descriptor budget exact (see `fd_limit`): at most [`MAX_IDLE`] empty pipes wait in the pool,
//! and at most [`MAX_OPEN`] pipes exist at all, idle or leased. When every pipe is out (many
//! destinations that do not read), [`Pipes::lease`] says no and the caller copies that cycle
//! through user space instead of waiting, so a client that never reads cannot stall the others.
//!
//! A pipe that may still hold bytes (an error or a cancellation between fill and drain) is
//! closed, never pooled: the next connection would otherwise receive this one's bytes. Only the
//! relay's own count says a pipe is empty ([`Lease::give_back`]: everything spliced in was spliced
//! out), so giving one back costs no system call.
//!
//! # Concurrency
//! One `std::sync::Mutex` guards the idle list and the count of open pipes; it is held for a push
//! or a pop, never across a system call that can block or an `.await`. Creating a pipe (two
//! syscalls) happens outside the lock, with its place counted beforehand so two leases cannot
//! both take the last one.

use std::io::{Error, Result};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use nix::fcntl::{FcntlArg, OFlag};

/// Empty pipes kept for the next cycle. A few dozen cover every worker thread's cycle in flight
/// plus destinations that are briefly slow; more would only hold kernel memory.
pub const MAX_IDLE: usize = 32;
/// Pipes that may exist at once, idle or leased: the relay's share of the descriptor budget is
/// twice this ([`DESCRIPTORS`]).
pub const MAX_OPEN: usize = 64;
/// Descriptors the pipes can hold at most.
pub const DESCRIPTORS: usize = 2 * MAX_OPEN;

/// Pipe capacity asked for; the kernel may grant less (pipe-max-size, or pipe-user-pages-soft
/// for an unprivileged user), which only costs speed.
const PIPE_SIZE: libc::c_int = 1 << 20;

/// The process-wide pool the direct path uses.
pub static SHARED: Pipes = Pipes::new(MAX_IDLE, MAX_OPEN);

/// A kernel pipe with both ends non-blocking.
#[derive(Debug)]
pub struct Pipe {
    pub read: OwnedFd,
    pub write: OwnedFd,
    /// What the kernel granted, in bytes; one fill moves at most this much.
    pub capacity: usize,
}

impl Pipe {
    fn new() -> Result<Self> {
        let (read, write) = nix::unistd::pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).map_err(Error::from)?;
        // A refusal leaves the default size.
        let granted = nix::fcntl::fcntl(&write, FcntlArg::F_SETPIPE_SZ(PIPE_SIZE)).unwrap_or(0);
        let capacity = usize::try_from(granted).ok().filter(|&n| n > 0).unwrap_or(64 * 1024);
        Ok(Self { read, write, capacity })
    }

    /// Bytes waiting in the pipe; `None` when the kernel will not say.
    pub fn pending(&self) -> Option<usize> {
        let mut n: libc::c_int = 0;
        // SAFETY: ioctl(2) FIONREAD on a pipe writes exactly one `int` through its third argument
        // (pipe(7)), here `n`, which lives across the call; `self.read` is an open descriptor
        // this pipe owns. Neither nix nor socket2 wraps FIONREAD for a pipe (nix's ioctl macros
        // generate unsafe functions too).
        let rc = unsafe { libc::ioctl(self.read.as_raw_fd(), libc::FIONREAD, &mut n) };
        if rc == 0 { usize::try_from(n).ok() } else { None }
    }
}

/// A bounded pool of pipes; see the module doc.
#[derive(Debug)]
pub struct Pipes {
    max_idle: usize,
    max_open: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    idle: Vec<Pipe>,
    /// Pipes that exist: idle ones plus leased ones (and ones being created).
    open: usize,
}

impl Pipes {
    pub const fn new(max_idle: usize, max_open: usize) -> Self {
        Self { max_idle, max_open, inner: Mutex::new(Inner { idle: Vec::new(), open: 0 }) }
    }

    /// An empty pipe for one fill/drain cycle, or `None` when every pipe is out (or the kernel
    /// refuses a new one): the caller then moves this cycle's bytes through user space.
    pub fn lease(&self) -> Option<Lease<'_>> {
        {
            let mut inner = self.lock();
            if let Some(pipe) = inner.idle.pop() {
                return Some(Lease { pool: self, pipe: Some(pipe) });
            }
            if inner.open >= self.max_open {
                return None;
            }
            inner.open += 1;
        }
        match Pipe::new() {
            Ok(pipe) => Some(Lease { pool: self, pipe: Some(pipe) }),
            Err(e) => {
                tracing::debug!("cannot create a splice pipe ({e}); copying this cycle instead");
                self.lock().open -= 1;
                None
            }
        }
    }

    /// (idle, open) pipes right now.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        let inner = self.lock();
        (inner.idle.len(), inner.open)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The lock guards plain counters and a list; a panic elsewhere cannot leave them torn.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn give_back(&self, pipe: Pipe) {
        let mut inner = self.lock();
        if inner.idle.len() < self.max_idle {
            inner.idle.push(pipe);
        } else {
            inner.open -= 1;
            drop(inner);
            drop(pipe);
        }
    }
}

/// A pipe on loan for one cycle. [`Lease::give_back`] returns it once it is empty; dropped
/// without that (an error or a cancellation mid-cycle), the pipe is closed, whatever it holds.
#[derive(Debug)]
pub struct Lease<'a> {
    pool: &'a Pipes,
    pipe: Option<Pipe>,
}

impl Lease<'_> {
    pub fn pipe(&self) -> &Pipe {
        // Only `give_back` and `drop` take the pipe out, and both consume the lease.
        self.pipe.as_ref().unwrap_or_else(|| unreachable!("a lease always holds its pipe"))
    }

    /// Returns the pipe to the pool, for a caller whose byte count says it is empty (everything
    /// spliced in was spliced out, or nothing was): the relay's every cycle, with no FIONREAD.
    /// Debug builds check the count against the kernel's.
    pub fn give_back(mut self) {
        if let Some(pipe) = self.pipe.take() {
            debug_assert_eq!(pipe.pending(), Some(0), "a pipe given back as empty holds bytes");
            self.pool.give_back(pipe);
        }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            self.pool.lock().open -= 1;
            drop(pipe);
        }
    }
}
