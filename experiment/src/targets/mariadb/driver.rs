//! `--target mariadb`: a throwaway server, the schema and its retention job,
//! the writers loading it, the pollers reading it over SQL, the truth pumped
//! into run.db. Wiring only.

use super::MariaOpts;
use super::id_pollers::{DropLog, IdTarget};
use super::roster::Roster;
use super::schema::{MariaSql, Partition, Partitions, Schema};
use super::source::MariaTarget;
use super::writers::{self, Output, Workload, Written};
use crate::record::{RecordSender, Recorder, TruthRow};
use crate::servers::mariadb::{self as server, Server};
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use mysql_async::prelude::Queryable;
use since_id::id::{Id, Layout};
use since_id::partitions::Counter;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The database the run makes on its server.
pub const DB: &str = "snowleak";

/// Runs the experiment against a throwaway MariaDB server.
pub fn run(common: Common, opts: MariaOpts) -> Result<RunSummary, String> {
    let server = Server::start(opts.lock_mode)?;
    let runtime = session::runtime()?;
    let result = runtime.block_on(drive(&common, &opts, &server));
    drop(runtime);
    drop(server);
    result
}

/// Everything stored about the run, as JSON in `runs.config`.
#[derive(serde::Serialize)]
struct MariaConfig<'a> {
    #[serde(flatten)]
    common: StoredConfig<'a>,
    table: &'static str,
    workload: &'a Workload,
    /// As the server reports them (`VERSION()`, `@@innodb_autoinc_lock_mode`).
    server_version: &'a str,
    autoinc_lock_mode: u8,
    partition_every_ms: u64,
    retain: u32,
    /// Said aloud: skewed writer clocks are our assumption, not MariaDB's behaviour.
    #[serde(skip_serializing_if = "Option::is_none")]
    assumption: Option<String>,
}

/// Creates the run's database and schema; returns the server's version and lock mode.
pub async fn prepare(
    server: &Server,
    schema: Schema,
    partitions: &Partitions,
) -> Result<(String, u8), String> {
    let e = |what: &str, e: mysql_async::Error| format!("{what}: {}", super::db_error(&e));
    let mut conn = mysql_async::Conn::new(server.opts(None))
        .await
        .map_err(|err| e("cannot connect to MariaDB", err))?;
    let settings = server::settings(&mut conn).await?;
    conn.query_drop(format!("CREATE DATABASE {DB}"))
        .await
        .map_err(|err| e("cannot create the database", err))?;
    conn.query_drop(format!("USE {DB}"))
        .await
        .map_err(|err| e("cannot use the database", err))?;
    for sql in schema.ddl(partitions) {
        conn.query_drop(sql)
            .await
            .map_err(|err| e(&format!("cannot create the {schema} schema"), err))?;
    }
    let _ = conn.disconnect().await;
    Ok(settings)
}

/// What the retention job keeps between rounds: its plan and, for
/// AUTO_INCREMENT, where the writers were (`since_id::partitions::Counter`).
pub struct Job {
    pub plan: Partitions,
    /// `--partition-every`: a round's period.
    every_ms: u64,
    counter: Option<Counter>,
}

impl Job {
    /// The first two partitions: each holds one `--partition-every` of events
    /// (by ID time for Snowflake IDs, by the rate asked for AUTO_INCREMENT:
    /// from the first round on, by the rate reached).
    pub fn new(opts: &MariaOpts, start_ms: i64) -> Job {
        let every = opts.partition_every_ms as i64;
        match opts.schema {
            Schema::Snowflake => {
                let at = |ms: i64| Layout::twitter().min_id_at(ms).0 as i64;
                Job {
                    plan: Partitions::new(
                        at(start_ms + every),
                        at(start_ms + 2 * every),
                        opts.retain,
                    ),
                    every_ms: opts.partition_every_ms,
                    counter: None,
                }
            }
            Schema::Autoinc => Job {
                plan: Counter::first_plan(opts.write_rate, opts.partition_every_ms, opts.retain),
                every_ms: opts.partition_every_ms,
                counter: Some(Counter::new(opts.retain)),
            },
        }
    }

    /// The bound of the partition to add at a round where the writers' highest
    /// ID is `max_id`, if one is needed: a Snowflake one ends two periods
    /// ahead by ID time; an AUTO_INCREMENT one as `Counter::round` says.
    fn next_bound(&mut self, now_ms: i64, max_id: i64) -> Option<i64> {
        match &mut self.counter {
            None => Some(
                Layout::twitter()
                    .min_id_at(now_ms + 2 * self.every_ms as i64)
                    .0 as i64,
            ),
            Some(counter) => counter.round(&self.plan, max_id),
        }
    }

    /// Below it, a partition beyond `--retain` is old enough to drop: a
    /// Snowflake partition's bound is a time, so the count alone ages it.
    fn aged_below(&self) -> i64 {
        self.counter.as_ref().map_or(i64::MAX, Counter::aged_below)
    }
}

/// One partition the job dropped.
#[derive(Clone, Debug)]
pub struct Dropped {
    pub partition: Partition,
    pub sent_at_ms: i64,
    pub returned_at_ms: i64,
    pub rows: i64,
}

/// What the retention job did and what went wrong.
#[derive(Default)]
pub struct Retention {
    pub dropped: Vec<Dropped>,
    pub added: u64,
    pub failed: u64,
    pub last_error: Option<String>,
}

/// One round of the retention job: add the next partition if one is needed,
/// drop the oldest beyond `retain` once aged, each drop recorded in `out`,
/// and in `log` as it is sent.
pub async fn retention_round(
    conn: &mut mysql_async::Conn,
    job: &mut Job,
    out: &Arc<Mutex<Retention>>,
    log: &Arc<Mutex<DropLog>>,
) -> Result<(), String> {
    let e = |e: mysql_async::Error| super::db_error(&e);
    let max_id: Option<i64> = conn
        .query_first("SELECT COALESCE(MAX(id), 0) FROM events")
        .await
        .map_err(e)?;
    if let Some(bound) = job.next_bound(crate::clock::now_ms(), max_id.unwrap_or(0)) {
        let (part, sql) = job.plan.add_sql(bound);
        conn.query_drop(sql).await.map_err(e)?;
        job.plan.added(part);
        out.lock().unwrap_or_else(|e| e.into_inner()).added += 1;
    }
    while let Some((part, sql)) = job.plan.next_drop(job.aged_below()) {
        let rows: Option<i64> = conn
            .query_first(format!(
                "SELECT COUNT(*) FROM events PARTITION ({})",
                part.name
            ))
            .await
            .map_err(e)?;
        // The clock is read under the log's lock, and the drop logged before
        // it is sent: a poller that settles a request sent in a later ms
        // finds it there (id_pollers::DropLog).
        let sent_at_ms = {
            let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
            let at = crate::clock::now_ms();
            log.dropping(part.hi, at);
            at
        };
        if let Err(err) = conn.query_drop(sql).await {
            log.lock()
                .unwrap_or_else(|e| e.into_inner())
                .failed(part.hi, sent_at_ms);
            return Err(e(err));
        }
        let returned_at_ms = crate::clock::now_ms();
        job.plan.dropped();
        tracing::info!(partition = %part.name, lo = part.lo, hi = part.hi, "partition dropped");
        out.lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped
            .push(Dropped {
                partition: part,
                sent_at_ms,
                returned_at_ms,
                rows: rows.unwrap_or(0),
            });
    }
    Ok(())
}

/// The retention job: a round every `--partition-every` from the start
/// until `stop` turns true.
async fn retention_job(
    server_opts: mysql_async::Opts,
    mut job: Job,
    start_ms: i64,
    out: Arc<Mutex<Retention>>,
    log: Arc<Mutex<DropLog>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut conn = match mysql_async::Conn::new(server_opts).await {
        Ok(conn) => conn,
        Err(e) => {
            let mut r = out.lock().unwrap_or_else(|e| e.into_inner());
            r.failed += 1;
            r.last_error = Some(super::db_error(&e));
            return;
        }
    };
    let mut round = 1i64;
    loop {
        let due = start_ms + round * job.every_ms as i64;
        let wait = Duration::from_millis((due - crate::clock::now_ms()).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        round += 1;
        let result = retention_round(&mut conn, &mut job, &out, &log).await;
        if let Err(e) = result {
            tracing::warn!("retention job: {e}");
            let mut r = out.lock().unwrap_or_else(|e| e.into_inner());
            r.failed += 1;
            r.last_error = Some(e);
        }
    }
    let _ = conn.disconnect().await;
}

async fn drive(args: &Common, opts: &MariaOpts, server: &Server) -> Result<RunSummary, String> {
    let schema = opts.schema;
    let layout = schema.layout();
    let start_ms = crate::clock::now_ms();
    let job = Job::new(opts, start_ms);
    let (version, lock_mode) = prepare(server, schema, &job.plan).await?;
    let db_opts = server.opts(Some(DB));
    let workload = Workload {
        schema,
        writer_lock: opts.writer_lock,
        writers: opts.writers,
        rate_per_s: opts.write_rate,
        clock_offsets_ms: writers::clock_offsets(opts.writers, opts.clock_skew_ms, args.seed),
        seed: args.seed,
    };
    let limit = args.limit as usize;
    let mut roster = Roster::new(args, &opts.id_pollers, &layout);
    let stored = MariaConfig {
        common: StoredConfig::common(args, limit, roster.all_names.clone(), &layout),
        table: super::schema::TABLE,
        workload: &workload,
        server_version: &version,
        autoinc_lock_mode: lock_mode,
        partition_every_ms: opts.partition_every_ms,
        retain: opts.retain,
        assumption: (opts.clock_skew_ms > 0).then(|| {
            format!(
                "writer clocks skewed: offsets {:?} ms (--clock-skew {} ms)",
                workload.clock_offsets_ms, opts.clock_skew_ms
            )
        }),
    };
    let run_info = session::run_row(
        args,
        RunRowParts {
            started_at_ms: start_ms,
            layout: &layout,
            page_limit: limit,
            profile: Some(schema.to_string()),
            seed: Some(args.seed),
            config: &stored,
        },
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &roster.infos)?;
    let run_id = recorder.run_id;
    let pool = mysql_async::Pool::new(db_opts.clone());
    let target = MariaTarget::new(pool.clone(), layout.clone());
    let drop_log = Arc::new(Mutex::new(DropLog::default()));
    let flags: Arc<Mutex<Vec<rundb::CursorFlagRow>>> = Arc::default();
    // AUTO_INCREMENT starts at 1, and the table is empty at the start: a row
    // missing below the first one read is a gap too.
    let id_plan = roster.id_plan(args, start_ms, Some(0), &drop_log, &flags);

    let shutdown = Shutdown::install("the writers stop, the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    tracing::info!(run = run_id, db = %args.db.display(), version = %version, lock_mode, "run started");
    let end_ms = start_ms + args.duration_ms as i64;
    // The writers and the retention job stop at the end of the duration or at a signal.
    let (writers_stop_tx, writers_stop) = watch::channel(false);
    {
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let until_end = Duration::from_millis((end_ms - crate::clock::now_ms()).max(0) as u64);
            tokio::select! {
                _ = tokio::time::sleep(until_end) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            let _ = writers_stop_tx.send(true);
        });
    }
    let output = Arc::new(Mutex::new(Output::default()));
    let writers_task = {
        let (db_opts, workload, output) = (db_opts.clone(), workload.clone(), output.clone());
        let stop = writers_stop.clone();
        tokio::spawn(async move { writers::run_writers(db_opts, workload, output, stop).await })
    };
    let retention = Arc::new(Mutex::new(Retention::default()));
    let retention_task = tokio::spawn(retention_job(
        db_opts.clone(),
        job,
        start_ms,
        retention.clone(),
        drop_log.clone(),
        writers_stop.clone(),
    ));
    let mut pollers_task = Box::pin(roster.poll(
        args,
        target,
        id_plan,
        IdTarget::new(pool.clone()),
        recorder.sender(),
        stop_rx.clone(),
    ));
    let sender = recorder.sender();
    let take = || std::mem::take(&mut output.lock().unwrap_or_else(|e| e.into_inner()).written);
    let mut brackets: Vec<Written> = Vec::new();
    let reason = loop {
        tokio::select! {
            reason = &mut pollers_task => break reason,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                brackets.extend(pump_truth(schema, take(), &sender));
            }
        }
    };
    let writers_result = writers_task.await.map_err(|e| e.to_string())?;
    // How long the writers wrote: the duration, or less after Ctrl-C.
    let writing_ms = (crate::clock::now_ms() - start_ms).clamp(1, args.duration_ms.max(1) as i64);
    let _ = retention_task.await;
    brackets.extend(pump_truth(schema, take(), &sender));
    pool.disconnect().await.ok();
    let reason = shutdown.end(reason);
    let progress = roster
        .progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .progress
        .clone();
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    let retention = std::mem::take(&mut *retention.lock().unwrap_or_else(|e| e.into_inner()));
    let flags = std::mem::take(&mut *flags.lock().unwrap_or_else(|e| e.into_inner()));
    write_after(&args.db, run_id, &brackets, &retention.dropped, &flags)?;
    writers_result?;
    let out = std::mem::take(&mut *output.lock().unwrap_or_else(|e| e.into_inner()));
    let mut notes = format!(
        "MariaDB {version}, innodb_autoinc_lock_mode {lock_mode}, schema {schema}\n\
         writers (lock: {}): {} commits ({:.0}/s), {} failed transactions{}\n\
         retention: {} partitions added, {} dropped ({} rows){}\n",
        opts.writer_lock,
        out.commits,
        out.commits as f64 * 1000.0 / writing_ms.max(1) as f64,
        out.failed,
        out.last_error
            .as_ref()
            .map(|e| format!(" (last: {e})"))
            .unwrap_or_default(),
        retention.added,
        retention.dropped.len(),
        retention.dropped.iter().map(|d| d.rows).sum::<i64>(),
        retention
            .last_error
            .as_ref()
            .map(|e| format!(", {} failed (last: {e})", retention.failed))
            .unwrap_or_default(),
    );
    notes.push_str(&roster.id_notes());
    if let Some(ms) = opts.bare_inserts_ms {
        let writers_rate = out.commits as f64 * 1000.0 / writing_ms as f64;
        let inserts = writers::bare_inserts(db_opts.clone(), opts.writers, ms).await?;
        let bare_rate = inserts as f64 * 1000.0 / ms.max(1) as f64;
        notes.push_str(&format!(
            "bare single-row autocommit inserts, {} connections, {} ms: {inserts} ({bare_rate:.0}/s); \
             the writers' events reached {:.3} of that\n",
            opts.writers,
            ms,
            writers_rate / bare_rate.max(f64::MIN_POSITIVE)
        ));
    }
    if opts.clock_skew_ms > 0 {
        notes.push_str(&format!(
            "assumption: writer clocks skewed by {:?} ms\n",
            workload.clock_offsets_ms
        ));
    }
    tracing::info!(run = run_id, reason, "run finished");
    Ok(RunSummary {
        run_id,
        db: args.db.clone(),
        complete: true,
        progress,
        notes,
    })
}

/// The ID pollers' names: their policies, numbered when one repeats or
/// clashes with a since_id poller's name.
pub fn id_poller_names(specs: &[super::id_pollers::IdPollerSpec], taken: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for policy in specs {
        let base = policy.to_string();
        let mut name = base.clone();
        let mut n = 2;
        while taken.contains(&name) || names.contains(&name) {
            name = format!("{base}#{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// Turns what the writers committed into truth rows (sent to the recorder);
/// returns them for `pg_truth`.
fn pump_truth(schema: Schema, pending: Vec<Written>, sender: &RecordSender) -> Vec<Written> {
    if pending.is_empty() {
        return pending;
    }
    let truth = pending
        .iter()
        .map(|w| TruthRow {
            id: w.id.to_string(),
            id_key: Id(w.id as u128).sort_key(),
            id_time_ms: writers::id_time_ms(schema, w),
            posted_at_ms: w.xact_start_ms,
            // The conservative end of the bracket: owed only to requests sent
            // after COMMIT returned; the clocks read whole ms, so the next ms
            // (as targets/postgres/driver.rs does, for the same reason).
            visible_at_ms: w.commit_returned_ms + 1,
            deleted_at_ms: None,
            origin: "local".into(),
        })
        .collect();
    sender.truth(truth);
    pending
}

/// After the recorder finished: each event's bracket in `pg_truth`, the
/// dropped partitions in `partition_drops` (their truth rows marked deleted),
/// and the requests whose cursor lay below the oldest ID kept in `cursor_flags`.
fn write_after(
    db: &std::path::Path,
    run_id: i64,
    brackets: &[Written],
    dropped: &[Dropped],
    flags: &[rundb::CursorFlagRow],
) -> Result<(), String> {
    let e = |e: rusqlite::Error| format!("cannot write {}: {e}", db.display());
    let r = |err: rundb::Error| format!("cannot write {}: {err}", db.display());
    let mut conn = rusqlite::Connection::open(db).map_err(e)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(e)?;
    let rows: Vec<rundb::PgTruthRow> = brackets
        .iter()
        .map(|w| rundb::PgTruthRow {
            id: w.id.to_string(),
            xid: format!("writer {}", w.writer),
            xact_start_ms: w.xact_start_ms,
            commit_ts_ms: None,
            commit_returned_ms: w.commit_returned_ms,
            injected_sleep_ms: 0,
        })
        .collect();
    let drops: Vec<rundb::PartitionDropRow> = dropped
        .iter()
        .map(|d| rundb::PartitionDropRow {
            partition: d.partition.name.clone(),
            lo_id: d.partition.lo,
            hi_id: d.partition.hi,
            sent_at_ms: d.sent_at_ms,
            returned_at_ms: d.returned_at_ms,
            rows: d.rows,
        })
        .collect();
    let tx = conn.transaction().map_err(e)?;
    rundb::write::insert_pg_truth(&tx, run_id, &rows).map_err(r)?;
    // Both tables always, empty or not: a run without them was not checked.
    rundb::write::insert_partition_drops(&tx, run_id, &drops, |id| {
        Id(id.max(0) as u128).sort_key()
    })
    .map_err(r)?;
    rundb::write::insert_cursor_flags(&tx, run_id, flags).map_err(r)?;
    tx.commit().map_err(e)
}

#[cfg(test)]
mod database_tests {
    use super::*;
    use crate::servers::mariadb::LockMode;
    use crate::targets::mariadb::writers::{Event, WriterLock, write_event};

    fn r_sent(out: &Arc<Mutex<Retention>>) -> i64 {
        out.lock().unwrap().dropped[0].sent_at_ms
    }

    /// The job of `opts` and its table on `server`, and a connection to it.
    async fn prepared(server: &Server, opts: &MariaOpts) -> (super::Job, mysql_async::Conn) {
        let job = super::Job::new(opts, 0);
        super::prepare(server, opts.schema, &job.plan)
            .await
            .unwrap();
        let conn = mysql_async::Conn::new(server.opts(Some(super::DB)))
            .await
            .unwrap();
        (job, conn)
    }

    /// Writes `n` events as a writer does; returns their IDs.
    async fn write_events(conn: &mut mysql_async::Conn, n: usize) -> Vec<i64> {
        let mut ids = since_id::snowflake::Generator::new(0);
        let mut out = Vec::new();
        for k in 0..n {
            let event = Event {
                stream: 1,
                subscriber: 2,
                payload: format!("{k}"),
            };
            let w = write_event(
                conn,
                Schema::Autoinc,
                WriterLock::None,
                &mut ids,
                0,
                0,
                event,
            )
            .await
            .unwrap();
            out.push(w.id);
        }
        out
    }

    fn autoinc_opts(write_rate: f64, retain: u32) -> MariaOpts {
        MariaOpts {
            schema: Schema::Autoinc,
            lock_mode: LockMode::DEFAULT,
            writers: 1,
            write_rate,
            clock_skew_ms: 0,
            partition_every_ms: 1000,
            retain,
            id_pollers: Vec::new(),
            bare_inserts_ms: None,
            writer_lock: WriterLock::None,
        }
    }

    /// The retention job on a real server: a round adds the next partition and
    /// drops exactly the oldest beyond --retain, with the rows it says.
    #[test]
    fn the_retention_job_drops_exactly_the_partitions_it_says() {
        let server = Server::start(LockMode::DEFAULT)
            .expect("MariaDB must start for this test (Debian: mariadb-server)");
        let rt = session::runtime().unwrap();
        // Ten rows a partition, two kept.
        let opts = autoinc_opts(10.0, 2);
        rt.block_on(async {
            let (mut job, mut conn) = prepared(&server, &opts).await;
            let ids = write_events(&mut conn, 25).await;
            assert_eq!(ids, (1..=25).collect::<Vec<i64>>(), "AUTO_INCREMENT counts from 1");
            let out = Arc::new(Mutex::new(Retention::default()));
            let log = Arc::new(Mutex::new(DropLog::default()));
            super::retention_round(&mut conn, &mut job, &out, &log)
                .await
                .unwrap();
            let sent = r_sent(&out);
            assert_eq!(
                log.lock().unwrap().oldest_kept_before(sent + 1),
                Some(11),
                "the drop is in the pollers' log as sent"
            );
            let r = std::mem::take(&mut *out.lock().unwrap());
            assert_eq!(r.added, 1);
            assert_eq!(r.dropped.len(), 1, "three partitions, two kept");
            let d = &r.dropped[0];
            assert_eq!((d.partition.name.as_str(), d.partition.lo, d.partition.hi), ("p0", 0, 11));
            assert_eq!(d.rows, 10);
            let left: Vec<i64> = conn.query("SELECT id FROM events ORDER BY id").await.unwrap();
            assert_eq!(left, (11..=25).collect::<Vec<i64>>(), "exactly the dropped range is gone");
            let parts: Vec<(String, Option<String>)> = conn
                .query(
                    "SELECT PARTITION_NAME, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS \
                     WHERE TABLE_SCHEMA = 'snowleak' AND TABLE_NAME = 'events' ORDER BY PARTITION_ORDINAL_POSITION",
                )
                .await
                .unwrap();
            let plan = &job.plan;
            let plan_says: Vec<(String, Option<String>)> = plan
                .bounded()
                .map(|p| (p.name.clone(), Some(p.hi.to_string())))
                .chain([("pmax".to_string(), Some("MAXVALUE".to_string()))])
                .collect();
            assert_eq!(parts, plan_says, "the server has the partitions the plan says");
            assert_eq!(plan.oldest_lo(), 11);
            // The new partition ends a period and a half of the IDs written
            // (25) past the highest: 25 + 1 + 25 + 13.
            assert_eq!(plan.last_hi(), 64);
        });
    }

    /// Writers slower than the rate asked: the job sizes partitions by the
    /// IDs they took, and drops a row only a round (`--retain 3` - 2) after
    /// it was written, on a real server. (The rule it replaces dropped the
    /// partition being written once the writers lagged the rate asked.)
    #[test]
    fn writers_slower_than_asked_keep_their_rows_as_long_as_retain_promises() {
        let server = Server::start(LockMode::DEFAULT)
            .expect("MariaDB must start for this test (Debian: mariadb-server)");
        let rt = session::runtime().unwrap();
        // Partitions made for 10 rows a round; the writers write 4.
        let opts = autoinc_opts(10.0, 3);
        rt.block_on(async {
            let (mut job, mut conn) = prepared(&server, &opts).await;
            let out = Arc::new(Mutex::new(Retention::default()));
            let log = Arc::new(Mutex::new(DropLog::default()));
            // The round each ID was written in.
            let mut written_in: Vec<usize> = vec![0];
            let mut dropped_rows = 0;
            for round in 1..=20 {
                for id in write_events(&mut conn, 4).await {
                    assert_eq!(id as usize, written_in.len());
                    written_in.push(round);
                }
                super::retention_round(&mut conn, &mut job, &out, &log)
                    .await
                    .unwrap();
                for d in std::mem::take(&mut out.lock().unwrap().dropped) {
                    let newest = (d.partition.hi - 1).min(written_in.len() as i64 - 1);
                    assert!(
                        written_in[newest as usize] < round,
                        "round {round} dropped {:?}, written in round {}",
                        d.partition,
                        written_in[newest as usize]
                    );
                    dropped_rows += d.rows;
                }
                let kept: i64 = conn
                    .query_first("SELECT COUNT(*) FROM events")
                    .await
                    .unwrap()
                    .unwrap();
                assert_eq!(kept + dropped_rows, 4 * round as i64, "round {round}");
                assert!(job.plan.len() <= 5, "round {round}: {:?}", job.plan);
            }
            assert!(dropped_rows >= 40, "{dropped_rows} of 80 rows dropped");
            let oldest: i64 = conn
                .query_first("SELECT MIN(id) FROM events")
                .await
                .unwrap()
                .unwrap();
            assert!(
                oldest >= job.plan.oldest_lo(),
                "nothing kept below the plan"
            );
        });
    }
}
