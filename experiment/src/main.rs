//! The `experiment` command line: runs pollers against a target and records
//! every request and item (`experiment --duration 1h`), serves the leaky
//! simulator alone (`experiment serve`), does ID math (`experiment id`), and
//! runs the virtual experiment over many seeds (`experiment sweep`).

use clap::{Parser, Subcommand};
use snowleak::cmd::id::IdCommand;
use snowleak::cmd::judge::{JudgeArgs, judge_command};
use snowleak::cmd::serve::{ServeArgs, serve_command};
use snowleak::cmd::sweep::{SweepArgs, sweep_command};
use snowleak::cmd::watch::{WatchArgs, watch_command};
use snowleak::targets::RunArgs;
use snowleak::{RunSummary, dry_run, run_experiment};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "experiment",
    version,
    about = "Run pollers side by side against a timeline and record every request and item",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the leaky simulator alone, for any client to poll.
    Serve(ServeArgs),
    /// Decode IDs and compute since_id values.
    #[command(subcommand)]
    Id(IdCommand),
    /// Run the virtual experiment over many seeds and summarise each poller; with
    /// `--target postgres|mariadb|misskey-ftt`, a campaign of real runs (docs/campaigns.md).
    Sweep(SweepArgs),
    /// Run a polling client against the leaky server and judge it:
    /// `experiment judge -- python3 my_bot.py` (exit 0: every client valid; 1: one lost a status).
    Judge(Box<JudgeArgs>),
    /// Record the truth of your own PostgreSQL or MariaDB table from its log while your system
    /// runs, and judge its consumers (exit 0: every consumer valid; 1: one lost a row).
    Watch(WatchArgs),
}

fn main() -> ExitCode {
    let cli: Cli = parse_args_or_exit();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Some(Command::Id(cmd)) => snowleak::cmd::id::id_command(cmd),
        Some(Command::Sweep(args)) => match sweep_command(args) {
            Ok(code) => return ExitCode::from(code),
            Err(message) => Err(message),
        },
        Some(Command::Judge(args)) => match judge_command(*args) {
            Ok(judgement) => {
                for line in &judgement.lines {
                    println!("{line}");
                }
                return if judgement.any_invalid {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                };
            }
            Err(message) => Err(message),
        },
        Some(Command::Watch(args)) => match watch_command(args) {
            Ok(watched) => {
                for line in &watched.lines {
                    println!("{line}");
                }
                return if watched.any_invalid {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                };
            }
            Err(message) => Err(message),
        },
        Some(Command::Serve(args)) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))
            .and_then(|rt| rt.block_on(serve_command(args))),
        None if cli.run.shared.dry_run => dry_run(cli.run).map(|text| print!("{text}")),
        None => run_experiment(cli.run).map(|summary| print!("{}", summary_text(&summary))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
    }
}

/// The closing lines: per poller, and how to analyze the run.
fn summary_text(summary: &RunSummary) -> String {
    let p = &summary.progress;
    let mut out = format!(
        "run {} {}: {} requests ({} failed), {} distinct statuses\n",
        summary.run_id,
        if summary.complete {
            "complete"
        } else {
            "INCOMPLETE"
        },
        p.requests,
        p.failed,
        p.statuses
    );
    for (name, late) in &p.late_arrivals {
        out.push_str(&format!("  {name}: {late} late arrivals seen\n"));
    }
    out.push_str(&summary.notes);
    out.push_str(&format!(
        "analyze it with: cargo run --release --bin analyze {} --run {}\n",
        summary.db.display(),
        summary.run_id
    ));
    out
}

/// Parses the command line; a usage error is one line on stderr and exit status 2
/// (clap's own output adds a blank line and a tip), while `--help` and `--version` print as usual.
fn parse_args_or_exit<T: clap::Parser>() -> T {
    match T::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let rendered = e.to_string();
            let first = rendered.lines().next().unwrap_or("error: bad arguments");
            eprintln!("{first}");
            std::process::exit(2);
        }
    }
}
