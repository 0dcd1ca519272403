//! `--target misskey-ftt`: a throwaway Redis and PostgreSQL, the creators
//! loading them, the read side served over loopback HTTP in Misskey's
//! dialect, the harness's Misskey pollers reading it, the truth into run.db
//! by the database targets' skeleton (`crate::workload`). Wiring only.

use super::creators::{self, Creator, Event, Load};
use super::http::{self, ME};
use super::read::{Switches, Window};
use super::redis::Redis;
use super::store::{self, Source};
use super::timeline::{LiveSwitches, Reader, RedisSlot, RedisSource, redis_keys};
use super::truth::{Membership, TruthSink};
use crate::api::{Dialect, HttpTarget};
use crate::drive::{self, Tally};
use crate::record::{RecordSender, Recorder};
use crate::servers::postgres::{Cluster, connect};
use crate::session::{self, Common, RunRowParts, RunSummary, Shutdown, StoredConfig};
use crate::sim::sync::lock;
use crate::workload::{self, Database};
use since_id::id::Layout;
use since_id::poller::Poller;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// `serve --record` builds its FTT rows as a run does.
pub(super) use super::truth::ftt_rows;

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
    /// Of the users the pollers' account follows, the share that is remote
    /// (from the follow graph, `load.graph_seed`).
    home_followed_remote_share: f64,
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

/// The servers of a run, up and loaded with the schema and the follow graph.
struct Servers {
    config: tokio_postgres::Config,
    redis_client: redis::Client,
    redis_version: String,
    pg_version: String,
    slot: RedisSlot,
    reader: Reader,
    switches: Arc<LiveSwitches>,
    membership: Membership,
    /// The run's start: the windows of `--ftt-off` and the restarts count from it.
    start_ms: i64,
}

impl Servers {
    async fn prepare(
        opts: &FttOpts,
        redis_server: &Mutex<Redis>,
        cluster: &Cluster,
    ) -> Result<Servers, String> {
        let (redis_client, redis_version) = {
            let redis = lock(redis_server);
            (redis.client()?, redis.version().to_string())
        };
        let config = cluster.config();
        let admin = connect(&config).await?;
        let pg_version: String = admin
            .query_one("SHOW server_version", &[])
            .await
            .map_err(|e| format!("cannot read PostgreSQL's version: {e}"))?
            .get(0);
        let follows = opts.load.follows();
        store::create(&admin, &follows).await?;
        let timeline = opts.timeline;
        let membership = Membership {
            home_authors: follows
                .iter()
                .filter(|(_, follower)| *follower == ME)
                .map(|(followee, _)| *followee)
                .chain([ME])
                .collect(),
            shows_home: timeline != Timeline::Local,
            shows_local: timeline != Timeline::Home,
        };
        // The windows count from the run's start, taken before anything runs.
        let start_ms = crate::clock::now_ms();
        let switches = Arc::new(LiveSwitches::scheduled(
            opts.switches,
            opts.ftt_off.clone(),
            start_ms,
        ));
        let slot = RedisSlot::new(redis_connect(&redis_client).await?);
        let reader = Reader {
            redis: slot.conn().1,
            pg: Arc::new(connect(&config).await?),
            switches: switches.clone(),
        };
        Ok(Servers {
            config,
            redis_client,
            redis_version,
            pg_version,
            slot,
            reader,
            switches,
            membership,
            start_ms,
        })
    }
}

async fn redis_connect(
    client: &redis::Client,
) -> Result<redis::aio::MultiplexedConnection, String> {
    client
        .get_multiplexed_async_connection_with_config(&redis_config())
        .await
        .map_err(|e| format!("cannot connect to Redis: {e}"))
}

async fn drive_run(
    args: &Common,
    opts: &FttOpts,
    redis_server: Arc<Mutex<Redis>>,
    cluster: &Cluster,
) -> Result<RunSummary, String> {
    let servers = Servers::prepare(opts, &redis_server, cluster).await?;
    let layout: Layout = "misskey-aidx".parse().map_err(|e| format!("{e}"))?;
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
    let final_wait_ms = (args.pollers.iter().filter_map(|p| p.k_ms()).max()).unwrap_or(0);
    let mut stored_common = StoredConfig::common(args, limit, names.clone(), &layout);
    stored_common.timeline = Some(opts.timeline.endpoint().to_string());
    stored_common.arrivals = Some(opts.load.arrivals);
    let mut stored = FttConfig {
        common: stored_common,
        load: &opts.load,
        home_followed_remote_share: opts.load.remote_share_followed(),
        enable_fanout_timeline: opts.switches.fanout_timeline,
        enable_fanout_timeline_db_fallback: opts.switches.db_fallback,
        ftt_off: &opts.ftt_off,
        redis_restart_at_ms: &opts.redis_restarts_ms,
        redis_restarts: Vec::new(),
        redis_version: &servers.redis_version,
        postgres_version: &servers.pg_version,
    };
    let run_info = session::run_row(
        args,
        RunRowParts {
            profile: Some("misskey-ftt".into()),
            seed: Some(args.seed),
            ..RunRowParts::new(servers.start_ms, &layout, limit, &stored)
        },
    )?;
    let recorder = Recorder::create(&args.db, &run_info, &infos)?;
    let run_id = recorder.run_id;
    let sender = recorder.sender();
    let (target, path_counts) = serve_http(&servers, args, dialect, &layout).await?;
    let progress = Arc::new(Mutex::new(Tally::new(&pollers)));

    let shutdown = Shutdown::install("the creators stop, the pollers make their last cycle");
    let stop_rx = shutdown.requested.clone();
    tracing::info!(run = run_id, db = %args.db.display(), redis = %servers.redis_version, postgres = %servers.pg_version, "run started");
    let end_ms = servers.start_ms + args.duration_ms as i64;
    let mut db = FttDatabase::new(&servers, opts, redis_server)?;
    let plan = session::plan_of(args, &layout, pollers, final_wait_ms);
    let pollers = drive::run_real(
        plan,
        target,
        None,
        sender.clone(),
        progress.clone(),
        stop_rx.clone(),
    );
    let sampler = crate::load::Sampler::start();
    let ended = workload::run(&mut db, pollers, end_ms, stop_rx, &sender).await?;
    let reason = shutdown.end(ended.reason);
    let (complete, reason) = db.outcome(reason, &path_counts);
    let (progress, ticks) = {
        let tally = lock(&progress);
        (tally.progress.clone(), tally.tick_lateness.clone())
    };
    // The run's configuration again, with what only its end knows (the restarts).
    stored.redis_restarts = db.restarts_done.clone();
    sender.run_config(serde_json::to_string(&stored).map_err(|e| e.to_string())?);
    // After the configuration is replaced, so that it stays in it.
    sampler.finish(&ticks, ended.writers_load.clone(), &sender);
    recorder.finish(crate::clock::now_ms(), complete, &reason)?;
    let mut notes = db.notes(args.duration_ms, opts, &servers);
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

/// The read side served in Misskey's dialect on loopback, and the target the
/// pollers read it through.
async fn serve_http(
    servers: &Servers,
    args: &Common,
    dialect: Dialect,
    layout: &Layout,
) -> Result<(HttpTarget, http::PathCounts), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("cannot listen on 127.0.0.1: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    // Other clients (Misskey.py, a load tool) may read the same API.
    tracing::info!(%addr, "Misskey API served at http://{addr}/api/notes/");
    let path_counts: http::PathCounts = Default::default();
    let reader = servers.reader.clone();
    let router = http::router_on(reader, path_counts.clone(), Some(servers.slot.clone()));
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
    Ok((target, path_counts))
}

/// The creators and the planned Redis restarts as the skeleton drives them;
/// the truth taken from the creators' events as they arrive.
struct FttDatabase {
    config: tokio_postgres::Config,
    load: Arc<Load>,
    slot: RedisSlot,
    switches: Arc<LiveSwitches>,
    redis_server: Arc<Mutex<Redis>>,
    redis_client: redis::Client,
    start_ms: i64,
    restarts_ms: Vec<u64>,
    sink: Arc<Mutex<TruthSink>>,
    creators: Vec<JoinHandle<()>>,
    events: Option<JoinHandle<()>>,
    restarts: Option<JoinHandle<(Vec<RestartDone>, Option<String>)>>,
    restarts_done: Vec<RestartDone>,
    /// A restart that failed: the run is then incomplete.
    restart_error: Option<String>,
}

impl FttDatabase {
    fn new(
        servers: &Servers,
        opts: &FttOpts,
        redis_server: Arc<Mutex<Redis>>,
    ) -> Result<FttDatabase, String> {
        let keys: HashSet<String> = redis_keys(opts.timeline.source()).into_iter().collect();
        let membership = servers.membership.clone();
        Ok(FttDatabase {
            config: servers.config.clone(),
            load: Arc::new(opts.load.clone()),
            slot: servers.slot.clone(),
            switches: servers.switches.clone(),
            redis_server,
            redis_client: servers.redis_client.clone(),
            start_ms: servers.start_ms,
            restarts_ms: opts.redis_restarts_ms.clone(),
            sink: Arc::new(Mutex::new(TruthSink::new(membership, keys)?)),
            creators: Vec::new(),
            events: None,
            restarts: None,
            restarts_done: Vec::new(),
            restart_error: None,
        })
    }

    /// Whether the run is complete, and why it ended. A server that failed
    /// under the run (Redis or PostgreSQL gone) leaves it incomplete: its
    /// truth and its reads stop where the failure began. A planned
    /// restart's failures (`--redis-restart-at`) are counted but leave the
    /// run complete; any other failure, or a restart that did not bring
    /// Redis back, does not.
    fn outcome(&self, reason: &str, path_counts: &http::PathCounts) -> (bool, String) {
        let failed_reads = lock(path_counts).get(http::FAILED).copied().unwrap_or(0);
        let sink = lock(&self.sink);
        let counts = &sink.counts;
        let planned = self.slot.planned_failures();
        let unplanned = (counts.failures + failed_reads).saturating_sub(planned);
        let complete = unplanned == 0 && self.restart_error.is_none();
        let reason = if let Some(e) = &self.restart_error {
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
        (complete, reason)
    }

    /// The summary's lines: the creators, the servers, the switches and restarts.
    fn notes(&self, duration_ms: u64, opts: &FttOpts, servers: &Servers) -> String {
        let sink = lock(&self.sink);
        let counts = &sink.counts;
        let seconds = duration_ms.max(1) as f64 / 1000.0;
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
            servers.redis_version,
            servers.pg_version,
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
        for r in &self.restarts_done {
            notes.push_str(&format!(
                "Redis restarted at {} into the run: down {} ms\n",
                since_id::time::format_duration_ms(r.at_ms),
                r.ready_at_ms - r.stopped_at_ms
            ));
        }
        let planned = self.slot.planned_failures();
        if planned > 0 {
            notes.push_str(&format!(
                "{planned} Redis commands failed during the planned restarts (pushes and reads)\n"
            ));
        }
        notes
    }
}

impl Database for FttDatabase {
    /// The creators: notes asked (local and remote together) and each
    /// note's INSERT, from its start to its return.
    fn writers_load(&self, writing_ms: u64) -> Option<analysis::machine::WritersLoad> {
        let sink = lock(&self.sink);
        Some(analysis::machine::WritersLoad::of(
            self.load.local_rate_per_s + self.load.remote_rate_per_s,
            &sink.counts.latency,
            writing_ms,
        ))
    }

    async fn start(&mut self, stop: watch::Receiver<bool>) -> Result<(), String> {
        // Bounded: creators wait when the truth falls behind.
        let (events_tx, mut events_rx) = mpsc::channel::<Event>(4096);
        for index in 0..self.load.creators {
            let pg = Arc::new(connect(&self.config).await?);
            self.creators
                .push(tokio::spawn(creators::run_creator(Creator {
                    index,
                    load: self.load.clone(),
                    pg,
                    redis: self.slot.clone(),
                    events: events_tx.clone(),
                    stop: stop.clone(),
                    ftt_enabled: self.switches.clone(),
                    now: crate::clock::now_ms,
                })));
        }
        drop(events_tx);
        let sink = self.sink.clone();
        self.events = Some(tokio::spawn(async move {
            while let Some(e) = events_rx.recv().await {
                lock(&sink).take(e);
            }
        }));
        self.restarts = Some(tokio::spawn(restart_redis(
            self.redis_server.clone(),
            self.redis_client.clone(),
            self.slot.clone(),
            self.start_ms,
            self.restarts_ms.clone(),
            stop,
        )));
        Ok(())
    }

    async fn pump(&mut self, sender: &RecordSender) {
        let truth = lock(&self.sink).take_truth();
        if !truth.is_empty() {
            sender.truth(truth);
        }
    }

    /// The creators have stopped (the duration passed or a signal came);
    /// their pending pushes end and close the events' channel.
    async fn join(&mut self) -> Result<(), String> {
        for task in self.creators.drain(..) {
            let _ = task.await;
        }
        if let Some(task) = self.restarts.take() {
            let (done, error) = task
                .await
                .unwrap_or_else(|e| (Vec::new(), Some(format!("the Redis restarts failed: {e}"))));
            self.restarts_done = done;
            self.restart_error = error;
        }
        if let Some(task) = self.events.take() {
            let _ = task.await;
        }
        Ok(())
    }

    /// The FTT tables, in every run, empty or not; after the last truth,
    /// whose deleted notes they mark.
    async fn side_rows(&mut self, sender: &RecordSender) {
        let ftt = lock(&self.sink).take_ftt();
        sender.side(ftt.pushes);
        sender.side(ftt.trims);
        sender.side(ftt.deletes);
    }
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
        let restarted = tokio::task::spawn_blocking(move || lock(&server).restart())
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
