//! Driving pollers side by side, in real time over HTTP or in virtual time
//! in-process, and handing every request to the recorder.
//!
//! Both drivers share the cadence (ticks aligned to multiples of the interval
//! since the Unix epoch, so at the start of a second for 1 s, as the original
//! experiment did), the final drain (after the stop, wait the largest k of the
//! run, then one last cycle per poller) and [`settle`], which turns one
//! response into the poller's next step and a recorded row.

use crate::id::{Id, Layout};
use crate::poller::{PageRequest, Poller};
use crate::record::{RecordSender, RequestRow, StatusRow, TruthRow};
use crate::target::{Fetched, HttpTarget};
use std::collections::{BinaryHeap, HashSet};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// Everything a driver needs to know about the run.
#[derive(Clone, Debug)]
pub struct Plan {
    pub layout: Layout,
    pub pollers: Vec<Poller>,
    pub interval_ms: u64,
    pub duration_ms: u64,
    /// The largest k of the run: how long to wait before the final cycle.
    pub final_wait_ms: u64,
}

/// Live counters, for the progress bar and the summary.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub requests: u64,
    pub failed: u64,
    pub statuses: u64,
    pub late_arrivals: Vec<(String, u64)>,
    /// Items from the future (see [`crate::poller::FUTURE_TOLERANCE_MS`]).
    pub future_ids: u64,
    seen: HashSet<Id>,
}

impl Progress {
    pub fn new(pollers: &[Poller]) -> Progress {
        Progress {
            late_arrivals: pollers.iter().map(|p| (p.name().to_string(), 0)).collect(),
            ..Progress::default()
        }
    }

    /// Counts one returned status; true the first time any poller returns it.
    pub fn sighted(&mut self, id: Id) -> bool {
        let first = self.seen.insert(id);
        self.statuses += first as u64;
        first
    }
}

/// The first tick at or after `t`.
pub fn align_up(t_ms: i64, interval_ms: u64) -> i64 {
    let i = interval_ms.max(1) as i64;
    t_ms.div_euclid(i) * i + if t_ms.rem_euclid(i) == 0 { 0 } else { i }
}

/// Applies one response to its poller, records it, and says what to send next.
#[allow(clippy::too_many_arguments)]
pub fn settle(
    poller: &mut Poller,
    index: usize,
    layout: &Layout,
    req: &PageRequest,
    fetched: Fetched,
    sent_at_ms: i64,
    received_at_ms: i64,
    wait_ms: u64,
    recorder: &RecordSender,
    progress: &mut Progress,
) -> Option<PageRequest> {
    let (cycle, page) = poller.position();
    let mut row = RequestRow {
        poller: index,
        cycle,
        page,
        sent_at_ms,
        received_at_ms,
        since_id: req.since.map(|id| (layout.format(id), id.sort_key())),
        before_id: req.before.map(|id| (layout.format(id), id.sort_key())),
        page_limit: req.limit,
        retrieved_at_ms: req.since.and(poller.retrieved_at_ms()),
        http_status: fetched.http_status,
        bytes: fetched.bytes,
        wait_ms,
        ..RequestRow::default()
    };
    progress.requests += 1;
    let next = match fetched.result {
        Err(error) => {
            poller.on_failure();
            progress.failed += 1;
            row.error = Some(error);
            None
        }
        Ok(items) => {
            let outcome = poller.on_page(items);
            if let Some(first) = outcome.future.first() {
                // Flagged here and by `analyze` (from the recorded ID times).
                tracing::warn!(
                    poller = poller.name(),
                    count = outcome.future.len(),
                    id = %layout.format(*first),
                    "IDs more than {} s ahead of the client clock: recorded, the cursor does not follow them",
                    crate::poller::FUTURE_TOLERANCE_MS / 1000
                );
                progress.future_ids += outcome.future.len() as u64;
            }
            row.new_items = outcome.new_items;
            row.reordered = outcome.reordered;
            row.overflow = outcome.overflow;
            progress.late_arrivals[index].1 += outcome.late_arrivals.len() as u64;
            row.items = outcome
                .items
                .into_iter()
                .map(|item| {
                    let first_sighting = progress.sighted(item.id);
                    StatusRow {
                        first_sighting,
                        id_key: item.id.sort_key(),
                        id_time_ms: layout.ts_ms(item.id),
                        id: item.id_text,
                        created_at: item.created_at,
                        author: item.author,
                    }
                })
                .collect();
            if outcome.next.is_some() {
                poller.next_page_sent();
            }
            outcome.next
        }
    };
    recorder.request(row);
    next
}

/// A target reachable in-process at a simulated time.
pub trait VirtualTarget {
    /// Answers `req` as the server would at `server_time_ms`.
    fn fetch_at(&mut self, server_time_ms: i64, req: &PageRequest) -> Fetched;
    /// Ground truth produced since the last call (empty for targets without one).
    fn take_truth(&mut self) -> Vec<TruthRow>;
}

/// Simulated round trip of a request in virtual time (the server answers halfway).
pub const VIRTUAL_LATENCY_MS: i64 = 20;

/// Runs the plan in virtual time from `start_ms`: no sockets, no sleeps, and
/// the same inputs give the same records, in the same order.
pub fn run_virtual(
    plan: &mut Plan,
    target: &mut dyn VirtualTarget,
    start_ms: i64,
    recorder: &RecordSender,
    progress: &mut Progress,
    mut on_tick: impl FnMut(i64, &Progress),
) {
    #[derive(PartialEq, Eq, PartialOrd, Ord)]
    struct Event {
        at_ms: std::cmp::Reverse<i64>,
        poller: std::cmp::Reverse<usize>,
        page: Option<(u64, u64)>,
    }
    let end_ms = start_ms + plan.duration_ms as i64;
    let final_ms = end_ms + plan.final_wait_ms as i64;
    // The ticks, made one at a time (a list of them all would grow with the run):
    // every interval from the aligned start until the end, then the final cycle.
    let first = align_up(start_ms, plan.interval_ms);
    let next_tick = |tick: i64| -> Option<i64> {
        if tick >= end_ms {
            return None;
        }
        let next = tick + plan.interval_ms as i64;
        Some(if next < end_ms {
            next
        } else {
            final_ms.max(tick + 1)
        })
    };
    let mut tick = if first < end_ms { first } else { final_ms };
    let mut queue: BinaryHeap<Event> = BinaryHeap::new();
    let mut pending: Vec<Option<PageRequest>> = vec![None; plan.pollers.len()];
    loop {
        if recorder.failed() {
            // Nothing more can be recorded: end the run; the recorder says why.
            return;
        }
        for i in 0..plan.pollers.len() {
            queue.push(Event {
                at_ms: std::cmp::Reverse(tick),
                poller: std::cmp::Reverse(i),
                page: None,
            });
        }
        // Process every event up to the next tick, in time order (ties by poller).
        let following = next_tick(tick);
        let horizon = following.unwrap_or(i64::MAX);
        while queue.peek().is_some_and(|e| e.at_ms.0 < horizon) {
            let Some(event) = queue.pop() else { break };
            let (sent, i) = (event.at_ms.0, event.poller.0);
            let req = match event.page {
                // The policy may skip a tick (its request budget).
                None => match plan.pollers[i].tick(sent, following.is_none()) {
                    Some(req) => req,
                    None => continue,
                },
                Some(_) => match pending[i].take() {
                    Some(req) => req,
                    None => continue,
                },
            };
            let fetched = target.fetch_at(sent + VIRTUAL_LATENCY_MS / 2, &req);
            let received = sent + VIRTUAL_LATENCY_MS;
            let layout = plan.layout.clone();
            let next = settle(
                &mut plan.pollers[i],
                i,
                &layout,
                &req,
                fetched,
                sent,
                received,
                0,
                recorder,
                progress,
            );
            if let Some(next) = next {
                pending[i] = Some(next);
                queue.push(Event {
                    at_ms: std::cmp::Reverse(received),
                    poller: std::cmp::Reverse(i),
                    page: Some((0, 0)),
                });
            }
        }
        recorder.truth(target.take_truth());
        on_tick(tick, progress);
        match following {
            Some(next) => tick = next,
            None => return,
        }
    }
}

/// A target polled in real time: over HTTP ([`HttpTarget`]) or over SQL
/// (`crate::pg::source::SqlTarget`). Clones share the target's pacing.
pub trait PollTarget: Clone + Send + Sync + 'static {
    /// Waits for a slot in the shared rate-limit budget; returns the ms waited.
    fn pace(&self) -> impl std::future::Future<Output = u64> + Send;
    /// Sends one request.
    fn fetch(&self, req: &PageRequest) -> impl std::future::Future<Output = Fetched> + Send;
}

impl PollTarget for HttpTarget {
    fn pace(&self) -> impl std::future::Future<Output = u64> + Send {
        HttpTarget::pace(self)
    }

    fn fetch(&self, req: &PageRequest) -> impl std::future::Future<Output = Fetched> + Send {
        HttpTarget::fetch(self, req)
    }
}

/// Where truth comes from during a real-time run (the embedded simulator), if anywhere.
pub type TruthSource = Box<dyn FnMut() -> Vec<TruthRow> + Send>;

/// Why a real-time run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    Duration,
    Interrupted,
}

/// Runs the plan in real time against an HTTP target until the duration ends
/// or `stop` turns true; then waits the largest k and makes one last cycle
/// per poller. Returns why it stopped: [`StopReason::Interrupted`] if any
/// poller was interrupted.
pub async fn run_real<T: PollTarget>(
    plan: Plan,
    target: T,
    mut truth: Option<TruthSource>,
    recorder: RecordSender,
    progress: Arc<Mutex<Progress>>,
    stop: watch::Receiver<bool>,
) -> StopReason {
    let start_ms = crate::clock::now_ms();
    let end_ms = start_ms + plan.duration_ms as i64;
    let mut tasks = tokio::task::JoinSet::new();
    for (index, poller) in plan.pollers.into_iter().enumerate() {
        let target = target.clone();
        let recorder = recorder.clone();
        let progress = progress.clone();
        let stop = stop.clone();
        let layout = plan.layout.clone();
        let (interval_ms, final_wait_ms) = (plan.interval_ms, plan.final_wait_ms);
        tasks.spawn(async move {
            poll_loop(
                poller,
                index,
                layout,
                target,
                recorder,
                progress,
                stop,
                start_ms,
                end_ms,
                interval_ms,
                final_wait_ms,
            )
            .await
        });
    }
    // Stream the truth out once a second while the pollers run.
    let truth_recorder = recorder.clone();
    let mut all_done = Box::pin(all_stopped(tasks));
    let reason = loop {
        tokio::select! {
            reason = &mut all_done => break reason,
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                if let Some(source) = truth.as_mut() {
                    truth_recorder.truth(source());
                }
            }
        }
    };
    if let Some(source) = truth.as_mut() {
        truth_recorder.truth(source());
    }
    reason
}

/// Waits for every poller task, taking each as it finishes (not in spawn
/// order), and says `Interrupted` if any of them was. A task that panicked
/// counts as stopped by the duration: its requests are already recorded.
async fn all_stopped(mut tasks: tokio::task::JoinSet<StopReason>) -> StopReason {
    let mut reason = StopReason::Duration;
    while let Some(done) = tasks.join_next().await {
        if let Ok(StopReason::Interrupted) = done {
            reason = StopReason::Interrupted;
        }
    }
    reason
}

/// The longest the final cycle waits for the shared rate-limit budget.
const FINAL_PACE_CAP_MS: u64 = 5_000;

/// Backoff after consecutive failures: 1, 2, 4 ... ticks, at most a minute.
fn backoff_ms(failures: u32, interval_ms: u64) -> u64 {
    if failures == 0 {
        return 0;
    }
    let doubled = interval_ms.saturating_mul(1u64 << (failures - 1).min(16));
    doubled.min(60_000).saturating_sub(interval_ms)
}

#[allow(clippy::too_many_arguments)]
async fn poll_loop<T: PollTarget>(
    mut poller: Poller,
    index: usize,
    layout: Layout,
    target: T,
    recorder: RecordSender,
    progress: Arc<Mutex<Progress>>,
    mut stop: watch::Receiver<bool>,
    start_ms: i64,
    end_ms: i64,
    interval_ms: u64,
    final_wait_ms: u64,
) -> StopReason {
    let mut next_tick = align_up(start_ms, interval_ms);
    let mut failures = 0u32;
    let mut not_before_ms = i64::MIN;
    let mut reason = StopReason::Duration;
    let mut last = false;
    let mut stopped = false;
    // A wait cut short by the end of the run, recorded with the final cycle's first request.
    let mut cut_wait_ms = 0u64;
    // The final cycle's deadline for waits on the server (Retry-After, budget).
    let mut final_deadline_ms = i64::MAX;
    loop {
        if recorder.failed() {
            // Nothing more can be recorded: end the run; the recorder says why.
            return reason;
        }
        stopped |= *stop.borrow();
        if !last && (next_tick >= end_ms || stopped) {
            // The final drain: wait the largest k of the run, then one last cycle.
            if stopped {
                reason = StopReason::Interrupted;
            }
            next_tick = crate::clock::now_ms().min(next_tick) + final_wait_ms as i64;
            final_deadline_ms = next_tick + FINAL_PACE_CAP_MS as i64;
            last = true;
        }
        // The final cycle waits out a rate-limit refusal for a few seconds at
        // most (the window can be 15 minutes): it goes, and a refusal is recorded.
        let not_before = if last {
            not_before_ms.min(final_deadline_ms)
        } else {
            not_before_ms
        };
        let wait_until = next_tick.max(not_before);
        // No wait outlasts the run, whatever the server asked for (Retry-After:
        // 99999999, a reset far away, backoff): at the end it is cut short and
        // the final drain begins.
        let cut = !last && wait_until > end_ms;
        let sleep_until = if cut { end_ms } else { wait_until };
        let wait_ms = (wait_until - next_tick).max(0) as u64;
        let delay =
            std::time::Duration::from_millis((sleep_until - crate::clock::now_ms()).max(0) as u64);
        if last {
            tokio::time::sleep(delay).await;
        } else {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                changed = stop.changed() => {
                    // A dropped sender counts as a stop, so this never spins.
                    stopped |= changed.is_err();
                    continue;
                }
            }
        }
        if cut {
            cut_wait_ms += (end_ms - next_tick).max(0) as u64;
            next_tick = end_ms;
            continue;
        }
        let Some(mut req) = poller.tick(crate::clock::now_ms(), last) else {
            // The policy skipped this tick (its request budget): on to the next.
            next_tick += interval_ms as i64;
            let now = crate::clock::now_ms();
            if next_tick <= now {
                next_tick = align_up(now, interval_ms);
            }
            continue;
        };
        let mut cycle_failed = false;
        let mut request_wait = wait_ms + std::mem::take(&mut cut_wait_ms);
        let mut abandoned = false;
        loop {
            // All pollers share the target's rate-limit budget: wait for a slot.
            // A stop during a long wait (a spent budget can mean minutes)
            // abandons the cycle, cursor unchanged, and goes to the final drain.
            let paced_ms = if last {
                // The final cycle waits for the budget until its deadline at
                // most, then goes anyway (a refusal is recorded as such): ending
                // a run must not take a whole rate-limit window.
                let cap = (final_deadline_ms - crate::clock::now_ms()).max(0) as u64;
                tokio::time::timeout(std::time::Duration::from_millis(cap), target.pace())
                    .await
                    .unwrap_or(cap)
            } else {
                let pace_started = crate::clock::now_ms();
                let until_end = (end_ms - pace_started).max(0) as u64;
                tokio::select! {
                    waited = target.pace() => waited,
                    // The budget's wait ends with the run too: the cycle is abandoned,
                    // cursor unchanged, and the wait is recorded with the final cycle.
                    _ = tokio::time::sleep(std::time::Duration::from_millis(until_end)) => {
                        cut_wait_ms += request_wait + (crate::clock::now_ms() - pace_started).max(0) as u64;
                        poller.on_failure();
                        abandoned = true;
                        break;
                    }
                    changed = stop.changed() => {
                        stopped |= changed.is_err();
                        poller.on_failure();
                        abandoned = true;
                        break;
                    }
                }
            };
            let sent = crate::clock::now_ms();
            let fetched = target.fetch(&req).await;
            let received = crate::clock::now_ms();
            let failed = fetched.result.is_err();
            let retry_after = fetched.retry_after_ms;
            let next = {
                let mut progress = progress.lock().unwrap_or_else(|e| e.into_inner());
                settle(
                    &mut poller,
                    index,
                    &layout,
                    &req,
                    fetched,
                    sent,
                    received,
                    request_wait + paced_ms,
                    &recorder,
                    &mut progress,
                )
            };
            request_wait = 0;
            if let Some(retry) = retry_after {
                not_before_ms = received.saturating_add(retry as i64);
            }
            cycle_failed |= failed;
            match next {
                Some(n) => req = n,
                None => break,
            }
        }
        if abandoned {
            next_tick = next_tick.max(end_ms.min(crate::clock::now_ms()));
            continue;
        }
        if last {
            return reason;
        }
        failures = if cycle_failed { failures + 1 } else { 0 };
        not_before_ms =
            not_before_ms.max(crate::clock::now_ms() + backoff_ms(failures, interval_ms) as i64);
        next_tick = following_tick(next_tick, interval_ms, crate::clock::now_ms());
    }
}

/// The tick after `tick`; ticks missed while waiting are skipped, not made up,
/// so the cadence stays aligned.
pub fn following_tick(tick: i64, interval_ms: u64, now_ms: i64) -> i64 {
    let next = tick + interval_ms as i64;
    if next <= now_ms {
        align_up(now_ms, interval_ms)
    } else {
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first-spawned task finishes last (it waits for the second), and a
    /// panicked task does not hide another's interruption.
    #[tokio::test]
    async fn all_stopped_waits_for_every_task_in_any_order() {
        use tokio::sync::oneshot;
        let (first_may_end, wait) = oneshot::channel::<()>();
        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(async move {
            wait.await.unwrap();
            StopReason::Duration
        });
        tasks.spawn(async move {
            first_may_end.send(()).unwrap();
            StopReason::Interrupted
        });
        tasks.spawn(async { panic!("a poller task failed") });
        assert_eq!(all_stopped(tasks).await, StopReason::Interrupted);

        let mut tasks = tokio::task::JoinSet::new();
        tasks.spawn(async { StopReason::Duration });
        tasks.spawn(async { StopReason::Duration });
        assert_eq!(all_stopped(tasks).await, StopReason::Duration);
        assert_eq!(
            all_stopped(tokio::task::JoinSet::new()).await,
            StopReason::Duration
        );
    }

    #[test]
    fn ticks_align_to_the_interval() {
        assert_eq!(align_up(1_700_000_000_001, 1000), 1_700_000_001_000);
        assert_eq!(align_up(1_700_000_000_000, 1000), 1_700_000_000_000);
        assert_eq!(align_up(-1, 1000), 0);
    }

    /// Issue 11.2: a server answering every request with `Retry-After: 99999999`
    /// cannot hold the run: it ends after the duration, the largest k and the
    /// final cycle's bounded wait, and the wait cut short is recorded. Without
    /// the cut, this test never returns (the harness timeout fails it).
    #[tokio::test]
    async fn a_far_retry_after_cannot_hold_the_run_past_its_end() {
        use crate::record::writer::tests::{run_info, temp_db};
        use crate::record::{PollerInfo, Recorder};
        use crate::target::{Dialect, HttpTarget, http_client};
        use axum::response::IntoResponse;
        let app = axum::Router::new().fallback(|| async {
            (
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                [(axum::http::header::RETRY_AFTER, "99999999")],
                "slow down",
            )
                .into_response()
        });
        let server = crate::sim::server::RunningServer::start(app).await.unwrap();
        let layout: Layout = "mastodon".parse().unwrap();
        let policies = ["naive", "compensated:k=100ms"];
        let pollers: Vec<Poller> = policies
            .iter()
            .map(|p| Poller::new(*p, p.parse().unwrap(), layout.clone(), 40, 2))
            .collect();
        let infos: Vec<PollerInfo> = policies
            .iter()
            .map(|p| PollerInfo {
                name: p.to_string(),
                policy: p.to_string(),
                k_ms: None,
            })
            .collect();
        let path = temp_db("retry-after");
        let recorder = Recorder::create(&path, &run_info(), &infos).unwrap();
        let target = HttpTarget::new(
            http_client(std::time::Duration::from_secs(5)).unwrap(),
            &server.url(""),
            Dialect::Mastodon {
                timeline: "public".into(),
            },
            layout.clone(),
            None,
        );
        let plan = Plan {
            layout,
            pollers,
            interval_ms: 100,
            duration_ms: 300,
            final_wait_ms: 100,
        };
        let progress = Arc::new(Mutex::new(Progress::new(&plan.pollers)));
        let (_stop_tx, stop_rx) = watch::channel(false);
        let reason = tokio::time::timeout(
            std::time::Duration::from_secs(120),
            run_real(plan, target, None, recorder.sender(), progress, stop_rx),
        )
        .await
        .expect("the run ends whatever Retry-After says");
        assert_eq!(reason, StopReason::Duration);
        recorder.finish(0, true, "duration").unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let rows: Vec<(i64, i64, u16, i64, String)> = conn
            .prepare("SELECT poller_id, cycle, http_status, wait_ms, error FROM requests ORDER BY poller_id, id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        for poller in 1..=2 {
            let mine: Vec<_> = rows.iter().filter(|r| r.0 == poller).collect();
            // The first tick's request, refused; then only the final cycle's.
            assert_eq!(mine.len(), 2, "{rows:?}");
            assert!(
                mine.iter()
                    .all(|r| r.2 == 429 && r.4.starts_with("HTTP 429"))
            );
            assert_eq!(mine[0].3, 0);
            // The wait the server asked for was cut short at the end, and recorded.
            assert!(mine[1].3 > 0, "{rows:?}");
            assert!((mine[1].3 as u64) < crate::target::MAX_SERVER_WAIT_MS);
        }
    }

    #[test]
    fn missed_ticks_are_skipped() {
        assert_eq!(following_tick(1000, 1000, 1500), 2000);
        assert_eq!(following_tick(1000, 1000, 3500), 4000);
        assert_eq!(following_tick(1000, 1000, 2000), 2000);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff_ms(0, 1000), 0);
        assert_eq!(backoff_ms(1, 1000), 0);
        assert_eq!(backoff_ms(2, 1000), 1000);
        assert_eq!(backoff_ms(3, 1000), 3000);
        assert_eq!(backoff_ms(30, 1000), 59_000);
    }
}
