//! The pollers in real time: the one poll loop under the shutdown handler,
//! with the live counters on the progress display.

use super::progress::{Bar, describe};
use super::shutdown::Shutdown;
use crate::drive::{self, Plan, PollTarget, StopReason, Tally, TruthSource};
use crate::record::Recorder;
use crate::sim::sync::lock;
use std::sync::{Arc, Mutex};

/// What a real-time run shows and records while its pollers run.
pub struct Live<'a> {
    pub recorder: &'a Recorder,
    pub progress: Arc<Mutex<Tally>>,
    pub bar: &'a Bar,
    /// The run's recorded start: the duration and the final drain count from it.
    pub start_ms: i64,
}

/// Runs the pollers in real time with the shutdown handler and the live
/// counters: the first signal ends the run after one last cycle per poller.
pub async fn poll_in_real_time<T: PollTarget>(
    plan: Plan,
    target: T,
    truth: Option<TruthSource>,
    live: Live<'_>,
) -> StopReason {
    let shutdown = Shutdown::install(
        "one last request per poller after the largest k, then the run is closed",
    );
    let watcher = {
        let progress = live.progress.clone();
        let bar = live.bar.clone();
        let start_ms = live.start_ms;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                let p = lock(&progress).progress.clone();
                bar.tick_to((crate::clock::now_ms() - start_ms).max(0) as u64, || {
                    describe(&p)
                });
            }
        })
    };
    // The machine's load while the pollers run (a target without writers).
    let sampler = crate::load::Sampler::start();
    // From the recorded start, so the drain is due when a virtual run from
    // the same `--start` has it.
    let reason = drive::run_real_from(
        live.start_ms,
        plan,
        target,
        truth,
        live.recorder.sender(),
        live.progress.clone(),
        shutdown.requested.clone(),
    )
    .await;
    watcher.abort();
    let ticks = lock(&live.progress).tick_lateness.clone();
    sampler.finish(&ticks, None, &live.recorder.sender());
    reason
}
