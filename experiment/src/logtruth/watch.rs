//! `experiment watch --target postgres:URL|mariadb:URL --table T [--key COL]
//! [--delivered NAME=FILE]... [--expect-all] [--duration D] [--db FILE]
//! [--metrics ADDR] [--max-slot-lag SIZE]`:
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
//! also read between, as its events come), into run.db's
//! `log_truth` and `log_deliveries` (the tables and `runs.target` of
//! `experiment judge --log postgres|mariadb`, so `analyze` reads a watch
//! run as a judge run); at `--duration` or Ctrl-C the files are read to
//! their end, the log a last time, the source released, and each consumer
//! judged (`analysis::consumers`). Meanwhile every few seconds the run so
//! far is judged for the live line on stderr and `/metrics`
//! ([`super::metrics`]), and a slot's retained WAL is held under `--max-slot-lag`.

use crate::clock::now_ms;
use crate::logtruth::Counts;
use crate::logtruth::source::{WatchArgs, WatchOpened, WatchOpening, WatchSource};
use crate::logtruth::tail::{Tail, parse_delivered};
use crate::record::{RecordSender, Recorder, RunRow};
use crate::session::Shutdown;
use std::path::PathBuf;
use std::time::Duration;

/// How often the files are read and the log drained (a slot every
/// `targets::postgres::slot::DRAIN_EVERY`, see there why): a delivery's time is
/// known to within this.
pub const PERIOD: Duration = Duration::from_millis(200);

/// What watch found: one line a consumer, and whether any lost a row.
pub struct Watched {
    pub lines: Vec<String>,
    pub any_invalid: bool,
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
    let mut live = super::metrics::Live::default();
    if let Some(addr) = &args.metrics {
        super::metrics::serve(&runtime, addr, live.body.clone())?;
    }
    let shutdown = {
        let _inside = runtime.enter();
        Shutdown::install("the last read of the files and the log")
    };
    // The files first, then the log: a row committed after the log's
    // start is delivered after the files' start.
    let mut tails = Vec::new();
    for (name, path) in &delivered {
        let mut tail = Tail::new(name, path.clone(), &args.key);
        tail.skip_existing()?;
        tails.push(tail);
    }
    let opened = runtime.block_on(target)?;
    let WatchOpened {
        mut source,
        table,
        from,
        target,
        config,
        batch,
    } = opened;
    let mut stored = serde_json::json!({
        "watch": true,
        "table": table,
        "key": args.key,
        "delivered": delivered.iter().map(|(n, f)| serde_json::json!({"name": n, "file": f})).collect::<Vec<_>>(),
        "expect_all": args.expect_all,
        "duration_ms": args.duration,
        "period_ms": PERIOD.as_millis() as i64,
    });
    for (name, value) in config {
        stored[name] = value;
    }
    let run = RunRow {
        started_at_ms: now_ms(),
        target: target.into(),
        clock: "real".into(),
        layout: "key".into(),
        interval_ms: PERIOD.as_millis() as i64,
        page_limit: batch,
        config: stored.to_string(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
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
    sender.side(Vec::<rundb::LogTruthRow>::new());
    sender.side(Vec::<rundb::DeliveryRow>::new());
    eprintln!(
        "watching {table} (key {}) {from}, recording run {run_id} to {}; Ctrl-C ends it",
        args.key,
        args.db.display()
    );
    let names: Vec<String> = delivered.iter().map(|(n, _)| n.clone()).collect();
    let mut tick =
        |source: &dyn WatchSource| live.tick(&args.db, run_id, &names, source.slot_status());
    let (ended, outcome) = runtime.block_on(follow(
        source.as_mut(),
        &mut tails,
        &sender,
        args.duration.map(Duration::from_millis),
        shutdown.requested.clone(),
        &mut tick,
    ));
    let counts = source.counts().clone();
    let released = runtime.block_on(source.release());
    drop(sender);
    let failure = outcome.err().or(released.err());
    let finished = recorder.finish(now_ms(), failure.is_none(), ended);
    drop(shutdown);
    if let Some(m) = failure {
        return Err(m);
    }
    finished?;
    verdicts(&args, run_id, &table, &delivered, &counts, ended)
}

/// Reads the files and drains the log every [`PERIOD`] until `limit` or
/// a signal, then the files to their end and the log a last time.
/// Returns the run's end reason and whether every read succeeded.
async fn follow(
    source: &mut dyn WatchSource,
    tails: &mut [Tail],
    sender: &RecordSender,
    limit: Option<Duration>,
    mut signal: tokio::sync::watch::Receiver<bool>,
    tick: &mut impl FnMut(&dyn WatchSource),
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
        // row is in the log when the log is read after the file.
        let read = read_files(tails, sender, ended.is_some());
        let read = match read {
            Ok(()) => source.drain(sender, ended.is_some()).await,
            Err(m) => Err(m),
        };
        match (ended, read) {
            (_, Err(m)) => return ("failed", Err(m)),
            (Some(reason), Ok(())) => return (reason, Ok(())),
            (None, Ok(())) => tick(source),
        }
    }
}

/// Every file's new complete lines (with `last`, to its end).
fn read_files(tails: &mut [Tail], sender: &RecordSender, last: bool) -> Result<(), String> {
    for tail in tails {
        loop {
            let (rows, more) = tail.read(now_ms(), last)?;
            if !rows.is_empty() {
                sender.side(rows);
            }
            if !more {
                break;
            }
        }
    }
    Ok(())
}

/// Each consumer's verdict, from what the run recorded.
fn verdicts(
    args: &WatchArgs,
    run_id: i64,
    table: &str,
    delivered: &[(String, PathBuf)],
    counts: &Counts,
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
