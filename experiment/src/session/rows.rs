//! What a run writes about itself and returns: its `runs` and `pollers`
//! rows, its end reason, and the summary a target hands back.

use super::config::Common;
use crate::drive::{Progress, StopReason};
use crate::record::{PollerRow, RunRow};
use serde::Serialize;
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use std::path::PathBuf;

/// What a finished run reports.
pub struct RunSummary {
    pub run_id: i64,
    pub db: PathBuf,
    pub complete: bool,
    pub progress: Progress,
    /// Lines the target adds to the summary (PostgreSQL: the writers, xmin's delay).
    pub notes: String,
}

impl RunSummary {
    /// The summary of run `run_id` of `common`, which ran to its end,
    /// `reason` why (as its `runs` row says), and the log line that says so.
    pub fn finished(
        common: &Common,
        run_id: i64,
        reason: &str,
        progress: Progress,
        notes: String,
    ) -> RunSummary {
        tracing::info!(run = run_id, reason, "run finished");
        RunSummary {
            run_id,
            db: common.db.clone(),
            complete: true,
            progress,
            notes,
        }
    }
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

impl<'a, C: Serialize> RunRowParts<'a, C> {
    /// The parts of a run with no profile and no seed (a real API, your
    /// own table): its start, its IDs' layout, its page limit and config.
    pub fn new(started_at_ms: i64, layout: &'a Layout, page_limit: usize, config: &'a C) -> Self {
        RunRowParts {
            started_at_ms,
            layout,
            page_limit,
            profile: None,
            seed: None,
            config,
        }
    }
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

/// The text `runs.end_reason` holds for a driver's stop.
pub fn end_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Duration => "duration",
        StopReason::Interrupted => "interrupted",
    }
}
