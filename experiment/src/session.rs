//! What every target's run shares, below all of them: the options common to
//! every run ([`Common`]), the rows and the stored configuration a run
//! writes, the summary it returns, the async runtime, the one shutdown
//! handler, and the progress display. A leaf: it imports the core, the
//! recorder's row types and the driver's plan, never a target or a command.

use crate::drive::{self, Plan, PollTarget, Progress, StopReason, Tally, TruthSource};
use crate::record::{PollerRow, Recorder, RunRow};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use since_id::time::format_duration_ms;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Which clock a run follows. Its text (`as_str`) is what run.db's `runs.clock`
/// and the stored config hold, so the two spellings are part of the schema.
#[derive(clap::ValueEnum, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ClockMode {
    /// In real time: the simulator over HTTP on 127.0.0.1, or a real target.
    Real,
    /// The simulator in process, in simulated time: deterministic for a seed.
    Virtual,
}

impl ClockMode {
    /// The stored text: `real` or `virtual`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClockMode::Real => "real",
            ClockMode::Virtual => "virtual",
        }
    }
}

/// The pollers of a run when no `--poller` is given: naive and k = 1 s.
pub fn default_pollers() -> Vec<CursorPolicy> {
    vec![
        CursorPolicy::Naive,
        CursorPolicy::Compensated { k_ms: 1000 },
    ]
}

/// The options every run has, whatever its target, resolved and checked
/// (`cmd::run` builds them from the command line).
#[derive(Clone, Debug)]
pub struct Common {
    /// `--target` as given: `runs.target`.
    pub target: String,
    pub duration_ms: u64,
    pub interval_ms: u64,
    /// `--limit` as given; each target clamps it to what it serves.
    pub limit: u32,
    pub max_back_pages: u32,
    pub db: PathBuf,
    pub seed: u64,
    pub clock: ClockMode,
    pub timeout_ms: u64,
    /// Never empty ([`default_pollers`] when none was given), except in a
    /// MariaDB run with only `--id-poller`s.
    pub pollers: Vec<CursorPolicy>,
    /// No progress bar even on a terminal (`experiment sweep` runs many at once).
    pub quiet: bool,
}

/// Everything that defines a run, stored as JSON in `runs.config`.
#[derive(Serialize)]
pub struct StoredConfig<'a> {
    pub target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_id: Option<&'a str>,
    /// `"<redacted>"` when a token was used; the token itself is never stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<&'a str>,
    pub seed: u64,
    pub clock: ClockMode,
    pub duration_ms: u64,
    pub interval_ms: u64,
    pub page_limit: usize,
    pub max_back_pages: u32,
    pub timeout_ms: u64,
    pub pollers: Vec<String>,
    pub layout: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulator: Option<&'a crate::sim::SimConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub faults: Option<String>,
    /// The simulator's history at the start of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backlog_ms: Option<u64>,
    pub version: &'static str,
}

impl<'a> StoredConfig<'a> {
    /// The fields every run stores; each kind of target adds its own.
    pub fn common(
        common: &'a Common,
        page_limit: usize,
        pollers: Vec<String>,
        layout: &Layout,
    ) -> StoredConfig<'a> {
        StoredConfig {
            target: &common.target,
            timeline: None,
            base_url: None,
            list_id: None,
            token: None,
            profile: None,
            seed: common.seed,
            clock: common.clock,
            duration_ms: common.duration_ms,
            interval_ms: common.interval_ms,
            page_limit,
            max_back_pages: common.max_back_pages,
            timeout_ms: common.timeout_ms,
            pollers,
            layout: layout.to_string(),
            simulator: None,
            faults: None,
            backlog_ms: None,
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// What a finished run reports.
pub struct RunSummary {
    pub run_id: i64,
    pub db: PathBuf,
    pub complete: bool,
    pub progress: Progress,
    /// Lines the target adds to the summary (PostgreSQL: the writers, xmin's delay).
    pub notes: String,
}

/// The pollers' names: each policy's text, `#2`, `#3`... for repeats.
pub fn poller_names(policies: &[CursorPolicy]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in policies {
        let base = p.to_string();
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}#{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// The pollers of a run, their names, and the largest k (the final drain's wait).
pub fn build_pollers(
    common: &Common,
    layout: &Layout,
    limit: usize,
) -> (Vec<Poller>, Vec<String>, u64) {
    let names = poller_names(&common.pollers);
    let final_wait_ms = common
        .pollers
        .iter()
        .filter_map(|p| p.k_ms())
        .max()
        .unwrap_or(0);
    let pollers = names
        .iter()
        .zip(&common.pollers)
        .map(|(name, policy)| {
            Poller::new(
                name.clone(),
                *policy,
                layout.clone(),
                limit,
                common.max_back_pages,
            )
        })
        .collect();
    (pollers, names, final_wait_ms)
}

/// The `pollers` rows of a run's pollers.
pub fn poller_infos(pollers: &[Poller]) -> Vec<PollerRow> {
    pollers
        .iter()
        .map(|p| poller_row(p.name(), &p.policy()))
        .collect()
}

/// The `pollers` row of a poller.
pub fn poller_row(name: &str, policy: &CursorPolicy) -> PollerRow {
    PollerRow {
        name: name.to_string(),
        policy: policy.to_string(),
        k_ms: policy.k_ms().map(|k| k as i64),
        ..PollerRow::default()
    }
}

/// What a run's `runs` row says besides the common options.
pub struct RunRowParts<'a, C: Serialize> {
    pub started_at_ms: i64,
    pub layout: &'a Layout,
    pub page_limit: usize,
    pub profile: Option<String>,
    pub seed: Option<u64>,
    /// A [`StoredConfig`], or one that flattens it: `runs.config`.
    pub config: &'a C,
}

/// The `runs` row of a run.
pub fn run_row<C: Serialize>(common: &Common, parts: RunRowParts<'_, C>) -> Result<RunRow, String> {
    Ok(RunRow {
        started_at_ms: parts.started_at_ms,
        target: common.target.clone(),
        profile: parts.profile,
        // The seed's bit pattern (rundb::rows).
        seed: parts.seed.map(|s| s as i64),
        clock: common.clock.as_str().into(),
        layout: parts.layout.to_string(),
        interval_ms: common.interval_ms as i64,
        page_limit: parts.page_limit as i64,
        config: serde_json::to_string(parts.config).map_err(|e| e.to_string())?,
        version: rundb::VERSION.into(),
        ..RunRow::default()
    })
}

/// The plan of a run: the common cadence and duration, the pollers, and the
/// wait before the final cycle.
pub fn plan_of(common: &Common, layout: &Layout, pollers: Vec<Poller>, final_wait_ms: u64) -> Plan {
    Plan {
        layout: layout.clone(),
        pollers,
        interval_ms: common.interval_ms,
        duration_ms: common.duration_ms,
        final_wait_ms,
        first_index: 0,
    }
}

/// The async runtime of a run: two workers (the machine's pollers and server
/// share them; more buys nothing on loopback).
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The text `runs.end_reason` holds for a driver's stop.
pub fn end_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Duration => "duration",
        StopReason::Interrupted => "interrupted",
    }
}

/// The one shutdown handler of every command: the first Ctrl-C or SIGTERM
/// asks for a clean end (what `on_first` says is logged), a second one exits
/// at once with status 130 and leaves the run marked incomplete.
pub struct Shutdown {
    /// Turns `true` at the first signal.
    pub requested: tokio::sync::watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Shutdown {
    /// Installs the handlers now, not when a task first runs: tokio keeps an
    /// installed handler for the life of the process, so from here on Ctrl-C
    /// and SIGTERM no longer kill it (and whatever it started is cleaned up).
    /// Must be called inside a runtime.
    pub fn install(on_first: &'static str) -> Shutdown {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let _ = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            );
        }
        let (tx, requested) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            wait_for_signal().await;
            tracing::warn!("stopping: {on_first}");
            let _ = tx.send(true);
            wait_for_signal().await;
            tracing::error!("second signal: exiting now; the run stays marked incomplete");
            std::process::exit(130);
        });
        Shutdown { requested, task }
    }

    /// Whether a signal asked for the end.
    pub fn was_requested(&self) -> bool {
        *self.requested.borrow()
    }

    /// Ends the handling (a second signal kills again) and gives the run's
    /// `end_reason`: `interrupted` if a signal asked for the end, whatever
    /// the poll loop says, else the loop's.
    pub fn end(self, reason: StopReason) -> &'static str {
        end_reason(if self.was_requested() {
            StopReason::Interrupted
        } else {
            reason
        })
    }
}

impl Drop for Shutdown {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Ctrl-C, or SIGTERM on Unix.
pub async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

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
                let p = progress
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .progress
                    .clone();
                bar.tick_to((crate::clock::now_ms() - start_ms).max(0) as u64, || {
                    describe(&p)
                });
            }
        })
    };
    // From the recorded start, so the drain is due when a virtual run from
    // the same `--start` has it.
    let reason = drive::run_real_from(
        live.start_ms,
        plan,
        target,
        truth,
        live.recorder.sender(),
        live.progress,
        shutdown.requested.clone(),
    )
    .await;
    watcher.abort();
    reason
}

/// One line of live counters.
pub fn describe(p: &Progress) -> String {
    let late: Vec<String> = p
        .late_arrivals
        .iter()
        .map(|(n, c)| format!("{n} {c}"))
        .collect();
    format!(
        "{} requests ({} failed), {} statuses, late arrivals: {}",
        p.requests,
        p.failed,
        p.statuses,
        late.join(", ")
    )
}

/// A progress bar on a terminal; plain log lines every `log_every_ms` elsewhere.
#[derive(Clone)]
pub struct Bar {
    bar: Option<ProgressBar>,
    log_every_ms: u64,
    last_log_ms: Arc<Mutex<u64>>,
}

impl Bar {
    /// A bar over `duration_ms` on a terminal, log lines elsewhere.
    pub fn new(duration_ms: u64, log_every_ms: u64) -> Bar {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(duration_ms.div_ceil(1000));
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{bar:30}] {pos}/{len}s (eta {eta}) {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar
        });
        Bar {
            bar,
            log_every_ms,
            last_log_ms: Arc::new(Mutex::new(0)),
        }
    }

    /// No bar and no log lines.
    pub fn silent() -> Bar {
        Bar {
            bar: None,
            log_every_ms: u64::MAX,
            last_log_ms: Arc::new(Mutex::new(0)),
        }
    }

    pub fn tick_to(&self, elapsed_ms: u64, message: impl FnOnce() -> String) {
        match &self.bar {
            Some(bar) => {
                bar.set_position(elapsed_ms / 1000);
                bar.set_message(message());
            }
            None => {
                let mut last = self.last_log_ms.lock().unwrap_or_else(|e| e.into_inner());
                if elapsed_ms >= last.saturating_add(self.log_every_ms) {
                    *last = elapsed_ms;
                    tracing::info!(
                        "{} elapsed: {}",
                        format_duration_ms(elapsed_ms / 1000 * 1000),
                        message()
                    );
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
