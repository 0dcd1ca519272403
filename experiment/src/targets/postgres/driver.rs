//! `--target postgres`: a throwaway cluster, the writers loading it, the
//! pollers reading it over SQL, the truth pumped into run.db. Wiring only.

use super::schema::{Schema, partition_sql};
use super::source::SqlTarget;
use super::writers::{self, Output, Workload, Written};
use super::{PgOpts, Via};
use crate::api::{Dialect, HttpTarget};
use crate::drive::{self, Plan, StopReason, Tally};
use crate::record::{PollerRow, RecordSender, Recorder};
use crate::servers::postgres::Cluster;
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use rand::{Rng, SeedableRng};
use since_id::id::Layout;
use since_id::keyset::KeysetPoller;
use since_id::partitions::{Counter, Partitions};
use since_id::policy::CursorPolicy;
use since_id::poller::Poller;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

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
        seed: common.seed,
    };
    let config = cluster.config();
    let retention = (schema == Schema::Partitioned).then(|| RetentionJob::new(&opts));
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
    /// The partitioned schema's retention job.
    pub retention: Option<RetentionJob>,
}

/// The partitioned schema's retention job: the pure plan shared with the
/// MariaDB target (`targets/mariadb/schema.rs`), run with PostgreSQL's SQL
/// (`partition_sql`). BIGSERIAL is a counter key: each round adds a
/// partition ahead of the writers sized by the IDs they took, and detaches
/// and drops the oldest beyond `--retain` once aged (`Counter`).
pub(super) struct RetentionJob {
    pub plan: Partitions,
    pub every_ms: u64,
    counter: Counter,
}

impl RetentionJob {
    fn new(opts: &PgOpts) -> RetentionJob {
        RetentionJob {
            plan: Counter::first_plan(opts.write_rate, opts.partition_every_ms, opts.retain),
            every_ms: opts.partition_every_ms,
            counter: Counter::new(opts.retain),
        }
    }
}

/// What the retention job did and what went wrong.
#[derive(Default)]
struct Retention {
    dropped: Vec<rundb::PartitionDropRow>,
    added: u64,
    failed: u64,
    last_error: Option<String>,
}

/// One round: add the next partition if one is needed, detach and drop the
/// oldest beyond `--retain` once aged.
async fn retention_round(
    client: &tokio_postgres::Client,
    job: &mut RetentionJob,
    out: &Arc<Mutex<Retention>>,
) -> Result<(), String> {
    let e = |e: tokio_postgres::Error| super::db_error(&e);
    let max_id: i64 = client
        .query_one("SELECT COALESCE(MAX(id), 0) FROM events", &[])
        .await
        .map_err(e)?
        .get(0);
    if let Some(bound) = job.counter.round(&job.plan, max_id) {
        let part = job.plan.next_partition(bound);
        client
            .batch_execute(&partition_sql::create(&part))
            .await
            .map_err(e)?;
        job.plan.added(part);
        out.lock().unwrap_or_else(|e| e.into_inner()).added += 1;
    }
    while let Some(part) = job.plan.beyond_retain(job.counter.aged_below()) {
        let rows: i64 = client
            .query_one(&partition_sql::count(&part), &[])
            .await
            .map_err(e)?
            .get(0);
        let sent_at_ms = crate::clock::now_ms();
        client
            .batch_execute(&partition_sql::drop(&part))
            .await
            .map_err(e)?;
        let returned_at_ms = crate::clock::now_ms();
        job.plan.dropped();
        tracing::info!(partition = %part.name, lo = part.lo, hi = part.hi, "partition dropped");
        out.lock()
            .unwrap_or_else(|e| e.into_inner())
            .dropped
            .push(rundb::PartitionDropRow {
                partition: part.name.clone(),
                lo_id: part.lo,
                hi_id: part.hi,
                sent_at_ms,
                returned_at_ms,
                rows,
            });
    }
    Ok(())
}

/// The retention job: a round every period from the start until `stop`.
async fn retention_loop(
    config: tokio_postgres::Config,
    mut job: RetentionJob,
    start_ms: i64,
    out: Arc<Mutex<Retention>>,
    mut stop: watch::Receiver<bool>,
) {
    let fail = |e: String| {
        let mut r = out.lock().unwrap_or_else(|e| e.into_inner());
        r.failed += 1;
        r.last_error = Some(e);
    };
    let client = match connect(&config).await {
        Ok(c) => c,
        Err(e) => return fail(e),
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
        if let Err(e) = retention_round(&client, &mut job, &out).await {
            tracing::warn!("retention job: {e}");
            fail(e);
        }
    }
}

pub(super) async fn connect(
    config: &tokio_postgres::Config,
) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL: {}", super::db_error(&e)))?;
    tokio::spawn(connection);
    Ok(client)
}

/// A row of `pg_truth`: the bracket of a post's visibility.
struct Bracket {
    written: Written,
    commit_ts_ms: Option<i64>,
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

pub(super) async fn drive(args: &Common, setup: Setup) -> Result<RunSummary, String> {
    let Setup {
        config,
        admin,
        workload,
        layout,
        table,
        id_column,
        commit_ts_truth,
        via,
        retention,
    } = setup;
    let via_http = via == Via::Http;
    let config = &config;
    let mastodon = Dialect::Mastodon {
        timeline: "public".into(),
    };
    let limit = if via_http {
        mastodon.page_limit(args.limit as usize)
    } else {
        args.limit as usize
    };
    // Pollers with a since_id cursor first, xmin pollers after them.
    let (xmins, ids): (Vec<CursorPolicy>, Vec<CursorPolicy>) =
        args.pollers.iter().partition(|p| p.is_keyset());
    let ordered: Vec<CursorPolicy> = ids.iter().chain(&xmins).copied().collect();
    let names = session::poller_names(&ordered);
    let pollers: Vec<Poller> = names
        .iter()
        .zip(&ids)
        .map(|(name, p)| Poller::new(name.clone(), *p, layout.clone(), limit, args.max_back_pages))
        .collect();
    let infos: Vec<PollerRow> = names
        .iter()
        .zip(&ordered)
        .map(|(name, p)| session::poller_row(name, p))
        .collect();
    let final_wait_ms = ordered.iter().filter_map(|p| p.k_ms()).max().unwrap_or(0);
    let stored = PgConfig {
        common: StoredConfig::common(args, limit, names.clone(), &layout),
        via: via.as_str(),
        table: &table,
        id_column: &id_column,
        workload: workload.as_ref(),
        password: config.get_password().map(|_| "<redacted>"),
        assumption: workload.as_ref().and_then(|w| w.tail).map(|t| {
            format!("injected tail: {t} of transactions sleep inside the transaction (pg_sleep)")
        }),
    };
    let start_ms = crate::clock::now_ms();
    let run_info = session::run_row(
        args,
        RunRowParts {
            started_at_ms: start_ms,
            layout: &layout,
            page_limit: limit,
            profile: workload.as_ref().map(|w| w.schema.to_string()),
            seed: workload.as_ref().map(|_| args.seed),
            config: &stored,
        },
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &infos)?;
    let run_id = recorder.run_id;

    let readers = Arc::new(connect(config).await?);
    let target = SqlTarget::new(readers.clone(), &table, &id_column, layout.clone()).await?;
    let http_target = if via_http {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let router = super::http::router(readers.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let client = crate::api::http_client(Duration::from_millis(args.timeout_ms))?;
        Some(HttpTarget::new(
            client,
            &format!("http://{addr}"),
            mastodon,
            layout.clone(),
            None,
        ))
    } else {
        None
    };
    let mut progress = Tally::new(&pollers);
    for name in &names[ids.len()..] {
        progress.progress.late_arrivals.push((name.clone(), 0));
    }
    let progress = Arc::new(Mutex::new(progress));

    let shutdown = Shutdown::install("the writers stop, the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    // Logged once Ctrl-C is handled: from here on a signal ends the run cleanly.
    tracing::info!(run = run_id, db = %args.db.display(), table = %table, "run started");
    let end_ms = start_ms + args.duration_ms as i64;
    // The writers stop at the end of the duration or at a signal.
    let (writers_stop_tx, writers_stop) = watch::channel(false);
    {
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let until_end = Duration::from_millis(args_end_delay(end_ms));
            tokio::select! {
                _ = tokio::time::sleep(until_end) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            let _ = writers_stop_tx.send(true);
        });
    }
    let retention_out = Arc::new(Mutex::new(Retention::default()));
    let retention_task = retention.map(|job| {
        tokio::spawn(retention_loop(
            config.clone(),
            job,
            start_ms,
            retention_out.clone(),
            writers_stop.clone(),
        ))
    });
    let output = Arc::new(Mutex::new(Output::default()));
    let (done_tx, done_rx) = watch::channel(false);
    let writers_task = {
        let (config, workload, output) = (config.clone(), workload.clone(), output.clone());
        tokio::spawn(async move {
            let result = match workload {
                Some(w) => writers::run_writers(config, w, output, writers_stop).await,
                None => Ok(()),
            };
            let _ = done_tx.send(true);
            result
        })
    };

    // The keyset pollers run on the same loop as the others, with their own
    // plan (their rows follow the since_id pollers' in `pollers`).
    let keyset_task = if xmins.is_empty() {
        None
    } else {
        let client = Arc::new(connect(config).await?);
        let statement = client
            .prepare(&super::xmin::query(&table, &id_column))
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
            writers_done: done_rx.clone(),
        };
        let plan = Plan {
            layout: layout.clone(),
            pollers: names[ids.len()..]
                .iter()
                .map(|name| KeysetPoller::new(name.clone(), limit, args.max_back_pages))
                .collect(),
            first_index: ids.len(),
            interval_ms: args.interval_ms,
            duration_ms: args.duration_ms,
            // Its final read waits for the writers instead (`XminTarget::settled`).
            final_wait_ms: 0,
        };
        Some(tokio::spawn(drive::run_real(
            plan,
            target,
            None,
            recorder.sender(),
            progress.clone(),
            stop_rx.clone(),
        )))
    };
    let plan = session::plan_of(args, &layout, pollers, final_wait_ms);
    let mut pollers_task: std::pin::Pin<Box<dyn std::future::Future<Output = StopReason> + Send>> =
        match http_target {
            Some(http) => Box::pin(drive::run_real(
                plan,
                http,
                None,
                recorder.sender(),
                progress.clone(),
                stop_rx.clone(),
            )),
            None => Box::pin(drive::run_real(
                plan,
                target,
                None,
                recorder.sender(),
                progress.clone(),
                stop_rx.clone(),
            )),
        };
    let sender = recorder.sender();
    let take = || std::mem::take(&mut output.lock().unwrap_or_else(|e| e.into_inner()).written);
    let mut brackets: Vec<Bracket> = Vec::new();
    let reason = loop {
        tokio::select! {
            reason = &mut pollers_task => break reason,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                brackets.extend(pump_truth(&admin, &table, &layout, take(), &sender).await);
            }
        }
    };
    if let Some(task) = keyset_task {
        let _ = task.await;
    }
    let writers_result = writers_task.await.map_err(|e| e.to_string())?;
    let retention_ran = retention_task.is_some();
    if let Some(task) = retention_task {
        let _ = task.await;
    }
    brackets.extend(pump_truth(&admin, &table, &layout, take(), &sender).await);
    if commit_ts_truth {
        let rows = super::own::commit_ts_truth(&admin, &table, &id_column, &layout, start_ms).await;
        match rows {
            Ok(rows) => sender.truth(rows),
            Err(e) => tracing::warn!("no truth: {e}"),
        }
    }
    let reason = shutdown.end(reason);
    let progress = progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .progress
        .clone();
    recorder.finish(crate::clock::now_ms(), true, reason)?;
    let retention = std::mem::take(&mut *retention_out.lock().unwrap_or_else(|e| e.into_inner()));
    write_brackets(&args.db, run_id, &brackets, &retention.dropped)?;
    writers_result?;
    let out = output.lock().unwrap_or_else(|e| e.into_inner());
    let mut notes = if workload.is_none() {
        String::new()
    } else {
        format!(
            "writers: {} commits ({:.0}/s), {} failed transactions{}\n",
            out.commits,
            out.commits as f64 * 1000.0 / args.duration_ms.max(1) as f64,
            out.failed,
            out.last_error
                .as_ref()
                .map(|e| format!(" (last: {e})"))
                .unwrap_or_default()
        )
    };
    if retention_ran {
        notes.push_str(&format!(
            "retention: {} partitions added, {} detached and dropped ({} rows){}\n",
            retention.added,
            retention.dropped.len(),
            retention.dropped.iter().map(|d| d.rows).sum::<i64>(),
            retention
                .last_error
                .as_ref()
                .map(|e| format!(", {} failed (last: {e})", retention.failed))
                .unwrap_or_default(),
        ));
    }
    if let Some(t) = workload.as_ref().and_then(|w| w.tail) {
        notes.push_str(&format!(
            "assumption: an injected tail, {t} of transactions sleep inside the transaction\n"
        ));
    }
    if workload.is_some() {
        for name in &names[ids.len()..] {
            notes.push_str(&xmin_delay_line(&args.db, run_id, name)?);
        }
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

fn args_end_delay(end_ms: i64) -> u64 {
    (end_ms - crate::clock::now_ms()).max(0) as u64
}

/// Turns what the writers committed into truth rows (sent to the recorder)
/// and brackets (kept for `pg_truth`).
async fn pump_truth(
    admin: &tokio_postgres::Client,
    table: &str,
    layout: &Layout,
    pending: Vec<Written>,
    sender: &RecordSender,
) -> Vec<Bracket> {
    if pending.is_empty() {
        return Vec::new();
    }
    let ids: Vec<i64> = pending.iter().map(|w| w.id).collect();
    let stamps: std::collections::HashMap<i64, Option<i64>> =
        writers::commit_timestamps(admin, table, "id", &ids)
            .await
            .unwrap_or_default()
            .into_iter()
            .collect();
    let truth = pending
        .iter()
        .map(|w| writers::truth_row(layout, w))
        .collect();
    sender.truth(truth);
    pending
        .into_iter()
        .map(|w| Bracket {
            commit_ts_ms: stamps.get(&w.id).copied().flatten(),
            written: w,
        })
        .collect()
}

/// Writes `pg_truth` beside `truth`: each post's transaction, start, commit
/// timestamp and the moment COMMIT returned; and the partitions the retention
/// job dropped in `partition_drops` (their truth rows marked deleted).
fn write_brackets(
    db: &std::path::Path,
    run_id: i64,
    rows: &[Bracket],
    dropped: &[rundb::PartitionDropRow],
) -> Result<(), String> {
    let e = |e: rusqlite::Error| format!("cannot write pg_truth in {}: {e}", db.display());
    let mut conn = rusqlite::Connection::open(db).map_err(e)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(e)?;
    let rows: Vec<rundb::PgTruthRow> = rows
        .iter()
        .map(|b| rundb::PgTruthRow {
            id: b.written.id.to_string(),
            xid: b.written.xid.clone(),
            xact_start_ms: b.written.xact_start_ms,
            commit_ts_ms: b.commit_ts_ms,
            commit_returned_ms: b.written.commit_returned_ms,
            injected_sleep_ms: b.written.sleep_ms as i64,
        })
        .collect();
    let tx = conn.transaction().map_err(e)?;
    rundb::write::insert_pg_truth(&tx, run_id, &rows)
        .map_err(|err| format!("cannot write pg_truth in {}: {err}", db.display()))?;
    if !dropped.is_empty() {
        rundb::write::insert_partition_drops(&tx, run_id, dropped, |id| {
            since_id::id::Id(id.max(0) as u128).sort_key()
        })
        .map_err(|err| format!("cannot write partition_drops in {}: {err}", db.display()))?;
    }
    tx.commit().map_err(e)
}

/// The xmin poller's delivery delay: from each row's commit timestamp to the
/// first response of the poller that returned it.
pub fn xmin_delay_line(db: &std::path::Path, run_id: i64, poller: &str) -> Result<String, String> {
    let e = |e: rusqlite::Error| format!("cannot read {}: {e}", db.display());
    let conn = rusqlite::Connection::open(db).map_err(e)?;
    let mut st = conn
        .prepare(
            "SELECT MIN(r.received_at_ms) - g.commit_ts_ms AS delay
             FROM writer_brackets g
             JOIN observations o ON o.status_id = g.id
             JOIN requests r ON r.id = o.request_id AND r.run_id = g.run_id
             JOIN pollers p ON p.id = r.poller_id AND p.name = ?2
             WHERE g.run_id = ?1 AND g.commit_ts_ms IS NOT NULL
             GROUP BY g.id ORDER BY delay",
        )
        .map_err(e)?;
    let delays: Vec<i64> = st
        .query_map(rusqlite::params![run_id, poller], |r| r.get(0))
        .map_err(e)?
        .collect::<Result<_, _>>()
        .map_err(e)?;
    if delays.is_empty() {
        return Ok(format!("{poller}: delivered nothing\n"));
    }
    let q = |f: f64| delays[((delays.len() - 1) as f64 * f).round() as usize];
    Ok(format!(
        "{poller}: delivery after commit p50 {} ms, p99 {} ms, max {} ms ({} rows)\n",
        q(0.5),
        q(0.99),
        q(1.0),
        delays.len()
    ))
}
