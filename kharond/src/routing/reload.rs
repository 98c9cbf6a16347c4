//! How a reload runs, whoever asked for it (SIGHUP or the `Reload` RPC): off the async threads,
//! one at a time, and within a deadline after which the caller gets an error and nothing is
//! installed.
//!
//! A reload has a slow half that changes nothing (reading the files, resolving every jump host:
//! `Match exec`, canonicalization) and a quick half that puts the result in force (`install`,
//! run only if the slow half finished in time). So a reload either installs everything it
//! prepared or nothing.
//!
//! Reading a file cannot be cancelled: a read stuck on a hung network file system keeps its
//! blocking thread however long it takes. So a reload past its deadline is abandoned, not
//! stopped; its result is dropped when it finally arrives, and until its *reads* end it keeps
//! the one loader slot, so stuck reads never pile up (later callers wait for the slot, within
//! their own deadline, and are told an earlier reload is stuck). The resolving that follows the
//! reads gives the slot back ([`Job::reads_done`]): it is bounded (each `Match exec` has its own
//! timeout, and it asks [`Job::abandoned`] between jump hosts), so an abandoned one does not hold
//! up the next reload.
//!
//! # Concurrency
//! Two locks with two jobs. `turn` orders callers from start to install, so an older reload can
//! never install over a newer one. `loader` is held by the blocking reads themselves and
//! outlives an abandoned caller, which is what bounds stuck threads to one.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, timeout_at};

/// What the blocking half of a reload gets: whether its caller gave up, and a way to give the
/// loader slot back once the part that can hang forever (reading files) is over.
pub struct Job {
    abandoned: Arc<AtomicBool>,
    slot: std::sync::Mutex<Option<OwnedSemaphorePermit>>,
}

impl Job {
    /// True once the caller gave up: skip whatever only makes sense for a reload that will be
    /// installed.
    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }

    /// The reads are over; what is left is bounded, so the next reload may start its own.
    pub fn reads_done(&self) {
        self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }
}

/// Why a reload did not install anything.
#[derive(Debug)]
pub enum Failure<E> {
    /// The load itself failed.
    Load(E),
    /// The load did not finish within the deadline; it was abandoned.
    Deadline,
    /// An earlier, abandoned load still holds the loader when the deadline passed.
    Busy,
    /// The load panicked (a bug); the message says where.
    Panicked(String),
}

/// Serializes reloads; one per daemon.
pub struct Reloads {
    turn: Mutex<()>,
    loader: Arc<Semaphore>,
}

impl Default for Reloads {
    fn default() -> Self {
        Self { turn: Mutex::new(()), loader: Arc::new(Semaphore::new(1)) }
    }
}

impl Reloads {
    /// Runs `load` on a blocking thread and, if it succeeds within `deadline`, `install` with its
    /// result, still in this caller's turn. `load` gets a [`Job`]: whether its caller gave up,
    /// and [`Job::reads_done`] to free the loader slot early.
    pub async fn run<T, E, R>(
        &self,
        deadline: Duration,
        load: impl FnOnce(&Job) -> Result<T, E> + Send + 'static,
        install: impl FnOnce(T) -> R,
    ) -> Result<R, Failure<E>>
    where
        T: Send + 'static,
        E: Send + 'static,
    {
        let until = Instant::now() + deadline;
        let _turn = timeout_at(until, self.turn.lock()).await.map_err(|_| Failure::Busy)?;
        let slot = match timeout_at(until, Arc::clone(&self.loader).acquire_owned()).await {
            Ok(Ok(slot)) => slot,
            // Closed never happens: the semaphore is never closed.
            Ok(Err(_)) | Err(_) => return Err(Failure::Busy),
        };
        let abandoned = Arc::new(AtomicBool::new(false));
        let job = Job { abandoned: Arc::clone(&abandoned), slot: std::sync::Mutex::new(Some(slot)) };
        let task = tokio::task::spawn_blocking(move || {
            let result = load(&job);
            if job.abandoned() {
                tracing::info!("an abandoned reload finished; nothing of it is installed");
            }
            result
        });
        match timeout_at(until, task).await {
            Err(_) => {
                abandoned.store(true, Ordering::Relaxed);
                Err(Failure::Deadline)
            }
            Ok(Err(join)) => Err(Failure::Panicked(join.to_string())),
            Ok(Ok(Err(e))) => Err(Failure::Load(e)),
            Ok(Ok(Ok(fresh))) => Ok(install(fresh)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex as StdMutex;

    const SHORT: Duration = Duration::from_millis(200);

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_load_past_its_deadline_is_abandoned_and_never_installed() {
        let reloads = Reloads::default();
        let installed = Arc::new(StdMutex::new(Vec::new()));
        let saw_abandoned = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&saw_abandoned);
        let sink = Arc::clone(&installed);
        let result = reloads
            .run(
                SHORT,
                move |job: &Job| {
                    std::thread::sleep(SHORT * 3);
                    seen.store(job.abandoned(), Ordering::Relaxed);
                    Ok::<_, ()>("late")
                },
                |v| sink.lock().unwrap().push(v),
            )
            .await;
        assert!(matches!(result, Err(Failure::Deadline)), "{result:?}");
        // Once the stuck load ends, the next reload runs and installs; the late result never did.
        let next =
            reloads.run(SHORT * 10, |_| Ok::<_, ()>("next"), |v| installed.lock().unwrap().push(v)).await;
        assert!(next.is_ok(), "{next:?}");
        assert_eq!(*installed.lock().unwrap(), ["next"]);
        assert!(saw_abandoned.load(Ordering::Relaxed), "the load is told its caller gave up");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reload_behind_a_stuck_one_is_told_so_without_starting_another_read() {
        let reloads = Arc::new(Reloads::default());
        let (release, stuck) = std::sync::mpsc::channel::<()>();
        let first = {
            let reloads = Arc::clone(&reloads);
            tokio::spawn(async move {
                reloads.run(SHORT, move |_| stuck.recv().map_err(|_| ()), |_| ()).await.map_err(|_| ())
            })
        };
        assert!(first.await.unwrap().is_err(), "the first reload passes its deadline");
        let started = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&started);
        let second = reloads
            .run(
                SHORT,
                move |_| {
                    flag.store(true, Ordering::Relaxed);
                    Ok::<_, ()>(())
                },
                |_| (),
            )
            .await;
        assert!(matches!(second, Err(Failure::Busy)), "{second:?}");
        assert!(!started.load(Ordering::Relaxed), "no second read while the first is stuck");
        release.send(()).unwrap();
        let third = reloads.run(SHORT * 10, |_| Ok::<_, ()>(()), |_| ()).await;
        assert!(third.is_ok(), "{third:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_abandoned_load_past_its_reads_does_not_hold_up_the_next_reload() {
        let reloads = Reloads::default();
        let installed = Arc::new(StdMutex::new(Vec::new()));
        let (release, slow) = std::sync::mpsc::channel::<()>();
        let (finished_tx, finished) = std::sync::mpsc::channel::<()>();
        let sink = Arc::clone(&installed);
        let first = reloads
            .run(
                SHORT,
                move |job: &Job| {
                    job.reads_done();
                    // A slow `Match exec`: bounded, but longer than the deadline.
                    let _ = slow.recv();
                    let _ = finished_tx.send(());
                    Ok::<_, ()>("abandoned")
                },
                |v| sink.lock().unwrap().push(v),
            )
            .await;
        assert!(matches!(first, Err(Failure::Deadline)), "{first:?}");
        // The first load is still running; the next reload starts and installs all the same.
        let sink = Arc::clone(&installed);
        let next = reloads.run(SHORT, |_| Ok::<_, ()>("next"), |v| sink.lock().unwrap().push(v)).await;
        assert!(next.is_ok(), "{next:?}");
        release.send(()).unwrap();
        finished.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(*installed.lock().unwrap(), ["next"], "the abandoned load never installs");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_older_reload_never_installs_over_a_newer_one() {
        let reloads = Arc::new(Reloads::default());
        let installed = Arc::new(StdMutex::new(Vec::new()));
        let started = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let (reloads, installed, started) =
                (Arc::clone(&reloads), Arc::clone(&installed), Arc::clone(&started));
            tasks.push(tokio::spawn(async move {
                reloads
                    .run(
                        Duration::from_secs(20),
                        move |_| {
                            std::thread::sleep(Duration::from_millis(10));
                            Ok::<_, ()>(started.fetch_add(1, Ordering::SeqCst))
                        },
                        |seq| {
                            // The first install is slow: the next load is done by then, and
                            // must still wait for its turn to install.
                            if seq == 0 {
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            installed.lock().unwrap().push(seq);
                        },
                    )
                    .await
            }));
        }
        for task in tasks {
            assert!(task.await.unwrap().is_ok());
        }
        assert_eq!(*installed.lock().unwrap(), [0, 1, 2, 3]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_load_is_reported_and_nothing_installed() {
        let reloads = Reloads::default();
        let mut installed = false;
        let result = reloads.run(SHORT * 10, |_| Err::<(), _>("bad json"), |_| installed = true).await;
        assert!(matches!(result, Err(Failure::Load("bad json"))), "{result:?}");
        assert!(!installed);
    }
}
