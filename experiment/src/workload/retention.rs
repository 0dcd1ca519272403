//! A range-partitioned table's retention job, as a run drives it: a round
//! every period from the run's start until the writers stop, on a connection
//! of its own. What a round does (the SQL of the target's server, the plan
//! of `since_id::partitions`) is the target's ([`Rounds`]).

use crate::sim::sync::lock;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the retention job did and what went wrong; `D` is a dropped
/// partition as the target records it.
pub struct Retention<D> {
    pub dropped: Vec<D>,
    pub added: u64,
    pub failed: u64,
    pub last_error: Option<String>,
}

impl<D> Default for Retention<D> {
    fn default() -> Self {
        Retention {
            dropped: Vec::new(),
            added: 0,
            failed: 0,
            last_error: None,
        }
    }
}

impl<D> Retention<D> {
    fn fail(&mut self, error: String) {
        self.failed += 1;
        self.last_error = Some(error);
    }

    /// The summary's tail: `, N failed (last: E)` after a failure, else nothing.
    pub fn failures(&self) -> String {
        self.last_error
            .as_ref()
            .map(|e| format!(", {} failed (last: {e})", self.failed))
            .unwrap_or_default()
    }
}

/// One target's rounds, with the connection they run on.
pub trait Rounds: Send + 'static {
    type Dropped: Send + 'static;

    /// One round: add the next partition if one is needed, drop the oldest
    /// beyond those kept once aged, each drop recorded in `out`.
    fn round(
        &mut self,
        out: &Arc<Mutex<Retention<Self::Dropped>>>,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Closes the connection after the last round.
    fn close(self) -> impl Future<Output = ()> + Send;
}

/// A retention job running beside the writers, and what it did so far.
pub struct RetentionTask<D> {
    task: Option<JoinHandle<()>>,
    out: Arc<Mutex<Retention<D>>>,
}

impl<D: Send + 'static> RetentionTask<D> {
    /// Starts the job ([`run_retention`]) on the runtime.
    pub fn spawn<R: Rounds<Dropped = D>>(
        rounds: impl Future<Output = Result<R, String>> + Send + 'static,
        every_ms: u64,
        start_ms: i64,
        stop: watch::Receiver<bool>,
    ) -> RetentionTask<D> {
        let out = Arc::new(Mutex::new(Retention::default()));
        let task = tokio::spawn(run_retention(rounds, every_ms, start_ms, out.clone(), stop));
        RetentionTask {
            task: Some(task),
            out,
        }
    }

    /// Waits for the job to end (it ends once its `stop` turned true).
    pub async fn join(&mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// What the job did so far.
    pub fn report(&self) -> MutexGuard<'_, Retention<D>> {
        lock(&self.out)
    }
}

/// The retention job: connects (`rounds`), then runs a round every
/// `every_ms` from `start_ms` until `stop` turns true. A failed round is
/// counted in `out` and the job goes on.
pub async fn run_retention<R: Rounds>(
    rounds: impl Future<Output = Result<R, String>>,
    every_ms: u64,
    start_ms: i64,
    out: Arc<Mutex<Retention<R::Dropped>>>,
    mut stop: watch::Receiver<bool>,
) {
    let fail = |e: String| lock(&out).fail(e);
    let mut rounds = match rounds.await {
        Ok(rounds) => rounds,
        Err(e) => return fail(e),
    };
    let mut round = 1i64;
    loop {
        let due = start_ms + round * every_ms as i64;
        let wait = Duration::from_millis((due - crate::clock::now_ms()).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        round += 1;
        if let Err(e) = rounds.round(&out).await {
            tracing::warn!("retention job: {e}");
            fail(e);
        }
    }
    rounds.close().await;
}
