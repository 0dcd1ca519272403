//! `experiment watch --target postgres:URL --table T [--key COL] --slot NAME
//! [--create-slot] [--delivered NAME=FILE]... [--duration D] [--db FILE]`:
//! records the truth of the user's own PostgreSQL while their own system
//! runs (docs/log-truth.md, "Your own database").
//!
//! The session is read-only (`SET SESSION CHARACTERISTICS AS TRANSACTION
//! READ ONLY`): nothing of the user's is written. The truth comes from a
//! logical slot of `test_decoding`: one the user made (`--slot NAME`,
//! checked: it exists, is of that plugin on this database and no other
//! consumer holds it; what it held from before is skipped), or, with
//! `--create-slot`, one made here and dropped at the end; a slot watch did
//! not make is never dropped. Each delivered file is read from its end as
//! watch starts. Every [`PERIOD`] the files are read and the slot drained
//! into run.db's `log_truth` and `log_deliveries` (the tables and
//! `runs.target` of `experiment judge --backend postgres`, so `analyze`
//! reads a watch run as a judge run); at `--duration` or Ctrl-C the files
//! are read to their end, the slot drained a last time, and each consumer
//! judged (`analysis::consumers`).

use crate::clock::now_ms;
use crate::logtruth::decode::{Counts, Decoder, parse_table};
use crate::logtruth::slot::{self, Slot, check_name};
use crate::logtruth::tail::{Tail, parse_delivered};
use crate::record::{RecordSender, Recorder, RunRow};
use crate::servers::postgres::{connect, db_error};
use crate::session::Shutdown;
use crate::targets::postgres::own;
use std::path::PathBuf;
use std::time::Duration;

/// How often the files are read and the slot drained: a delivery's time is
/// known to within this.
pub const PERIOD: Duration = Duration::from_millis(200);

/// How long connecting may take before the URL counts as not connecting.
const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Record the truth of your own PostgreSQL table from a logical slot while
/// your system runs, and judge its consumers.
#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    /// `postgres:URL` (postgresql://USER@HOST:PORT/DB, or ?host=/socket/dir):
    /// your database. The password comes from PGPASSWORD or --token-file,
    /// never the URL.
    #[arg(long, value_name = "postgres:URL")]
    pub target: String,
    /// The password's file (else PGPASSWORD).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The watched table (`T` is `public.T`; `SCHEMA.T` names the schema).
    #[arg(long, value_name = "T")]
    pub table: String,
    /// Its key column: the value every consumer names.
    #[arg(long, value_name = "COLUMN", default_value = "id")]
    pub key: String,
    /// The logical replication slot (of `test_decoding`) the truth is read
    /// from: yours, or with --create-slot one watch makes and drops.
    #[arg(long, value_name = "NAME")]
    pub slot: String,
    /// Make the slot (needs the REPLICATION attribute or superuser) and drop
    /// it at the end.
    #[arg(long)]
    pub create_slot: bool,
    /// A consumer's delivered keys, one a line (CSV's first field, or JSON
    /// lines with "key" or "id"), read from the file's end as it grows. Repeatable.
    #[arg(long = "delivered", value_name = "NAME=FILE")]
    pub delivered: Vec<String>,
    /// Every committed row is owed to every consumer, not only those below
    /// the highest key it delivered.
    #[arg(long)]
    pub expect_all: bool,
    /// Stop after this long (else at Ctrl-C).
    #[arg(long, value_parser = since_id::time::parse_duration_ms)]
    pub duration: Option<u64>,
    /// The run database (a run is added to it).
    #[arg(long, default_value = "data/watch.db")]
    pub db: PathBuf,
}

/// What watch found: one line a consumer, and whether any lost a row.
pub struct Watched {
    pub lines: Vec<String>,
    pub any_invalid: bool,
}

/// The slot read, and whether watch made it (then it drops it).
struct Source {
    slot: Slot,
    made: bool,
}

/// Watches the table until `--duration` or a signal and judges its
/// consumers; `Err` is bad input or a failure (exit 2), with a slot watch
/// made dropped.
pub fn watch_command(args: WatchArgs) -> Result<Watched, String> {
    let url = args.target.strip_prefix("postgres:").ok_or_else(|| {
        format!(
            "bad --target '{}': watch reads PostgreSQL: postgres:postgresql://USER@HOST/DB",
            args.target
        )
    })?;
    let (schema, table) = parse_table(&args.table)?;
    let delivered = parse_delivered(&args.delivered)?;
    check_name(&args.slot)?;
    if args.key.is_empty() {
        return Err("--key names the key column: it cannot be empty".into());
    }
    let config = own::config(url, args.token_file.as_deref(), CONNECT_TIMEOUT_MS)?;
    let runtime = crate::session::runtime()?;
    let shutdown = {
        let _inside = runtime.enter();
        Shutdown::install("the last read of the files and the log")
    };
    let quoted = format!(
        "{}.{}",
        crate::targets::postgres::quote_ident(&schema),
        crate::targets::postgres::quote_ident(&table)
    );
    // The files first, then the slot: a row committed after the slot's
    // start is delivered after the files' start.
    let mut tails = Vec::new();
    for (name, path) in &delivered {
        let mut tail = Tail::new(name, path.clone(), &args.key);
        tail.skip_existing()?;
        tails.push(tail);
    }
    let source = runtime.block_on(async {
        let client = connect(&config)
            .await
            .map_err(|e| format!("--target {url}: {e}"))?;
        // Nothing of the user's is written; commit times in UTC, as the
        // decoder reads them.
        client
            .batch_execute(
                "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET TimeZone = 'UTC'",
            )
            .await
            .map_err(|e| db_error(&e))?;
        let probe = format!(
            "SELECT {} FROM {quoted} LIMIT 0",
            crate::targets::postgres::quote_ident(&args.key)
        );
        client.query(&probe, &[]).await.map_err(|e| {
            format!(
                "table {schema}.{table}, key column {}: {}",
                args.key,
                db_error(&e)
            )
        })?;
        if args.create_slot {
            if slot::exists(&client, &args.slot).await? {
                return Err(format!(
                    "replication slot '{}' exists already: watch drops only a slot it made; \
                     to read that one, leave out --create-slot",
                    args.slot
                ));
            }
            Ok(Source {
                slot: Slot::create(client, &args.slot).await?,
                made: true,
            })
        } else {
            Ok(Source {
                slot: Slot::open(client, &args.slot).await?,
                made: false,
            })
        }
    })?;
    let stored = serde_json::json!({
        "watch": true,
        "url": url,
        "table": format!("{schema}.{table}"),
        "key": args.key,
        "delivered": delivered.iter().map(|(n, f)| serde_json::json!({"name": n, "file": f})).collect::<Vec<_>>(),
        "expect_all": args.expect_all,
        "slot": args.slot,
        "slot_made": source.made,
        "duration_ms": args.duration,
        "period_ms": PERIOD.as_millis() as i64,
    });
    let run = RunRow {
        started_at_ms: now_ms(),
        target: analysis::consumers::TARGET.into(),
        clock: "real".into(),
        layout: "key".into(),
        interval_ms: PERIOD.as_millis() as i64,
        page_limit: slot::BATCH as i64,
        config: stored.to_string(),
        version: rundb::VERSION.into(),
        ..RunRow::default()
    };
    let recorder = match Recorder::create(&args.db, &run, &[]) {
        Ok(r) => r,
        Err(e) => {
            let _ = runtime.block_on(release(source));
            return Err(e);
        }
    };
    let run_id = recorder.run_id;
    let sender = recorder.sender();
    // The tables exist even when nothing arrives: the run was read.
    sender.log_truth(Vec::new());
    sender.deliveries(Vec::new());
    eprintln!(
        "watching {schema}.{table} (key {}) through slot '{}'{}, recording run {run_id} to {}; \
         Ctrl-C ends it",
        args.key,
        args.slot,
        if source.made { " (made by watch)" } else { "" },
        args.db.display()
    );
    let mut decoder = Decoder::new(&schema, &table, &args.key);
    let (ended, outcome) = runtime.block_on(follow(
        &source.slot,
        &mut decoder,
        &mut tails,
        &sender,
        args.duration.map(Duration::from_millis),
        shutdown.requested.clone(),
    ));
    let released = runtime.block_on(release(source));
    drop(sender);
    let failure = outcome.err().or(released.err());
    let finished = recorder.finish(now_ms(), failure.is_none(), ended);
    drop(shutdown);
    if let Some(m) = failure {
        return Err(m);
    }
    finished?;
    verdicts(
        &args,
        run_id,
        &schema,
        &table,
        &delivered,
        &decoder.counts,
        ended,
    )
}

/// Drops the slot if watch made it; leaves the user's.
async fn release(source: Source) -> Result<(), String> {
    if source.made {
        source.slot.drop_slot().await
    } else {
        Ok(())
    }
}

/// Reads the files and drains the slot every [`PERIOD`] until `limit` or
/// a signal, then the files to their end and the slot a last time.
/// Returns the run's end reason and whether every read succeeded.
async fn follow(
    slot: &Slot,
    decoder: &mut Decoder,
    tails: &mut [Tail],
    sender: &RecordSender,
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
            _ = tokio::time::sleep(PERIOD) => None,
            _ = until_deadline => Some("duration"),
            _ = signal.changed() => Some("interrupted"),
        };
        // The files before the slot: a key delivered was committed, so its
        // row is in the slot when the slot is read after the file.
        let read = read_files(tails, sender, ended.is_some());
        let read = match read {
            Ok(()) => drain(slot, decoder, sender).await,
            Err(m) => Err(m),
        };
        match (ended, read) {
            (_, Err(m)) => return ("failed", Err(m)),
            (Some(reason), Ok(())) => return (reason, Ok(())),
            (None, Ok(())) => {}
        }
    }
}

/// Every file's new complete lines (with `last`, to its end).
fn read_files(tails: &mut [Tail], sender: &RecordSender, last: bool) -> Result<(), String> {
    for tail in tails {
        loop {
            let (rows, more) = tail.read(now_ms(), last)?;
            if !rows.is_empty() {
                sender.deliveries(rows);
            }
            if !more {
                break;
            }
        }
    }
    Ok(())
}

/// Takes batches from the slot until one is not full, recording each.
async fn drain(slot: &Slot, decoder: &mut Decoder, sender: &RecordSender) -> Result<(), String> {
    loop {
        let (rows, full) = slot.drain_batch(decoder).await?;
        if !rows.is_empty() {
            // The recorder's queue is bounded: a full queue waits here.
            sender.log_truth(rows);
        }
        if !full {
            return Ok(());
        }
    }
}

/// Each consumer's verdict, from what the run recorded.
fn verdicts(
    args: &WatchArgs,
    run_id: i64,
    schema: &str,
    table: &str,
    delivered: &[(String, PathBuf)],
    counts: &Counts,
    ended: &str,
) -> Result<Watched, String> {
    let conn = rundb::read::open(&args.db)?;
    let truth = rundb::read::log_truth(&conn, run_id)?;
    let lines = rundb::read::log_deliveries(&conn, run_id)?;
    drop(conn);
    let names: Vec<String> = delivered.iter().map(|(n, _)| n.clone()).collect();
    let judged = analysis::consumers::judge(&truth, &lines, &names, args.expect_all);
    let mut out = vec![format!(
        "watched run {run_id} of {} (ended: {ended}): {} rows of {schema}.{table} committed \
         in {} transactions while it watched ({} deleted)",
        args.db.display(),
        judged.committed,
        counts.transactions,
        counts.deletes,
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
    Ok(Watched {
        any_invalid: judged.any_invalid(),
        lines: out,
    })
}
