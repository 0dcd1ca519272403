//! What defines a run, whatever its target: the options every run has
//! ([`Common`]), its clock, its default pollers, and the configuration it
//! stores in `runs.config`.

use serde::Serialize;
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use std::path::PathBuf;

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
    /// `--tick-jitter`: each tick moved later by a seeded draw in `[0, this)`.
    pub tick_jitter_ms: u64,
}

impl Common {
    /// The pollers' tick jitter, seeded by the run's seed: every poller of
    /// the run draws the same moves, so they still send together.
    pub fn tick_jitter(&self) -> since_id::schedule::TickJitter {
        since_id::schedule::TickJitter {
            max_ms: self.tick_jitter_ms,
            seed: self.seed ^ 0x5449_434b_4a49_5454,
        }
    }
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
    /// `--tick-jitter`; absent when 0, so that a run without it stores the
    /// config it always did (the golden run's digest, experiment/tests/experiment.rs).
    #[serde(skip_serializing_if = "is_zero")]
    pub tick_jitter_ms: u64,
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
    /// A database target's writers' arrivals (`--arrivals`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<crate::workload::Arrivals>,
    pub version: &'static str,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
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
            tick_jitter_ms: common.tick_jitter_ms,
            page_limit,
            max_back_pages: common.max_back_pages,
            timeout_ms: common.timeout_ms,
            pollers,
            layout: layout.to_string(),
            simulator: None,
            faults: None,
            backlog_ms: None,
            arrivals: None,
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}
