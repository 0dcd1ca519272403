//! `sweep`: the virtual experiment over many seeds (see `analysis/src/sweep.rs`).

use analysis::sweep;
use clap::Parser;
use serde::Serialize;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

/// Runs the virtual experiment for every seed, in parallel over the cores,
/// judges each run with analyze's checker, keeps one row per seed and poller
/// in DIR/sweep.db and prints a summary per poller.
#[derive(Parser)]
#[command(name = "sweep", version)]
struct Args {
    /// Seeds: A-B, N, or a comma list of them.
    #[arg(long, default_value = "1-100")]
    seeds: String,
    /// Virtual duration of each run.
    #[arg(long, default_value = "1h")]
    duration: String,
    /// Simulator profile.
    #[arg(long, default_value = "twitter")]
    profile: String,
    /// A poller (repeatable); default naive, compensated:k=1s, compensated:k=2m,
    /// audit:k=1s,depth=2m,every=1m and adaptive.
    #[arg(long = "poller", value_name = "SPEC")]
    pollers: Vec<String>,
    /// One simulator parameter, KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    sets: Vec<String>,
    /// Print JSON (documented in analysis/JSON.md) instead of the table.
    #[arg(long)]
    json: bool,
    /// Where sweep.db (and the plots) go.
    #[arg(long, default_value = "data/sweep")]
    out: PathBuf,
    /// Parallel runs (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Do not draw the plots.
    #[arg(long)]
    no_plots: bool,
}

#[derive(Serialize)]
struct JsonOut {
    schema: u32,
    seeds: String,
    duration: String,
    profile: String,
    sets: Vec<String>,
    database: String,
    sweep_id: i64,
    oracle_duplicates_per_new: Option<f64>,
    pollers: Vec<sweep::PollerSummary>,
    plots: Vec<String>,
}

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("sweep: internal error (please report): {info}");
    }));
    let args: Args = analysis::cli::parse_args_or_exit();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("sweep: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let seeds = sweep::parse_seeds(&args.seeds)?;
    let pollers = if args.pollers.is_empty() {
        [
            "naive",
            "compensated:k=1s",
            "compensated:k=2m",
            "audit:k=1s,depth=2m,every=1m",
            "adaptive",
        ]
        .map(String::from)
        .to_vec()
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
    // Every option checked once, before any run, by the experiment's parser.
    sweep::run_args(&base, seeds[0], &args.out.join("check.db"))?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let terminal = std::io::stderr().is_terminal();
    let results = sweep::run_all(&base, &seeds, jobs, &args.out, |done, total| {
        if terminal {
            eprint!("\r{done}/{total} seeds");
        }
    })?;
    if terminal {
        eprintln!();
    }
    let config = serde_json::json!({
        "seeds": args.seeds, "duration": args.duration, "profile": args.profile,
        "pollers": pollers, "sets": args.sets, "version": env!("CARGO_PKG_VERSION"),
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
                eprintln!("sweep: plotting failed: {e}");
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
