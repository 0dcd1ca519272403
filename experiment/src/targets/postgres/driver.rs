//! `--target postgres` (and `postgres:URL`, through `own.rs`): a throwaway
//! cluster, the writers loading it, the pollers reading it over SQL or the
//! Mastodon API, the truth pumped into run.db by the database targets'
//! skeleton (`crate::workload`). Wiring only.

use super::retention::RetentionJob;
use super::schema::partition_sql;
use super::source::SqlTarget;
use super::writers::{self, Workload};
use super::{PgOpts, Via};
use crate::api::{Dialect, HttpTarget};
use crate::drive::{self, Plan, StopReason, Tally};
use crate::record::{PollerRow, RecordSender, Recorder};
use crate::servers::postgres::{Cluster, connect};
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use crate::sim::sync::lock;
use crate::workload::{self, Database, Output, RetentionTask, take_written};
use rand::{Rng, SeedableRng};
use since_id::id::Layout;
use since_id::keyset::KeysetPoller;
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Runs the experiment against a throwaway PostgreSQL cluster.
pub fn run(common: Common, opts: PgOpts) -> Result<RunSummary, String> {
    let schema = opts.schema;
    let cluster = Cluster::start()?;
    let runtime = session::runtime()?;
    let layout = schema.layout();
    let workload = Workload {
        schema,
        writers: opts.writers,
        rate_per_s: opts.write_rate,
        tail: opts.tail,
        arrivals: opts.arrivals,
        seed: common.seed,
    };
    let config = cluster.config();
    let retention = schema
        .partitioned()
        .then(|| RetentionJob::new(&opts, crate::clock::now_ms()));
    let admin = runtime.block_on(async {
        let client = connect(&config).await?;
        // The per-installation secret of timestamp_id, from the seed.
        let secret = format!(
            "{:016x}",
            rand_chacha::ChaCha8Rng::seed_from_u64(common.seed).random::<u64>()
        );
        client
            .batch_execute(&schema.ddl(&secret))
            .await
            .map_err(|e| format!("cannot create the {schema} schema: {}", super::db_error(&e)))?;
        if let Some(job) = &retention {
            for p in job.plan.bounded() {
                client
                    .batch_execute(&partition_sql::create(p))
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot create partition {}: {}",
                            p.name,
                            super::db_error(&e)
                        )
                    })?;
            }
        }
        Ok::<_, String>(Arc::new(client))
    })?;
    let setup = Setup {
        config,
        admin,
        workload: Some(workload),
        layout,
        table: schema.table().to_string(),
        id_column: "id".to_string(),
        commit_ts_truth: false,
        via: opts.via,
        retention,
    };
    let result = runtime.block_on(drive(&common, setup));
    drop(runtime);
    drop(cluster);
    result
}

/// What a run polls and whether anything writes to it.
pub(super) struct Setup {
    pub config: tokio_postgres::Config,
    pub admin: Arc<tokio_postgres::Client>,
    /// The writers' load (the throwaway cluster); none for your own database.
    pub workload: Option<Workload>,
    pub layout: Layout,
    pub table: String,
    pub id_column: String,
    /// Your own database with track_commit_timestamp on: truth from commit timestamps.
    pub commit_ts_truth: bool,
    /// How the pollers read: SQL, or the Mastodon API served from the table.
    pub via: Via,
    /// The partitioned schemas' retention job.
    pub retention: Option<RetentionJob>,
}

/// Everything stored about the run, as JSON in `runs.config`: what every run
/// stores, and the PostgreSQL target's own.
#[derive(serde::Serialize)]
struct PgConfig<'a> {
    #[serde(flatten)]
    common: StoredConfig<'a>,
    via: &'a str,
    table: &'a str,
    id_column: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    workload: Option<&'a Workload>,
    /// `"<redacted>"` when a password was used; the password itself never.
    #[serde(skip_serializing_if = "Option::is_none")]
    password: Option<&'static str>,
    /// Said aloud: an injected tail is our assumption, not PostgreSQL's behaviour.
    #[serde(skip_serializing_if = "Option::is_none")]
    assumption: Option<String>,
}

/// The run's pollers: those with a since_id cursor first, the xmin
/// (keyset) pollers after them, each kind on its own plan.
struct Roster {
    names: Vec<String>,
    /// How many since_id pollers there are: the xmin pollers' names follow.
    since_count: usize,
    since: Vec<Poller>,
    infos: Vec<PollerRow>,
    final_wait_ms: u64,
}

impl Roster {
    fn new(args: &Common, layout: &Layout, limit: usize) -> Roster {
        let (xmins, ids): (Vec<CursorPolicy>, Vec<CursorPolicy>) =
            args.pollers.iter().partition(|p| p.is_keyset());
        let ordered: Vec<CursorPolicy> = ids.iter().chain(&xmins).copied().collect();
        let names = session::poller_names(&ordered);
        Roster {
            since: names
                .iter()
                .zip(&ids)
                .map(|(name, p)| {
                    Poller::new(name.clone(), *p, layout.clone(), limit, args.max_back_pages)
                })
                .collect(),
            infos: names
                .iter()
                .zip(&ordered)
                .map(|(name, p)| session::poller_row(name, p))
                .collect(),
            final_wait_ms: ordered.iter().filter_map(|p| p.k_ms()).max().unwrap_or(0),
            since_count: ids.len(),
            names,
        }
    }

    fn xmin_names(&self) -> &[String] {
        &self.names[self.since_count..]
    }
}

pub(super) async fn drive(args: &Common, setup: Setup) -> Result<RunSummary, String> {
    let via_http = setup.via == Via::Http;
    let mastodon = Dialect::Mastodon {
        timeline: "public".into(),
    };
    let limit = if via_http {
        mastodon.page_limit(args.limit as usize)
    } else {
        args.limit as usize
    };
    let layout = setup.layout.clone();
    let mut roster = Roster::new(args, &layout, limit);
    let workload = setup.workload.as_ref();
    let mut stored_common = StoredConfig::common(args, limit, roster.names.clone(), &layout);
    stored_common.arrivals = workload.map(|w| w.arrivals);
    let stored = PgConfig {
        common: stored_common,
        via: setup.via.as_str(),
        table: &setup.table,
        id_column: &setup.id_column,
        workload,
        password: setup.config.get_password().map(|_| "<redacted>"),
        assumption: workload.and_then(|w| w.tail).map(|t| {
            format!("injected tail: {t} of transactions sleep inside the transaction (pg_sleep)")
        }),
    };
    let start_ms = crate::clock::now_ms();
    let run_info = session::run_row(
        args,
        RunRowParts {
            profile: workload.map(|w| w.schema.to_string()),
            seed: workload.map(|_| args.seed),
            ..RunRowParts::new(start_ms, &layout, limit, &stored)
        },
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &roster.infos)?;
    let run_id = recorder.run_id;
    let mut db = PgDatabase::new(setup, start_ms);

    let readers = Arc::new(connect(&db.config).await?);
    let target = SqlTarget::new(readers.clone(), &db.table, &db.id_column, layout.clone()).await?;
    let http_target = match via_http {
        true => Some(serve_http(readers, args, mastodon, &layout).await?),
        false => None,
    };
    let mut progress = Tally::new(&roster.since);
    for name in roster.xmin_names() {
        progress.progress.late_arrivals.push((name.clone(), 0));
    }
    let progress = Arc::new(Mutex::new(progress));

    let shutdown = Shutdown::install("the writers stop, the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    // Logged once Ctrl-C is handled: from here on a signal ends the run cleanly.
    tracing::info!(run = run_id, db = %args.db.display(), table = %db.table, "run started");
    let sender = recorder.sender();
    let keyset = keyset_pollers(args, &roster, &db, limit, &progress, &sender, &stop_rx).await?;
    let plan = session::plan_of(
        args,
        &layout,
        std::mem::take(&mut roster.since),
        roster.final_wait_ms,
    );
    let (progress_of, stop) = (progress.clone(), stop_rx.clone());
    let since: Pin<Box<dyn Future<Output = StopReason>>> = match http_target {
        Some(http) => Box::pin(drive::run_real(
            plan,
            http,
            None,
            sender.clone(),
            progress_of,
            stop,
        )),
        None => Box::pin(drive::run_real(
            plan,
            target,
            None,
            sender.clone(),
            progress_of,
            stop,
        )),
    };
    let pollers = async move {
        match keyset {
            Some(keyset) => tokio::join!(since, keyset).0,
            None => since.await,
        }
    };
    let end_ms = start_ms + args.duration_ms as i64;
    let sampler = crate::load::Sampler::start();
    let ended = workload::run(&mut db, pollers, end_ms, stop_rx, &sender).await?;
    let reason = shutdown.end(ended.reason);
    let (progress, ticks) = {
        let tally = lock(&progress);
        (tally.progress.clone(), tally.tick_lateness.clone())
    };
    sampler.finish(&ticks, ended.writers_load.clone(), &sender);
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    ended.writers?;
    let mut notes = db.notes(args.duration_ms);
    if db.workload.is_some() {
        for name in roster.xmin_names() {
            notes.push_str(&analysis::delivery::after_commit_line(
                &args.db, run_id, name,
            )?);
        }
    }
    Ok(RunSummary::finished(args, run_id, reason, progress, notes))
}

/// `--via http`: the Mastodon API served from the table on loopback, and
/// the target the pollers read it through.
async fn serve_http(
    readers: Arc<tokio_postgres::Client>,
    args: &Common,
    mastodon: Dialect,
    layout: &Layout,
) -> Result<HttpTarget, String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let router = super::http::router(readers);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let client = crate::api::http_client(Duration::from_millis(args.timeout_ms))?;
    Ok(HttpTarget::new(
        client,
        &format!("http://{addr}"),
        mastodon,
        layout.clone(),
        None,
    ))
}

/// The xmin pollers, if any, on the same poll loop as the others with their
/// own plan (their rows follow the since_id pollers'). Their final read
/// waits for the writers instead of the largest k (`XminTarget::settled`).
async fn keyset_pollers(
    args: &Common,
    roster: &Roster,
    db: &PgDatabase,
    limit: usize,
    progress: &Arc<Mutex<Tally>>,
    sender: &RecordSender,
    stop: &watch::Receiver<bool>,
) -> Result<Option<impl Future<Output = StopReason> + use<>>, String> {
    if roster.xmin_names().is_empty() {
        return Ok(None);
    }
    let client = Arc::new(connect(&db.config).await?);
    let statement = client
        .prepare(&super::xmin::query(&db.table, &db.id_column))
        .await
        .map_err(|e| {
            format!(
                "the xmin poller needs an xid8 column 'xid': {}",
                super::db_error(&e)
            )
        })?;
    let target = super::xmin::XminTarget {
        client,
        statement,
        writers_done: db.writers_done.subscribe(),
    };
    let plan = Plan {
        layout: db.layout.clone(),
        pollers: roster
            .xmin_names()
            .iter()
            .map(|name| KeysetPoller::new(name.clone(), limit, args.max_back_pages))
            .collect(),
        first_index: roster.since_count,
        interval_ms: args.interval_ms,
        duration_ms: args.duration_ms,
        final_wait_ms: 0,
        tick_jitter: args.tick_jitter(),
    };
    Ok(Some(drive::run_real(
        plan,
        target,
        None,
        sender.clone(),
        progress.clone(),
        stop.clone(),
    )))
}

/// The cluster (or your own database) as the skeleton drives it: the
/// writers and the retention job if the run has them, and the truth pump.
struct PgDatabase {
    config: tokio_postgres::Config,
    admin: Arc<tokio_postgres::Client>,
    table: String,
    id_column: String,
    layout: Layout,
    workload: Option<Workload>,
    /// Your own database with track_commit_timestamp on: its truth is read
    /// at the end, from the run's start (`start_ms`).
    commit_ts_truth: bool,
    start_ms: i64,
    output: Arc<Mutex<Output>>,
    /// The brackets of what was pumped, for `writer_brackets` when the run ends.
    brackets: Vec<rundb::WriterBracketRow>,
    /// Turns true when the writers are done (at once without writers).
    writers_done: watch::Sender<bool>,
    writers: Option<JoinHandle<Result<(), String>>>,
    retention_job: Option<RetentionJob>,
    retention: Option<RetentionTask<rundb::PartitionDropRow>>,
}

impl PgDatabase {
    fn new(setup: Setup, start_ms: i64) -> PgDatabase {
        PgDatabase {
            config: setup.config,
            admin: setup.admin,
            table: setup.table,
            id_column: setup.id_column,
            layout: setup.layout,
            workload: setup.workload,
            commit_ts_truth: setup.commit_ts_truth,
            start_ms,
            output: Arc::default(),
            brackets: Vec::new(),
            writers_done: watch::channel(false).0,
            writers: None,
            retention_job: setup.retention,
            retention: None,
        }
    }

    /// The summary's lines: the writers, the retention job, the assumption.
    fn notes(&self, duration_ms: u64) -> String {
        let mut notes = String::new();
        if self.workload.is_some() {
            let out = lock(&self.output);
            notes.push_str(&format!("writers: {}\n", out.line(duration_ms as i64)));
        }
        if let Some(job) = &self.retention {
            let r = job.report();
            notes.push_str(&format!(
                "retention: {} partitions added, {} detached and dropped ({} rows){}\n",
                r.added,
                r.dropped.len(),
                r.dropped.iter().map(|d| d.rows).sum::<i64>(),
                r.failures(),
            ));
        }
        if let Some(t) = self.workload.as_ref().and_then(|w| w.tail) {
            notes.push_str(&format!(
                "assumption: an injected tail, {t} of transactions sleep inside the transaction\n"
            ));
        }
        notes
    }
}

impl Database for PgDatabase {
    fn writers_load(&self, writing_ms: u64) -> Option<analysis::machine::WritersLoad> {
        let w = self.workload.as_ref()?;
        let out = lock(&self.output);
        Some(analysis::machine::WritersLoad::of(
            w.rate_per_s,
            &out.latency,
            writing_ms,
        ))
    }

    async fn start(&mut self, stop: watch::Receiver<bool>) -> Result<(), String> {
        if let Some(job) = self.retention_job.take() {
            let every_ms = job.every_ms;
            let rounds = job.connect(self.config.clone());
            let task = RetentionTask::spawn(rounds, every_ms, self.start_ms, stop.clone());
            self.retention = Some(task);
        }
        let (config, workload) = (self.config.clone(), self.workload.clone());
        let (output, done) = (self.output.clone(), self.writers_done.clone());
        self.writers = Some(tokio::spawn(async move {
            let result = match workload {
                Some(w) => writers::run_writers(config, w, output, stop).await,
                None => Ok(()),
            };
            done.send_replace(true);
            result
        }));
        Ok(())
    }

    /// The truth of what the writers committed; its brackets, with the
    /// commit timestamps PostgreSQL keeps (`track_commit_timestamp`), are
    /// kept for the end.
    async fn pump(&mut self, sender: &RecordSender) {
        let pending = take_written(&self.output);
        if pending.is_empty() {
            return;
        }
        let ids: Vec<i64> = pending.iter().map(|w| w.id).collect();
        let stamps: std::collections::HashMap<i64, Option<i64>> =
            writers::commit_timestamps(&self.admin, &self.table, "id", &ids)
                .await
                .unwrap_or_default()
                .into_iter()
                .collect();
        let layout = &self.layout;
        sender.truth(
            pending
                .iter()
                .map(|w| writers::truth_row(layout, w))
                .collect(),
        );
        self.brackets.extend(
            pending
                .iter()
                .map(|w| w.bracket(stamps.get(&w.id).copied().flatten())),
        );
    }

    async fn join(&mut self) -> Result<(), String> {
        let writers = match self.writers.take() {
            Some(task) => task.await.map_err(|e| e.to_string()).and_then(|r| r),
            None => Ok(()),
        };
        if let Some(job) = &mut self.retention {
            job.join().await;
        }
        writers
    }

    /// Your own database's truth, read now; `writer_brackets` in every run, and
    /// `partition_drops` when the job dropped any (docs/rundb.md: written
    /// when the run ends).
    async fn side_rows(&mut self, sender: &RecordSender) {
        if self.commit_ts_truth {
            let (admin, layout) = (&self.admin, &self.layout);
            let rows = super::truth::commit_ts_truth(
                admin,
                &self.table,
                &self.id_column,
                layout,
                self.start_ms,
            );
            match rows.await {
                Ok(rows) => sender.truth(rows),
                Err(e) => tracing::warn!("no truth: {e}"),
            }
        }
        sender.side(std::mem::take(&mut self.brackets));
        if let Some(job) = &self.retention {
            let dropped = job.report().dropped.clone();
            if !dropped.is_empty() {
                sender.side(dropped);
            }
        }
    }
}
