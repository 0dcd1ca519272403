//! One experiment: options in, a recorded run out ([`run_experiment`]). This is wiring
//! only: it builds the target, the pollers and the recorder and hands them to a
//! driver in [`crate::run`]. The `experiment` binary parses the options and prints the
//! summary; the tests call [`run_experiment`] directly, and `experiment sweep`
//! [`run_virtual_to`], which records to memory.

use crate::api::spec::{self, TargetOptions, TargetSpec};
use crate::api::{Dialect, HttpTarget, Token, http_client};
use crate::embedded::{self, InProcess};
use crate::record::{PollerInfo, Recorder, RunInfo};
use crate::run::{self, Plan, Progress, StopReason};
use crate::sim::faults::{FaultPlan, FaultSpec};
use crate::sim::model::{DEFAULT_BACKLOG_MS, SimConfig, Simulator};
use clap::{Args, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use since_id::id::Layout;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use since_id::time::{format_duration_ms, parse_duration_ms};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which clock a run follows. Its text (`as_str`) is what run.db's `runs.clock`
/// and the stored config hold, so the two spellings are part of the schema.
#[derive(ValueEnum, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
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

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// How long to poll (1h, 90s, 1500ms; at most 366 days).
    #[arg(long, default_value = "1h", value_parser = parse_run_duration)]
    pub duration: u64,
    // The APIs' options are described where they are parsed (`api/spec.rs`).
    #[arg(long, default_value = "simulator", help = spec::target_help())]
    pub target: String,
    #[arg(long, help = spec::TIMELINE_HELP)]
    pub timeline: Option<String>,
    #[arg(long, help = spec::LIST_ID_HELP)]
    pub list_id: Option<String>,
    #[arg(long, help = spec::BASE_URL_HELP)]
    pub base_url: Option<String>,
    #[arg(long, help = spec::LAYOUT_HELP)]
    pub layout: Option<String>,
    #[arg(long, help = spec::token_file_help())]
    pub token_file: Option<PathBuf>,
    /// Print the first request each poller would make (token redacted) and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Simulator profile: twitter, mastodon, misskey or discord.
    #[arg(long, default_value = "twitter")]
    pub profile: String,
    /// A TOML file of simulator parameters, applied over the profile.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// One simulator parameter, KEY=VALUE (repeatable; after --config).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// A poller's cursor policy (repeatable; default naive and compensated:k=1s): naive,
    /// compensated:k=1s, audit:k=1s,depth=2m,every=1m, adaptive, or xmin (PostgreSQL only).
    #[arg(long = "poller", value_name = "SPEC", value_parser = parse_policy)]
    pub pollers: Vec<CursorPolicy>,
    /// Time between the pollers' ticks, aligned to multiples of it (1s: the start of each second).
    #[arg(long, default_value = "1s", value_parser = parse_interval)]
    pub interval: u64,
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000), help = spec::LIMIT_HELP)]
    pub limit: u32,
    /// How many pages a poller may page back within one tick before it gives up (overflow).
    #[arg(long, default_value_t = 10)]
    pub max_back_pages: u32,
    /// The run database; each invocation adds a run to it.
    #[arg(long, default_value = "data/run.db")]
    pub db: PathBuf,
    /// Seed of everything random.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `real`: in real time (the simulator over HTTP on 127.0.0.1); `virtual`: the simulator
    /// in-process, in simulated time.
    #[arg(long, value_enum, default_value_t = ClockMode::Real)]
    pub clock: ClockMode,
    /// Start of a virtual run (RFC 3339 or ms); default 2026-01-01T00:00:00Z, so runs reproduce.
    #[arg(long, value_parser = since_id::time::parse_time)]
    pub start: Option<i64>,
    /// History the simulator holds when the run starts (default 5m; 0s: an empty timeline).
    #[arg(long, value_parser = parse_duration_ms)]
    pub backlog: Option<u64>,
    /// Faults the simulator injects, e.g. 5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s
    #[arg(long, value_parser = parse_faults)]
    pub faults: Option<FaultSpec>,
    /// HTTP request timeout (at most 1h).
    #[arg(long, default_value = "10s", value_parser = parse_timeout)]
    pub timeout: u64,
    /// No progress bar even on a terminal (set by callers that run many at
    /// once, such as `experiment sweep`; not a flag).
    #[arg(skip)]
    pub quiet: bool,
    #[command(flatten)]
    pub pg: crate::pg::driver::PgArgs,
}

fn parse_policy(text: &str) -> Result<CursorPolicy, String> {
    Ok(text.parse()?)
}

fn parse_faults(text: &str) -> Result<FaultSpec, String> {
    text.parse()
}

/// The longest run: a year and a day of leap. Beyond, `--duration` is refused.
pub const MAX_DURATION_MS: u64 = 366 * 24 * 3600 * 1000;

/// The longest HTTP timeout: the final drain lasts at most a few of them.
pub const MAX_TIMEOUT_MS: u64 = 3600 * 1000;

/// A virtual run steps through every tick: at most this many, so it ends in minutes.
pub const MAX_VIRTUAL_TICKS: u64 = 10_000_000;

/// The simulator creates, between two looks at it (an interval, or the final
/// drain's k), at most this many statuses on average: its memory is bounded
/// per step, and a step ends.
pub const MAX_STATUSES_PER_STEP: f64 = 1_000_000.0;

fn parse_bounded(text: &str, what: &str, max_ms: u64, max_text: &str) -> Result<u64, String> {
    let ms = parse_duration_ms(text)?;
    if ms > max_ms {
        return Err(format!("bad {what} '{text}': at most {max_text}"));
    }
    Ok(ms)
}

fn parse_run_duration(text: &str) -> Result<u64, String> {
    parse_bounded(
        text,
        "duration",
        MAX_DURATION_MS,
        "366days (a run must end)",
    )
}

fn parse_timeout(text: &str) -> Result<u64, String> {
    parse_bounded(text, "timeout", MAX_TIMEOUT_MS, "1h")
}

/// Refuses a simulated run whose size would not fit: too many virtual ticks, or
/// more statuses in one step of the simulator than memory should hold.
fn check_finite(args: &RunArgs, sim: &SimConfig, final_wait_ms: u64) -> Result<(), String> {
    if args.clock == ClockMode::Virtual {
        let ticks = (args.duration + final_wait_ms) / args.interval;
        if ticks > MAX_VIRTUAL_TICKS {
            return Err(format!(
                "a virtual run of {ticks} ticks (--duration and k over --interval) is more than {MAX_VIRTUAL_TICKS}: raise --interval or shorten --duration"
            ));
        }
    }
    let step_ms = args.interval.max(final_wait_ms);
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

/// The most `--poller` values a run takes (`analyze` reads at most as many).
pub const MAX_POLLERS: usize = 64;

fn parse_interval(text: &str) -> Result<u64, String> {
    match parse_duration_ms(text)? {
        0 => Err(format!("bad interval '{text}': must be at least 1ms")),
        ms => Ok(ms),
    }
}

/// The default start of virtual runs: fixed, so that a seed reproduces a run exactly.
pub const VIRTUAL_START_MS: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z

/// Everything that defines a run, stored as JSON in `runs.config`.
#[derive(Serialize)]
pub(crate) struct StoredConfig<'a> {
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    list_id: Option<&'a str>,
    /// `"<redacted>"` when a token was used; the token itself is never stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    profile: Option<&'a str>,
    seed: u64,
    clock: ClockMode,
    duration_ms: u64,
    interval_ms: u64,
    page_limit: usize,
    max_back_pages: u32,
    timeout_ms: u64,
    pollers: Vec<String>,
    layout: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    simulator: Option<&'a SimConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    faults: Option<String>,
    /// The simulator's history at the start of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    backlog_ms: Option<u64>,
    version: &'static str,
}

impl<'a> StoredConfig<'a> {
    /// The fields every run stores; each kind of target adds its own.
    pub(crate) fn common(
        args: &'a RunArgs,
        page_limit: usize,
        pollers: Vec<String>,
        layout: &Layout,
    ) -> StoredConfig<'a> {
        StoredConfig {
            target: &args.target,
            timeline: None,
            base_url: None,
            list_id: None,
            token: None,
            profile: None,
            seed: args.seed,
            clock: args.clock,
            duration_ms: args.duration,
            interval_ms: args.interval,
            page_limit,
            max_back_pages: args.max_back_pages,
            timeout_ms: args.timeout,
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

pub(crate) fn poller_names(policies: &[CursorPolicy]) -> Vec<String> {
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

/// Runs the experiment described by `args`.
pub fn run_experiment(mut args: RunArgs) -> Result<RunSummary, String> {
    check_poller_count(&args)?;
    if args.clock == ClockMode::Real && args.start.is_some() {
        return Err(
            "--start sets a virtual run's clock; a real-time run starts now (add --clock virtual)"
                .into(),
        );
    }
    if args.pollers.is_empty() {
        args.pollers = vec![
            CursorPolicy::Naive,
            CursorPolicy::Compensated { k_ms: 1000 },
        ];
    }
    if crate::pg::driver::is_postgres(&args.target) {
        return crate::pg::driver::run(args);
    }
    no_postgres_only(&args)?;
    let spec: TargetSpec = args.target.parse()?;
    if spec.is_simulator() {
        simulator_only_flags(&args)?;
        run_simulator(args)
    } else {
        run_real_target(args, &spec)
    }
}

/// `--dry-run`: the first request each poller would make, token redacted.
pub fn dry_run(mut args: RunArgs) -> Result<String, String> {
    if crate::pg::driver::is_postgres(&args.target) {
        return Err(
            "--dry-run shows HTTP requests; a PostgreSQL target sends only the SELECTs \
             documented in docs/postgres.md"
                .into(),
        );
    }
    no_postgres_only(&args)?;
    let spec: TargetSpec = args.target.parse()?;
    check_poller_count(&args)?;
    if args.pollers.is_empty() {
        args.pollers = vec![
            CursorPolicy::Naive,
            CursorPolicy::Compensated { k_ms: 1000 },
        ];
    }
    let (base, dialect, layout, token) = if spec.is_simulator() {
        simulator_only_flags(&args)?;
        let mut sim_config = SimConfig::profile(&args.profile)?;
        sim_config.apply_overrides(read_config(&args)?.as_deref(), &args.sets)?;
        let layout = sim_config.layout();
        let dialect = crate::sim::server::client_dialect(&layout, args.timeline.as_deref())?;
        (
            "http://127.0.0.1:PORT".to_string(),
            dialect,
            Some(layout),
            false,
        )
    } else {
        let resolved = spec.resolve(&target_options(&args))?;
        let token = Token::load(resolved.dialect.token_env(), args.token_file.as_deref())?;
        for warning in token_warnings(&resolved.base, args.token_file.as_deref(), token.is_some()) {
            eprintln!("{warning}");
        }
        (
            resolved.base,
            resolved.dialect,
            resolved.layout,
            token.is_some(),
        )
    };
    let mut out = format!("target {} (dry run: nothing is sent)\n", args.target);
    let Some(layout) = layout else {
        // No layout yet: the run starts with one probe to see the IDs.
        out.push_str(&format!(
            "layout probe: {}\n(the pollers' requests depend on the layout detected; pass --layout to see them)\n",
            dialect.describe_layout_probe(&base, token)
        ));
        return Ok(out);
    };
    let limit = dialect.page_limit(args.limit as usize);
    let now = crate::clock::now_ms();
    for (name, policy) in poller_names(&args.pollers).iter().zip(&args.pollers) {
        let mut poller = Poller::new(
            name.clone(),
            *policy,
            layout.clone(),
            limit,
            args.max_back_pages,
        );
        let req = poller.begin_cycle(now);
        out.push_str(&format!(
            "{name}: {}\n",
            dialect.describe(&base, &layout, &req, token)
        ));
    }
    Ok(out)
}

/// Warnings (never refusals) about how a token is kept and where it goes: a
/// token file others can read, or a token sent in clear text off this machine.
pub fn token_warnings(
    base: &str,
    token_file: Option<&std::path::Path>,
    token: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    #[cfg(unix)]
    if let Some(path) = token_file {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path) {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o044 != 0 {
                out.push(format!(
                    "warning: the token file {} is readable by other users (mode {mode:o}); chmod 600 it",
                    path.display()
                ));
            }
        }
    }
    if token && let Ok(url) = reqwest::Url::parse(base) {
        let host = url.host_str().unwrap_or_default();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let loopback = bare.eq_ignore_ascii_case("localhost")
            || bare
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        if url.scheme() == "http" && !loopback {
            out.push(format!(
                "warning: the token is sent over plain http:// to {host}, readable by anyone on the way; use https://"
            ));
        }
    }
    out
}

fn check_poller_count(args: &RunArgs) -> Result<(), String> {
    if args.pollers.len() > MAX_POLLERS {
        return Err(format!(
            "{} --poller values: at most {MAX_POLLERS} per run",
            args.pollers.len()
        ));
    }
    Ok(())
}

fn target_options(args: &RunArgs) -> TargetOptions {
    TargetOptions {
        timeline: args.timeline.clone(),
        list_id: args.list_id.clone(),
        base_url: args.base_url.clone(),
        layout: args.layout.clone(),
    }
}

/// The `xmin` policy reads PostgreSQL's transaction horizon: nothing else
/// has one; and the PostgreSQL flags do nothing elsewhere.
fn no_postgres_only(args: &RunArgs) -> Result<(), String> {
    if args.pollers.contains(&CursorPolicy::Xmin) {
        return Err(format!(
            "the xmin policy reads PostgreSQL's transaction horizon; it applies to --target postgres only, not '{}'",
            args.target
        ));
    }
    args.pg.refuse(
        &crate::pg::driver::PgArgs::ALL,
        &format!("applies to --target postgres only, not '{}'", args.target),
    )
}

/// The flags of real targets are errors with the simulator (its layout comes from the profile).
fn simulator_only_flags(args: &RunArgs) -> Result<(), String> {
    for (flag, given) in [
        ("--list-id", args.list_id.is_some()),
        ("--base-url", args.base_url.is_some()),
        ("--layout", args.layout.is_some()),
        ("--token-file", args.token_file.is_some()),
    ] {
        if given {
            return Err(format!(
                "{flag} applies to real targets only (the simulator is configured with --profile and --set)"
            ));
        }
    }
    Ok(())
}

fn read_config(args: &RunArgs) -> Result<Option<String>, String> {
    match &args.config {
        Some(path) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        None => Ok(None),
    }
}

/// The pollers of a run, and the largest k (the final drain's wait).
fn build_pollers(args: &RunArgs, layout: &Layout, limit: usize) -> (Vec<Poller>, Vec<String>, u64) {
    let names = poller_names(&args.pollers);
    let final_wait_ms = args
        .pollers
        .iter()
        .filter_map(|p| p.k_ms())
        .max()
        .unwrap_or(0);
    let pollers = names
        .iter()
        .zip(&args.pollers)
        .map(|(name, policy)| {
            Poller::new(
                name.clone(),
                *policy,
                layout.clone(),
                limit,
                args.max_back_pages,
            )
        })
        .collect();
    (pollers, names, final_wait_ms)
}

fn poller_infos(pollers: &[Poller]) -> Vec<PollerInfo> {
    pollers
        .iter()
        .map(|p| poller_row(p.name(), &p.policy()))
        .collect()
}

/// The `pollers` row of a poller.
pub(crate) fn poller_row(name: &str, policy: &CursorPolicy) -> PollerInfo {
    PollerInfo {
        name: name.to_string(),
        policy: policy.to_string(),
        k_ms: policy.k_ms().map(|k| k as i64),
        ..PollerInfo::default()
    }
}

/// The `runs` row of a run of `args` starting at `started_at_ms`, with
/// `config` (a [`StoredConfig`], or one that flattens it) as its JSON.
pub(crate) fn run_row(
    args: &RunArgs,
    started_at_ms: i64,
    layout: &Layout,
    page_limit: usize,
    profile: Option<String>,
    seed: Option<u64>,
    config: &impl Serialize,
) -> Result<RunInfo, String> {
    Ok(RunInfo {
        started_at_ms,
        target: args.target.clone(),
        profile,
        // The seed's bit pattern (rundb::rows).
        seed: seed.map(|s| s as i64),
        clock: args.clock.as_str().into(),
        layout: layout.to_string(),
        interval_ms: args.interval as i64,
        page_limit: page_limit as i64,
        config: serde_json::to_string(config).map_err(|e| e.to_string())?,
        version: rundb::VERSION.into(),
        ..RunInfo::default()
    })
}

/// Polls a real API in real time; no truth.
fn run_real_target(args: RunArgs, spec: &TargetSpec) -> Result<RunSummary, String> {
    if args.clock == ClockMode::Virtual {
        return Err(
            "--clock virtual runs the simulator only; real targets are polled in real time".into(),
        );
    }
    if args.config.is_some() || !args.sets.is_empty() {
        return Err(
            "--config and --set configure the simulator; they do not apply to a real target".into(),
        );
    }
    if args.backlog.is_some() {
        return Err(
            "--backlog is the simulator's history; it does not apply to a real target".into(),
        );
    }
    if args.faults.is_some() {
        return Err(
            "--faults are injected by the simulator; they do not apply to a real target".into(),
        );
    }
    let resolved = spec.resolve(&target_options(&args))?;
    let token = Token::load(resolved.dialect.token_env(), args.token_file.as_deref())?;
    for warning in token_warnings(&resolved.base, args.token_file.as_deref(), token.is_some()) {
        eprintln!("{warning}");
    }
    let runtime = runtime()?;
    let client = http_client(Duration::from_millis(args.timeout))?;
    let layout = match resolved.layout.clone() {
        Some(layout) => layout,
        None => {
            let layout = runtime.block_on(resolved.dialect.detect_layout(
                &client,
                &resolved.base,
                token.as_ref(),
            ))?;
            tracing::info!(layout = %layout, "ID layout detected from the first notes");
            layout
        }
    };
    let dialect = resolved.dialect.clone();
    let limit = dialect.page_limit(args.limit as usize);
    let (pollers, names, final_wait_ms) = build_pollers(&args, &layout, limit);
    let start_ms = crate::clock::now_ms();
    let stored = StoredConfig {
        timeline: dialect.timeline(),
        base_url: Some(resolved.base.clone()),
        list_id: args.list_id.as_deref(),
        token: token.as_ref().map(|_| "<redacted>"),
        ..StoredConfig::common(&args, limit, names, &layout)
    };
    let run_info = run_row(&args, start_ms, &layout, limit, None, None, &stored)?;
    let recorder = Recorder::create(&args.db, &run_info, &poller_infos(&pollers))?;
    let run_id = recorder.run_id;
    let plan = plan_of(&args, &layout, pollers, final_wait_ms);
    let bar = progress_bar(args.duration, 60_000);
    tracing::info!(run = run_id, db = %args.db.display(), target = %args.target, "run started");
    let progress = Arc::new(Mutex::new(Progress::new(&plan.pollers)));
    let target = HttpTarget::new(client, &resolved.base, dialect, layout, token);
    let reason = runtime.block_on(drive(
        plan,
        target,
        None,
        &recorder,
        progress.clone(),
        &bar,
        start_ms,
    ));
    let progress = progress.lock().unwrap_or_else(|e| e.into_inner()).clone();
    bar.finish();
    let reason = match reason {
        StopReason::Duration => "duration",
        StopReason::Interrupted => "interrupted",
    };
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    tracing::info!(run = run_id, reason, "run finished");
    Ok(RunSummary {
        run_id,
        db: args.db,
        complete: true,
        progress,
        notes: String::new(),
    })
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Runs the pollers in real time with signal handling and the live counters.
async fn drive(
    plan: Plan,
    target: HttpTarget,
    truth: Option<run::TruthSource>,
    recorder: &Recorder,
    progress: Arc<Mutex<Progress>>,
    bar: &Bar,
    start_ms: i64,
) -> StopReason {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::warn!(
            "stopping: one last request per poller after the largest k, then the run is closed"
        );
        let _ = stop_tx.send(true);
        wait_for_signal().await;
        tracing::error!("second signal: exiting now; the run stays marked incomplete");
        std::process::exit(130);
    });
    let watcher = {
        let progress = progress.clone();
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let p = progress.lock().unwrap_or_else(|e| e.into_inner()).clone();
                bar.tick_to((crate::clock::now_ms() - start_ms).max(0) as u64, || {
                    describe(&p)
                });
            }
        })
    };
    // From the recorded start, so the drain is due when a virtual run from
    // the same `--start` has it.
    let reason = run::run_real_from(
        start_ms,
        plan,
        target,
        truth,
        recorder.sender(),
        progress,
        stop_rx,
    )
    .await;
    watcher.abort();
    reason
}

/// What a run against the embedded simulator is made of.
struct SimSetup {
    sim_config: SimConfig,
    layout: Layout,
    dialect: Dialect,
    limit: usize,
    pollers: Vec<Poller>,
    names: Vec<String>,
    final_wait_ms: u64,
}

fn sim_setup(args: &RunArgs) -> Result<SimSetup, String> {
    let mut sim_config = SimConfig::profile(&args.profile)?;
    sim_config.apply_overrides(read_config(args)?.as_deref(), &args.sets)?;
    let layout: Layout = sim_config.layout();
    let dialect = crate::sim::server::client_dialect(&layout, args.timeline.as_deref())?;
    let limit = (args.limit as usize).min(dialect.max_limit());
    let (pollers, names, final_wait_ms) = build_pollers(args, &layout, limit);
    check_finite(args, &sim_config, final_wait_ms)?;
    Ok(SimSetup {
        sim_config,
        layout,
        dialect,
        limit,
        pollers,
        names,
        final_wait_ms,
    })
}

/// Drives `plan` in virtual time against the simulator, records to `records`
/// (items with their `created_at` and `author` when `details`).
#[allow(clippy::too_many_arguments)]
fn drive_virtual(
    args: &RunArgs,
    plan: &mut Plan,
    simulator: Simulator,
    dialect: &Dialect,
    start_ms: i64,
    records: &dyn run::Records,
    details: bool,
    mut on_tick: impl FnMut(i64, &Progress),
) -> Progress {
    let faults = args
        .faults
        .clone()
        .map(|spec| FaultPlan::new(spec, args.seed));
    let mut target = InProcess {
        sim: simulator,
        max_limit: dialect.max_limit(),
        faults,
        serves: embedded::serves(dialect),
        details,
    };
    let mut progress = Progress::new(&plan.pollers);
    run::run_virtual(
        plan,
        &mut target,
        start_ms,
        records,
        &mut progress,
        &mut on_tick,
    );
    progress
}

/// A virtual run against the embedded simulator that writes no database:
/// every record goes to the sink `make` builds from the run's layout and
/// pollers (`experiment sweep` judges each seed's run in memory). The same
/// options give the same records as `run_experiment` with `--clock virtual`.
pub fn run_virtual_to<S: run::Records>(
    mut args: RunArgs,
    make: impl FnOnce(&Layout, &[PollerInfo]) -> S,
) -> Result<S, String> {
    check_poller_count(&args)?;
    if args.pollers.is_empty() {
        args.pollers = vec![
            CursorPolicy::Naive,
            CursorPolicy::Compensated { k_ms: 1000 },
        ];
    }
    let spec: TargetSpec = args.target.parse()?;
    if !spec.is_simulator() || crate::pg::driver::is_postgres(&args.target) {
        return Err("a run in memory needs the embedded simulator".into());
    }
    no_postgres_only(&args)?;
    simulator_only_flags(&args)?;
    let setup = sim_setup(&args)?;
    let start_ms = args.start.unwrap_or(VIRTUAL_START_MS);
    let backlog_ms = args.backlog.unwrap_or(DEFAULT_BACKLOG_MS);
    let sink = make(&setup.layout, &poller_infos(&setup.pollers));
    let mut plan = plan_of(&args, &setup.layout, setup.pollers, setup.final_wait_ms);
    let simulator = embedded::with_backlog_streamed(
        setup.sim_config,
        args.seed,
        start_ms,
        backlog_ms,
        embedded::serves(&setup.dialect),
        &sink,
    );
    drive_virtual(
        &args,
        &mut plan,
        simulator,
        &setup.dialect,
        start_ms,
        &sink,
        false,
        |_, _| {},
    );
    Ok(sink)
}

/// The plan of a run: `args`' cadence and duration, the pollers, and the
/// wait before the final cycle.
pub(crate) fn plan_of(
    args: &RunArgs,
    layout: &Layout,
    pollers: Vec<Poller>,
    final_wait_ms: u64,
) -> Plan {
    Plan {
        layout: layout.clone(),
        pollers,
        interval_ms: args.interval,
        duration_ms: args.duration,
        final_wait_ms,
    }
}

/// The experiment against the embedded simulator, in real or virtual time.
fn run_simulator(args: RunArgs) -> Result<RunSummary, String> {
    let SimSetup {
        sim_config,
        layout,
        dialect,
        limit,
        pollers,
        names,
        final_wait_ms,
    } = sim_setup(&args)?;
    let virtual_clock = args.clock == ClockMode::Virtual;
    let backlog_ms = args.backlog.unwrap_or(DEFAULT_BACKLOG_MS);
    let start_ms = if virtual_clock {
        args.start.unwrap_or(VIRTUAL_START_MS)
    } else {
        crate::clock::now_ms()
    };
    let stored = StoredConfig {
        // The truth is what this endpoint serves (`embedded::serves`).
        timeline: dialect.timeline(),
        profile: Some(&args.profile),
        simulator: Some(&sim_config),
        faults: args.faults.as_ref().map(|f| f.to_string()),
        backlog_ms: Some(backlog_ms),
        ..StoredConfig::common(&args, limit, names, &layout)
    };
    let profile = Some(args.profile.clone());
    let run_info = run_row(
        &args,
        start_ms,
        &layout,
        limit,
        profile,
        Some(args.seed),
        &stored,
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &poller_infos(&pollers))?;
    let run_id = recorder.run_id;
    let mut plan = plan_of(&args, &layout, pollers, final_wait_ms);
    let simulator = embedded::with_backlog_streamed(
        sim_config.clone(),
        args.seed,
        start_ms,
        backlog_ms,
        embedded::serves(&dialect),
        &recorder.sender(),
    );
    // Off a terminal: a line a minute in real time, ten lines a run in virtual time.
    let log_every_ms = if virtual_clock {
        (args.duration / 10).max(1)
    } else {
        60_000
    };
    let bar = if args.quiet {
        Bar::silent()
    } else {
        progress_bar(args.duration, log_every_ms)
    };
    tracing::info!(run = run_id, db = %args.db.display(), clock = args.clock.as_str(), "run started");
    let (progress, complete, reason) = if virtual_clock {
        let sender = recorder.sender();
        let progress = drive_virtual(
            &args,
            &mut plan,
            simulator,
            &dialect,
            start_ms,
            &sender,
            true,
            |tick, p| {
                bar.tick_to(((tick - start_ms).max(0) as u64).min(args.duration), || {
                    describe(p)
                });
            },
        );
        (progress, true, "duration")
    } else {
        let runtime = runtime()?;
        let progress = Arc::new(Mutex::new(Progress::new(&plan.pollers)));
        let shared = Arc::new(Mutex::new(simulator));
        let reason = runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .map_err(|e| format!("cannot bind the simulator on 127.0.0.1: {e}"))?;
            let addr = listener.local_addr().map_err(|e| e.to_string())?;
            let mut router = crate::sim::server::router(
                shared.clone(),
                crate::sim::server::RateLimits::default(),
            );
            if let Some(spec) = args.faults.clone() {
                router = crate::sim::faults::layer(router, FaultPlan::new(spec, args.seed));
            }
            tokio::spawn(crate::sim::server::serve(
                listener,
                router,
                std::future::pending(),
            ));
            let client = http_client(Duration::from_millis(args.timeout))?;
            let target = HttpTarget::new(
                client,
                &format!("http://{addr}"),
                dialect.clone(),
                layout.clone(),
                None,
            );
            let truth = embedded::shared_truth(shared.clone(), embedded::serves(&dialect));
            Ok::<StopReason, String>(
                drive(
                    plan,
                    target,
                    Some(truth),
                    &recorder,
                    progress.clone(),
                    &bar,
                    start_ms,
                )
                .await,
            )
        })?;
        let progress = progress.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let reason = match reason {
            StopReason::Duration => "duration",
            StopReason::Interrupted => "interrupted",
        };
        (progress, true, reason)
    };
    bar.finish();
    let ended_at = if virtual_clock {
        start_ms + (args.duration + final_wait_ms) as i64
    } else {
        crate::clock::now_ms()
    };
    recorder.finish(ended_at, complete, reason)?;
    tracing::info!(run = run_id, reason, "run finished");
    Ok(RunSummary {
        run_id,
        db: args.db,
        complete,
        progress,
        notes: String::new(),
    })
}

/// One line of live counters.
fn describe(p: &Progress) -> String {
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

/// Ctrl-C, or SIGTERM on Unix.
pub(crate) async fn wait_for_signal() {
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

/// A progress bar on a terminal; plain log lines every minute elsewhere.
#[derive(Clone)]
struct Bar {
    bar: Option<ProgressBar>,
    log_every_ms: u64,
    last_log_ms: Arc<Mutex<u64>>,
}

impl Bar {
    /// No bar and no log lines.
    fn silent() -> Bar {
        Bar {
            bar: None,
            log_every_ms: u64::MAX,
            last_log_ms: Arc::new(Mutex::new(0)),
        }
    }

    fn tick_to(&self, elapsed_ms: u64, message: impl FnOnce() -> String) {
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

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn progress_bar(duration_ms: u64, log_every_ms: u64) -> Bar {
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
