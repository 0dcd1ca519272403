//! `experiment watch --target postgres:URL|mariadb:URL --table T [--key COL]
//! [--delivered NAME=FILE]... [--expect-all] [--duration D] [--db FILE]
//! [--metrics ADDR] [--max-slot-lag SIZE] [--settle-after D]`:
//! records the truth of the user's own database while their own system
//! runs (docs/log-truth.md, "Your own database"). One skeleton, two log
//! sources:
//!
//! - `postgres`: a logical slot of `test_decoding`, the user's
//!   (`--slot NAME`) or one made here and dropped (`--create-slot`);
//! - `mariadb`: the binary log, read as a replica reads it
//!   (`--server-id N`) from where it ends as watch starts.
//!
//! The skeleton, the same for both: nothing of the user's is written (every
//! session is read-only). Each delivered file is read from its end as watch
//! starts, then the source is opened: a row committed after the source's
//! start is delivered after the files' start. Every [`PERIOD`] the files
//! are read, then the log up to where it ends at that moment (the binlog is
//! also read between, as its events come), and both fed to the incremental
//! checker (`analysis::settle`: the log first, so that a delivered key's
//! commit is known): a row every consumer delivered folds into counts once
//! it is older than `--settle-after`, so memory and run.db stay flat however
//! long watch runs. Every [`CHECKPOINT`] and at the end, run.db gets the
//! checker's state (`watch_state`) and its open rows (`log_truth`, the
//! table and `runs.target` of `experiment judge --log postgres|mariadb`,
//! so `analyze` reads a watch run as a judge run, judged by the stored
//! checker). At `--duration` or Ctrl-C the files are read to their end,
//! the log a last time, the source released, and each consumer judged.
//! Meanwhile every few seconds the checker's verdicts so far feed the live
//! line on stderr and `/metrics` ([`super::metrics`]), and a slot's
//! retained WAL is held under `--max-slot-lag`.
//!
//! Each state written holds where the log rows the checker took end
//! ([`WatchSource::position`]); once the recorder says it is committed, the
//! source is told ([`WatchSource::confirm`]: a slot is confirmed up to
//! there, never further), so the log still holds whatever the last
//! committed state lacks, however watch ends. Started again with the same
//! `--db`, `--target`, `--table`, `--key`, `--delivered` and `--slot` or
//! `--server-id` (not `--create-slot`: that slot is dropped at the end),
//! watch resumes the last such run ([`resumable`]): its checker, each file
//! from where it had read, the log from where the state ends (what the
//! state holds is not read again), into a new run that names the one it
//! continues (`resumed_from`).

use crate::clock::now_ms;
use crate::logtruth::source::{Killed, Resumed, WatchArgs, WatchOpened, WatchOpening, WatchSource};
use crate::logtruth::tail::{Tail, parse_delivered};
use crate::record::{RecordSender, Recorder, RunRow};
use crate::session::Shutdown;
use analysis::settle::Checker;
use rundb::{LogTruthRow, WatchStateRow};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// How often the files are read and the log drained (a slot every
/// `targets::postgres::slot::DRAIN_EVERY`, see there why): a delivery's time is
/// known to within this.
pub const PERIOD: Duration = Duration::from_millis(200);

/// How often the checker's state and open rows are written to run.db: a
/// watch killed without its last write resumes from the one before, and
/// its log (a slot) is confirmed this often, so the slot keeps about this
/// much log more than a consumed one, and a peek (a slot watch could not
/// copy) reads again at most about this much.
pub const CHECKPOINT: Duration = Duration::from_secs(10);

/// What watch found: one line a consumer, and whether any lost a row.
pub struct Watched {
    pub lines: Vec<String>,
    pub any_invalid: bool,
}

/// The last run of `--db` this watch continues, if any: a watch run with
/// the same target, table, key, consumers and slot that stored its state.
/// A run killed before it stored one holds nothing more than the run it
/// resumed (its log was confirmed only past a stored state): that run's
/// state is taken, and so on back.
pub fn resumable(args: &WatchArgs) -> Result<Option<Resumed>, String> {
    if args.create_slot || !args.db.exists() {
        return Ok(None);
    }
    let conn = rundb::read::open(&args.db)?;
    let Some(&last) = rundb::read::run_ids(&conn)?.last() else {
        return Ok(None);
    };
    let mut id = last;
    loop {
        let Some((run, config)) = same_watch(&conn, args, id)? else {
            return Ok(None);
        };
        if let Some(row) = rundb::read::side_rows::<WatchStateRow>(&conn, run.id)?
            .into_iter()
            .next()
        {
            let state = serde_json::from_str(&row.state).map_err(|e| {
                format!(
                    "{}: run {}: unreadable watch_state: {e}",
                    args.db.display(),
                    run.id
                )
            })?;
            return Ok(Some(Resumed {
                run_id: run.id,
                state,
            }));
        }
        match config["resumed_from"].as_i64() {
            Some(earlier) if earlier < id => id = earlier,
            _ => return Ok(None),
        }
    }
}

/// The last run of `--db`, when it is a watch with these flags that never
/// recorded its end (killed: SIGKILL, a crash): `--create-slot`'s slot it
/// made may still be there ([`Killed`]).
pub fn killed(args: &WatchArgs) -> Result<Option<Killed>, String> {
    if !args.create_slot || !args.db.exists() {
        return Ok(None);
    }
    let conn = rundb::read::open(&args.db)?;
    let Some(&last) = rundb::read::run_ids(&conn)?.last() else {
        return Ok(None);
    };
    Ok(same_watch(&conn, args, last)?
        .filter(|(run, _)| run.ended_at_ms.is_none())
        .map(|(run, config)| Killed {
            run_id: run.id,
            config,
        }))
}

/// Run `id` of `conn` and its `runs.config`, when it is a watch with the
/// flags of `args` ([`identity`]).
fn same_watch(
    conn: &rusqlite::Connection,
    args: &WatchArgs,
    id: i64,
) -> Result<Option<(RunRow, serde_json::Value)>, String> {
    let Some(run) = rundb::read::run(conn, id)? else {
        return Ok(None);
    };
    let config: serde_json::Value = serde_json::from_str(&run.config).unwrap_or_default();
    if identity(args) != config["identity"] {
        return Ok(None);
    }
    Ok(Some((run, config)))
}

/// What makes two watch runs one watch resumed: the flags that say what is
/// watched and who is judged.
fn identity(args: &WatchArgs) -> serde_json::Value {
    serde_json::json!({
        "target": args.target,
        "table": args.table,
        "key": args.key,
        "slot": args.slot,
        "server_id": args.server_id,
        "delivered": args.delivered,
        "expect_all": args.expect_all,
    })
}

/// Watches the table until `--duration` or a signal and judges its
/// consumers; `Err` is bad input or a failure (exit 2), with a slot watch
/// made dropped.
pub fn watch(args: WatchArgs, target: WatchOpening) -> Result<Watched, String> {
    let delivered = parse_delivered(&args.delivered)?;
    if args.key.is_empty() {
        return Err("--key names the key column: it cannot be empty".into());
    }
    let runtime = crate::session::runtime()?;
    // Bound before the source opens: an address taken is refused before
    // a slot is made.
    let live = super::metrics::Live::default();
    if let Some(addr) = &args.metrics {
        super::metrics::serve(&runtime, addr, live.body.clone())?;
    }
    let shutdown = {
        let _inside = runtime.enter();
        Shutdown::install("the last read of the files and the log")
    };
    let names: Vec<String> = delivered.iter().map(|(n, _)| n.clone()).collect();
    let (checker, tails) = start(&args, &delivered, &names)?;
    let opened = runtime.block_on(target)?;
    let WatchOpened {
        mut source,
        table,
        from,
        target,
        config,
        batch,
    } = opened;
    let run = run_row(&args, &delivered, &table, target, config, batch);
    let recorder = match Recorder::create(&args.db, &run, &[]) {
        Ok(r) => r,
        Err(e) => {
            let _ = runtime.block_on(source.release());
            return Err(e);
        }
    };
    let run_id = recorder.run_id;
    let sender = recorder.sender();
    // The tables exist even when nothing arrives: the run was read.
    sender.side(Vec::<LogTruthRow>::new());
    sender.side(Vec::<rundb::DeliveryRow>::new());
    eprintln!(
        "watching {table} (key {}) {from}, recording run {run_id} to {}{}; Ctrl-C ends it",
        args.key,
        args.db.display(),
        match &args.resume {
            Some(r) => format!(" (resuming run {})", r.run_id),
            None => String::new(),
        }
    );
    let mut w = Watching {
        checker,
        tails,
        sender: &sender,
        live,
        saved: None,
        pending: Vec::new(),
        confirming: None,
    };
    let (ended, outcome) = runtime.block_on(follow(
        source.as_mut(),
        &mut w,
        args.duration.map(Duration::from_millis),
        shutdown.requested.clone(),
    ));
    // The last state, and the log confirmed up to it once it is committed.
    w.checkpoint(&*source);
    let confirmed = match w.confirming.take() {
        Some((position, committed)) if committed.recv().is_ok() => {
            runtime.block_on(source.confirm(&position))
        }
        _ => Ok(()),
    };
    let counts = source.counts().clone();
    let released = runtime.block_on(source.release());
    drop(sender);
    let failure = outcome.err().or(confirmed.err()).or(released.err());
    let finished = recorder.finish(now_ms(), failure.is_none(), ended);
    drop(shutdown);
    if let Some(m) = failure {
        return Err(m);
    }
    finished?;
    verdicts(&args, run_id, &table, &delivered, &counts, ended)
}

/// The checker and the files' tails: the resumed run's, each file from
/// where it had read; else new, each file from its end.
fn start(
    args: &WatchArgs,
    delivered: &[(String, PathBuf)],
    names: &[String],
) -> Result<(Checker, Vec<Tail>), String> {
    let mut tails = Vec::new();
    for (name, path) in delivered {
        tails.push(Tail::new(name, path.clone(), &args.key));
    }
    let Some(resumed) = &args.resume else {
        // The files first, then the log: a row committed after the log's
        // start is delivered after the files' start.
        for tail in &mut tails {
            tail.skip_existing()?;
        }
        let checker = Checker::new(
            names,
            args.expect_all,
            &HashMap::new(),
            args.settle_after as i64,
        );
        return Ok((checker, tails));
    };
    let state = &resumed.state;
    let checker = Checker::from_value(state["checker"].clone())?;
    for tail in &mut tails {
        let file = state["files"]
            .as_array()
            .and_then(|f| f.iter().find(|f| f["name"] == tail.name.as_str()))
            .ok_or_else(|| {
                format!(
                    "run {}: no position of --delivered {}",
                    resumed.run_id, tail.name
                )
            })?;
        let (offset, lines) = (file["offset"].as_u64(), file["lines"].as_i64());
        tail.resume_at(offset.unwrap_or(0), lines.unwrap_or(0));
    }
    Ok((checker, tails))
}

/// The run's row: `runs.config` with the flags, the source's own and what
/// makes a later watch resume it.
fn run_row(
    args: &WatchArgs,
    delivered: &[(String, PathBuf)],
    table: &str,
    target: &str,
    config: Vec<(&'static str, serde_json::Value)>,
    batch: i64,
) -> RunRow {
    let mut stored = serde_json::json!({
        "watch": true,
        "table": table,
        "key": args.key,
        "delivered": delivered.iter().map(|(n, f)| serde_json::json!({"name": n, "file": f})).collect::<Vec<_>>(),
        "expect_all": args.expect_all,
        "duration_ms": args.duration,
        "period_ms": PERIOD.as_millis() as i64,
        "settle_after_ms": args.settle_after,
        "identity": identity(args),
        "resumed_from": args.resume.as_ref().map(|r| r.run_id),
    });
    for (name, value) in config {
        stored[name] = value;
    }
    RunRow {
        started_at_ms: now_ms(),
        target: target.into(),
        clock: "real".into(),
        layout: "key".into(),
        interval_ms: PERIOD.as_millis() as i64,
        page_limit: batch,
        config: stored.to_string(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    }
}

/// `watch_state`'s JSON (docs/rundb.md).
#[derive(serde::Serialize)]
struct Saved<'a> {
    checker: &'a Checker,
    files: Vec<serde_json::Value>,
    /// Where the log rows the checker took end ([`WatchSource::position`]).
    log: serde_json::Value,
}

/// What a running watch holds: the checker, the files, where run.db is
/// written, the live view, and when the state was last written.
struct Watching<'a> {
    checker: Checker,
    tails: Vec<Tail>,
    sender: &'a RecordSender,
    live: super::metrics::Live,
    saved: Option<Instant>,
    /// Lines read since the log was last read to its end: the checker
    /// takes them after the log rows committed before them.
    pending: Vec<rundb::DeliveryRow>,
    /// The log's position the last state written holds, and the
    /// recorder's word that it is committed: then the log is confirmed up
    /// to there, never before (a watch killed meanwhile resumes from the
    /// state before, and its log still holds what came after that).
    confirming: Option<(serde_json::Value, Receiver<()>)>,
}

impl Watching<'_> {
    /// Writes the checker's state, the files' positions, the log's position
    /// and the open rows to run.db (when no line read waits for the log:
    /// the positions are then those of the lines and log rows the checker
    /// took), and asks the recorder to say when they are committed.
    fn checkpoint(&mut self, source: &dyn WatchSource) {
        if !self.pending.is_empty() {
            return;
        }
        self.saved = Some(Instant::now());
        let files: Vec<serde_json::Value> = self
            .tails
            .iter()
            .map(|t| {
                let (offset, lines) = t.position();
                serde_json::json!({"name": t.name, "offset": offset, "lines": lines})
            })
            .collect();
        // Written straight to text: a JSON tree of the checker first would
        // take several times its size for a moment every checkpoint.
        let log = source.position();
        let state = serde_json::to_string(&Saved {
            checker: &self.checker,
            files,
            log: log.clone(),
        })
        .expect("the state serializes");
        self.sender.replace_side(self.checker.open_truth());
        self.sender.replace_side(vec![WatchStateRow {
            at_ms: now_ms(),
            state,
        }]);
        // A state not yet committed is overtaken: the recorder commits in
        // order, so this one's word comes after it.
        self.confirming = Some((log, self.sender.committed()));
    }

    /// The live view when due, the state when [`CHECKPOINT`] has passed.
    fn tick(&mut self, source: &dyn WatchSource) {
        let checker = &self.checker;
        self.live.tick(|| checker.judged(), source.slot_status());
        if self.saved.is_none_or(|at| at.elapsed() >= CHECKPOINT) {
            self.checkpoint(source);
        }
    }

    /// The log's position of the last state written, once the recorder
    /// says it is committed (once). A recorder that failed never says so:
    /// the run then ends with its error, the log unconfirmed.
    fn committed(&mut self) -> Option<serde_json::Value> {
        let (_, committed) = self.confirming.as_ref()?;
        match committed.try_recv() {
            Ok(()) => self.confirming.take().map(|(position, _)| position),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.confirming = None;
                None
            }
        }
    }
}

/// Reads the files and drains the log every [`PERIOD`] until `limit` or
/// a signal, then the files to their end and the log a last time, each
/// read fed to the checker.
/// Returns the run's end reason and whether every read succeeded.
async fn follow(
    source: &mut dyn WatchSource,
    w: &mut Watching<'_>,
    limit: Option<Duration>,
    mut signal: tokio::sync::watch::Receiver<bool>,
) -> (&'static str, Result<(), String>) {
    let deadline = limit.map(|d| tokio::time::Instant::now() + d);
    loop {
        let until_deadline = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let ended = tokio::select! {
            waited = source.wait(PERIOD) => match waited {
                Ok(()) => None,
                Err(m) => return ("failed", Err(m)),
            },
            _ = until_deadline => Some("duration"),
            _ = signal.changed() => Some("interrupted"),
        };
        // The files before the log: a key delivered was committed, so its
        // row is in the log when the log is read to its end after the
        // file; the checker takes the log first, and the lines once the
        // log was read to its end after them (a slot is drained every
        // second, the files read every period).
        let mut truth = Vec::new();
        let read = match read_files(&mut w.tails, ended.is_some()) {
            Ok(lines) => {
                w.pending.extend(lines);
                source.drain(&mut truth, ended.is_some()).await
            }
            Err(m) => Err(m),
        };
        // The rows a failed drain read are the checker's all the same: the
        // source's position already counts them.
        w.checker.log(&truth);
        match read {
            Ok(true) => w.checker.deliver(&std::mem::take(&mut w.pending)),
            Ok(false) => {}
            Err(m) => return ("failed", Err(m)),
        }
        if let Some(reason) = ended {
            return (reason, Ok(()));
        }
        w.tick(source);
        if let Some(position) = w.committed()
            && let Err(m) = source.confirm(&position).await
        {
            return ("failed", Err(m));
        }
    }
}

/// Every file's new complete lines (with `last`, to its end).
fn read_files(tails: &mut [Tail], last: bool) -> Result<Vec<rundb::DeliveryRow>, String> {
    let mut out = Vec::new();
    for tail in tails {
        loop {
            let (rows, more) = tail.read(now_ms(), last)?;
            out.extend(rows);
            if !more {
                break;
            }
        }
    }
    Ok(out)
}

/// Each consumer's verdict, from what the run recorded.
fn verdicts(
    args: &WatchArgs,
    run_id: i64,
    table: &str,
    delivered: &[(String, PathBuf)],
    counts: &crate::logtruth::Counts,
    ended: &str,
) -> Result<Watched, String> {
    let judged = crate::logtruth::verdict::read(&args.db, run_id, delivered)?;
    let mut lines = vec![format!(
        "watched run {run_id} of {} (ended: {ended}): {} rows of {table} committed \
         in {} transactions while it watched ({} deleted)",
        args.db.display(),
        judged.committed,
        counts.transactions,
        counts.deletes,
    )];
    lines.extend(judged.lines);
    Ok(Watched {
        any_invalid: judged.any_invalid,
        lines,
    })
}
