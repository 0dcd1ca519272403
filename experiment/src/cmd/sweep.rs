//! `experiment sweep`: the virtual experiment over many seeds, each run
//! judged in memory by `analyze`'s checker, one row per seed and poller kept.
//!
//! Each seed's run goes to [`InMemory`], which builds the checker's history
//! as the records are made ([`analysis::history_builder`]) instead of writing
//! them to a run database and reading them back: that round trip was most
//! of a sweep's time (docs/policies.md, "Benchmark"). The rows, the summary and
//! `sweep.db` are `analysis::sweep`'s. Seeds run in parallel on scoped
//! threads, one per core.
//!
//! With `--target postgres|mariadb|misskey-ftt` it runs a campaign of real
//! runs instead (docs/campaigns.md): the plan is `crate::campaign`'s, each
//! run goes through `targets` as `experiment [OPTIONS]` would, and the
//! judging and summary are `analysis::campaign`'s.

mod collect;
mod files;
mod machine;
mod merge;
mod plan;
mod report;
mod run;
mod store;

use crate::campaign::{self, FlagPair};
use crate::drive::Records;
use crate::record::{PollerRow, RequestRecord, TruthRow};
use crate::sim::sync::lock;
use crate::targets::{
    GivenRun, Sweep, check_campaign_run, resolve, run_flag, run_in_campaign, run_in_memory,
};
use analysis::history::{History, PollerSpec, Visibility};
use analysis::history_builder::{HistoryBuilder, StatusRef};
use analysis::sweep::SeedResult;
use since_id::Layout;
use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A run's records, as the checker's history, built as they come.
pub struct InMemory {
    builder: RefCell<HistoryBuilder>,
}

impl InMemory {
    /// For a run of these pollers (named and judged as `analyze` would).
    pub fn new(layout: &Layout, pollers: &[PollerRow], interval_ms: u64) -> InMemory {
        let specs = pollers
            .iter()
            .map(|p| PollerSpec {
                name: p.name.clone(),
                k_ms: p.k_ms,
                keyset: since_id::CursorPolicy::text_is_keyset(&p.policy),
                forward: since_id::gaps::IdPolicy::text_reads_forward(&p.policy),
            })
            .collect();
        InMemory {
            builder: RefCell::new(HistoryBuilder::new(
                layout.clone(),
                specs,
                interval_ms as i64,
            )),
        }
    }

    pub fn finish(self) -> Result<History, String> {
        self.builder.into_inner().finish()
    }
}

impl Records for InMemory {
    fn request(&self, row: RequestRecord) {
        self.builder.borrow_mut().request(
            row.poller,
            &row.request,
            row.items.iter().map(|s| StatusRef {
                id: &s.status.id,
                key: &s.status.id_key,
                id_time_ms: s.status.id_time_ms,
            }),
        );
    }

    fn truth(&self, rows: Vec<TruthRow>) {
        let mut builder = self.builder.borrow_mut();
        for t in &rows {
            builder.truth(
                StatusRef {
                    id: &t.id,
                    key: &t.id_key,
                    id_time_ms: t.id_time_ms,
                },
                Visibility {
                    visible_at_ms: t.visible_at_ms,
                    deleted_at_ms: t.deleted_at_ms,
                },
            );
        }
    }
}

/// The `experiment` options of one seed's run, checked by the experiment's own parser.
pub use crate::targets::run_args;

/// One seed's virtual run, in memory: its history.
pub fn history_of(base: &[String], seed: u64) -> Result<History, String> {
    let args = run_args(base, seed)?;
    let interval = args.shared.interval;
    run_in_memory(args, |layout, pollers| {
        InMemory::new(layout, pollers, interval)
    })?
    .finish()
}

/// Runs one seed in memory and judges it.
pub fn run_seed(base: &[String], seed: u64) -> Result<SeedResult, String> {
    let duration_ms = run_args(base, seed)?.shared.duration;
    let h = history_of(base, seed)?;
    Ok(analysis::sweep::judge(&h, seed, duration_ms))
}

/// Runs every seed on `jobs` threads; results in seed order. The first error
/// stops the sweep (seeds already started finish).
pub fn run_all(
    base: &[String],
    seeds: &[u64],
    jobs: usize,
    mut on_done: impl FnMut(usize, usize) + Send,
) -> Result<Vec<SeedResult>, String> {
    let total = seeds.len();
    in_parallel(
        seeds,
        jobs,
        |&seed| run_seed(base, seed).map_err(|e| format!("seed {seed}: {e}")),
        |done, _| on_done(done, total),
    )
}

/// Runs `run` over `items` on `jobs` scoped threads, telling `on_done` how
/// many are done as each finishes; results in the items' order. The first
/// error stops the rest (those already started finish).
fn in_parallel<I: Sync, R: Send>(
    items: &[I],
    jobs: usize,
    run: impl Fn(&I) -> Result<R, String> + Sync,
    on_done: impl FnMut(usize, &R) + Send,
) -> Result<Vec<R>, String> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    let error: Mutex<Option<String>> = Mutex::new(None);
    let done = Mutex::new((0usize, on_done));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if lock(&error).is_some() {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { return };
                    match run(item) {
                        Ok(r) => {
                            let mut d = lock(&done);
                            d.0 += 1;
                            let n = d.0;
                            (d.1)(n, &r);
                            lock(&results)[i] = Some(r);
                        }
                        Err(e) => {
                            lock(&error).get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect())
}

/// `experiment sweep`: the virtual experiment for every seed, in parallel
/// over the cores, judged with analyze's checker; one row per seed and
/// poller in DIR/sweep.db, and a summary per poller. With `--target
/// postgres|mariadb|misskey-ftt`, a campaign of real runs instead
/// (docs/campaigns.md): every combination of `--vary` times every seed, one
/// run after another, each run's database kept under `--out` and judged.
#[derive(clap::Args, Debug, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SweepArgs {
    /// Run one run of a plan, or merge a plan's runs (docs/campaigns.md, "On a cluster").
    #[command(subcommand)]
    pub action: Option<SweepAction>,
    /// Seeds: A-B, N, or a comma list of them (default 1-100 in virtual time;
    /// a campaign needs them given).
    #[arg(long)]
    pub seeds: Option<String>,
    /// Print JSON (documented in analysis/JSON.md) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where sweep.db (and the plots) go (default data/sweep); a campaign's run
    /// databases (required for a campaign).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Parallel runs (default: the number of cores in virtual time, 1 in a
    /// campaign, where runs side by side compete for the machine).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Do not draw the plots.
    #[arg(long)]
    pub no_plots: bool,
    /// A campaign: run every value of a run flag (interval, limit, schema, ...)
    /// or of a --set key (set:NAME), KEY=V1,V2,... (repeatable: every combination).
    #[arg(long = "vary", value_name = "KEY=V1,V2,...")]
    pub vary: Vec<String>,
    /// Plan the sweep instead of running it: in DIR, plan.json (one entry per
    /// run, in a seeded random order), slurm.sh (a Slurm job array) and
    /// job.yaml (a Kubernetes Indexed Job), each task calling
    /// `experiment sweep run DIR` (docs/campaigns.md, "On a cluster").
    #[arg(long, value_name = "DIR")]
    pub plan: Option<std::path::PathBuf>,
    /// The seed of the runs' random order (default 1): a campaign, or a
    /// plan, runs its (combination, seed) pairs interleaved in that order, so
    /// that what changes over the campaign's time falls on every cell alike.
    #[arg(long, value_name = "N")]
    pub order_seed: Option<u64>,
    /// A campaign: the equivalence margin, a loss rate in the rows' unit (per
    /// 100,000 rows; per 1,000 notes on misskey-ftt) stated before the runs. A
    /// comparison is called equivalent only when its difference's 90 %
    /// interval lies inside +-RATE (docs/campaigns.md, "Differences").
    #[arg(long, value_name = "RATE")]
    pub equivalence_margin: Option<f64>,
    /// The runs' own flags, as for `experiment` (--duration, --poller,
    /// --profile, --set, --timeline, and a target's flags).
    #[command(flatten)]
    pub run: GivenRun,
}

/// `experiment sweep run` and `experiment sweep merge`: a planned sweep's
/// runs, one per task, and their summary.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum SweepAction {
    /// Run one run of the plan in DIR: --index N, else SLURM_ARRAY_TASK_ID,
    /// else JOB_COMPLETION_INDEX; written to DIR/runs/N.db once finished (a
    /// finished index does nothing).
    Run {
        /// The plan's directory (`experiment sweep ... --plan DIR`).
        dir: std::path::PathBuf,
        /// The run's index in the plan.
        #[arg(long)]
        index: Option<usize>,
    },
    /// Merge the plan's finished runs into the sweep's summary, with the
    /// machines that ran them; missing and failed runs listed (exit 1).
    Merge {
        /// The plan's directory.
        dir: std::path::PathBuf,
        /// Print JSON (documented in analysis/JSON.md) instead of the table.
        #[arg(long)]
        json: bool,
        /// Also write each finished run's summary (its record, its judged
        /// result, its database's SHA-256) to FILE, for `sweep report`: a
        /// campaign plan's tables made again without the databases. An
        /// existing FILE of the same plan keeps the runs whose databases
        /// are gone, and the summary counts them.
        #[arg(long, value_name = "FILE")]
        keep: Option<std::path::PathBuf>,
    },
    /// Print a campaign's summary from the runs kept by `sweep merge
    /// --keep FILE`, as the merge printed it (no database needed).
    Report {
        /// The file `sweep merge --keep` wrote.
        file: std::path::PathBuf,
        /// Print JSON (documented in analysis/JSON.md) instead of the table.
        #[arg(long)]
        json: bool,
    },
}

/// The pollers of a sweep without `--poller`.
pub const DEFAULT_POLLERS: [&str; 5] = [
    "naive",
    "compensated:k=1s",
    "compensated:k=2m",
    "audit:k=1s,depth=2m,every=1m",
    "adaptive",
];

#[derive(serde::Serialize)]
struct JsonOut {
    schema: u32,
    seeds: String,
    duration: String,
    profile: String,
    sets: Vec<String>,
    database: String,
    sweep_id: i64,
    oracle_duplicates_per_new: Option<f64>,
    pollers: Vec<analysis::sweep::PollerSummary>,
    plots: Vec<String>,
}

/// The run flags a sweep sets itself, refused when given.
const SET_BY_SWEEP: [&str; 5] = ["--seed", "--db", "--clock", "--start", "--dry-run"];

/// Runs `experiment sweep` and prints its table or JSON: a campaign of
/// real runs on a database target, else the virtual sweep; with `--plan`
/// writes the plan instead; `sweep run` and `sweep merge` a plan's run and
/// summary. The exit status: 0, or 1 when a planned run failed or a merge
/// lacks runs.
pub fn sweep_command(args: SweepArgs) -> Result<u8, String> {
    match &args.action {
        Some(SweepAction::Run { dir, index }) => return run::run_command(dir, *index),
        Some(SweepAction::Merge { dir, json, keep }) => {
            return collect::merge_command(dir, *json, keep.as_deref());
        }
        Some(SweepAction::Report { file, json }) => return report::report_command(file, *json),
        None => {}
    }
    let given = args.run.flags.clone();
    if let Some((flag, _)) = given
        .iter()
        .find(|(f, _)| SET_BY_SWEEP.contains(&f.as_str()))
    {
        return Err(format!(
            "{flag}: experiment sweep sets it for each run (--seeds, --out)"
        ));
    }
    if let Some(dir) = args.plan.clone() {
        return plan_command(&args, given, &dir).map(|()| 0);
    }
    match sweep_of(
        &args.run.target,
        &args.vary,
        "runs the simulator in virtual time",
    )? {
        Sweep::Campaign => campaign_command(args, given).map(|()| 0),
        Sweep::Virtual => {
            refuse_campaign_only(&args)?;
            virtual_sweep(args, given).map(|()| 0)
        }
    }
}

/// The flags of a campaign alone, refused on the simulator's sweep (whose
/// seeds run in parallel, in no order, and are not compared by a margin).
fn refuse_campaign_only(args: &SweepArgs) -> Result<(), String> {
    let campaigns = crate::targets::sweep_targets(Sweep::Campaign);
    for (given, flag) in [
        (args.equivalence_margin.is_some(), "--equivalence-margin"),
        (
            args.order_seed.is_some() && args.plan.is_none(),
            "--order-seed",
        ),
    ] {
        if given {
            return Err(format!(
                "{flag} applies to a campaign (--target {campaigns}) or a plan (--plan DIR)"
            ));
        }
    }
    Ok(())
}

/// `--equivalence-margin`, checked: a positive, finite rate.
fn margin(args: &SweepArgs) -> Result<Option<f64>, String> {
    match args.equivalence_margin {
        Some(m) if !(m.is_finite() && m > 0.0) => Err(format!(
            "--equivalence-margin {m}: a loss rate above 0 in the rows' unit (per 100,000 rows)"
        )),
        m => Ok(m),
    }
}

/// What the sweep runs on `target` (the targets' table says, `targets::
/// sweep_of`): a campaign, or the simulator's sweep of seeds when nothing
/// is varied; else why not, `what` saying what the sweep does with the
/// simulator.
fn sweep_of(target: &str, vary: &[String], what: &str) -> Result<Sweep, String> {
    let campaigns = crate::targets::sweep_targets(Sweep::Campaign);
    match crate::targets::sweep_of(target) {
        Some(Sweep::Virtual) if !vary.is_empty() => Err(format!(
            "--vary runs a campaign on --target {campaigns}; the simulator's sweep varies seeds only"
        )),
        Some(sweep) => Ok(sweep),
        None => Err(format!(
            "experiment sweep {what} or a campaign on --target {campaigns}, not '{target}'"
        )),
    }
}

/// The value last given for `flag`, if any.
fn given_value(given: &[FlagPair], flag: &str) -> Option<String> {
    given
        .iter()
        .rev()
        .find(|(f, _)| f == flag)
        .and_then(|(_, v)| v.clone())
}

/// A virtual sweep's runs and what its summary names.
struct VirtualSetup {
    seeds_text: String,
    seeds: Vec<u64>,
    pollers: Vec<String>,
    duration: String,
    profile: String,
    timeline: Option<String>,
    sets: Vec<String>,
    /// Every run's flags, but its seed.
    base: Vec<String>,
}

/// Reads a virtual sweep's flags, each checked once by the experiment's parser.
fn virtual_setup(args: &SweepArgs, given: Vec<FlagPair>) -> Result<VirtualSetup, String> {
    let seeds_text = args.seeds.clone().unwrap_or_else(|| "1-100".into());
    let seeds = analysis::sweep::parse_seeds(&seeds_text)?;
    let given_pollers: Vec<String> = given
        .iter()
        .filter(|(f, _)| f == "--poller")
        .filter_map(|(_, v)| v.clone())
        .collect();
    let pollers = if given_pollers.is_empty() {
        DEFAULT_POLLERS.map(String::from).to_vec()
    } else {
        given_pollers
    };
    let duration = given_value(&given, "--duration").unwrap_or_else(|| "1h".into());
    let profile = given_value(&given, "--profile").unwrap_or_else(|| "twitter".into());
    let timeline = given_value(&given, "--timeline");
    let sets: Vec<String> = given
        .iter()
        .filter(|(f, _)| f == "--set")
        .filter_map(|(_, v)| v.clone())
        .collect();
    let mut base_flags: Vec<FlagPair> = given
        .into_iter()
        .filter(|(f, _)| f != "--poller" && f != "--target")
        .collect();
    base_flags.extend(pollers.iter().map(|p| ("--poller".into(), Some(p.clone()))));
    let base = campaign::argv(&base_flags);
    // Every option checked once, before any run, by the experiment's parser
    // (and the simulator's, for --set and --profile).
    resolve(run_args(&base, seeds[0])?)?;
    Ok(VirtualSetup {
        seeds_text,
        seeds,
        pollers,
        duration,
        profile,
        timeline,
        sets,
        base,
    })
}

/// The virtual sweep over many seeds (issue 15, docs/policies.md).
fn virtual_sweep(args: SweepArgs, given: Vec<FlagPair>) -> Result<(), String> {
    use analysis::sweep;
    let VirtualSetup {
        seeds_text,
        seeds,
        pollers,
        duration,
        profile,
        timeline,
        sets,
        base,
    } = virtual_setup(&args, given)?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| std::path::PathBuf::from("data/sweep"));
    std::fs::create_dir_all(&out_dir)
        .map_err(|e| format!("cannot create {}: {e}", out_dir.display()))?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    // Seeds done of seeds total, with an estimate, on a terminal only
    // (analysis::progress): nothing reaches piped stderr or --json.
    let bar = analysis::progress::counted(seeds.len() as u64, "seeds");
    let results = run_all(&base, &seeds, jobs, |done, _| bar.set_position(done as u64));
    bar.finish_and_clear();
    let results = results?;
    let config = serde_json::json!({
        "seeds": seeds_text, "duration": duration, "profile": profile,
        "timeline": timeline, "pollers": pollers, "sets": sets, "version": env!("CARGO_PKG_VERSION"),
    })
    .to_string();
    let db = out_dir.join("sweep.db");
    let sweep_id = sweep::store(&db, &config, &results)?;
    let summary = sweep::summarize(&results);
    let oracle = sweep::oracle_duplicates_per_new(&results);
    let plots = if args.no_plots {
        Vec::new()
    } else {
        match analysis::sweep_plot::write_all(&results, &summary, oracle, &out_dir, sweep_id) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("experiment sweep: plotting failed: {e}");
                Vec::new()
            }
        }
    };
    if args.json {
        let out = JsonOut {
            schema: 1,
            seeds: seeds_text,
            duration,
            profile,
            sets,
            database: db.display().to_string(),
            sweep_id,
            oracle_duplicates_per_new: oracle,
            pollers: summary,
            plots,
        };
        print_json(&out)?;
    } else {
        println!(
            "sweep {sweep_id}: {} seeds x {} pollers, {} each, profile {} ({})",
            seeds.len(),
            pollers.len(),
            duration,
            profile,
            db.display()
        );
        print!("{}", sweep::render(&summary, oracle));
        for p in &plots {
            println!("plot: {p}");
        }
    }
    Ok(())
}

/// A campaign's `--json` (analysis/JSON.md, "experiment sweep --target").
#[derive(serde::Serialize)]
struct CampaignJson<'a> {
    schema: u32,
    target: String,
    seeds: String,
    duration: String,
    /// Runs at once: 1 unless `--jobs`; above 1 the runs competed for the machine.
    jobs: usize,
    vary: Vec<String>,
    out: String,
    summary: &'a analysis::campaign::Summary,
    runs: &'a [analysis::campaign::RunResult],
}

/// A campaign's runs and what its summary names.
struct CampaignSetup {
    target: String,
    seeds_text: String,
    seeds: Vec<u64>,
    duration: String,
    combinations: Vec<campaign::Combination>,
    /// Each run in the one-machine order (combinations outermost, then
    /// seeds): its combination's label, its flags but the seed, its seed.
    cells: Vec<(String, Vec<String>, u64)>,
}

/// Reads a campaign's flags: every combination checked by the target
/// before any run starts.
fn campaign_setup(args: &SweepArgs, given: Vec<FlagPair>) -> Result<CampaignSetup, String> {
    let target = args.run.target.clone();
    let seeds_text = args.seeds.clone().ok_or_else(|| {
        format!(
            "a campaign on --target {target} needs --seeds (each seed is a real run of --duration)"
        )
    })?;
    let seeds = analysis::sweep::parse_seeds(&seeds_text)?;
    let varied = |key: &str| args.vary.iter().any(|v| v.starts_with(&format!("{key}=")));
    let duration = given_value(&given, "--duration")
        .or_else(|| varied("duration").then(|| "varied".to_string()))
        .ok_or_else(|| {
            format!("a campaign on --target {target} needs --duration (each run takes that long)")
        })?;
    let varies = args
        .vary
        .iter()
        .map(|v| campaign::parse_vary(v, run_flag))
        .collect::<Result<Vec<_>, _>>()?;
    let combinations = campaign::combinations(&varies);
    let mut cells = Vec::new();
    for c in &combinations {
        let flags = campaign::argv(&c.apply(&given));
        check_campaign_run(&flags).map_err(|e| match c.settings.is_empty() {
            true => e,
            false => format!("{}: {e}", c.label()),
        })?;
        for &seed in &seeds {
            cells.push((c.label(), flags.clone(), seed));
        }
    }
    Ok(CampaignSetup {
        target,
        seeds_text,
        seeds,
        duration,
        combinations,
        cells,
    })
}

/// `experiment sweep ... --plan DIR`: the sweep's runs planned, not run
/// (docs/campaigns.md, "On a cluster"): plan.json, slurm.sh and job.yaml
/// written in DIR, its runs and logs folders made; a directory that holds a plan
/// already is refused.
fn plan_command(
    args: &SweepArgs,
    given: Vec<FlagPair>,
    dir: &std::path::Path,
) -> Result<(), String> {
    for (given, flag) in [
        (args.out.is_some(), "--out"),
        (args.jobs.is_some(), "--jobs"),
        (args.json, "--json"),
        (args.no_plots, "--no-plots"),
    ] {
        if given {
            return Err(format!(
                "{flag} does not apply with --plan: each run is one task, its result DIR/runs/INDEX.db (`experiment sweep merge DIR` sums them up)"
            ));
        }
    }
    let sweep = sweep_of(&args.run.target, &args.vary, "plans the simulator's sweep")?;
    let (kind, header, seeds_text, duration, cells) = match sweep {
        Sweep::Campaign => {
            let s = campaign_setup(args, given)?;
            let header = plan::Header {
                vary: args.vary.clone(),
                combinations: s.combinations.len(),
                margin: margin(args)?,
                ..plan::Header::default()
            };
            let cells = s
                .cells
                .into_iter()
                .map(|(combination, flags, seed)| plan::Cell {
                    combination,
                    seed,
                    flags,
                })
                .collect();
            ("campaign", header, s.seeds_text, s.duration, cells)
        }
        Sweep::Virtual => {
            if args.equivalence_margin.is_some() {
                refuse_campaign_only(args)?;
            }
            let s = virtual_setup(args, given)?;
            let header = plan::Header {
                profile: Some(s.profile),
                timeline: s.timeline,
                pollers: s.pollers,
                sets: s.sets,
                ..plan::Header::default()
            };
            let cells = s
                .seeds
                .iter()
                .map(|&seed| plan::Cell {
                    combination: String::new(),
                    seed,
                    flags: s.base.clone(),
                })
                .collect();
            ("virtual", header, s.seeds_text, s.duration, cells)
        }
    };
    let existing = files::plan_path(dir);
    if existing.exists() {
        return Err(format!(
            "{} exists: a directory holds one plan (another --plan DIR)",
            existing.display()
        ));
    }
    for sub in ["runs", "logs"] {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    let absolute = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let binary = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot find this experiment binary: {e}"))?;
    let p = plan::build(
        plan::Draft {
            kind,
            target: args.run.target.clone(),
            seeds: seeds_text,
            duration,
            order_seed: args.order_seed.unwrap_or(1),
            experiment: env!("CARGO_PKG_VERSION").into(),
            binary: binary.display().to_string(),
            dir: absolute.display().to_string(),
            header,
        },
        cells,
    );
    let json = serde_json::to_string_pretty(&p).map_err(|e| e.to_string())? + "\n";
    files::write_atomically(&dir.join("slurm.sh"), plan::slurm_script(&p).as_bytes())?;
    files::write_atomically(&dir.join("job.yaml"), plan::kubernetes_job(&p).as_bytes())?;
    // The plan last: a directory with plan.json holds the whole.
    files::write_atomically(&existing, json.as_bytes())?;
    println!(
        "plan {}: {} run(s) in a seeded order (--order-seed {}), {}",
        plan::short(&p.id),
        p.runs.len(),
        p.order_seed,
        existing.display()
    );
    println!(
        "Slurm:      sbatch {}   (one task per run and node; sbatch --wait blocks until all ended)",
        dir.join("slurm.sh").display()
    );
    println!(
        "Kubernetes: kubectl apply -f {}   (set its image and volume claim first)",
        dir.join("job.yaml").display()
    );
    println!(
        "one run:    experiment sweep run {} --index N;  the summary: experiment sweep merge {}",
        dir.display(),
        dir.display()
    );
    Ok(())
}

/// A campaign of real runs (docs/campaigns.md): every combination of
/// `--vary` times every seed, each run's database under `--out`, each
/// judged by the checker; one row per combination and poller.
fn campaign_command(args: SweepArgs, given: Vec<FlagPair>) -> Result<(), String> {
    let out = args
        .out
        .clone()
        .ok_or("a campaign needs --out DIR, where each run's database is kept")?;
    if args.jobs == Some(0) {
        return Err("--jobs 0: at least one run at a time".into());
    }
    let jobs = args.jobs.unwrap_or(1);
    let margin = margin(&args)?;
    let order_seed = args.order_seed.unwrap_or(1);
    let CampaignSetup {
        target,
        seeds_text,
        seeds,
        duration,
        combinations,
        cells,
    } = campaign_setup(&args, given)?;
    let mut plan = Vec::new();
    for ((label, flags, seed), c) in cells.into_iter().zip(
        combinations
            .iter()
            .flat_map(|c| seeds.iter().map(move |_| c)),
    ) {
        let db = c.db(&out, seed);
        if db.exists() {
            return Err(format!(
                "{} exists: a campaign writes each run's database afresh (another --out)",
                db.display()
            ));
        }
        plan.push((label, flags, seed, db));
    }
    for (_, _, _, db) in &plan {
        if let Some(dir) = db.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
    }
    let total = plan.len();
    // The runs interleaved in a seeded order (the plan's, `plan::order`):
    // whatever drifts over the campaign's time (the machine, the night)
    // falls on every cell alike, and the summary checks for it. The summary
    // keeps the one-machine order (cells, then seeds).
    let order = plan::order(order_seed, total);
    let shuffled: Vec<_> = order.iter().map(|&i| plan[i].clone()).collect();
    // Runs done of runs total, with an estimate, on a terminal only
    // (analysis::progress); each run's line shows everywhere, above the bar.
    let bar = analysis::progress::counted(total as u64, "runs");
    let results = run_plan(&shuffled, jobs, |done, r| {
        bar.set_position(done as u64);
        bar.suspend(|| {
            eprintln!(
                "campaign: run {done}/{total} done: {} seed {} ({}){}",
                if r.combination.is_empty() {
                    "-"
                } else {
                    &r.combination
                },
                r.seed,
                r.db,
                if r.flags.is_empty() {
                    String::new()
                } else {
                    format!(", flagged: {}", r.flags.join("; "))
                }
            )
        });
    });
    bar.finish_and_clear();
    let mut in_place: Vec<Option<analysis::campaign::RunResult>> = vec![None; total];
    for (&i, r) in order.iter().zip(results?) {
        in_place[i] = Some(r);
    }
    let results: Vec<_> = in_place.into_iter().flatten().collect();
    let summary = analysis::campaign::summarize_with(&results, margin);
    if args.json {
        let out = CampaignJson {
            schema: 3,
            target,
            seeds: seeds_text,
            duration,
            jobs,
            vary: args.vary.clone(),
            out: out.display().to_string(),
            summary: &summary,
            runs: &results,
        };
        print_json(&out)?;
    } else {
        println!(
            "campaign: --target {target}, {} combination(s) x {} seed(s), {duration} each, interleaved (--order-seed {order_seed}), {} ({})",
            combinations.len(),
            seeds.len(),
            if jobs == 1 {
                "one run at a time".to_string()
            } else {
                format!("{jobs} runs side by side (--jobs {jobs}): they competed for the machine")
            },
            out.display()
        );
        print!("{}", analysis::campaign::render(&summary));
    }
    Ok(())
}

/// `--json`: the sweep's object, pretty-printed on stdout.
fn print_json(out: &impl serde::Serialize) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(out).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Runs a campaign's plan on `jobs` threads, each run judged once its
/// database is closed; results in plan order. The first error stops the
/// campaign (runs already started finish), and so does a run a signal ended.
fn run_plan(
    plan: &[(String, Vec<String>, u64, std::path::PathBuf)],
    jobs: usize,
    on_done: impl FnMut(usize, &analysis::campaign::RunResult) + Send,
) -> Result<Vec<analysis::campaign::RunResult>, String> {
    in_parallel(
        plan,
        jobs,
        |(label, flags, seed, db)| {
            let which = match label.is_empty() {
                true => format!("seed {seed}"),
                false => format!("{label} seed {seed}"),
            };
            let r = run_in_campaign(flags, *seed, db)
                .and_then(|_| analysis::campaign::judge_run(db, label, *seed))
                .map_err(|e| format!("{which}: {e}"))?;
            match r.interrupted {
                // A signal ended the run: it ends the campaign, whose
                // databases so far are kept.
                true => Err(format!(
                    "interrupted during {which} ({}): the runs' databases so far are kept",
                    r.db
                )),
                false => Ok(r),
            }
        },
        on_done,
    )
}
