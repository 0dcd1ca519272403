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
//! `experiment judge --backend postgres|mariadb`, so `analyze` reads a watch
//! run as a judge run); at `--duration` or Ctrl-C the files are read to
//! their end, the log a last time, the source released, and each consumer
//! judged (`analysis::consumers`). Meanwhile every few seconds the run so
//! far is judged for the live line on stderr and `/metrics`
//! ([`metrics`]), and a slot's retained WAL is held under `--max-slot-lag`.

mod mariadb;
pub mod metrics;
mod postgres;

use crate::clock::now_ms;
use crate::logtruth::Counts;
use crate::logtruth::tail::{Tail, parse_delivered};
use crate::record::{RecordSender, Recorder, RunRow};
use crate::session::Shutdown;
use std::path::PathBuf;
use std::time::Duration;

/// How often the files are read and the log drained (a slot every
/// `targets::postgres::slot::DRAIN_EVERY`, see there why): a delivery's time is
/// known to within this.
pub const PERIOD: Duration = Duration::from_millis(200);

/// How long connecting may take before the URL counts as not connecting.
const CONNECT_TIMEOUT_MS: u64 = 10_000;

/// Record the truth of your own PostgreSQL or MariaDB table from its log
/// while your system runs, and judge its consumers.
#[derive(clap::Args, Debug, Clone)]
pub struct WatchArgs {
    /// `postgres:URL` (postgresql://USER@HOST:PORT/DB, or ?host=/socket/dir)
    /// or `mariadb:URL` (mysql://USER@HOST:PORT/DB, or ?socket=/path): your
    /// database. The password comes from PGPASSWORD or MYSQL_PWD, or
    /// --token-file, never the URL.
    #[arg(long, value_name = "postgres:URL|mariadb:URL")]
    pub target: String,
    /// The password's file (else PGPASSWORD, or MYSQL_PWD for mariadb).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The watched table (postgres: `T` is `public.T`, `SCHEMA.T` names the
    /// schema; mariadb: `T` is in the URL's database, `DB.T` names it).
    #[arg(long, value_name = "T")]
    pub table: String,
    /// Its key column: the value every consumer names.
    #[arg(long, value_name = "COLUMN", default_value = "id")]
    pub key: String,
    /// postgres: the logical replication slot (of `test_decoding`) the truth
    /// is read from: yours, or with --create-slot one watch makes and drops.
    #[arg(long, value_name = "NAME")]
    pub slot: Option<String>,
    /// postgres: make the slot (needs the REPLICATION attribute or
    /// superuser) and drop it at the end.
    #[arg(long)]
    pub create_slot: bool,
    /// mariadb: the server id watch's binlog reader registers with, unique
    /// among the server's replicas (default 1734921553).
    #[arg(long, value_name = "N")]
    pub server_id: Option<u32>,
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
    /// Serve GET /metrics (Prometheus text format 0.0.4) on this address
    /// while watch runs, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// postgres: warn when the slot keeps more than half of SIZE of WAL;
    /// beyond SIZE stop with exit 2 (dropping the slot if watch made it).
    /// E.g. 64MiB, 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub max_slot_lag: Option<String>,
    /// The run database (a run is added to it).
    #[arg(long, default_value = "data/watch.db")]
    pub db: PathBuf,
}

/// What watch found: one line a consumer, and whether any lost a row.
pub struct Watched {
    pub lines: Vec<String>,
    pub any_invalid: bool,
}

/// The database the URL names, its options checked.
enum Target {
    Postgres(Box<postgres::Checked>),
    MariaDb(mariadb::Checked),
}

/// A log opened and read: the slot, or the binlog's dump.
enum Source {
    Postgres(postgres::Source),
    MariaDb(mariadb::Source),
}

/// A source opened, with what the run records and says about it.
struct Opened {
    source: Source,
    /// The watched table as messages name it (`schema.table`).
    table: String,
    /// The banner's words for where the truth comes from.
    from: String,
    /// The run's `runs.target`.
    target: &'static str,
    /// What `runs.config` holds beyond the common flags.
    config: Vec<(&'static str, serde_json::Value)>,
    /// `runs.page_limit`: the most rows a read of the log takes at once.
    batch: i64,
}

impl Source {
    /// Reads the log up to where it ends now, recording each batch (a slot
    /// only when it is due, or `last`).
    async fn drain(&mut self, sender: &RecordSender, last: bool) -> Result<(), String> {
        match self {
            Source::Postgres(s) => s.drain(sender, last).await,
            Source::MariaDb(s) => s.drain(sender).await,
        }
    }

    /// Waits `period` before the next drain. The binlog's events come as
    /// the server writes them, so the MariaDB source reads them meanwhile
    /// (each commit's read time is then when it arrived, not when the drain
    /// came); the slot is only read when drained.
    async fn wait(&mut self, period: Duration) -> Result<(), String> {
        match self {
            Source::Postgres(_) => {
                tokio::time::sleep(period).await;
                Ok(())
            }
            Source::MariaDb(s) => s.read_for(period).await,
        }
    }

    /// Lets go of the log: a slot watch made is dropped, a dump closed.
    async fn release(self) -> Result<(), String> {
        match self {
            Source::Postgres(s) => s.release().await,
            Source::MariaDb(s) => {
                s.release().await;
                Ok(())
            }
        }
    }

    /// A slot's status at its last drain (none for the binlog).
    fn slot_status(&self) -> Option<metrics::SlotStatus> {
        match self {
            Source::Postgres(s) => s.status(),
            Source::MariaDb(_) => None,
        }
    }

    fn counts(&self) -> &Counts {
        match self {
            Source::Postgres(s) => s.counts(),
            Source::MariaDb(s) => s.counts(),
        }
    }
}

/// Which database `--target` names, with the flags only the other one has
/// refused; everything checked before anything connects.
fn check(args: &WatchArgs) -> Result<Target, String> {
    if let Some(url) = args.target.strip_prefix("postgres:") {
        if args.server_id.is_some() {
            return Err(
                "--server-id is MariaDB's (the binlog reader's id): postgres reads a \
                        slot (--slot NAME)"
                    .into(),
            );
        }
        return postgres::check(url, args).map(|c| Target::Postgres(Box::new(c)));
    }
    if let Some(url) = args.target.strip_prefix("mariadb:") {
        if args.slot.is_some() || args.create_slot {
            return Err(
                "--slot and --create-slot are PostgreSQL's: mariadb reads the binary log \
                 as a replica (--server-id N)"
                    .into(),
            );
        }
        if args.max_slot_lag.is_some() {
            return Err(
                "--max-slot-lag is PostgreSQL's (the WAL a slot keeps): mariadb reads the \
                 binary log as a replica and holds none of it back"
                    .into(),
            );
        }
        return mariadb::check(url, args).map(Target::MariaDb);
    }
    Err(format!(
        "bad --target '{}': watch reads PostgreSQL or MariaDB: \
         postgres:postgresql://USER@HOST/DB or mariadb:mysql://USER@HOST/DB",
        args.target
    ))
}

/// Watches the table until `--duration` or a signal and judges its
/// consumers; `Err` is bad input or a failure (exit 2), with a slot watch
/// made dropped.
pub fn watch_command(args: WatchArgs) -> Result<Watched, String> {
    let target = check(&args)?;
    let delivered = parse_delivered(&args.delivered)?;
    if args.key.is_empty() {
        return Err("--key names the key column: it cannot be empty".into());
    }
    let runtime = crate::session::runtime()?;
    // Bound before the source opens: an address taken is refused before
    // a slot is made.
    let mut live = metrics::Live::default();
    if let Some(addr) = &args.metrics {
        metrics::serve(&runtime, addr, live.body.clone())?;
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
    let opened = runtime.block_on(async {
        match target {
            Target::Postgres(t) => postgres::open(*t, &args.key).await,
            Target::MariaDb(t) => mariadb::open(t, &args.key).await,
        }
    })?;
    let Opened {
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
    sender.log_truth(Vec::new());
    sender.deliveries(Vec::new());
    eprintln!(
        "watching {table} (key {}) {from}, recording run {run_id} to {}; Ctrl-C ends it",
        args.key,
        args.db.display()
    );
    let names: Vec<String> = delivered.iter().map(|(n, _)| n.clone()).collect();
    let mut tick = |source: &Source| live.tick(&args.db, run_id, &names, source.slot_status());
    let (ended, outcome) = runtime.block_on(follow(
        &mut source,
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
    source: &mut Source,
    tails: &mut [Tail],
    sender: &RecordSender,
    limit: Option<Duration>,
    mut signal: tokio::sync::watch::Receiver<bool>,
    tick: &mut impl FnMut(&Source),
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
                sender.deliveries(rows);
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
