//! The planning workers: a fixed number run at once, the rest wait; at
//! shutdown queued jobs fail and running ones are waited for, a while.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tessera_plan::Cancel;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::error::ApiError;

/// The planning workers and the jobs they hold.
#[derive(Debug)]
pub(crate) struct JobQueue {
    /// One permit per worker; closed at shutdown.
    workers: Arc<Semaphore>,
    /// When each running job started, its limit, and how to cancel it.
    running: Mutex<HashMap<u64, (Instant, Duration, Cancel)>>,
    /// Jobs queued or running.
    pending: Mutex<usize>,
    /// Told when a job finishes.
    finished: Notify,
    /// Cleared at shutdown: no job is accepted after.
    accepting: AtomicBool,
}

/// How far a running job is.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Progress {
    /// Seconds it has run.
    pub elapsed_s: f64,
    /// Its time limit, seconds.
    pub time_limit_s: f64,
}

impl JobQueue {
    /// A queue with `workers` workers.
    pub(crate) fn new(workers: usize) -> JobQueue {
        JobQueue {
            workers: Arc::new(Semaphore::new(workers)),
            running: Mutex::new(HashMap::new()),
            pending: Mutex::new(0),
            finished: Notify::new(),
            accepting: AtomicBool::new(true),
        }
    }

    /// Waits for a free worker; `None` once the server stops.
    pub(crate) async fn worker(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.workers).acquire_owned().await.ok()
    }

    /// Job `id` started now, with `limit`; `cancel` stops it.
    pub(crate) fn started(&self, id: u64, started: Instant, limit: Duration, cancel: Cancel) {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).insert(id, (started, limit, cancel));
    }

    /// Job `id` is no longer running.
    pub(crate) fn stopped(&self, id: u64) {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).remove(&id);
    }

    /// How far job `id` is, if it is running.
    pub(crate) fn progress(&self, id: u64) -> Option<Progress> {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.get(&id).map(|(started, limit, _)| Progress {
            elapsed_s: started.elapsed().as_secs_f64(),
            time_limit_s: limit.as_secs_f64(),
        })
    }

    /// Takes a place for a new job, or refuses one: the server is stopping
    /// or `max_jobs` are queued or running.
    pub(crate) fn reserve(&self, max_jobs: usize) -> Result<(), ApiError> {
        if !self.accepting.load(Ordering::SeqCst) {
            return Err(shutting_down());
        }
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        if *pending >= max_jobs {
            return Err(ApiError::new(
                axum::http::StatusCode::SERVICE_UNAVAILABLE,
                "queue_full",
                format!("{max_jobs} planning jobs are queued or running; retry when some have finished"),
            ));
        }
        *pending += 1;
        Ok(())
    }

    /// Gives back a place taken by [`JobQueue::reserve`].
    pub(crate) fn release(&self) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        *pending = pending.saturating_sub(1);
        drop(pending);
        self.finished.notify_waiters();
    }

    /// Stops accepting jobs and fails queued ones; returns once no job is
    /// pending or `wait` has passed, with how many are still pending then
    /// (the running ones among them cancelled).
    pub(crate) async fn shut_down(&self, wait: Duration) -> usize {
        self.accepting.store(false, Ordering::SeqCst);
        self.workers.close();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.finished.notified();
            if *self.pending.lock().unwrap_or_else(PoisonError::into_inner) == 0 {
                return 0;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                for (_, _, cancel) in self.running.lock().unwrap_or_else(PoisonError::into_inner).values() {
                    cancel.cancel();
                }
                return *self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            }
        }
    }
}

/// The error of a request that arrives while the server stops.
fn shutting_down() -> ApiError {
    ApiError::new(axum::http::StatusCode::SERVICE_UNAVAILABLE, "shutting_down", "the server is shutting down")
}
