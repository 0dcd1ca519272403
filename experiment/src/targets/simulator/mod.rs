//! `--target simulator` (the default): the embedded leaky timeline, in real
//! time over HTTP on 127.0.0.1 or in virtual time in-process, its truth
//! streamed to the recorder either way.

pub(crate) mod in_process;
pub mod options;
pub mod serve;

use crate::api::{Dialect, HttpTarget, http_client};
use crate::drive::{self, Plan, Progress, Records, Tally};
use crate::record::{PollerRow, Recorder};
use crate::session::{
    self, Bar, ClockMode, Common, RunRowParts, RunSummary, StoredConfig, build_pollers, plan_of,
    poller_infos,
};
use crate::sim::faults::{FaultPlan, FaultSpec};
use crate::sim::model::{DEFAULT_BACKLOG_MS, SimConfig, Simulator};
use crate::sim::sync::lock;
use in_process::InProcess;
use since_id::id::Layout;
use since_id::time::format_duration_ms;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The default start of virtual runs: fixed, so that a seed reproduces a run exactly.
pub const VIRTUAL_START_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// A virtual run steps through every tick: at most this many, so it ends in minutes.
pub const MAX_VIRTUAL_TICKS: u64 = 10_000_000;

/// The simulator creates, between two looks at it (an interval, or the final
/// drain's k), at most this many statuses on average: its memory is bounded
/// per step, and a step ends.
pub const MAX_STATUSES_PER_STEP: f64 = 1_000_000.0;

/// The simulator's own options, resolved: the profile with `--config` and
/// `--set` applied, and the dialect its pollers speak.
#[derive(Clone, Debug)]
pub struct SimOpts {
    pub profile: String,
    pub config: SimConfig,
    pub dialect: Dialect,
    /// `--start` (virtual time only).
    pub start_ms: Option<i64>,
    pub backlog_ms: u64,
    pub faults: Option<FaultSpec>,
}

impl SimOpts {
    /// The profile, its overrides (`config_text` is the `--config` file's
    /// text, then each `--set`), and the timeline the pollers read.
    pub fn new(
        profile: &str,
        config_text: Option<&str>,
        sets: &[String],
        timeline: Option<&str>,
    ) -> Result<SimOpts, String> {
        let mut config = SimConfig::profile(profile)?;
        config.apply_overrides(config_text, sets)?;
        let dialect = client_dialect(&config.layout(), timeline)?;
        Ok(SimOpts {
            profile: profile.to_string(),
            config,
            dialect,
            start_ms: None,
            backlog_ms: DEFAULT_BACKLOG_MS,
            faults: None,
        })
    }

    fn layout(&self) -> Layout {
        self.config.layout()
    }

    /// The simulator of these options seeded `seed`, at `start_ms` with its
    /// backlog made behind it, the backlog's truth sent to `records`.
    fn simulator(&self, seed: u64, start_ms: i64, records: &dyn Records) -> Simulator {
        in_process::with_backlog_streamed(
            self.config.clone(),
            seed,
            start_ms,
            self.backlog_ms,
            in_process::serves(&self.dialect),
            records,
        )
    }
}

/// The dialect a client speaks to the simulator for a profile's layout:
/// Mastodon's public timeline, Misskey's local timeline (or its global one
/// with `--timeline global`), or a Twitter v1.1 list.
pub fn client_dialect(layout: &Layout, timeline: Option<&str>) -> Result<Dialect, String> {
    let misskey = layout.name().starts_with("misskey");
    let dialect = match (layout.name(), timeline) {
        ("mastodon", None) => Dialect::Mastodon {
            timeline: "public".into(),
        },
        // Misskey's local timeline holds local notes only; the global one also
        // holds remote notes, IDed at their `published` time (docs/simulator.md).
        (_, None | Some("local")) if misskey => Dialect::Misskey {
            endpoint: "local-timeline".into(),
        },
        (_, Some("global")) if misskey => Dialect::Misskey {
            endpoint: "global-timeline".into(),
        },
        (_, Some(other)) if misskey => {
            return Err(format!(
                "--timeline {other}: the simulator serves the misskey profile's local and global timelines"
            ));
        }
        (_, Some(_)) => {
            return Err(
                "--timeline applies to real targets and to the simulator's misskey profile (local or global)"
                    .into(),
            );
        }
        _ => Dialect::TwitterV1 {
            list_id: "1".into(),
        },
    };
    Ok(dialect)
}

/// The simulator's layout and dialect, for `--dry-run`.
pub fn dry_run_target(opts: &SimOpts) -> (Layout, Dialect) {
    (opts.layout(), opts.dialect.clone())
}

/// What a run against the embedded simulator is made of.
struct Setup {
    layout: Layout,
    limit: usize,
    plan: Plan,
    infos: Vec<PollerRow>,
    names: Vec<String>,
}

fn setup(common: &Common, opts: &SimOpts) -> Result<Setup, String> {
    let layout = opts.layout();
    let limit = (common.limit as usize).min(opts.dialect.max_limit());
    let (pollers, names, final_wait_ms) = build_pollers(common, &layout, limit);
    check_finite(common, &opts.config, final_wait_ms)?;
    let infos = poller_infos(&pollers);
    let plan = plan_of(common, &layout, pollers, final_wait_ms);
    Ok(Setup {
        layout,
        limit,
        plan,
        infos,
        names,
    })
}

/// Refuses a simulated run whose size would not fit: too many virtual ticks, or
/// more statuses in one step of the simulator than memory should hold.
fn check_finite(common: &Common, sim: &SimConfig, final_wait_ms: u64) -> Result<(), String> {
    if common.clock == ClockMode::Virtual {
        let ticks = (common.duration_ms + final_wait_ms) / common.interval_ms;
        if ticks > MAX_VIRTUAL_TICKS {
            return Err(format!(
                "a virtual run of {ticks} ticks (--duration and k over --interval) is more than {MAX_VIRTUAL_TICKS}: raise --interval or shorten --duration"
            ));
        }
    }
    let step_ms = common.interval_ms.max(final_wait_ms);
    let peak = sim.rate_per_s * sim.burst_factor.max(1.0);
    let per_step = peak * step_ms as f64 / 1000.0;
    if per_step > MAX_STATUSES_PER_STEP {
        return Err(format!(
            "the simulator would create about {per_step:.0} statuses every {} (rate_per_s={} x burst_factor={}), more than {MAX_STATUSES_PER_STEP:.0}: lower rate_per_s, or shorten --interval or k",
            format_duration_ms(step_ms),
            sim.rate_per_s,
            sim.burst_factor
        ));
    }
    Ok(())
}

/// What [`drive_virtual`] is given besides the plan.
struct VirtualRun<'a> {
    common: &'a Common,
    opts: &'a SimOpts,
    simulator: Simulator,
    start_ms: i64,
    records: &'a dyn Records,
    /// Record items with their `created_at` and `author`.
    details: bool,
}

/// Drives `plan` in virtual time against the simulator.
fn drive_virtual(
    run: VirtualRun<'_>,
    plan: &mut Plan,
    mut on_tick: impl FnMut(i64, &Progress),
) -> Progress {
    let faults = run
        .opts
        .faults
        .clone()
        .map(|spec| FaultPlan::new(spec, run.common.seed));
    let mut target = InProcess {
        sim: run.simulator,
        max_limit: run.opts.dialect.max_limit(),
        faults,
        serves: in_process::serves(&run.opts.dialect),
        details: run.details,
    };
    let mut tally = Tally::new(&plan.pollers);
    drive::run_virtual(
        plan,
        &mut target,
        run.start_ms,
        run.records,
        &mut tally,
        &mut on_tick,
    );
    tally.progress
}

/// A virtual run against the embedded simulator that writes no database:
/// every record goes to the sink `make` builds from the run's layout and
/// pollers (`experiment sweep` judges each seed's run in memory). The same
/// options give the same records as [`run`] with `--clock virtual`.
pub fn run_virtual_to<S: Records>(
    common: &Common,
    opts: &SimOpts,
    make: impl FnOnce(&Layout, &[PollerRow]) -> S,
) -> Result<S, String> {
    let Setup {
        layout,
        mut plan,
        infos,
        ..
    } = setup(common, opts)?;
    let start_ms = opts.start_ms.unwrap_or(VIRTUAL_START_MS);
    let sink = make(&layout, &infos);
    let simulator = opts.simulator(common.seed, start_ms, &sink);
    let run = VirtualRun {
        common,
        opts,
        simulator,
        start_ms,
        records: &sink,
        details: false,
    };
    drive_virtual(run, &mut plan, |_, _| {});
    Ok(sink)
}

/// The experiment against the embedded simulator, in real or virtual time.
pub fn run(common: Common, opts: SimOpts) -> Result<RunSummary, String> {
    let Setup {
        layout,
        limit,
        mut plan,
        infos,
        names,
    } = setup(&common, &opts)?;
    let final_wait_ms = plan.final_wait_ms;
    let virtual_clock = common.clock == ClockMode::Virtual;
    let start_ms = if virtual_clock {
        opts.start_ms.unwrap_or(VIRTUAL_START_MS)
    } else {
        crate::clock::now_ms()
    };
    let stored = StoredConfig {
        // The truth is what this endpoint serves (`in_process::serves`).
        timeline: opts.dialect.timeline(),
        profile: Some(&opts.profile),
        simulator: Some(&opts.config),
        faults: opts.faults.as_ref().map(|f| f.to_string()),
        backlog_ms: Some(opts.backlog_ms),
        ..StoredConfig::common(&common, limit, names, &layout)
    };
    let run_info = session::run_row(
        &common,
        RunRowParts {
            profile: Some(opts.profile.clone()),
            seed: Some(common.seed),
            ..RunRowParts::new(start_ms, &layout, limit, &stored)
        },
    )?;
    let recorder = Recorder::create(&common.db, &run_info, &infos)?;
    let run_id = recorder.run_id;
    let simulator = opts.simulator(common.seed, start_ms, &recorder.sender());
    // Off a terminal: a line a minute in real time, ten lines a run in virtual time.
    let log_every_ms = if virtual_clock {
        (common.duration_ms / 10).max(1)
    } else {
        60_000
    };
    let bar = if common.quiet {
        Bar::silent()
    } else {
        Bar::new(common.duration_ms, log_every_ms)
    };
    tracing::info!(run = run_id, db = %common.db.display(), clock = common.clock.as_str(), "run started");
    let (progress, reason) = if virtual_clock {
        let sender = recorder.sender();
        let run = VirtualRun {
            common: &common,
            opts: &opts,
            simulator,
            start_ms,
            records: &sender,
            details: true,
        };
        let progress = drive_virtual(run, &mut plan, |tick, p| {
            bar.tick_to(
                ((tick - start_ms).max(0) as u64).min(common.duration_ms),
                || session::describe(p),
            );
        });
        (progress, session::end_reason(drive::StopReason::Duration))
    } else {
        let live = session::Live {
            recorder: &recorder,
            progress: Arc::new(Mutex::new(Tally::new(&plan.pollers))),
            bar: &bar,
            start_ms,
        };
        let reason = serve_and_poll(&common, &opts, &layout, plan, simulator, live)?;
        (reason.0, session::end_reason(reason.1))
    };
    bar.finish();
    let ended_at = if virtual_clock {
        start_ms + (common.duration_ms + final_wait_ms) as i64
    } else {
        crate::clock::now_ms()
    };
    recorder.finish(ended_at, true, reason)?;
    let summary = RunSummary::finished(&common, run_id, reason, progress, String::new());
    Ok(summary)
}

/// Real time: the simulator served over loopback HTTP, the pollers reading
/// it as they would a real API; returns their progress and why they stopped.
fn serve_and_poll(
    common: &Common,
    opts: &SimOpts,
    layout: &Layout,
    plan: drive::Plan,
    simulator: Simulator,
    live: session::Live<'_>,
) -> Result<(drive::Progress, drive::StopReason), String> {
    let runtime = session::runtime()?;
    let progress = live.progress.clone();
    let shared = Arc::new(Mutex::new(simulator));
    let reason = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot bind the simulator on 127.0.0.1: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let mut router =
            crate::sim::server::router(shared.clone(), crate::sim::server::RateLimits::default());
        if let Some(spec) = opts.faults.clone() {
            router = crate::sim::faults::layer(router, FaultPlan::new(spec, common.seed));
        }
        tokio::spawn(crate::sim::server::serve(
            listener,
            router,
            std::future::pending(),
        ));
        let client = http_client(Duration::from_millis(common.timeout_ms))?;
        let target = HttpTarget::new(
            client,
            &format!("http://{addr}"),
            opts.dialect.clone(),
            layout.clone(),
            None,
        );
        let truth = in_process::shared_truth(shared.clone(), in_process::serves(&opts.dialect));
        Ok::<_, String>(session::poll_in_real_time(plan, target, Some(truth), live).await)
    })?;
    let progress = lock(&progress).progress.clone();
    Ok((progress, reason))
}
