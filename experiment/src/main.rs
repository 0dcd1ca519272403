//! The `experiment` command line: runs pollers against a target and records
//! every request and item (`experiment --duration 1h`), serves the leaky
//! simulator alone (`experiment serve`), does ID math (`experiment id`), and
//! runs the virtual experiment over many seeds (`experiment sweep`).

use clap::{Parser, Subcommand};
use since_id::id::{Id, Layout};
use since_id::policy::compensated_since_id;
use since_id::time::{parse_duration_ms, parse_time, rfc3339_ms};
use snowleak::sim::serve_cmd::{ServeArgs, serve_command};
use snowleak::{RunArgs, RunSummary, dry_run, run_experiment};
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
    /// Run the virtual experiment over many seeds and summarise each poller.
    Sweep(snowleak::sweep::SweepArgs),
}

#[derive(Subcommand)]
enum IdCommand {
    /// Print an ID's time (RFC 3339 in UTC, and ms since the Unix epoch).
    Decode {
        /// The ID, as the API writes it.
        id: String,
        #[arg(long, short, help = layout_help())]
        layout: String,
    },
    /// Print the smallest ID at an instant (RFC 3339 or ms since the Unix epoch).
    At {
        /// RFC 3339 (2016-04-30T11:18:25.796Z) or ms since the Unix epoch.
        time: String,
        #[arg(long, short, help = layout_help())]
        layout: String,
    },
    /// Print the compensated since_id for the next request.
    SinceId {
        #[arg(long, short, help = layout_help())]
        layout: String,
        /// The highest ID seen so far, as the API writes it.
        #[arg(long)]
        latest_id: String,
        /// Client time at which the previous request was sent (RFC 3339 or ms since the Unix epoch).
        #[arg(long)]
        retrieved_at: String,
        /// How far the IDs may be out of order (1s, 1500ms).
        #[arg(long)]
        k: String,
    },
}

/// `--help` of the `id` commands' `--layout`: every name the layouts accept.
fn layout_help() -> String {
    format!(
        "The ID layout: {}, sonyflake:epoch=MS, or custom:epoch=MS,shift=N[,unit=MS]",
        Layout::NAMES.join(", ")
    )
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
        Some(Command::Id(cmd)) => id_command(cmd),
        Some(Command::Sweep(args)) => snowleak::sweep::sweep_command(args),
        Some(Command::Serve(args)) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))
            .and_then(|rt| rt.block_on(serve_command(args))),
        None if cli.run.dry_run => dry_run(cli.run).map(|text| print!("{text}")),
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

fn id_command(cmd: IdCommand) -> Result<(), String> {
    let layout = |name: &str| name.parse::<Layout>().map_err(|e| e.to_string());
    match cmd {
        IdCommand::Decode { id, layout: name } => {
            let layout = layout(&name)?;
            let id = layout.parse(&id).map_err(|e| e.to_string())?;
            let ms = layout.ts_ms(id);
            println!("{}\t{ms}", rfc3339_ms(ms));
        }
        IdCommand::At { time, layout: name } => {
            let layout = layout(&name)?;
            let ms = parse_time(&time)?;
            println!("{}", layout.format(layout.min_id_at(ms)));
        }
        IdCommand::SinceId {
            layout: name,
            latest_id,
            retrieved_at,
            k,
        } => {
            let layout = layout(&name)?;
            let latest: Id = layout.parse(&latest_id).map_err(|e| e.to_string())?;
            let retrieved_at = parse_time(&retrieved_at)?;
            let k_ms = parse_duration_ms(&k)?;
            println!(
                "{}",
                layout.format(compensated_since_id(&layout, latest, retrieved_at, k_ms))
            );
        }
    }
    Ok(())
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
