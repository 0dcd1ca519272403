//! `analyze DB [--run N] [--out DIR] [--json] [--html FILE] [--delivered NAME=FILE.csv]... [--max-memory SIZE] [--expect-all] [--follow]`: reads one run of the leak
//! harness, diffs the pollers against truth (or each other), and prints a
//! report with a verdict per poller, plus plots. `--follow` first prints
//! each leak as it settles while the run is written (`follow.rs`).
//!
//! A thin shell over the `analysis` library: `load` reads run.db (read-only), `diff` judges the
//! history (pure), `report` and `json` print, `plot` draws. Bad input
//! ends with one line on stderr and exit status 2; never a panic.

mod follow;

use analysis::{
    consumers, delivered, diff, ftt, html, json, load, load_stream, plot, progress, report,
};

use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "analyze",
    version,
    about = "Report leaks, late arrivals and verdicts for a run of the snowleak harness"
)]
struct AnalyzeArgs {
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
    /// Also write the report as one self-contained HTML page (plots inline as
    /// SVG, nothing fetched from the network) to this file.
    #[arg(long, value_name = "FILE.html")]
    html: Option<PathBuf>,
    /// Refuse a run whose analysis in memory would need more memory than
    /// this, e.g. 512MiB or 8GiB (default: the memory the system has
    /// available, on Linux). A run judged streaming needs no such check.
    #[arg(long, value_parser = parse_size)]
    max_memory: Option<u64>,
    /// Judge a consumer the server cannot see from the IDs it delivered: one
    /// `id,delivered_at` row per line (ISO 8601 or epoch ms). Repeatable.
    #[arg(long, value_name = "NAME=FILE.csv", value_parser = delivered::parse_arg)]
    delivered: Vec<(String, PathBuf)>,
    /// A run of `experiment judge --log postgres`: owe every consumer
    /// every committed row, not only those below the highest key it delivered.
    #[arg(long)]
    expect_all: bool,
    /// Follow the run while it is written: print each leak, one line, as it
    /// settles; when the run ends (or on Ctrl-C) print the usual report.
    #[arg(long)]
    follow: bool,
    /// Judge the run with its whole history in memory, not streaming (the
    /// default streams a simulator run: memory bounded by the horizon, not by
    /// the run's length; docs/analysis.md).
    #[arg(long)]
    in_memory: bool,
}

/// Set by SIGINT or SIGTERM while `--follow` waits for the run to end.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: i32) {
    // Only an atomic store: async-signal-safe (POSIX, signal-safety(7)).
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Makes SIGINT (Ctrl-C) and SIGTERM set [`STOP`] (`on`), or kill the
/// process again (`!on`: `SIG_DFL`).
fn catch_stop(on: bool) {
    let handler = if on {
        on_stop as extern "C" fn(i32) as libc::sighandler_t
    } else {
        libc::SIG_DFL
    };
    for signum in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only stores an atomic, or the default.
        unsafe {
            libc::signal(signum, handler);
        }
    }
}

/// `--follow`: the leaks as they settle, until the run ends or a stop; the
/// run followed, for the report.
fn follow_run(args: &AnalyzeArgs) -> Result<i64, String> {
    if args.json {
        return Err(
            "--follow prints leak lines then the text report; --json is for a run that ended (analyze DB --json)"
                .into(),
        );
    }
    catch_stop(true);
    let mut stdout = std::io::stdout().lock();
    let followed = follow::follow(
        &args.db,
        args.run,
        &STOP,
        std::time::Duration::from_millis(500),
        &mut stdout,
    );
    catch_stop(false);
    followed
}

/// `N`, `NKiB`, `NMiB`, `NGiB` or `NTiB` (binary units; `N` in bytes).
fn parse_size(text: &str) -> Result<u64, String> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let shift = match unit {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        _ => {
            return Err(format!(
                "bad size '{text}': expected a number of bytes, KiB, MiB, GiB or TiB, such as 8GiB"
            ));
        }
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1u64 << shift))
        .ok_or_else(|| {
            format!(
                "bad size '{text}': expected a number of bytes, KiB, MiB, GiB or TiB, such as 8GiB"
            )
        })
}

/// The memory the system can give a new process without swapping
/// (`MemAvailable` in /proc/meminfo, Linux 3.14 and later); `None` elsewhere.
fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `bytes` in the largest binary unit that keeps it at 1 or more, to a tenth.
fn human(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let at = ((63 - bytes.max(1).leading_zeros()) / 10).min(4) as usize;
    match at {
        0 => format!("{bytes} bytes"),
        _ => format!(
            "{:.1} {}",
            bytes as f64 / (1u64 << (10 * at)) as f64,
            units[at]
        ),
    }
}

fn main() -> ExitCode {
    // A bug must still end in one readable line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("analyze: internal error (please report): {info}");
    }));
    let mut args: AnalyzeArgs = analysis::cli::parse_args_or_exit();
    if args.follow {
        match follow_run(&args) {
            Ok(run_id) => args.run = Some(run_id),
            Err(msg) => {
                eprintln!("analyze: {msg}");
                return ExitCode::from(2);
            }
        }
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("analyze: {msg}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &AnalyzeArgs) -> Result<(), String> {
    let conn = load::open(&args.db).map_err(|e| e.to_string())?;
    let run_id = load::pick_run(&conn, &args.db, args.run).map_err(|e| e.to_string())?;
    let run = rundb::read::run(&conn, run_id).map_err(|e| e.to_string())?;
    if let Some(run) = run.filter(|r| consumers::is_log_run(&r.target)) {
        return run_log(args, &conn, &run);
    }
    if args.expect_all {
        return Err(format!(
            "--expect-all applies to a run of `experiment judge --log postgres`; run {run_id} is not one"
        ));
    }
    let (mut loaded, streamed) = match judge_streaming(args, &conn, run_id)? {
        Some((loaded, analysis)) => (loaded, Some(analysis)),
        None => {
            let size = fits_in_memory(args, &conn, run_id)?;
            (load_with_bar(&conn, run_id, size)?, None)
        }
    };
    let phase = progress::phases();
    phase.set_message("reading the Fanout Timeline's truth");
    let ftt_truth = ftt::load(&conn, run_id)?;
    drop(conn);
    let mut delivered_notes = Vec::new();
    for (name, path) in &args.delivered {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let rows = delivered::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let missing = delivered::add(&mut loaded, name, &rows)?;
        if missing.count > 0 {
            delivered_notes.push(format!(
                "{name}: {} delivered IDs are not in the run's truth, so not judged (first: {})",
                missing.count,
                missing.first.join(", ")
            ));
        }
    }
    phase.set_message("checking the pollers against the reference");
    let analysis = match streamed {
        Some(a) => a,
        None => diff::analyze(&loaded.history),
    };
    phase.set_message("drawing the plots");
    let out_dir = out_dir(args);
    // Plots never decide the exit status: a report without pictures is still a report.
    let drawn = std::panic::catch_unwind(|| plot::write_all(&loaded, &analysis, &out_dir));
    let (plots, mut notes) = match drawn {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => (Vec::new(), vec![format!("plotting failed: {e}")]),
        Err(_) => (
            Vec::new(),
            vec!["plotting failed (internal error)".to_string()],
        ),
    };
    notes.extend(delivered_notes);
    phase.set_message("writing the report");
    // One computation of the fates, for the text, --json and --html alike.
    let lost = ftt_truth
        .as_ref()
        .map(|truth| ftt::fates(&loaded, &analysis, truth));
    if let Some(path) = &args.html {
        write_html(path, &loaded, &analysis, &plots, lost.as_deref())?;
    }
    // Cleared before anything is printed, so no bar is left between the lines.
    phase.finish_and_clear();
    if args.json {
        let out = json::build(&loaded, &analysis, &plots, lost.as_deref());
        // Streamed, not built as one string: a run with millions of misses
        // prints hundreds of MB of JSON.
        use std::io::Write;
        // In large writes: the hour at 3,000/s prints 1.3 GB.
        let mut stdout = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
        serde_json::to_writer_pretty(&mut stdout, &out).map_err(|e| e.to_string())?;
        writeln!(stdout)
            .and_then(|_| stdout.flush())
            .map_err(|e| e.to_string())?;
        for n in &notes {
            eprintln!("analyze: {n}");
        }
    } else {
        print!("{}", report::render(&loaded, &analysis, &plots, &notes));
        if let Some(lost) = &lost {
            print!("{}", ftt::render(&loaded, lost));
        }
    }
    Ok(())
}

/// The run judged streaming ([`load_stream`]), unless `--in-memory`,
/// `--delivered` (which adds to the history) or the run asks otherwise;
/// `None` to judge it in memory (a line on stderr says why, when the
/// streaming check gave up).
fn judge_streaming(
    args: &AnalyzeArgs,
    conn: &rusqlite::Connection,
    run_id: i64,
) -> Result<Option<(load::Loaded, diff::Analysis)>, String> {
    if args.in_memory || !args.delivered.is_empty() {
        return Ok(None);
    }
    // A bar over the observations read (the checker keeps pace with the
    // reader); their count from the requests', not `footprint`'s, which
    // counts the statuses and the truth (a scan of each).
    let observations = rundb::read::items_of_run(conn, run_id).map_err(|e| e.to_string())?;
    let bar = progress::counted(observations.max(0) as u64, "rows");
    bar.set_message("read and checked in time order");
    let judged = load_stream::load_with(conn, run_id, &mut |n| bar.set_position(n))
        .map_err(|e| e.to_string())?;
    bar.finish_and_clear();
    match judged {
        load_stream::Streaming::Judged(loaded, analysis) => Ok(Some((*loaded, *analysis))),
        load_stream::Streaming::NotStreamable(_) => Ok(None),
        load_stream::Streaming::GaveUp(why) => {
            eprintln!("analyze: judged in memory: the streaming check gave up ({why})");
            Ok(None)
        }
    }
}

/// The run's size, or a one-line refusal when analyzing it cannot fit in memory.
fn fits_in_memory(
    args: &AnalyzeArgs,
    conn: &rusqlite::Connection,
    run_id: i64,
) -> Result<load::Footprint, String> {
    // The check holds the whole history in memory: refuse a run that cannot
    // fit with one line, rather than be killed by the kernel halfway.
    let size = load::footprint(conn, run_id).map_err(|e| e.to_string())?;
    let needed = size.estimated_bytes();
    if let Some(limit) = args.max_memory.or_else(available_memory)
        && needed > limit
    {
        return Err(format!(
            "run {run_id} holds {} statuses and {} observations: analyzing it needs about {}, more than the {} {}",
            size.statuses,
            size.observations,
            human(needed),
            human(limit),
            if args.max_memory.is_some() {
                "--max-memory allows"
            } else {
                "available (--max-memory to set another limit)"
            },
        ));
    }
    Ok(size)
}

/// Loads the run, with a bar over each table's rows as they are read.
fn load_with_bar(
    conn: &rusqlite::Connection,
    run_id: i64,
    size: load::Footprint,
) -> Result<load::Loaded, String> {
    // On a terminal only (analysis::progress): a bar over each table's rows
    // as they are read, sized from the footprint, then the phases by name.
    let bar = progress::counted(size.statuses, "rows");
    let mut table = "";
    let loaded = load::load_with(conn, run_id, &mut |t, rows| {
        if t != table {
            table = t;
            let expected = match t {
                "observations" => size.observations,
                _ => size.statuses,
            };
            bar.set_length(expected.max(rows));
            bar.set_position(rows);
            bar.reset_eta();
            bar.set_message(format!("reading {t}"));
        } else {
            bar.set_position(rows);
        }
    });
    bar.finish_and_clear();
    loaded.map_err(|e| e.to_string())
}

/// Where the plots go: `--out`, or the database's folder.
fn out_dir(args: &AnalyzeArgs) -> PathBuf {
    match &args.out {
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
    }
}

/// `--html`: the page, from the `--json` object and the SVG plots.
fn write_html(
    path: &std::path::Path,
    loaded: &load::Loaded,
    analysis: &diff::Analysis,
    plots: &[String],
    lost: Option<&[ftt::Lost]>,
) -> Result<(), String> {
    let report = serde_json::to_value(
        json::build(loaded, analysis, plots, lost).listing_at_most(html::MAX_ROWS),
    )
    .map_err(|e| e.to_string())?;
    // The totals, counted as the lists are read (from disk for a run
    // judged streaming), none of them held.
    let listed = html::Listed {
        leaks: count(loaded.leaks(analysis), "leaks")?,
        other_misses: count(loaded.other_misses(analysis), "misses")?,
    };
    let svgs: Vec<(String, String)> = plots
        .iter()
        .filter(|p| p.ends_with(".svg"))
        .filter_map(|p| {
            let title = std::path::Path::new(p)
                .file_stem()?
                .to_string_lossy()
                .into_owned();
            Some((title, std::fs::read_to_string(p).ok()?))
        })
        .collect();
    std::fs::write(path, html::render(&report, &listed, &svgs))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// How many items `items` reads, or the first error reading them back.
fn count<T, E: std::fmt::Display>(
    items: impl Iterator<Item = Result<T, E>>,
    what: &str,
) -> Result<usize, String> {
    let mut n = 0;
    for item in items {
        item.map_err(|e| format!("cannot read the {what} back: {e}"))?;
        n += 1;
    }
    Ok(n)
}

/// A run of `experiment judge --log postgres` (or `mariadb`): each
/// consumer judged against the truth of the database's log (docs/log-truth.md).
fn run_log(
    args: &AnalyzeArgs,
    conn: &rusqlite::Connection,
    run: &rundb::RunRow,
) -> Result<(), String> {
    let log = if run.target == consumers::TARGET_MARIADB {
        "MariaDB's binary log"
    } else {
        "PostgreSQL's log"
    };
    if !args.delivered.is_empty() {
        return Err(format!(
            "run {} was judged against {log}: its consumers are those it recorded \
             (experiment judge --delivered), not --delivered here",
            run.id
        ));
    }
    let config: serde_json::Value = serde_json::from_str(&run.config)
        .map_err(|e| format!("run {}: unreadable config: {e}", run.id))?;
    let names: Vec<String> = config["delivered"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|d| d["name"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut setting = consumers::Setting::from_config(&config)?;
    setting.expect_all |= args.expect_all;
    // The phases on a terminal only (analysis::progress), cleared before printing.
    let phase = progress::phases();
    phase.set_message(format!("reading {log}'s truth"));
    let truth =
        rundb::read::side_rows::<rundb::LogTruthRow>(conn, run.id).map_err(|e| e.to_string())?;
    phase.set_message("reading the consumers' deliveries");
    let lines =
        rundb::read::side_rows::<rundb::DeliveryRow>(conn, run.id).map_err(|e| e.to_string())?;
    phase.set_message("judging the consumers");
    // A watch run folded its settled rows: its stored checker judges it.
    let judged = match analysis::settle::stored::watch_checker(conn, run.id)? {
        Some(mut checker) => {
            if args.expect_all {
                checker.expect_all();
            }
            checker.judged()
        }
        None => consumers::judge(&truth, &lines, &names, &setting),
    };
    phase.finish_and_clear();
    let table = config["table"].as_str().unwrap_or("?");
    let title = format!(
        "run {}: consumers of {table} judged against {log} ({} rows committed)",
        run.id, judged.committed
    );
    if let Some(path) = &args.html {
        std::fs::write(path, consumers::html(&title, &judged))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if args.json {
        let mut out = serde_json::to_value(&judged).map_err(|e| e.to_string())?;
        out["run"] = run.id.into();
        out["table"] = table.into();
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
        );
    } else {
        println!("{title}");
        print!("{}", consumers::render(&judged));
    }
    Ok(())
}
