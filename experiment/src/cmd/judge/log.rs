//! `experiment judge --backend postgres --table T [--key COL] [--delivered
//! NAME=FILE]... [--duration D] [--drain D] -- COMMAND`: judges any
//! application's consumers against PostgreSQL's own log (docs/log-truth.md).
//!
//! A throwaway cluster with `wal_level = logical` is started and a logical
//! slot made on it (`test_decoding`) before COMMAND starts, with
//! `DATABASE_URL`, `PGHOST`, `PGPORT`, `PGUSER` and `PGDATABASE` in its
//! environment (and the server's binaries, `psql` among them, at the end of
//! its `PATH`). While it runs, the slot is drained every [`PERIOD`] into
//! run.db's `log_truth`, and each delivered file is read as it grows into
//! `log_deliveries`. When COMMAND exits (or at `--duration`: SIGINT, then
//! SIGTERM, then SIGKILL), `--drain` gives the consumers time to catch up;
//! then the files and the slot are read a last time, the slot is dropped
//! and the cluster stopped, on every way out (an error, Ctrl-C), and each
//! consumer is judged (`analysis::consumers`).

use crate::clock::now_ms;
use crate::logtruth::decode::{Counts, Decoder, parse_table};
use crate::logtruth::slot::{Slot, check_name};
use crate::logtruth::tail::Tail;
use crate::record::{RecordSender, Recorder, RunRow};
use crate::servers::postgres::{Cluster, connect};
use crate::session::Shutdown;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How often the slot is drained and the delivered files are read: a
/// delivery's time is known to within this.
pub const PERIOD: Duration = Duration::from_millis(200);

/// `--drain`'s default: how long consumers have to catch up after COMMAND ends.
pub const DEFAULT_DRAIN_MS: u64 = 10_000;

/// The slot's name unless `--slot` gives one.
pub const DEFAULT_SLOT: &str = "snowleak";

/// The run's `runs.target`.
pub const TARGET: &str = analysis::consumers::TARGET;

/// What the postgres judge is asked to do (checked by [`judge_log`]).
pub struct LogArgs {
    pub db: PathBuf,
    pub table: String,
    pub key: String,
    pub delivered: Vec<String>,
    pub duration_ms: Option<u64>,
    pub drain_ms: u64,
    pub expect_all: bool,
    pub slot: String,
    pub command: Vec<String>,
    pub grace: Duration,
}

/// What the judge's threads and tasks report to it.
enum Event {
    Exited(std::io::Result<ExitStatus>),
    /// The slot or a delivered file failed: the run stops (bad input).
    Failed(String),
    Signal,
}

/// How the command's part of the run ended.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Exited,
    Duration,
    Interrupted,
    Failed,
}

/// `NAME=FILE` of `--delivered`, names unique.
fn parse_delivered(specs: &[String]) -> Result<Vec<(String, PathBuf)>, String> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for spec in specs {
        let (name, file) = spec
            .split_once('=')
            .filter(|(n, f)| !n.is_empty() && !f.is_empty())
            .ok_or_else(|| {
                format!("bad --delivered '{spec}': expected NAME=FILE, such as relay=out.csv")
            })?;
        if out.iter().any(|(n, _)| n == name) {
            return Err(format!("--delivered {name}: two consumers have that name"));
        }
        out.push((name.to_string(), file.into()));
    }
    Ok(out)
}

/// Runs the command against a throwaway PostgreSQL and judges its consumers;
/// `Err` is bad input (exit 2), with nothing left behind.
pub fn judge_log(args: LogArgs) -> Result<super::Judgement, String> {
    let (schema, table) = parse_table(&args.table)?;
    let delivered = parse_delivered(&args.delivered)?;
    check_name(&args.slot)?;
    if args.key.is_empty() {
        return Err("--key names the key column: it cannot be empty".into());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    // Ctrl-C and SIGTERM end the run cleanly from here on (the cluster and
    // the slot go with it); a second one exits at once.
    let shutdown = {
        let _inside = runtime.enter();
        Shutdown::install("stopping the command, then the last read of the log")
    };
    let cluster = Cluster::start_with(&[
        ("wal_level", "logical"),
        ("max_replication_slots", "4"),
        ("max_wal_senders", "4"),
    ])?;
    let mut config = cluster.config();
    // Commit times in the log are written in the session's time zone: UTC.
    config.options("-c TimeZone=UTC");
    let slot = runtime.block_on(async {
        let client = connect(&config).await?;
        Slot::create(client, &args.slot).await
    })?;
    let stored = serde_json::json!({
        "table": format!("{schema}.{table}"),
        "key": args.key,
        "delivered": delivered.iter().map(|(n, f)| serde_json::json!({"name": n, "file": f})).collect::<Vec<_>>(),
        "expect_all": args.expect_all,
        "slot": args.slot,
        "command": args.command,
        "duration_ms": args.duration_ms,
        "drain_ms": args.drain_ms,
        "period_ms": PERIOD.as_millis() as i64,
    });
    let run = RunRow {
        started_at_ms: now_ms(),
        target: TARGET.into(),
        clock: "real".into(),
        layout: "key".into(),
        interval_ms: PERIOD.as_millis() as i64,
        page_limit: crate::logtruth::slot::BATCH as i64,
        config: stored.to_string(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let recorder = Recorder::create(&args.db, &run, &[])?;
    let run_id = recorder.run_id;
    let sender = recorder.sender();
    // The tables exist even when nothing arrives: the run was read.
    sender.log_truth(Vec::new());
    sender.deliveries(Vec::new());

    let (events, received) = mpsc::channel::<Event>();
    let (stop_drain, drain_stopped) = tokio::sync::watch::channel(false);
    let decoder = Decoder::new(&schema, &table, &args.key);
    let drain = runtime.spawn(drain_slot(
        slot,
        decoder,
        sender.clone(),
        drain_stopped,
        events.clone(),
    ));
    let tails: Vec<_> = delivered
        .iter()
        .map(|(name, path)| {
            let (stop, stopped) = mpsc::channel::<()>();
            let tail = Tail::new(name, path.clone(), &args.key);
            let (sender, events) = (sender.clone(), events.clone());
            let thread = std::thread::spawn(move || tail_file(tail, sender, stopped, events));
            (stop, thread)
        })
        .collect();
    {
        let mut requested = shutdown.requested.clone();
        let events = events.clone();
        runtime.spawn(async move {
            if requested.changed().await.is_ok() {
                let _ = events.send(Event::Signal);
            }
        });
    }

    eprintln!(
        "judging `{}` against PostgreSQL's log of {schema}.{table} (key {}), recording to {}",
        args.command.join(" "),
        args.key,
        args.db.display()
    );
    let (end, status, failure) = run_command(&args, &cluster, &events, &received);
    drop(events);
    let mut failure = failure;
    // The consumers catch up, unless the run is already over (or the
    // command never ran).
    let mut end = end;
    if failure.is_none() && end != End::Interrupted && status.is_ok() {
        let deadline = Instant::now() + Duration::from_millis(args.drain_ms);
        loop {
            match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Event::Failed(m)) => {
                    failure = Some(m);
                    break;
                }
                Ok(Event::Signal) => {
                    end = End::Interrupted;
                    break;
                }
                Ok(Event::Exited(_)) => {}
                Err(_) => break,
            }
        }
    }
    // The last reads: the files, then the slot (dropped after it).
    for (stop, thread) in tails {
        let _ = stop.send(());
        if let Ok(Err(m)) = thread.join() {
            failure.get_or_insert(m);
        }
    }
    let _ = stop_drain.send(true);
    let counts = runtime
        .block_on(drain)
        .map_err(|e| format!("the log's reader failed: {e}"))
        .and_then(|r| r);
    drop(sender);
    drop(cluster);
    let counts = match counts {
        Ok(c) => Some(c),
        Err(m) => {
            failure.get_or_insert(m);
            None
        }
    };
    let reason = match end {
        End::Exited => "command-exited",
        End::Duration => "duration",
        End::Interrupted => "interrupted",
        End::Failed => "failed",
    };
    let finished = recorder.finish(now_ms(), failure.is_none(), reason);
    drop(shutdown);
    if let Some(m) = failure {
        return Err(m);
    }
    finished?;
    let counts = counts.unwrap_or_default();
    let status = status?;
    verdicts(&args, run_id, &schema, &table, &delivered, &counts, status)
}

/// Starts the command and waits for it to exit, for `--duration`, a
/// signal or a failure; stops it if it still runs. Returns how it ended,
/// its exit status (`Err`: it could not run), and a failure if one came.
fn run_command(
    args: &LogArgs,
    cluster: &Cluster,
    events: &Sender<Event>,
    received: &Receiver<Event>,
) -> (End, Result<ExitStatus, String>, Option<String>) {
    let program = &args.command[0];
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    path.push(":");
    path.push(cluster.bin_dir());
    let host = cluster.dir().display().to_string();
    let child = Command::new(program)
        .args(&args.command[1..])
        .env(
            "DATABASE_URL",
            format!("postgresql://postgres@/postgres?host={host}&port=5432"),
        )
        .env("PGHOST", &host)
        .env("PGPORT", "5432")
        .env("PGUSER", "postgres")
        .env("PGDATABASE", "postgres")
        .env("PATH", path)
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            return (
                End::Failed,
                Err(format!("cannot run '{program}': {e}")),
                None,
            );
        }
    };
    let pid = child.id() as libc::pid_t;
    {
        let events = events.clone();
        std::thread::spawn(move || {
            let _ = events.send(Event::Exited(child.wait()));
        });
    }
    let deadline = args
        .duration_ms
        .map(|ms| Instant::now() + Duration::from_millis(ms));
    // The first of: the command's exit, a failure, a signal, the deadline.
    let event = match deadline {
        Some(d) => received.recv_timeout(d.saturating_duration_since(Instant::now())),
        None => received.recv().map_err(|_| RecvTimeoutError::Disconnected),
    };
    let (end, mut failure) = match event {
        Ok(Event::Exited(status)) => {
            let status = status.map_err(|e| format!("cannot wait for the command: {e}"));
            return (End::Exited, status, None);
        }
        Ok(Event::Failed(m)) => (End::Failed, Some(m)),
        Ok(Event::Signal) => (End::Interrupted, None),
        Err(_) => (End::Duration, None),
    };
    // SIGINT, then SIGTERM, then SIGKILL, each after a grace period.
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        // SAFETY: kill(2) on our own child, not yet reaped: the waiting
        // thread has not reported its exit.
        unsafe {
            libc::kill(pid, signal);
        }
        let until = Instant::now() + args.grace;
        while let Ok(event) = received.recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            match event.into_exit() {
                Ok(status) => {
                    let status = status.map_err(|e| format!("cannot wait for the command: {e}"));
                    return (end, status, failure);
                }
                Err(Some(m)) => {
                    failure.get_or_insert(m);
                }
                Err(None) => {}
            }
        }
    }
    (
        end,
        Err("the command did not end, even after SIGKILL".into()),
        failure,
    )
}

impl Event {
    /// For the stopping loop: the exit status, or a failure (`Err(Some)`), or
    /// nothing of interest (`Err(None)`).
    #[allow(clippy::type_complexity)]
    fn into_exit(self) -> Result<std::io::Result<ExitStatus>, Option<String>> {
        match self {
            Event::Exited(s) => Ok(s),
            Event::Failed(m) => Err(Some(m)),
            Event::Signal => Err(None),
        }
    }
}

/// Drains the slot every [`PERIOD`] until told to stop, then a last time,
/// and drops it. A failure is reported at once (the run stops), and the
/// slot is dropped all the same.
async fn drain_slot(
    slot: Slot,
    mut decoder: Decoder,
    sender: RecordSender,
    mut stop: tokio::sync::watch::Receiver<bool>,
    events: Sender<Event>,
) -> Result<Counts, String> {
    let result = loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(PERIOD) => false,
            _ = stop.changed() => true,
        };
        let drained = drain_all(&slot, &mut decoder, &sender).await;
        if let Err(m) = &drained {
            let _ = events.send(Event::Failed(m.clone()));
        }
        if stopping || drained.is_err() {
            break drained;
        }
    };
    let dropped = slot.drop_slot().await;
    result.and(dropped).map(|()| decoder.counts.clone())
}

/// Takes batches from the slot until one is not full, recording each.
async fn drain_all(
    slot: &Slot,
    decoder: &mut Decoder,
    sender: &RecordSender,
) -> Result<(), String> {
    loop {
        let (rows, full) = slot.drain_batch(decoder).await?;
        if !rows.is_empty() {
            // The recorder's queue is bounded: a full queue waits here.
            tokio::task::block_in_place(|| sender.log_truth(rows));
        }
        if !full {
            return Ok(());
        }
    }
}

/// Reads a delivered file every [`PERIOD`] until told to stop, then to its
/// end; a failure is reported at once.
fn tail_file(
    mut tail: Tail,
    sender: RecordSender,
    stop: Receiver<()>,
    events: Sender<Event>,
) -> Result<i64, String> {
    loop {
        let last = !matches!(stop.recv_timeout(PERIOD), Err(RecvTimeoutError::Timeout));
        loop {
            let read = tail.read(now_ms(), last);
            let (rows, more) = match read {
                Ok(x) => x,
                Err(m) => {
                    let _ = events.send(Event::Failed(m.clone()));
                    return Err(m);
                }
            };
            if !rows.is_empty() {
                sender.deliveries(rows);
            }
            if !more {
                break;
            }
        }
        if last {
            return Ok(tail.lines());
        }
    }
}

/// Each consumer's verdict, from what the run recorded.
fn verdicts(
    args: &LogArgs,
    run_id: i64,
    schema: &str,
    table: &str,
    delivered: &[(String, PathBuf)],
    counts: &Counts,
    status: ExitStatus,
) -> Result<super::Judgement, String> {
    let exited = match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was stopped by a signal".into(),
    };
    if counts.inserts == 0 {
        return Err(format!(
            "the command ({exited}) committed no row to {schema}.{table} (the log holds {} \
             transactions): nothing to judge; check --table",
            counts.transactions
        ));
    }
    let conn = rundb::read::open(&args.db)?;
    let truth = rundb::read::log_truth(&conn, run_id)?;
    let lines = rundb::read::log_deliveries(&conn, run_id)?;
    drop(conn);
    let names: Vec<String> = delivered.iter().map(|(n, _)| n.clone()).collect();
    let judged = analysis::consumers::judge(&truth, &lines, &names, args.expect_all);
    let mut out = vec![format!(
        "judged run {run_id} of {} (the command {exited}): {} rows of {schema}.{table} committed \
         in {} transactions ({} deleted{})",
        args.db.display(),
        judged.committed,
        counts.transactions,
        counts.deletes,
        if counts.deletes_without_key > 0 {
            format!(
                ", {} deletes without the key in the log",
                counts.deletes_without_key
            )
        } else {
            String::new()
        }
    )];
    if names.is_empty() {
        out.push("no --delivered consumer: the truth is recorded, nobody judged".into());
    }
    out.extend(
        analysis::consumers::render(&judged)
            .lines()
            .map(str::to_string),
    );
    out.push(format!(
        "the full report: analyze {} --run {run_id}",
        args.db.display()
    ));
    Ok(super::Judgement {
        any_invalid: judged.any_invalid(),
        lines: out,
    })
}
