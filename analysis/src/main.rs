//! `analyze DB [--run N] [--out DIR] [--json]`: reads one run of the leak
//! harness, diffs the pollers against truth (or each other), and prints a
//! report with a verdict per poller, plus plots.
//!
//! A thin shell over the `analysis` library: `load` reads run.db (read-only), `diff` judges the
//! history (pure), `report` and `json` print, `plot` draws. Bad input
//! ends with one line on stderr and exit status 2; never a panic.

use analysis::{diff, json, load, plot, report};

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "analyze",
    version,
    about = "Report leaks, late arrivals and verdicts for a run of the snowleak harness"
)]
struct Args {
    /// The run database written by `experiment` (opened read-only).
    db: PathBuf,
    /// The run to analyze (default: the latest).
    #[arg(long)]
    run: Option<i64>,
    /// Where to write the plots (default: next to the database).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON (documented in analysis/JSON.md) instead of the text report.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    // A bug must still end in one readable line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("analyze: internal error (please report): {info}");
    }));
    let args: Args = analysis::cli::parse_args_or_exit();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("analyze: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let conn = load::open(&args.db).map_err(|e| e.to_string())?;
    let run_id = load::pick_run(&conn, &args.db, args.run).map_err(|e| e.to_string())?;
    let loaded = load::load(&conn, run_id).map_err(|e| e.to_string())?;
    drop(conn);
    let analysis = diff::analyze(&loaded.history);
    let out_dir = match &args.out {
        Some(d) => d.clone(),
        None => args
            .db
            .parent()
            .map(|p| {
                if p.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    p.to_path_buf()
                }
            })
            .unwrap_or_else(|| PathBuf::from(".")),
    };
    // Plots never decide the exit status: a report without pictures is still a report.
    let drawn = std::panic::catch_unwind(|| plot::write_all(&loaded, &analysis, &out_dir));
    let (plots, notes) = match drawn {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => (Vec::new(), vec![format!("plotting failed: {e}")]),
        Err(_) => (
            Vec::new(),
            vec!["plotting failed (internal error)".to_string()],
        ),
    };
    if args.json {
        let out = json::build(&loaded, &analysis, &plots);
        // Streamed, not built as one string: a run with millions of misses
        // prints hundreds of MB of JSON.
        use std::io::Write;
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut stdout, &out).map_err(|e| e.to_string())?;
        writeln!(stdout)
            .and_then(|_| stdout.flush())
            .map_err(|e| e.to_string())?;
        for n in &notes {
            eprintln!("analyze: {n}");
        }
    } else {
        print!("{}", report::render(&loaded, &analysis, &plots, &notes));
    }
    Ok(())
}
