//! `--target mariadb`: a throwaway server, the schema and its retention job,
//! the writers loading it, the pollers reading it over SQL, the truth pumped
//! into run.db by the database targets' skeleton (`crate::workload`).
//! Wiring only.

use super::MariaOpts;
use super::id_pollers::{DropLog, IdTarget};
use super::retention::{Dropped, Job, MariaRounds, Retention};
use super::roster::Roster;
use super::schema::{Partitions, Schema};
use super::server::{self as server, Server};
use super::source::MariaTarget;
use super::writers::{self, Output, Workload};
use crate::record::{RecordSender, Recorder, TruthRow};
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use crate::sim::sync::lock;
use crate::workload::{self, Database, RetentionTask, take_written};
use mysql_async::prelude::Queryable;
use since_id::id::Id;
use std::sync::{Arc, Mutex};
use tokio::sync::watch;
use tokio::task::JoinHandle;

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

/// What the run assumes rather than measures, said aloud in its config:
/// skewed writer clocks, injected stalls and rollbacks.
fn assumptions(opts: &MariaOpts, workload: &Workload) -> Option<String> {
    let skew = (opts.clock_skew_ms > 0).then(|| {
        format!(
            "writer clocks skewed: offsets {:?} ms (--clock-skew {} ms)",
            workload.clock_offsets_ms, opts.clock_skew_ms
        )
    });
    let parts: Vec<String> = skew.into_iter().chain(opts.inject.assumption()).collect();
    (!parts.is_empty()).then(|| parts.join("; "))
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

async fn drive(args: &Common, opts: &MariaOpts, server: &Server) -> Result<RunSummary, String> {
    let schema = opts.schema;
    let layout = schema.layout();
    let start_ms = crate::clock::now_ms();
    let job = Job::new(opts, start_ms);
    let (version, lock_mode) = prepare(server, schema, &job.plan).await?;
    let workload = Workload {
        schema,
        writer_lock: opts.writer_lock,
        writers: opts.writers,
        rate_per_s: opts.write_rate,
        clock_offsets_ms: writers::clock_offsets(opts.writers, opts.clock_skew_ms, args.seed),
        arrivals: opts.arrivals,
        inject: opts.inject,
        seed: args.seed,
    };
    let limit = args.limit as usize;
    let mut roster = Roster::new(args, &opts.id_pollers, &layout);
    let mut stored_common = StoredConfig::common(args, limit, roster.all_names.clone(), &layout);
    stored_common.arrivals = Some(opts.arrivals);
    let stored = MariaConfig {
        common: stored_common,
        table: super::schema::TABLE,
        workload: &workload,
        server_version: &version,
        autoinc_lock_mode: lock_mode,
        partition_every_ms: opts.partition_every_ms,
        retain: opts.retain,
        assumption: assumptions(opts, &workload),
    };
    let run_info = session::run_row(
        args,
        RunRowParts {
            profile: Some(schema.to_string()),
            seed: Some(args.seed),
            ..RunRowParts::new(start_ms, &layout, limit, &stored)
        },
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &roster.infos)?;
    let run_id = recorder.run_id;
    let mut db = MariaDatabase::new(
        server.opts(Some(DB)),
        workload,
        job,
        (start_ms, args.duration_ms),
    );
    let pool = mysql_async::Pool::new(db.opts.clone());
    let target = MariaTarget::new(pool.clone(), layout.clone());
    // AUTO_INCREMENT starts at 1, and the table is empty at the start: a row
    // missing below the first one read is a gap too.
    let id_plan = roster.id_plan(args, start_ms, Some(0), &db.drop_log, &db.flags);

    let shutdown = Shutdown::install("the writers stop, the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    tracing::info!(run = run_id, db = %args.db.display(), version = %version, lock_mode, "run started");
    let sender = recorder.sender();
    let pollers = roster.poll(
        args,
        target,
        id_plan,
        IdTarget::new(pool.clone()),
        sender.clone(),
        stop_rx.clone(),
    );
    let end_ms = start_ms + args.duration_ms as i64;
    let sampler = crate::load::Sampler::start();
    let ended = workload::run(&mut db, pollers, end_ms, stop_rx, &sender).await?;
    pool.disconnect().await.ok();
    let reason = shutdown.end(ended.reason);
    let (progress, ticks) = {
        let tally = lock(&roster.progress);
        (tally.progress.clone(), tally.tick_lateness.clone())
    };
    sampler.finish(&ticks, ended.writers_load.clone(), &sender);
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    ended.writers?;
    let mut notes = format!(
        "MariaDB {version}, innodb_autoinc_lock_mode {lock_mode}, schema {schema}\n{}",
        db.notes(opts)
    );
    notes.push_str(&roster.id_notes());
    if let Some(ms) = opts.bare_inserts_ms {
        notes.push_str(&db.bare_inserts_line(ms).await?);
    }
    if opts.clock_skew_ms > 0 {
        notes.push_str(&format!(
            "assumption: writer clocks skewed by {:?} ms\n",
            db.workload.clock_offsets_ms
        ));
    }
    if let Some(injected) = opts.inject.assumption() {
        notes.push_str(&format!("assumption: {injected}\n"));
    }
    Ok(RunSummary::finished(args, run_id, reason, progress, notes))
}

/// The throwaway server as the skeleton drives it: the writers, the
/// retention job, the truth pump, and the side tables every MariaDB run has
/// (`writer_brackets`, `partition_drops`, `cursor_flags`), empty or not: a run
/// without them was not checked.
struct MariaDatabase {
    /// The run's database on the server.
    opts: mysql_async::Opts,
    workload: Workload,
    start_ms: i64,
    /// The run's duration, at least 1 ms.
    duration_ms: i64,
    /// How long the writers wrote: the duration, or less after Ctrl-C.
    writing_ms: i64,
    output: Arc<Mutex<Output>>,
    /// The brackets of what was pumped, for `writer_brackets` when the run ends.
    brackets: Vec<rundb::WriterBracketRow>,
    job: Option<Job>,
    retention: Option<RetentionTask<Dropped>>,
    /// The drops as they are sent, for the ID pollers.
    drop_log: Arc<Mutex<DropLog>>,
    /// The ID pollers' requests whose cursor lay below the oldest ID kept.
    flags: Arc<Mutex<Vec<rundb::CursorFlagRow>>>,
    writers: Option<JoinHandle<Result<(), String>>>,
}

impl MariaDatabase {
    /// The run started at `start_ms` for `duration_ms`.
    fn new(
        opts: mysql_async::Opts,
        workload: Workload,
        job: Job,
        run: (i64, u64),
    ) -> MariaDatabase {
        MariaDatabase {
            opts,
            workload,
            start_ms: run.0,
            duration_ms: run.1.max(1) as i64,
            writing_ms: 1,
            output: Arc::default(),
            brackets: Vec::new(),
            job: Some(job),
            retention: None,
            drop_log: Arc::default(),
            flags: Arc::default(),
            writers: None,
        }
    }

    /// The summary's lines: the writers and the retention job.
    fn notes(&self, opts: &MariaOpts) -> String {
        let out = lock(&self.output);
        let none = Retention::default();
        let report = self.retention.as_ref().map(RetentionTask::report);
        let r = report.as_deref().unwrap_or(&none);
        format!(
            "writers (lock: {}): {}\n\
             retention: {} partitions added, {} dropped ({} rows){}\n",
            opts.writer_lock,
            out.line(self.writing_ms),
            r.added,
            r.dropped.len(),
            r.dropped.iter().map(|d| d.rows).sum::<i64>(),
            r.failures(),
        )
    }

    /// `--bare-inserts`: the server's ceiling for the smallest durable
    /// write, and the share of it the writers reached.
    async fn bare_inserts_line(&self, ms: u64) -> Result<String, String> {
        let commits = lock(&self.output).commits;
        let writers_rate = commits as f64 * 1000.0 / self.writing_ms as f64;
        let writers = self.workload.writers;
        let inserts = writers::bare_inserts(self.opts.clone(), writers, ms).await?;
        let bare_rate = inserts as f64 * 1000.0 / ms.max(1) as f64;
        Ok(format!(
            "bare single-row autocommit inserts, {writers} connections, {ms} ms: {inserts} \
             ({bare_rate:.0}/s); the writers' events reached {:.3} of that\n",
            writers_rate / bare_rate.max(f64::MIN_POSITIVE)
        ))
    }
}

impl Database for MariaDatabase {
    fn writers_load(&self, writing_ms: u64) -> Option<analysis::machine::WritersLoad> {
        let out = lock(&self.output);
        Some(analysis::machine::WritersLoad::of(
            self.workload.rate_per_s,
            &out.latency,
            writing_ms,
        ))
    }

    async fn start(&mut self, stop: watch::Receiver<bool>) -> Result<(), String> {
        let (opts, workload, output) = (
            self.opts.clone(),
            self.workload.clone(),
            self.output.clone(),
        );
        let writers_stop = stop.clone();
        self.writers = Some(tokio::spawn(async move {
            writers::run_writers(opts, workload, output, writers_stop).await
        }));
        if let Some(job) = self.job.take() {
            let every_ms = job.every_ms;
            let rounds = MariaRounds::connect(self.opts.clone(), job, self.drop_log.clone());
            self.retention = Some(RetentionTask::spawn(rounds, every_ms, self.start_ms, stop));
        }
        Ok(())
    }

    /// The truth of what the writers committed; its brackets are kept for the end.
    async fn pump(&mut self, sender: &RecordSender) {
        let pending = take_written(&self.output);
        if pending.is_empty() {
            return;
        }
        let schema = self.workload.schema;
        let truth = pending
            .iter()
            .map(|w| TruthRow {
                id: w.id.to_string(),
                id_key: Id(w.id as u128).sort_key(),
                id_time_ms: writers::id_time_ms(schema, w),
                posted_at_ms: w.xact_start_ms,
                // The conservative end of the bracket: owed only to requests
                // sent after COMMIT returned; the clocks read whole ms, so the
                // next ms (as targets/postgres/writers.rs does, for the same reason).
                visible_at_ms: w.commit_returned_ms + 1,
                deleted_at_ms: None,
                origin: "local".into(),
            })
            .collect();
        sender.truth(truth);
        self.brackets
            .extend(pending.iter().map(|w| w.bracket(None)));
    }

    async fn join(&mut self) -> Result<(), String> {
        let writers = match self.writers.take() {
            Some(task) => task.await.map_err(|e| e.to_string()).and_then(|r| r),
            None => Ok(()),
        };
        self.writing_ms = (crate::clock::now_ms() - self.start_ms).clamp(1, self.duration_ms);
        if let Some(job) = &mut self.retention {
            job.join().await;
        }
        writers
    }

    async fn side_rows(&mut self, sender: &RecordSender) {
        sender.side(std::mem::take(&mut self.brackets));
        let dropped = match &self.retention {
            Some(job) => job.report().dropped.iter().map(Dropped::row).collect(),
            None => Vec::new(),
        };
        sender.side(dropped);
        let flags = std::mem::take(&mut *lock(&self.flags));
        sender.side(flags);
    }
}

// The tests below reach the job's round through this module.
#[cfg(test)]
use super::retention::retention_round;

#[cfg(test)]
mod database_tests {
    use super::server::LockMode;
    use super::*;
    use crate::targets::mariadb::writers::{Event, Fate, WriterLock, write_event};

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
                fate: Fate::Commit { stall_ms: 0 },
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
            .unwrap()
            .expect("committed");
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
            arrivals: crate::workload::Arrivals::Grid,
            inject: Default::default(),
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
