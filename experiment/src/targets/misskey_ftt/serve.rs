//! The FTT target's server face, `experiment serve --backend misskey-ftt`:
//! a throwaway Redis and PostgreSQL, the creators loading them, and the read
//! side ([`super::http`]) for any client ([`serve`]). With `--record`, every
//! client of the timelines is recorded as with the simulator, each owed the
//! notes its endpoint shows ([`Served::scope`]), from the ms after the
//! note's INSERT returned (docs/misskey-ftt.md), and each note's pushes to
//! and trims of the timelines' Redis lists (`ftt_pushes`, `ftt_trims`).
//! Dropping [`Served`] stops both servers.

use super::creators::{self, Event, Load};
use super::http::{self, ME, PathCounts};
use super::read::Switches;
use super::redis::Redis;
use super::store::{self, Source};
use super::timeline::{LiveSwitches, Reader, redis_keys};
use crate::clients::ClientBook;
use crate::record::Recorder;
use crate::servers::postgres::Cluster;
use crate::servers::postgres::connect;
use crate::serving::{ListenArgs, recording};
use crate::sim::sync::lock;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use rundb::TruthRow;
use rundb::scope::Scope;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// The load of `serve --backend misskey-ftt`: the run's defaults
/// (docs/misskey-ftt.md), with local notes at 10 a second so that a client
/// meets full pages within seconds.
pub fn serve_load(seed: u64) -> Load {
    Load {
        creators: 4,
        local_users: 50,
        remote_users: 50,
        follows_per_user: 20,
        local_rate_per_s: 10.0,
        remote_rate_per_s: 2.0,
        federation_delay_ms: 2_000,
        federation_delay_dist: Default::default(),
        late_share: 0.02,
        late_max_ms: super::federation::LATE_MAX_DEFAULT_MS,
        deletes: Default::default(),
        caps: Default::default(),
        arrivals: Default::default(),
        seed,
        graph_seed: seed,
    }
}

/// What the creators made since the last [`Served::take_truth`].
#[derive(Default)]
struct Taken {
    rows: Vec<TruthRow>,
    /// (ID, author), for the home and hybrid timelines' scopes.
    authors: Vec<rundb::TruthAuthorRow>,
    /// Commit times of notes whose push has not been reported yet.
    committed: HashMap<String, i64>,
    /// `ftt_pushes` and `ftt_trims` rows, for the lists of the three
    /// timelines, and `ftt_deletes`, kept to the end (the recorder's writer
    /// holds the file).
    ftt: rundb::FttRows,
    notes: u64,
    failures: u64,
    last_failure: Option<String>,
}

/// The running server.
pub struct Served {
    pub load: Load,
    reader: Reader,
    counts: PathCounts,
    follows_of_me: BTreeSet<i64>,
    taken: Arc<Mutex<Taken>>,
    stop_creators: watch::Sender<bool>,
    creators: Vec<tokio::task::JoinHandle<()>>,
    truth_task: tokio::task::JoinHandle<()>,
    pub redis_version: String,
    pub postgres_version: String,
    /// Last: fields drop in order, and the connections go before the servers.
    cluster: Cluster,
    redis: Redis,
}

impl Served {
    /// Starts both servers, the tables and the creators. With `keep_truth`,
    /// every note committed is kept until taken; without, only counted.
    pub async fn start(load: Load, keep_truth: bool) -> Result<Served, String> {
        let redis = Redis::start()?;
        let cluster = Cluster::start()?;
        let config = cluster.config();
        let admin = connect(&config).await?;
        let postgres_version: String = admin
            .query_one("SHOW server_version", &[])
            .await
            .map_err(|e| format!("cannot read PostgreSQL's version: {e}"))?
            .get(0);
        let follows = load.follows();
        store::create(&admin, &follows).await?;
        let follows_of_me = follows
            .iter()
            .filter(|(_, follower)| *follower == ME)
            .map(|(followee, _)| i64::from(*followee))
            .chain([i64::from(ME)])
            .collect();
        let client = redis.client()?;
        let redis_conn = || async {
            client
                .get_multiplexed_async_connection_with_config(&super::driver::redis_config())
                .await
                .map_err(|e| format!("cannot connect to Redis: {e}"))
        };
        let reader = Reader {
            redis: redis_conn().await?,
            pg: Arc::new(connect(&config).await?),
            switches: Arc::new(LiveSwitches::new(Switches::default())),
        };
        let (stop_creators, stop) = watch::channel(false);
        // Bounded: creators wait when the truth falls behind.
        let (events_tx, events) = mpsc::channel::<Event>(4096);
        let shared = Arc::new(load.clone());
        let ftt_on = Arc::new(AtomicBool::new(true));
        let mut creators = Vec::new();
        for i in 0..load.creators {
            creators.push(tokio::spawn(creators::run_creator(creators::Creator {
                index: i,
                load: shared.clone(),
                pg: Arc::new(connect(&config).await?),
                redis: redis_conn().await?,
                events: events_tx.clone(),
                stop: stop.clone(),
                ftt_enabled: ftt_on.clone(),
                now: crate::clock::now_ms,
            })));
        }
        drop(events_tx);
        let taken = Arc::new(Mutex::new(Taken::default()));
        let truth_task = tokio::spawn(take_events(events, taken.clone(), keep_truth));
        Ok(Served {
            load,
            reader,
            counts: PathCounts::default(),
            follows_of_me,
            taken,
            stop_creators,
            creators,
            truth_task,
            redis_version: redis.version().to_string(),
            postgres_version,
            cluster,
            redis,
        })
    }

    /// The Misskey API over the lists and the table.
    pub fn router(&self) -> axum::Router {
        http::router(self.reader.clone(), self.counts.clone())
    }

    /// The notes a timeline endpoint (`timeline`, `local-timeline`,
    /// `hybrid-timeline`, `global-timeline`) serves, for `--record`: a client is owed only
    /// those. The hybrid timeline's local notes are the local users'.
    pub fn scope(&self, endpoint: &str) -> Option<Scope> {
        let locals = || (0..i64::from(self.load.local_users)).collect::<BTreeSet<i64>>();
        match endpoint {
            "timeline" => Some(Scope::Authors(self.follows_of_me.clone())),
            "local-timeline" => Some(Scope::Local),
            // Every note: Misskey's global timeline is every public note.
            "global-timeline" => Some(Scope::All),
            "hybrid-timeline" => {
                let mut both = locals();
                both.extend(self.follows_of_me.iter().copied());
                Some(Scope::Authors(both))
            }
            _ => None,
        }
    }

    /// The truth of every note committed since the last call, and the
    /// authors of those notes (nothing without `keep_truth`).
    pub fn take_truth(&self) -> (Vec<TruthRow>, Vec<rundb::TruthAuthorRow>) {
        let mut taken = lock(&self.taken);
        (
            std::mem::take(&mut taken.rows),
            std::mem::take(&mut taken.authors),
        )
    }

    /// Writes the pushes, trims and deletions of the whole serve into the FTT
    /// tables of run `run_id` in `db`, through the recorder module
    /// ([`crate::record::truth::append_ftt`]); call after the recorder has finished.
    pub fn write_ftt(&self, db: &std::path::Path, run_id: i64) -> Result<(), String> {
        let taken = lock(&self.taken);
        crate::record::truth::append_ftt(db, run_id, &taken.ftt)
    }

    /// Notes made, creator failures, the last failure, and the reads per path.
    pub fn summary(&self) -> String {
        let taken = lock(&self.taken);
        format!(
            "{} notes, {} creator failures{}; {}",
            taken.notes,
            taken.failures,
            taken
                .last_failure
                .as_ref()
                .map(|e| format!(" (last: {e})"))
                .unwrap_or_default(),
            http::counts_line(&self.counts).trim_end()
        )
    }

    /// The Redis socket, for redis-cli and load tools.
    pub fn redis_socket(&self) -> std::path::PathBuf {
        self.redis.socket()
    }

    /// The PostgreSQL cluster's socket directory.
    pub fn postgres_dir(&self) -> &std::path::Path {
        self.cluster.dir()
    }

    /// Stops the creators and waits for their last notes' truth; the servers
    /// go when `self` is dropped.
    pub async fn stop_creators(&mut self) {
        let _ = self.stop_creators.send(true);
        for task in self.creators.drain(..) {
            let _ = task.await;
        }
        // Pushes still running hold the channel open; they end on their own.
        let _ = (&mut self.truth_task).await;
    }
}

/// The timeline endpoints, under `/api/notes/`.
const ENDPOINTS: [&str; 4] = [
    "timeline",
    "local-timeline",
    "hybrid-timeline",
    "global-timeline",
];

/// The notes each timeline endpoint shows.
type Scopes = Arc<HashMap<&'static str, rundb::scope::Scope>>;

/// Marks each timeline response with the notes its endpoint shows
/// (`crate::sim::server::Scope`, read by the recording layer).
async fn mark_scope(State(scopes): State<Scopes>, request: Request, next: Next) -> Response {
    let endpoint = request
        .uri()
        .path()
        .strip_prefix("/api/notes/")
        .map(str::to_string);
    let mut response = next.run(request).await;
    // A narrower mark the handler set (`withFiles`: `Scope::None`) stands.
    if let Some(scope) = endpoint.and_then(|e| scopes.get(e.as_str()))
        && response.extensions().get::<rundb::scope::Scope>().is_none()
    {
        response.extensions_mut().insert(scope.clone());
    }
    response
}

/// Serves until `shutdown` resolves, then stops the creators, writes the
/// last truth and removes both servers.
pub async fn serve(
    args: ListenArgs,
    names: HashMap<String, String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let client_names = args.client_names(names)?;
    let (listener, bound) = args.listen().await?;
    let layout: since_id::id::Layout = "misskey-aidx".parse().map_err(|e| format!("{e}"))?;
    let load = serve_load(args.seed);
    let mut served = Served::start(load.clone(), args.record.is_some()).await?;
    let recorder = match &args.record {
        Some(path) => {
            let config = serde_json::json!({
                "load": &load,
                "redis_version": served.redis_version,
                "postgres_version": served.postgres_version,
            });
            let now = crate::clock::now_ms();
            let target = ("misskey-ftt-serve", "misskey-ftt");
            let run = recording::run_row(target, args.seed, now, &layout, config);
            Some(Recorder::create(path, &run, &[])?)
        }
        None => None,
    };
    if !args.quiet {
        println!(
            "snowleak Misskey FTT: Redis {} and PostgreSQL {}, {} creators, {} local + {} remote notes/s",
            served.redis_version,
            served.postgres_version,
            load.creators,
            load.local_rate_per_s,
            load.remote_rate_per_s
        );
        for endpoint in ENDPOINTS {
            println!("  misskey         http://{bound}/api/notes/{endpoint}");
        }
        println!(
            "  redis           {} (unix socket)",
            served.redis_socket().display()
        );
        println!(
            "  postgresql      {} (socket directory)",
            served.postgres_dir().display()
        );
        if let Some(path) = &args.record {
            println!("{}", recording::banner_line(path));
        }
        println!("Ctrl-C stops (and removes both servers).");
    }
    let mut app = served.router();
    if let Some(recorder) = &recorder {
        // Inside the recording layer: it reads the mark on the way back.
        let scopes: Scopes = Arc::new(
            ENDPOINTS
                .iter()
                .filter_map(|e| served.scope(e).map(|s| (*e, s)))
                .collect(),
        );
        app = app.layer(axum::middleware::from_fn_with_state(scopes, mark_scope));
        let book = ClientBook::new(layout.clone(), client_names);
        app = recording::layer(app, book, recorder.sender());
    }
    let mut server = tokio::spawn(crate::sim::server::serve(listener, app, shutdown));
    // The truth is taken every second, whether or not anyone reads.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let send_truth = |served: &Served| {
        if let Some(recorder) = &recorder {
            let (rows, authors) = served.take_truth();
            recorder.sender().truth(rows);
            recorder.sender().side(authors);
        }
    };
    let result = loop {
        tokio::select! {
            _ = tick.tick() => send_truth(&served),
            done = &mut server => break done.map_err(|e| format!("server: {e}")).and_then(|r| r),
        }
    };
    served.stop_creators().await;
    send_truth(&served);
    let summary = served.summary();
    if let (Some(recorder), Some(path)) = (recorder, &args.record) {
        let run_id = recorder.run_id;
        recorder.finish(crate::clock::now_ms(), true, "stopped")?;
        // After the recorder closed the file, as a run writes them.
        served.write_ftt(path, run_id)?;
    }
    drop(served);
    result?;
    if !args.quiet {
        println!("{summary}");
        println!("stopped");
    }
    Ok(())
}

/// Drains the creators' events: truth rows, pushes, trims and deletions (if kept) and counts.
async fn take_events(mut events: mpsc::Receiver<Event>, taken: Arc<Mutex<Taken>>, keep: bool) {
    let layout: since_id::id::Layout = match "misskey-aidx".parse() {
        Ok(l) => l,
        Err(_) => return,
    };
    // The lists any of the three endpoints reads, as user 0.
    let keys: HashSet<String> = [
        Source::Home { me: ME },
        Source::Local,
        Source::Hybrid { me: ME },
    ]
    .into_iter()
    .flat_map(redis_keys)
    .collect();
    while let Some(event) = events.recv().await {
        let mut taken = lock(&taken);
        match event {
            Event::Created(c) => {
                taken.notes += 1;
                if !keep {
                    continue;
                }
                let row = match super::truth::note_row(&layout, &c) {
                    Ok(row) => row,
                    Err(m) => {
                        taken.failures += 1;
                        taken.last_failure = Some(m);
                        continue;
                    }
                };
                taken.authors.push(rundb::TruthAuthorRow {
                    id: c.note.id.clone(),
                    author: i64::from(c.note.user_id),
                });
                taken.committed.insert(c.note.id, c.committed_ms);
                taken.rows.push(row);
            }
            Event::Pushed { id, report } => {
                if !keep {
                    continue;
                }
                let committed = taken.committed.remove(&id).unwrap_or_default();
                super::driver::ftt_rows(&id, committed, report, &keys, &mut taken.ftt);
            }
            Event::Deleted(row) => {
                if keep {
                    taken.ftt.deletes.push(row);
                }
            }
            Event::Failed(e) => {
                taken.failures += 1;
                taken.last_failure = Some(e);
            }
        }
    }
}
