//! `experiment sweep`: the virtual experiment over many seeds, each run
//! judged in memory by `analyze`'s checker, one row per seed and poller kept.
//!
//! Each seed's run goes to [`InMemory`], which builds the checker's history
//! as the records are made ([`analysis::history_builder`]) instead of writing
//! them to a run database and reading them back: that round trip was most
//! of a sweep's time (docs/policies.md, "Benchmark"). The rows, the summary and
//! `sweep.db` are `analysis::sweep`'s. Seeds run in parallel on scoped
//! threads, one per core.

use crate::drive::Records;
use crate::record::{PollerRow, RequestRecord, TruthRow};
use crate::sim::sync::lock;
use crate::targets::{resolve, run_in_memory};
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
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<SeedResult>>> =
        Mutex::new((0..seeds.len()).map(|_| None).collect());
    let error: Mutex<Option<String>> = Mutex::new(None);
    let done = Mutex::new((0usize, &mut on_done));
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if lock(&error).is_some() {
                        return;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(i) else { return };
                    match run_seed(base, seed) {
                        Ok(r) => {
                            lock(&results)[i] = Some(r);
                            let mut d = lock(&done);
                            d.0 += 1;
                            let n = d.0;
                            (d.1)(n, seeds.len());
                        }
                        Err(e) => {
                            lock(&error).get_or_insert(format!("seed {seed}: {e}"));
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
/// poller in DIR/sweep.db, and a summary per poller.
#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// Seeds: A-B, N, or a comma list of them.
    #[arg(long, default_value = "1-100")]
    pub seeds: String,
    /// Virtual duration of each run.
    #[arg(long, default_value = "1h")]
    pub duration: String,
    /// Simulator profile.
    #[arg(long, default_value = "twitter")]
    pub profile: String,
    /// The timeline polled, as for `experiment` (the misskey profile: local or global).
    #[arg(long)]
    pub timeline: Option<String>,
    /// A poller (repeatable); default naive, compensated:k=1s, compensated:k=2m,
    /// audit:k=1s,depth=2m,every=1m and adaptive.
    #[arg(long = "poller", value_name = "SPEC")]
    pub pollers: Vec<String>,
    /// One simulator parameter, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Print JSON (documented in analysis/JSON.md) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where sweep.db (and the plots) go.
    #[arg(long, default_value = "data/sweep")]
    pub out: std::path::PathBuf,
    /// Parallel runs (default: the number of cores).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Do not draw the plots.
    #[arg(long)]
    pub no_plots: bool,
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

/// Runs `experiment sweep` and prints its table or JSON.
pub fn sweep_command(args: SweepArgs) -> Result<(), String> {
    use analysis::sweep;
    use std::io::IsTerminal;
    let seeds = sweep::parse_seeds(&args.seeds)?;
    let pollers = if args.pollers.is_empty() {
        DEFAULT_POLLERS.map(String::from).to_vec()
    } else {
        args.pollers.clone()
    };
    let mut base = vec![
        "--duration".to_string(),
        args.duration.clone(),
        "--profile".into(),
        args.profile.clone(),
    ];
    for p in &pollers {
        base.extend(["--poller".into(), p.clone()]);
    }
    for s in &args.sets {
        base.extend(["--set".into(), s.clone()]);
    }
    if let Some(t) = &args.timeline {
        base.extend(["--timeline".into(), t.clone()]);
    }
    // Every option checked once, before any run, by the experiment's parser
    // (and the simulator's, for --set and --profile).
    resolve(run_args(&base, seeds[0])?)?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let terminal = std::io::stderr().is_terminal();
    let results = run_all(&base, &seeds, jobs, |done, total| {
        if terminal {
            eprint!("\r{done}/{total} seeds");
        }
    })?;
    if terminal {
        eprintln!();
    }
    let config = serde_json::json!({
        "seeds": args.seeds, "duration": args.duration, "profile": args.profile,
        "timeline": args.timeline, "pollers": pollers, "sets": args.sets, "version": env!("CARGO_PKG_VERSION"),
    })
    .to_string();
    let db = args.out.join("sweep.db");
    let sweep_id = sweep::store(&db, &config, &results)?;
    let summary = sweep::summarize(&results);
    let oracle = sweep::oracle_duplicates_per_new(&results);
    let plots = if args.no_plots {
        Vec::new()
    } else {
        match analysis::sweep_plot::write_all(&results, &summary, oracle, &args.out, sweep_id) {
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
            seeds: args.seeds,
            duration: args.duration,
            profile: args.profile,
            sets: args.sets,
            database: db.display().to_string(),
            sweep_id,
            oracle_duplicates_per_new: oracle,
            pollers: summary,
            plots,
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
    } else {
        println!(
            "sweep {sweep_id}: {} seeds x {} pollers, {} each, profile {} ({})",
            seeds.len(),
            pollers.len(),
            args.duration,
            args.profile,
            db.display()
        );
        print!("{}", sweep::render(&summary, oracle));
        for p in &plots {
            println!("plot: {p}");
        }
    }
    Ok(())
}
