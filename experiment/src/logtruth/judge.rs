//! `experiment judge --log postgres|mariadb --table T [--key COL]
//! [--delivered NAME=FILE]... [--duration D] [--drain D] -- COMMAND`: judges
//! any application's consumers against the database's own log
//! (docs/log-truth.md). One skeleton; each database's log source is in its
//! folder (`targets/postgres/judge.rs`, `targets/mariadb/judge.rs`, listed
//! in `targets::LOGS`):
//!
//! - `postgres`: a throwaway cluster with `wal_level = logical` and a
//!   logical slot (`test_decoding`) made before COMMAND starts, drained every
//!   [`PERIOD`];
//! - `mariadb`: a throwaway MariaDB with its binary log in ROW format, read
//!   as a replica reads it while it grows.
//!
//! The skeleton, the same for both: the source is opened (its server
//! started, its reader ready) before COMMAND starts with the source's
//! environment (`DATABASE_URL` and the client's own variables); while it
//! runs, the source's reader puts the judged table's committed rows into
//! run.db's `log_truth`, and each delivered file is read as it grows into
//! `log_deliveries`. When COMMAND exits (or at `--duration`: SIGINT, then
//! SIGTERM, then SIGKILL), `--drain` gives the consumers time to catch up;
//! then the files and the log are read a last time and the server stopped,
//! on every way out (an error, Ctrl-C), and each consumer is judged
//! (`analysis::consumers`).
//!
//! The nemesis ([`super::nemesis`]): at planned offsets the command's process
//! group is killed with SIGKILL and the command started again (its
//! `SNOWLEAK_START` counts the starts), or the server is restarted fast
//! (PostgreSQL; the slot survives it, and its reader reconnects). Each
//! fault goes into `runs.config` (`nemesis`) as it happens, with the lines
//! each delivered file held then, so that a redelivery after a restart is
//! told from a duplicate; `--promise` is recorded there too.

use super::nemesis::{Action, Fault};
use crate::clock::now_ms;
use crate::logtruth::Counts;
pub use crate::logtruth::source::PERIOD;
use crate::logtruth::source::{JudgeOpened, LogSource, ReaderCtx, Server};
use crate::logtruth::tail::{Tail, parse_delivered};
use crate::record::{RecordSender, Recorder, RunRow};
use crate::session::Shutdown;
use analysis::consumers::{Promise, Restart};
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// `--drain`'s default: how long consumers have to catch up after COMMAND ends.
pub const DEFAULT_DRAIN_MS: u64 = 10_000;

/// What the log judge is asked to do (checked by [`judge_log`]).
pub struct LogArgs {
    pub db: PathBuf,
    pub table: String,
    pub key: String,
    pub delivered: Vec<String>,
    pub duration_ms: Option<u64>,
    pub drain_ms: u64,
    pub expect_all: bool,
    /// The database whose log is read (a line of `targets::LOGS`).
    pub source: &'static dyn LogSource,
    /// `--slot`, as the source took it (`LogSource::judge_slot`).
    pub slot: Option<String>,
    pub command: Vec<String>,
    pub grace: Duration,
    /// The faults to inject, in time order.
    pub faults: Vec<Fault>,
    /// `--promise [NAME=]PROMISE`: a consumer's (or, without a name, every
    /// consumer's) promise.
    pub promises: Vec<String>,
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

/// Runs the command against a throwaway PostgreSQL and judges its consumers;
/// `Err` is bad input (exit 2), with nothing left behind.
pub fn judge_log(args: LogArgs) -> Result<super::verdict::Judgement, String> {
    let delivered = check(&args)?;
    let promises = promises(&args.promises, &delivered)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    // Ctrl-C and SIGTERM end the run cleanly from here on (the server, and
    // the slot, go with it); a second one exits at once.
    let shutdown = {
        let _inside = runtime.enter();
        Shutdown::install("stopping the command, then the last read of the log")
    };
    let opened = args
        .source
        .judge_open(&runtime, &args.table, &args.key, args.slot.as_deref())?;
    let (recorder, mut config) = record_run(&args, &opened, &delivered, &promises)?;
    let run_id = recorder.run_id;
    let sender = recorder.sender();
    // The tables exist even when nothing arrives: the run was read.
    sender.side(Vec::<rundb::LogTruthRow>::new());
    sender.side(Vec::<rundb::DeliveryRow>::new());

    let (events, received) = mpsc::channel::<Event>();
    let (stop_drain, drain_stopped) = tokio::sync::watch::channel(false);
    let JudgeOpened {
        mut server,
        env,
        table,
        log,
        reader,
        ..
    } = opened;
    let drain = runtime.spawn(reader(ReaderCtx {
        sender: sender.clone(),
        stop: drain_stopped,
        failed: {
            let events = events.clone();
            Box::new(move |m| {
                let _ = events.send(Event::Failed(m));
            })
        },
    }));
    let tails = spawn_tails(&delivered, &args.key, &sender, &events);
    forward_signal(&runtime, &shutdown, &events);

    eprintln!(
        "judging `{}` against {log} of {table} (key {}), recording to {}",
        args.command.join(" "),
        args.key,
        args.db.display()
    );
    let mut nemesis = Nemesis {
        faults: &args.faults,
        server: server.as_mut(),
        delivered: &delivered,
        done: Vec::new(),
        record: |done: &[Restart]| {
            config["nemesis"] = serde_json::to_value(done).unwrap_or_default();
            sender.run_config(config.to_string());
        },
    };
    let (mut end, status, mut failure) = run_command(&args, &env, &events, &received, &mut nemesis);
    drop(events);
    // The consumers catch up, unless the run is already over (or the
    // command never ran).
    if failure.is_none() && end != End::Interrupted && status.is_ok() {
        match catch_up(&received, args.drain_ms) {
            Some(Event::Failed(m)) => failure = Some(m),
            Some(Event::Signal) => end = End::Interrupted,
            _ => {}
        }
    }
    // The last reads: the files, then the log (the slot dropped after it).
    for tail in tails {
        if let Err(m) = tail.last_read() {
            failure.get_or_insert(m);
        }
    }
    let _ = stop_drain.send(true);
    let counts = runtime
        .block_on(drain)
        .map_err(|e| format!("the log's reader failed: {e}"))
        .and_then(|r| r);
    drop(sender);
    drop(server);
    let counts = match counts {
        Ok(c) => Some(c),
        Err(m) => {
            failure.get_or_insert(m);
            None
        }
    };
    let finished = recorder.finish(now_ms(), failure.is_none(), end.reason());
    drop(shutdown);
    if let Some(m) = failure {
        return Err(m);
    }
    finished?;
    let counts = counts.unwrap_or_default();
    let status = status?;
    verdicts(&args, run_id, &table, &delivered, &counts, status)
}

/// Checks what can be checked before anything starts: the delivered files'
/// `NAME=FILE`s (returned), the key, the table's name and the slot's.
fn check(args: &LogArgs) -> Result<Vec<(String, PathBuf)>, String> {
    let delivered = parse_delivered(&args.delivered)?;
    if args.key.is_empty() {
        return Err("--key names the key column: it cannot be empty".into());
    }
    args.source.judge_check(&args.table, args.slot.as_deref())?;
    Ok(delivered)
}

/// Records the run in run.db: the common flags and the source's own in
/// `runs.config`, the reading period as its interval.
fn record_run(
    args: &LogArgs,
    opened: &JudgeOpened,
    delivered: &[(String, PathBuf)],
    promises: &serde_json::Map<String, serde_json::Value>,
) -> Result<(Recorder, serde_json::Value), String> {
    let mut stored = serde_json::json!({
        "table": opened.table,
        "key": args.key,
        "delivered": delivered.iter().map(|(n, f)| serde_json::json!({"name": n, "file": f})).collect::<Vec<_>>(),
        "expect_all": args.expect_all,
        "command": args.command,
        "duration_ms": args.duration_ms,
        "drain_ms": args.drain_ms,
        "period_ms": PERIOD.as_millis() as i64,
        "promises": promises,
        "nemesis": [],
        "planned_faults": args.faults.iter().map(|f| serde_json::json!({"at_ms": f.at_ms, "action": f.action.as_str()})).collect::<Vec<_>>(),
    });
    for (name, value) in &opened.config {
        stored[*name] = value.clone();
    }
    let run = RunRow {
        started_at_ms: now_ms(),
        target: opened.target.into(),
        clock: "real".into(),
        layout: "key".into(),
        interval_ms: PERIOD.as_millis() as i64,
        page_limit: opened.batch,
        config: stored.to_string(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    Ok((Recorder::create(&args.db, &run, &[])?, stored))
}

/// `--promise [NAME=]PROMISE`s as `runs.config` holds them: `{name: promise}`
/// for every consumer a promise names (a bare one names them all; a named
/// one wins over it).
fn promises(
    given: &[String],
    delivered: &[(String, PathBuf)],
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let mut out = serde_json::Map::new();
    let mut named = Vec::new();
    for spec in given {
        match spec.split_once('=') {
            Some((name, promise)) => {
                let promise: Promise = promise.parse()?;
                if !delivered.iter().any(|(n, _)| n == name) {
                    return Err(format!(
                        "--promise {spec}: no --delivered consumer is named '{name}'"
                    ));
                }
                named.push((name.to_string(), promise));
            }
            None => {
                let promise: Promise = spec.parse()?;
                for (name, _) in delivered {
                    out.insert(name.clone(), promise.as_str().into());
                }
            }
        }
    }
    for (name, promise) in named {
        out.insert(name, promise.as_str().into());
    }
    Ok(out)
}

/// The faults still to inject, and what was injected.
struct Nemesis<'a, F: FnMut(&[Restart])> {
    faults: &'a [Fault],
    server: &'a mut dyn Server,
    delivered: &'a [(String, PathBuf)],
    done: Vec<Restart>,
    /// Puts the faults injected so far into the run's config.
    record: F,
}

impl<F: FnMut(&[Restart])> Nemesis<'_, F> {
    /// The next fault, if any.
    fn next(&self) -> Option<Fault> {
        self.faults.get(self.done.len()).copied()
    }

    /// Notes the fault injected at `at_ms`, with the lines each delivered
    /// file holds now (the command is dead, or the server was down: what
    /// they wrote before is on disk).
    fn injected(&mut self, fault: Fault, at_ms: i64) {
        let lines = self
            .delivered
            .iter()
            .map(|(name, path)| (name.clone(), count_lines(path)))
            .collect();
        self.done.push(Restart {
            at_ms,
            offset_ms: fault.at_ms as i64,
            action: fault.action.as_str().into(),
            lines,
        });
        (self.record)(&self.done);
    }
}

/// The complete lines of a file (0 for one not there yet).
fn count_lines(path: &std::path::Path) -> i64 {
    std::fs::read(path).map_or(0, |b| b.iter().filter(|&&c| c == b'\n').count() as i64)
}

/// A delivered file read by its own thread while the run goes on.
struct TailThread {
    /// Tells the thread to make its last read and end.
    stop: Sender<()>,
    thread: std::thread::JoinHandle<Result<i64, String>>,
}

impl TailThread {
    /// Makes the file's last read and waits for it; `Err` is the thread's
    /// failure (a thread that panicked reports none).
    fn last_read(self) -> Result<(), String> {
        let _ = self.stop.send(());
        match self.thread.join() {
            Ok(Err(m)) => Err(m),
            _ => Ok(()),
        }
    }
}

/// Starts reading each delivered file into `log_deliveries` (keyed by
/// `key`); a failure is reported on `events` at once.
fn spawn_tails(
    delivered: &[(String, PathBuf)],
    key: &str,
    sender: &RecordSender,
    events: &Sender<Event>,
) -> Vec<TailThread> {
    delivered
        .iter()
        .map(|(name, path)| {
            let (stop, stopped) = mpsc::channel::<()>();
            let tail = Tail::new(name, path.clone(), key);
            let (sender, events) = (sender.clone(), events.clone());
            let thread = std::thread::spawn(move || tail_file(tail, sender, stopped, events));
            TailThread { stop, thread }
        })
        .collect()
}

/// A signal (Ctrl-C, SIGTERM) reaches the judge as an event, as a failure
/// does: whatever it is waiting for, it stops the run.
fn forward_signal(runtime: &tokio::runtime::Runtime, shutdown: &Shutdown, events: &Sender<Event>) {
    let mut requested = shutdown.requested.clone();
    let events = events.clone();
    runtime.spawn(async move {
        if requested.changed().await.is_ok() {
            let _ = events.send(Event::Signal);
        }
    });
}

/// `--drain`: waits `drain_ms` for the consumers to catch up. Returns the
/// event that cut it short (a failure or a signal), if one did.
fn catch_up(received: &Receiver<Event>, drain_ms: u64) -> Option<Event> {
    let deadline = Instant::now() + Duration::from_millis(drain_ms);
    loop {
        match received.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(Event::Exited(_)) => {}
            Ok(event) => return Some(event),
            Err(_) => return None,
        }
    }
}

impl End {
    /// `runs.end_reason`: how the run ended.
    fn reason(self) -> &'static str {
        match self {
            End::Exited => "command-exited",
            End::Duration => "duration",
            End::Interrupted => "interrupted",
            End::Failed => "failed",
        }
    }
}

/// Starts the command and waits for it to exit, for `--duration`, a
/// signal or a failure; stops it if it still runs. On the way, the
/// nemesis's faults: the command killed and started again, the server
/// restarted. Returns how it ended, its exit status (`Err`: it could not
/// run), and a failure if one came.
fn run_command<F: FnMut(&[Restart])>(
    args: &LogArgs,
    env: &[(&'static str, OsString)],
    events: &Sender<Event>,
    received: &Receiver<Event>,
    nemesis: &mut Nemesis<F>,
) -> (End, Result<ExitStatus, String>, Option<String>) {
    let program = &args.command[0];
    let started = Instant::now();
    let mut starts = 0u32;
    let spawn = |start: u32| {
        // Its own process group: a kill reaches whatever it started.
        let child = Command::new(program)
            .args(&args.command[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("SNOWLEAK_START", start.to_string())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run '{program}': {e}"))?;
        let pid = child.id() as libc::pid_t;
        let events = events.clone();
        let mut child = child;
        std::thread::spawn(move || {
            let _ = events.send(Event::Exited(child.wait()));
        });
        Ok::<_, String>(pid)
    };
    let mut pid = match spawn(starts) {
        Ok(pid) => pid,
        Err(m) => return (End::Failed, Err(m), None),
    };
    let deadline = args
        .duration_ms
        .map(|ms| started + Duration::from_millis(ms));
    // The first of: the command's exit, a failure, a signal, the deadline;
    // a fault's time comes between.
    let (end, failure) = loop {
        let fault = nemesis.next();
        let wake = fault
            .map(|f| started + Duration::from_millis(f.at_ms))
            .into_iter()
            .chain(deadline)
            .min();
        let event = match wake {
            Some(at) => received.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => received.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match event {
            Ok(Event::Exited(status)) => {
                let status = status.map_err(|e| format!("cannot wait for the command: {e}"));
                return (End::Exited, status, None);
            }
            Ok(Event::Failed(m)) => break (End::Failed, Some(m)),
            Ok(Event::Signal) => break (End::Interrupted, None),
            Err(RecvTimeoutError::Disconnected) => break (End::Failed, None),
            Err(RecvTimeoutError::Timeout) => {}
        }
        let Some(fault) =
            fault.filter(|f| started + Duration::from_millis(f.at_ms) <= Instant::now())
        else {
            break (End::Duration, None);
        };
        let at_ms = now_ms();
        match fault.action {
            Action::Kill => {
                // SAFETY: kill(2) on our own child's process group; the child
                // is not yet reaped (its waiting thread has not reported).
                unsafe {
                    libc::kill(-pid, libc::SIGKILL);
                }
                match wait_exit(received, args.grace) {
                    Ok(false) => {}
                    // Ctrl-C while it died: the run ends, with no new start.
                    Ok(true) => return (End::Interrupted, Ok(ExitStatus::default()), None),
                    Err(m) => break (End::Failed, Some(m)),
                }
                nemesis.injected(fault, at_ms);
                starts += 1;
                pid = match spawn(starts) {
                    Ok(pid) => pid,
                    Err(m) => {
                        return (
                            End::Failed,
                            Err(format!("{m} (start {starts}, after a kill)")),
                            None,
                        );
                    }
                };
            }
            Action::RestartServer => {
                if let Err(m) = nemesis.server.restart() {
                    break (End::Failed, Some(format!("restarting the server: {m}")));
                }
                nemesis.injected(fault, at_ms);
            }
        }
    };
    stop(pid, received, args.grace, end, failure)
}

/// Stops the command's process group: SIGINT, then SIGTERM, then SIGKILL,
/// each after a grace period; returns how the run ended (`end`), the
/// command's exit status, and the first failure reported.
fn stop(
    pid: libc::pid_t,
    received: &Receiver<Event>,
    grace: Duration,
    end: End,
    mut failure: Option<String>,
) -> (End, Result<ExitStatus, String>, Option<String>) {
    // SIGINT, then SIGTERM, then SIGKILL, each after a grace period.
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGKILL] {
        // SAFETY: kill(2) on our own child's process group, not yet reaped:
        // the waiting thread has not reported its exit.
        unsafe {
            libc::kill(-pid, signal);
        }
        let until = Instant::now() + grace;
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

/// After a kill: waits for the command's exit to be reported; `true` if a
/// signal (Ctrl-C) came meanwhile. A failure reported meanwhile ends the run.
fn wait_exit(received: &Receiver<Event>, grace: Duration) -> Result<bool, String> {
    let until = Instant::now() + grace;
    let mut signalled = false;
    loop {
        match received.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Event::Exited(_)) => return Ok(signalled),
            Ok(Event::Failed(m)) => return Err(m),
            Ok(Event::Signal) => signalled = true,
            Err(_) => return Err("the command did not end after SIGKILL".into()),
        }
    }
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
                sender.side(rows);
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
    table: &str,
    delivered: &[(String, PathBuf)],
    counts: &Counts,
    status: ExitStatus,
) -> Result<super::verdict::Judgement, String> {
    let exited = match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => "was stopped by a signal".into(),
    };
    if counts.inserts == 0 {
        return Err(format!(
            "the command ({exited}) committed no row to {table} (the log holds {} \
             transactions): nothing to judge; check --table",
            counts.transactions
        ));
    }
    let judged = crate::logtruth::verdict::read(&args.db, run_id, delivered)?;
    let mut lines = vec![format!(
        "judged run {run_id} of {} (the command {exited}): {} rows of {table} committed \
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
    lines.extend(judged.lines);
    Ok(super::verdict::Judgement {
        any_invalid: judged.any_invalid,
        lines,
    })
}
