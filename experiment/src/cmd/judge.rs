//! `experiment judge [serve options] [--db FILE] [--duration D] -- COMMAND
//! [ARGS...]`: puts a client under test in one line. It starts the leaky
//! server on a free loopback port with `--record`, runs the command with
//! `SNOWLEAK_BASE_URL` and a generated `SNOWLEAK_TOKEN` in its environment,
//! stops when the command exits (or at `--duration`: SIGINT, then SIGTERM
//! after a grace period, then SIGKILL), and prints the verdict of every
//! client it saw. Exit status: 0 when every client is valid, 1 when any lost
//! a status, 2 on bad input (docs/judging.md).
//!
//! With `--log postgres --table T` (or `--log mariadb`), the command is an
//! application with its own writers and consumers, judged against the
//! database's own log (`logtruth::judge`, docs/log-truth.md): the line of
//! `targets::LOGS` that `--log` names.

use crate::logtruth::source::LogSource;
use crate::options::Given;
use crate::targets::ServeArgs;
use analysis::diff::Verdict;
use rand::Rng;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::Duration;

/// The name of the client that runs with the generated token.
pub const COMMAND_CLIENT: &str = "command";

/// How long a command has after SIGINT, and again after SIGTERM.
const GRACE: Duration = Duration::from_secs(5);

/// Run a polling client against the leaky server and judge it.
#[derive(clap::Args, Debug, Clone)]
pub struct JudgeArgs {
    #[command(flatten)]
    pub serve: ServeArgs,
    // Its help names each line of `targets::LOGS` (`targets::log_help`).
    #[arg(long, value_name = "DATABASE", value_parser = crate::targets::parse_log,
          help = crate::targets::log_help())]
    pub log: Option<&'static dyn LogSource>,
    /// The run database the recording goes to (a run is added to it).
    #[arg(long, default_value = "data/judge.db")]
    pub db: PathBuf,
    /// Stop the command after this long (SIGINT, then SIGTERM after 5 s);
    /// without it, the judge waits for the command to exit.
    #[arg(long, value_parser = since_id::time::parse_duration_ms)]
    pub duration: Option<u64>,
    #[command(flatten)]
    pub log_flags: Given<LogFlags>,
    /// The client to run, and its arguments.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// The flags of `judge --log`: each given without it is refused.
#[derive(clap::Args, Debug, Clone)]
pub struct LogFlags {
    /// `--log`: the table whose committed rows are the truth (`T` is
    /// `public.T`, on MariaDB `app.T`; `SCHEMA.T` names the schema or
    /// database); COMMAND may create it.
    #[arg(long, value_name = "T")]
    pub table: Option<String>,
    /// `--log`: the table's key column (default `id`).
    #[arg(long, value_name = "COLUMN")]
    pub key: Option<String>,
    /// `--log`: a consumer's delivered keys, one a line (CSV's first field,
    /// or JSON lines with "key" or "id"), read as the file grows. Repeatable.
    #[arg(long = "delivered", value_name = "NAME=FILE")]
    pub delivered: Vec<String>,
    /// `--log`: how long consumers have to catch up after COMMAND ends
    /// (default 10s).
    #[arg(long, value_parser = since_id::time::parse_duration_ms)]
    pub drain: Option<u64>,
    /// `--log`: every committed row is owed to every consumer, not only
    /// those below the highest key it delivered.
    #[arg(long)]
    pub expect_all: bool,
    /// `--log postgres`: the replication slot's name (default snowleak).
    #[arg(long, value_name = "NAME")]
    pub slot: Option<String>,
    /// `--log`: kill the command's process group with SIGKILL at these
    /// offsets from its start (`5s,12s`) and start it again with the same
    /// arguments and environment (SNOWLEAK_START counts the starts).
    #[arg(long, value_name = "T1,T2,...")]
    pub kill_at: Option<String>,
    /// `--log`: kill and start it again about this often (each gap drawn
    /// from [D/2, 3D/2) with --seed, which seeds the simulator elsewhere),
    /// until --duration.
    #[arg(long, value_parser = since_id::time::parse_duration_ms, value_name = "D")]
    pub kill_every: Option<u64>,
    /// `--log`: restart the database server (a fast or normal shutdown,
    /// then start) at these offsets; the command runs on.
    #[arg(long, value_name = "T1,T2,...")]
    pub restart_server_at: Option<String>,
    /// `--log`: what a consumer promises, its verdict judged against it:
    /// `at-least-once`, `exactly-once` or `ordered`, for every consumer, or
    /// `NAME=PROMISE` for one. Repeatable.
    #[arg(long, value_name = "[NAME=]PROMISE")]
    pub promise: Vec<String>,
}

pub use crate::logtruth::verdict::Judgement;

/// Runs the judge; `Ok` carries the verdicts, `Err` is bad input (exit 2).
pub fn judge_command(args: JudgeArgs) -> Result<Judgement, String> {
    if let Some(source) = args.log {
        return judge_database(args, source);
    }
    crate::targets::judge_serves(args.serve.backend)?;
    if let Some(flag) = args.log_flags.given.first() {
        return Err(format!(
            "{flag} applies to --log {} (a table judged against the database's log)",
            crate::targets::log_names()
        ));
    }
    let mut serve = args.serve;
    let profile = serve.simulator.profile().to_string();
    if serve.simulator.truth.is_some() || serve.listen.record.is_some() {
        return Err("--truth and --record are the judge's own: give --db FILE".into());
    }
    // The judge's server is its own, on a free loopback port.
    serve.listen.addr = "127.0.0.1:0".into();
    serve.listen.quiet = true;
    serve.listen.record = Some(args.db.clone());
    if let Some(dir) = args.db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let token = format!("{:032x}", rand::rng().random::<u128>());
    let mut names = HashMap::new();
    names.insert(token.clone(), COMMAND_CLIENT.to_string());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let (ready, bound) = tokio::sync::oneshot::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(crate::targets::serve(
        serve,
        names,
        async {
            let _ = stopped.await;
        },
        Some(ready),
    ));
    let Ok(addr) = runtime.block_on(bound) else {
        // The server ended before listening: its error says why.
        return Err(runtime
            .block_on(server)
            .map_err(|e| e.to_string())
            .and_then(|r| r)
            .err()
            .unwrap_or_else(|| "the server did not start".into()));
    };
    let program = &args.command[0];
    eprintln!(
        "judging `{}` against http://{addr} (profile {}, recording to {})",
        args.command.join(" "),
        profile,
        args.db.display()
    );
    let child = Command::new(program)
        .args(&args.command[1..])
        .env("SNOWLEAK_BASE_URL", format!("http://{addr}"))
        .env("SNOWLEAK_TOKEN", &token)
        .spawn();
    let outcome = child
        .map_err(|e| format!("cannot run '{program}': {e}"))
        .map(|child| wait_or_stop(child, args.duration.map(Duration::from_millis)));
    let _ = stop.send(());
    let served = runtime
        .block_on(server)
        .map_err(|e| format!("the server failed: {e}"))
        .and_then(|r| r);
    let status = outcome??;
    served?;
    verdicts(&args.db, status)
}

/// `--log NAME`: the command's table judged against that database's log.
fn judge_database(args: JudgeArgs, source: &'static dyn LogSource) -> Result<Judgement, String> {
    let (name, log) = (source.name(), source.log());
    let face = format!("--log {name}");
    if crate::targets::judge_serves(args.serve.backend).is_err() {
        return Err(format!(
            "--backend {} names what serves a timeline, and {face} judges a table against {log}: \
             give one of them",
            args.serve.backend.name()
        ));
    }
    args.serve.simulator.refuse_on(&face)?;
    if args.serve.listen.record.is_some() || !args.serve.listen.clients.is_empty() {
        return Err(format!(
            "--record and --client are serve's: the judge on {face} records to --db"
        ));
    }
    let flags = args.log_flags.args;
    let slot = source.judge_slot(flags.slot)?;
    let times = |flag: &str, given: &Option<String>| match given {
        Some(text) => crate::logtruth::nemesis::parse_times(flag, text),
        None => Ok(Vec::new()),
    };
    let faults = crate::logtruth::nemesis::plan(
        &times("--kill-at", &flags.kill_at)?,
        flags.kill_every,
        &times("--restart-server-at", &flags.restart_server_at)?,
        args.duration,
        args.serve.listen.seed,
    )?;
    let table = flags.table.ok_or_else(|| {
        format!("{face} judges a table against {log}: give --table T (docs/log-truth.md)")
    })?;
    crate::logtruth::judge::judge_log(crate::logtruth::judge::LogArgs {
        db: args.db,
        table,
        key: flags.key.unwrap_or_else(|| "id".into()),
        delivered: flags.delivered,
        duration_ms: args.duration,
        drain_ms: flags
            .drain
            .unwrap_or(crate::logtruth::judge::DEFAULT_DRAIN_MS),
        expect_all: flags.expect_all,
        source,
        slot,
        command: args.command,
        grace: GRACE,
        faults,
        promises: flags.promise,
    })
}

/// Waits for the command, or stops it at `limit`: SIGINT, then SIGTERM,
/// then SIGKILL, each after a grace period. A thread waits on the child and
/// reports its exit; this one only waits on that report, with deadlines.
fn wait_or_stop(mut child: Child, limit: Option<Duration>) -> Result<ExitStatus, String> {
    let pid = child.id() as libc::pid_t;
    let (tx, exited) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let waited = |outcome: std::io::Result<ExitStatus>| {
        outcome.map_err(|e| format!("cannot wait for the command: {e}"))
    };
    let first = match limit {
        Some(limit) => exited.recv_timeout(limit).ok(),
        None => exited.recv().ok(),
    };
    if let Some(outcome) = first {
        return waited(outcome);
    }
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        // SAFETY: kill(2) on our own child, not yet reaped: the waiting
        // thread has not reported its exit.
        unsafe {
            libc::kill(pid, signal);
        }
        if let Ok(outcome) = exited.recv_timeout(GRACE) {
            return waited(outcome);
        }
    }
    Err("the command did not end, even after SIGKILL".into())
}

/// The verdict of every client of the run just recorded.
fn verdicts(db: &std::path::Path, status: ExitStatus) -> Result<Judgement, String> {
    let conn = analysis::load::open(db).map_err(|e| e.to_string())?;
    let run = analysis::load::pick_run(&conn, db, None).map_err(|e| e.to_string())?;
    let loaded = analysis::load::load(&conn, run).map_err(|e| e.to_string())?;
    if loaded.pollers.is_empty() {
        return Err(match status.code() {
            Some(code) => format!(
                "the command exited with status {code} before it asked for a timeline: nothing to judge"
            ),
            None => {
                "the command was killed before it asked for a timeline: nothing to judge".into()
            }
        });
    }
    let judged = analysis::diff::analyze(&loaded.history);
    let mut lines = vec![format!(
        "judged run {run} of {} (the command {})",
        db.display(),
        match status.code() {
            Some(code) => format!("exited with status {code}"),
            None => "was stopped by a signal".into(),
        }
    )];
    for (i, poller) in loaded.pollers.iter().enumerate() {
        let stats = &judged.pollers[i];
        lines.push(format!(
            "{}: {} ({} requests, {} statuses seen, {} leaks; {})",
            poller.name,
            judged.verdicts[i].as_str(),
            stats.requests,
            stats.seen,
            stats.leaks,
            judged.verdict_reasons[i]
        ));
    }
    lines.push(format!(
        "the full report: analyze {} --run {run}",
        db.display()
    ));
    Ok(Judgement {
        any_invalid: judged.verdicts.contains(&Verdict::Invalid),
        lines,
    })
}
