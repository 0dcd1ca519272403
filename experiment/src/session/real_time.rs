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
    tally(live.bar, &live.progress, live.start_ms);
    let watcher = {
        let progress = live.progress.clone();
        let bar = live.bar.clone();
        let start_ms = live.start_ms;
        tokio::spawn(async move {
            let mut tallied_ms = crate::clock::now_ms();
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                let p = lock(&progress).progress.clone();
                bar.tick_to((crate::clock::now_ms() - start_ms).max(0) as u64, || {
                    describe(&p)
                });
                if crate::clock::now_ms() - tallied_ms >= TALLY_EVERY_MS {
                    tallied_ms = crate::clock::now_ms();
                    tally(&bar, &progress, start_ms);
                }
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
    tally(live.bar, &live.progress, live.start_ms);
    let ticks = lock(&live.progress).tick_lateness.clone();
    sampler.finish(&ticks, None, &live.recorder.sender());
    reason
}

/// How often a real-time run prints its tally line (docs/analysis.md,
/// "Following a run").
const TALLY_EVERY_MS: i64 = 10_000;

/// The running tally, one line on stderr (at the start, every
/// [`TALLY_EVERY_MS`] and at the end): `tally ELAPSED: N requests (F failed),
/// S statuses, late arrivals: P n, ...`. Leaks are not in it: a leak is
/// known only once every poller's cursor has passed it, which the checker
/// decides from the run's rows (`analyze --follow`), and the experiment
/// keeps no second definition of one.
fn tally(bar: &Bar, progress: &Mutex<Tally>, start_ms: i64) {
    let p = lock(progress).progress.clone();
    let elapsed = (crate::clock::now_ms() - start_ms).max(0) as u64;
    bar.println(&format!(
        "tally {}: {}",
        since_id::time::format_duration_ms(elapsed / 1000 * 1000),
        describe(&p)
    ));
}
