//! `--target misskey-ftt`: a throwaway Redis and PostgreSQL, the creators
//! loading them, the read side served over loopback HTTP in Misskey's
//! dialect, the harness's Misskey pollers reading it, the truth into run.db.
//! Wiring only.

use super::creators::{self, Event, Load};
use super::http::{self, ME};
use super::read::{Switches, Window};
use super::store::{self, Source};
use super::timeline::{LiveSwitches, Reader, RedisSlot, RedisSource, redis_keys};
use crate::api::{Dialect, HttpTarget};
use crate::drive::{self, Tally};
use crate::record::{Recorder, TruthRow};
use crate::servers::postgres::Cluster;
use crate::servers::redis::Redis;
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use since_id::id::Layout;
use since_id::poller::Poller;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Which timeline the pollers read (`--timeline`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Timeline {
    #[default]
    Home,
    Local,
    Hybrid,
}

impl Timeline {
    /// The endpoint under `/api/notes/`.
    pub fn endpoint(self) -> &'static str {
        match self {
            Timeline::Home => "timeline",
            Timeline::Local => "local-timeline",
            Timeline::Hybrid => "hybrid-timeline",
        }
    }

    pub fn source(self) -> Source {
        match self {
            Timeline::Home => Source::Home { me: ME },
            Timeline::Local => Source::Local,
            Timeline::Hybrid => Source::Hybrid { me: ME },
        }
    }
}

impl std::str::FromStr for Timeline {
    type Err = String;

    fn from_str(s: &str) -> Result<Timeline, String> {
        match s {
            "home" => Ok(Timeline::Home),
            "local" => Ok(Timeline::Local),
            "hybrid" => Ok(Timeline::Hybrid),
            _ => Err(format!(
                "unknown --timeline '{s}' for --target misskey-ftt: expected home, local or hybrid"
            )),
        }
    }
}

/// The target's options, resolved (`cmd::run` refuses the rest).
#[derive(Clone, Debug)]
pub struct FttOpts {
    pub load: Load,
    pub timeline: Timeline,
    pub switches: Switches,
    /// `--ftt-off`: spans of the run, from its start, with FTT switched off
    /// (ordered, not overlapping, inside the run).
    pub ftt_off: Vec<Window>,
    /// `--redis-restart-at`: when, from the run's start, Redis is stopped and
    /// started again empty (ascending, inside the run).
    pub redis_restarts_ms: Vec<u64>,
}

/// A planned Redis restart as it happened (ms since the epoch).
#[derive(Clone, Debug, serde::Serialize)]
struct RestartDone {
    /// Planned, ms from the run's start.
    at_ms: u64,
    stopped_at_ms: i64,
    ready_at_ms: i64,
}

#[derive(serde::Serialize)]
struct FttConfig<'a> {
    #[serde(flatten)]
    common: StoredConfig<'a>,
    load: &'a Load,
    enable_fanout_timeline: bool,
    enable_fanout_timeline_db_fallback: bool,
    /// `--ftt-off`, ms from the run's start (`started_at_ms`).
    ftt_off: &'a [Window],
    /// `--redis-restart-at`, ms from the run's start.
    redis_restart_at_ms: &'a [u64],
    /// The restarts as they happened; written when the run ends.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    redis_restarts: Vec<RestartDone>,
    redis_version: &'a str,
    postgres_version: &'a str,
}

async fn connect(config: &tokio_postgres::Config) -> Result<tokio_postgres::Client, String> {
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot connect to PostgreSQL: {e}"))?;
    tokio::spawn(connection);
    Ok(client)
}

/// Runs the experiment against Misskey's Fanout Timeline.
pub fn run(common: Common, opts: FttOpts) -> Result<RunSummary, String> {
    let redis = Arc::new(Mutex::new(Redis::start()?));
    let cluster = Cluster::start()?;
    let runtime = session::runtime()?;
    let result = runtime.block_on(drive_run(&common, &opts, redis.clone(), &cluster));
    drop(runtime);
    drop(cluster);
    drop(redis);
    result
}

/// Which notes the polled timeline shows: the truth a poller is judged by.
struct Membership {
    timeline: Timeline,
    home_authors: HashSet<i32>,
}

impl Membership {
    fn shows(&self, user: i32, is_local: bool) -> bool {
        match self.timeline {
            Timeline::Home => self.home_authors.contains(&user),
            Timeline::Local => is_local,
            Timeline::Hybrid => is_local || self.home_authors.contains(&user),
        }
    }
}

/// Counters for the closing summary.
#[derive(Default)]
struct Counts {
    notes: u64,
    deletes: u64,
    redis_commands: u64,
    failures: u64,
    last_failure: Option<String>,
}

async fn drive_run(
    args: &Common,
    opts: &FttOpts,
    redis_server: Arc<Mutex<Redis>>,
    cluster: &Cluster,
) -> Result<RunSummary, String> {
    let (redis_client, redis_version) = {
        let redis = redis_server.lock().unwrap_or_else(|e| e.into_inner());
        (redis.client()?, redis.version().to_string())
    };
    let layout: Layout = "misskey-aidx".parse().map_err(|e| format!("{e}"))?;
    let config = cluster.config();
    let admin = connect(&config).await?;
    let pg_version: String = admin
        .query_one("SHOW server_version", &[])
        .await
        .map_err(|e| format!("cannot read PostgreSQL's version: {e}"))?
        .get(0);
    let follows = opts.load.follows();
    store::create(&admin, &follows).await?;
    let membership = Membership {
        timeline: opts.timeline,
        home_authors: follows
            .iter()
            .filter(|(_, follower)| *follower == ME)
            .map(|(followee, _)| *followee)
            .chain([ME])
            .collect(),
    };
    let redis_conn = || async {
        redis_client
            .get_multiplexed_async_connection_with_config(&redis_config())
            .await
            .map_err(|e| format!("cannot connect to Redis: {e}"))
    };
    // The windows count from the run's start, taken before anything runs.
    let start_ms = crate::clock::now_ms();
    let switches = Arc::new(LiveSwitches::scheduled(
        opts.switches,
        opts.ftt_off.clone(),
        start_ms,
    ));
    let slot = RedisSlot::new(redis_conn().await?);
    let reader = Reader {
        redis: slot.conn().1,
        pg: Arc::new(connect(&config).await?),
        switches: switches.clone(),
    };

    let dialect = Dialect::Misskey {
        endpoint: opts.timeline.endpoint().to_string(),
    };
    let limit = dialect.page_limit(args.limit as usize);
    let names = session::poller_names(&args.pollers);
    let pollers: Vec<Poller> = names
        .iter()
        .zip(&args.pollers)
        .map(|(name, p)| Poller::new(name.clone(), *p, layout.clone(), limit, args.max_back_pages))
        .collect();
    let infos = session::poller_infos(&pollers);
    let final_wait_ms = args
        .pollers
        .iter()
        .filter_map(|p| p.k_ms())
        .max()
        .unwrap_or(0);
    let mut stored_common = StoredConfig::common(args, limit, names.clone(), &layout);
    stored_common.timeline = Some(opts.timeline.endpoint().to_string());
    let mut stored = FttConfig {
        common: stored_common,
        load: &opts.load,
        enable_fanout_timeline: opts.switches.fanout_timeline,
        enable_fanout_timeline_db_fallback: opts.switches.db_fallback,
        ftt_off: &opts.ftt_off,
        redis_restart_at_ms: &opts.redis_restarts_ms,
        redis_restarts: Vec::new(),
        redis_version: &redis_version,
        postgres_version: &pg_version,
    };
    let run_info = session::run_row(
        args,
        RunRowParts {
            started_at_ms: start_ms,
            layout: &layout,
            page_limit: limit,
            profile: Some("misskey-ftt".into()),
            seed: Some(args.seed),
            config: &stored,
        },
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &infos)?;
    let run_id = recorder.run_id;
    let sender = recorder.sender();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Other clients (Misskey.py, a load tool) may read the same API.
    tracing::info!(%addr, "Misskey API served at http://{addr}/api/notes/");
    let path_counts: http::PathCounts = Default::default();
    let router = http::router_on(reader, path_counts.clone(), Some(slot.clone()));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let client = crate::api::http_client(Duration::from_millis(args.timeout_ms))?;
    let target = HttpTarget::new(
        client,
        &format!("http://{addr}"),
        dialect,
        layout.clone(),
        None,
    );
    let progress = Arc::new(Mutex::new(Tally::new(&pollers)));

    let shutdown = Shutdown::install("the creators stop, the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    tracing::info!(run = run_id, db = %args.db.display(), redis = %redis_version, postgres = %pg_version, "run started");
    let end_ms = start_ms + args.duration_ms as i64;
    let (creators_stop_tx, creators_stop) = watch::channel(false);
    {
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let until_end = Duration::from_millis((end_ms - crate::clock::now_ms()).max(0) as u64);
            tokio::select! {
                _ = tokio::time::sleep(until_end) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            let _ = creators_stop_tx.send(true);
        });
    }
    // Bounded: creators wait when the truth falls behind.
    let (events_tx, mut events_rx) = mpsc::channel::<Event>(4096);
    let load = Arc::new(opts.load.clone());
    let mut creator_tasks = Vec::new();
    for i in 0..opts.load.creators {
        let pg = Arc::new(connect(&config).await?);
        creator_tasks.push(tokio::spawn(creators::run_creator(
            i,
            load.clone(),
            pg,
            slot.clone(),
            events_tx.clone(),
            creators_stop.clone(),
            switches.clone(),
            crate::clock::now_ms,
        )));
    }
    drop(events_tx);
    let restarts = tokio::spawn(restart_redis(
        redis_server,
        redis_client.clone(),
        slot.clone(),
        start_ms,
        opts.redis_restarts_ms.clone(),
        creators_stop.clone(),
    ));

    let plan = session::plan_of(args, &layout, pollers, final_wait_ms);
    let pollers_task = drive::run_real(
        plan,
        target,
        None,
        sender.clone(),
        progress.clone(),
        stop_rx.clone(),
    );
    tokio::pin!(pollers_task);

    let keys: HashSet<String> = redis_keys(opts.timeline.source()).into_iter().collect();
    let mut truth = TruthSink::open(&args.db, run_id, membership, keys)?;
    let mut counts = Counts::default();
    let mut flush = tokio::time::interval(Duration::from_secs(1));
    let mut events_open = true;
    let reason = loop {
        tokio::select! {
            reason = &mut pollers_task => break reason,
            event = events_rx.recv(), if events_open => match event {
                Some(e) => truth.take(e, &mut counts),
                None => events_open = false,
            },
            _ = flush.tick() => truth.flush(&sender),
        }
    };
    // The creators have stopped (the duration passed or a signal came);
    // their pending pushes end and close the channel.
    for task in creator_tasks {
        let _ = task.await;
    }
    let (restarts_done, restart_error) = restarts
        .await
        .unwrap_or_else(|e| (Vec::new(), Some(format!("the Redis restarts failed: {e}"))));
    while let Some(e) = events_rx.recv().await {
        truth.take(e, &mut counts);
    }
    truth.flush(&sender);
    let reason = shutdown.end(reason);
    // A server that failed under the run (Redis or PostgreSQL gone) leaves
    // it incomplete: its truth and its reads stop where the failure began.
    let failed_reads = path_counts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(http::FAILED)
        .copied()
        .unwrap_or(0);
    // A planned restart's failures (`--redis-restart-at`) are counted but
    // leave the run complete; any other failure, or a restart that did not
    // bring Redis back, does not.
    let planned = slot.planned_failures();
    let unplanned = (counts.failures + failed_reads).saturating_sub(planned);
    let complete = unplanned == 0 && restart_error.is_none();
    let reason = if let Some(e) = &restart_error {
        format!("a server failed: {e}")
    } else if complete {
        reason.to_string()
    } else {
        format!(
            "a server failed: {} creator failures, {failed_reads} failed reads{}",
            counts.failures,
            counts
                .last_failure
                .as_ref()
                .map(|e| format!(" (last: {e})"))
                .unwrap_or_default()
        )
    };
    let progress = progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .progress
        .clone();
    recorder.finish(crate::clock::now_ms(), complete, &reason)?;
    stored.redis_restarts = restarts_done.clone();
    let config_text = serde_json::to_string(&stored).map_err(|e| e.to_string())?;
    truth.write(&config_text)?;
    let seconds = args.duration_ms.max(1) as f64 / 1000.0;
    let mut notes = format!(
        "creators: {} notes ({:.1}/s), {} Redis commands ({:.0}/s), {} failures{}\n\
         redis {} , postgresql {}\n",
        counts.notes,
        counts.notes as f64 / seconds,
        counts.redis_commands,
        counts.redis_commands as f64 / seconds,
        counts.failures,
        counts
            .last_failure
            .as_ref()
            .map(|e| format!(" (last: {e})"))
            .unwrap_or_default(),
        redis_version,
        pg_version,
    );
    if counts.deletes > 0 {
        notes.push_str(&format!(
            "{} notes deleted by their authors (ftt_deletes)\n",
            counts.deletes
        ));
    }
    for w in &opts.ftt_off {
        notes.push_str(&format!(
            "FTT off from {} to {} into the run\n",
            since_id::time::format_duration_ms(w.from_ms),
            since_id::time::format_duration_ms(w.to_ms)
        ));
    }
    for r in &restarts_done {
        notes.push_str(&format!(
            "Redis restarted at {} into the run: down {} ms\n",
            since_id::time::format_duration_ms(r.at_ms),
            r.ready_at_ms - r.stopped_at_ms
        ));
    }
    if planned > 0 {
        notes.push_str(&format!(
            "{planned} Redis commands failed during the planned restarts (pushes and reads)\n"
        ));
    }
    notes.push_str(&http::counts_line(&path_counts));
    tracing::info!(run = run_id, reason = %reason, "run finished");
    Ok(RunSummary {
        run_id,
        db: args.db.clone(),
        complete,
        progress,
        notes,
    })
}

/// The truth as it arrives: notes of the polled timeline into `truth`,
/// pushes to and trims of its lists and the deletions into `ftt_pushes`,
/// `ftt_trims` and `ftt_deletes`.
struct TruthSink {
    conn: rusqlite::Connection,
    run_id: i64,
    layout: Layout,
    membership: Membership,
    keys: HashSet<String>,
    /// Commit times of notes whose push has not been reported yet.
    committed: HashMap<String, i64>,
    rows: Vec<TruthRow>,
    ftt: rundb::FttRows,
}

impl TruthSink {
    fn open(
        db: &std::path::Path,
        run_id: i64,
        membership: Membership,
        keys: HashSet<String>,
    ) -> Result<TruthSink, String> {
        let e = |e: rusqlite::Error| format!("cannot open {}: {e}", db.display());
        let conn = rusqlite::Connection::open(db).map_err(e)?;
        conn.busy_timeout(Duration::from_secs(10)).map_err(e)?;
        Ok(TruthSink {
            conn,
            run_id,
            layout: "misskey-aidx".parse().map_err(|e| format!("{e}"))?,
            membership,
            keys,
            committed: HashMap::new(),
            rows: Vec::new(),
            ftt: Default::default(),
        })
    }

    fn take(&mut self, event: Event, counts: &mut Counts) {
        match event {
            Event::Created(c) => {
                counts.notes += 1;
                if self.membership.shows(c.note.user_id, c.note.is_local) {
                    let Ok(id) = self.layout.parse(&c.note.id).map(|id| id.sort_key()) else {
                        counts.failures += 1;
                        counts.last_failure = Some(format!("not an aidx: {}", c.note.id));
                        return;
                    };
                    self.rows.push(TruthRow {
                        id: c.note.id.clone(),
                        id_key: id,
                        id_time_ms: c.id_ms,
                        posted_at_ms: c.started_ms,
                        // Owed from the ms after the INSERT returned: a
                        // request with a sinceId reads PostgreSQL (`read`).
                        visible_at_ms: c.committed_ms + 1,
                        deleted_at_ms: None,
                        origin: c.origin().into(),
                    });
                }
                self.committed.insert(c.note.id, c.committed_ms);
            }
            Event::Pushed { id, report } => {
                counts.redis_commands += report.commands;
                let committed = self.committed.remove(&id).unwrap_or_default();
                ftt_rows(&id, committed, report, &self.keys, &mut self.ftt);
            }
            Event::Deleted {
                id,
                sent_ms,
                returned_ms,
            } => {
                counts.deletes += 1;
                self.ftt.deletes.push(rundb::FttDeleteRow {
                    id,
                    sent_at_ms: sent_ms,
                    returned_at_ms: returned_ms,
                });
            }
            Event::Failed(e) => {
                counts.failures += 1;
                counts.last_failure = Some(e);
            }
        }
    }

    /// Sends the truth rows to the recorder; the pushes, trims and deletions
    /// stay (one row per note and polled list: a few MB for an hour) until
    /// [`Self::write`], which also marks the deleted notes' truth rows.
    fn flush(&mut self, sender: &crate::record::RecordSender) {
        if !self.rows.is_empty() {
            sender.truth(std::mem::take(&mut self.rows));
        }
    }

    /// Writes the FTT tables ([`write_ftt`]) once the recorder has closed the
    /// run (the recorder's writer holds the file while the run goes), and the
    /// run's configuration again with what only its end knows (the restarts).
    fn write(mut self, config: &str) -> Result<(), String> {
        write_ftt(&mut self.conn, self.run_id, &self.ftt, Some(config))
    }
}

/// The `ftt_pushes` and `ftt_trims` rows of one `pushToTl` report, for the
/// lists in `keys` (those the polled endpoints read): a run's and
/// `serve --record`'s (`serve.rs`).
pub(super) fn ftt_rows(
    id: &str,
    committed_ms: i64,
    report: super::push::Report,
    keys: &HashSet<String>,
    ftt: &mut rundb::FttRows,
) {
    for p in report.pushed.into_iter().filter(|p| keys.contains(&p.list)) {
        ftt.pushes.push(rundb::FttPushRow {
            id: id.to_string(),
            list: p.list,
            committed_at_ms: committed_ms,
            pushed_at_ms: p.pushed_at_ms,
            path: p.path.into(),
        });
    }
    for t in report
        .trimmed
        .into_iter()
        .filter(|t| keys.contains(&t.list))
    {
        ftt.trims
            .extend(t.ids.into_iter().map(|cut| rundb::FttTrimRow {
                id: cut,
                list: t.list.clone(),
                trimmed_at_ms: t.at_ms,
            }));
    }
}

/// Writes `ftt_pushes`, `ftt_trims` and `ftt_deletes` (marking the deleted
/// notes' truth) in one transaction, once the recorder has closed the run
/// (its writer holds the file while it goes), with the run's final `config`
/// if given: a run's and `serve --record`'s.
pub(super) fn write_ftt(
    conn: &mut rusqlite::Connection,
    run_id: i64,
    ftt: &rundb::FttRows,
    config: Option<&str>,
) -> Result<(), String> {
    let e = |e: rusqlite::Error| format!("cannot write ftt_pushes: {e}");
    let tx = conn.transaction().map_err(e)?;
    rundb::write::insert_ftt(&tx, run_id, ftt)
        .map_err(|err| format!("cannot write ftt_pushes: {err}"))?;
    if let Some(config) = config {
        tx.execute(
            "UPDATE runs SET config = ?1 WHERE id = ?2",
            rusqlite::params![config, run_id],
        )
        .map_err(e)?;
    }
    tx.commit().map_err(e)
}

/// The connections' settings: no response timeout. redis-rs gives up on an
/// answer after 500 ms by default (`DEFAULT_RESPONSE_TIMEOUT` in its
/// `client.rs`); ioredis, Misskey's client, sets no command timeout unless
/// asked to, and on a loaded machine 500 ms passes without Redis failing.
pub(super) fn redis_config() -> redis::AsyncConnectionConfig {
    redis::AsyncConnectionConfig::new().set_response_timeout(None)
}

/// `--redis-restart-at`: at each planned time from the run's start (unless the
/// run ends first) stops Redis and starts it again empty, then gives the
/// creators and the read side a connection to the new server. Returns the
/// restarts done and, if one failed, why (the run is then incomplete).
async fn restart_redis(
    server: Arc<Mutex<Redis>>,
    client: redis::Client,
    slot: RedisSlot,
    start_ms: i64,
    at_ms: Vec<u64>,
    mut stop: watch::Receiver<bool>,
) -> (Vec<RestartDone>, Option<String>) {
    let mut done = Vec::new();
    for at in at_ms {
        let wait = (start_ms + at as i64 - crate::clock::now_ms()).max(0) as u64;
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        slot.restart_begins();
        let server = server.clone();
        let restarted = tokio::task::spawn_blocking(move || {
            server.lock().unwrap_or_else(|e| e.into_inner()).restart()
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let (stopped_at_ms, ready_at_ms) = match restarted {
            Ok(times) => times,
            Err(e) => return (done, Some(format!("Redis did not restart: {e}"))),
        };
        match client
            .get_multiplexed_async_connection_with_config(&redis_config())
            .await
        {
            Ok(conn) => slot.restarted(conn),
            Err(e) => {
                return (
                    done,
                    Some(format!("cannot connect to the restarted Redis: {e}")),
                );
            }
        }
        tracing::info!(
            at_ms = at,
            down_ms = ready_at_ms - stopped_at_ms,
            "Redis restarted"
        );
        done.push(RestartDone {
            at_ms: at,
            stopped_at_ms,
            ready_at_ms,
        });
    }
    (done, None)
}
