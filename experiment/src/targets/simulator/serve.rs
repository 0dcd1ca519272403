//! The simulator's server face, `experiment serve` (the default backend):
//! the leaky simulator alone, in real time, so that anyone can point their
//! own client at it; optionally writing the truth (every status with its ID
//! time, posted, visible and deleted times) to SQLite in the run database's
//! schema (`--truth`), or recording every client with the truth
//! (`--record`), so that a foreign client's leaks can be judged.
//!
//! Shell only: the model is `crate::sim::model`, the HTTP side `crate::sim::server`.

use crate::clients::ClientBook;
use crate::record::Recorder;
use crate::record::truth::TruthWriter;
use crate::serving::{ListenArgs, recording};
use crate::sim::faults::{self, FaultSpec};
use crate::sim::model::{DEFAULT_BACKLOG_MS, SimStatus, Simulator};
use crate::sim::profile::SimConfig;
use crate::sim::server::{self, RateLimits};
use crate::sim::sync::lock;
use since_id::id::Layout;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The simulator's own options of `experiment serve`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SimServeArgs {
    /// Simulator profile: twitter (the default), mastodon, misskey or discord.
    #[arg(long)]
    pub profile: Option<String>,
    /// Write every status's truth to this SQLite file (the run database's `truth` table).
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
    /// TOML file overriding simulator parameters.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Override one simulator parameter (repeatable), e.g. --set rate_per_s=20.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Rate limit per API, e.g. 300/5m (default: 1000000/5m, beyond any real poller).
    #[arg(long, value_name = "N/WINDOW")]
    pub rate_limit: Option<String>,
    /// History the timeline holds when the server starts (default 5m; 0s: empty).
    #[arg(long, value_parser = since_id::time::parse_duration_ms)]
    pub backlog: Option<u64>,
    /// Faults to inject, e.g. 5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s
    #[arg(long, value_name = "SPEC", value_parser = |s: &str| s.parse::<FaultSpec>())]
    pub faults: Option<FaultSpec>,
}

impl SimServeArgs {
    /// The simulator's profile: `--profile`, else twitter.
    pub fn profile(&self) -> &str {
        self.profile.as_deref().unwrap_or("twitter")
    }

    /// Refuses the flags that configure the simulator, on a face that does
    /// not have one: `face` as given (`--backend postgres`, `--log mariadb`).
    pub fn refuse_on(&self, face: &str) -> Result<(), String> {
        let given = [
            (self.profile.is_some(), "--profile"),
            (self.config.is_some(), "--config"),
            (!self.sets.is_empty(), "--set"),
            (self.rate_limit.is_some(), "--rate-limit"),
            (self.backlog.is_some(), "--backlog"),
            (self.faults.is_some(), "--faults"),
        ];
        if let Some((_, flag)) = given.iter().find(|(on, _)| *on) {
            return Err(format!(
                "{flag} configures the simulator and does not apply to {face}"
            ));
        }
        if self.truth.is_some() {
            return Err(format!(
                "--truth is the simulator's: with {face}, --record FILE.db writes the truth"
            ));
        }
        Ok(())
    }
}

/// Serves the simulator until `shutdown` resolves, then flushes the truth;
/// sends the bound address to `ready` once listening. `names` are clients
/// named beside `--client`'s: credential -> name (`experiment judge` names
/// the command it runs).
pub async fn serve(
    listen: ListenArgs,
    args: SimServeArgs,
    names: HashMap<String, String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), String> {
    let config = sim_config(&args)?;
    if listen.record.is_some() && args.truth.is_some() {
        return Err("--record writes the truth too: give --truth or --record, not both".into());
    }
    let quiet = listen.quiet;
    // The banner and the closing line, unless quiet.
    macro_rules! say {
        ($($arg:tt)*) => {
            if !quiet {
                println!($($arg)*);
            }
        };
    }
    let client_names = listen.client_names(names)?;
    let limits = match &args.rate_limit {
        Some(text) => text.parse::<RateLimits>()?,
        None => RateLimits::default(),
    };
    let (listener, bound) = listen.listen().await?;

    let started = crate::clock::now_ms();
    let layout = config.layout();
    let backlog_ms = args.backlog.unwrap_or(DEFAULT_BACKLOG_MS);
    let mut sim = Simulator::with_backlog(config.clone(), listen.seed, started, backlog_ms);
    let run = serve_run_row(&config, listen.seed, &limits, started, backlog_ms);
    let truth = match (&args.truth, &listen.record) {
        (Some(path), _) => Some(TruthSink::Writer(
            TruthWriter::open(path, &run)?,
            layout.clone(),
        )),
        (None, Some(path)) => {
            let recorder = Recorder::create(path, &run, &[])?;
            Some(TruthSink::Recorder(recorder, layout.clone()))
        }
        (None, None) => {
            sim.set_truth_recording(false);
            None
        }
    };
    // What the recording middleware sends requests to: the recorder's sender.
    let record_to = match &truth {
        Some(TruthSink::Recorder(recorder, _)) => Some(recorder.sender()),
        _ => None,
    };
    let sim = Arc::new(Mutex::new(sim));

    if !quiet {
        print!("{}", banner(&config, &listen, &args, bound));
    }
    if let Some(ready) = ready {
        let _ = ready.send(bound);
    }

    // The truth is taken every second whether or not anyone asks: statuses
    // exist on the simulator's clock, not on its readers'.
    let (stop_flush, flush_stopped) = tokio::sync::oneshot::channel::<()>();
    let flusher = truth.map(|writer| tokio::spawn(flush_truth(sim.clone(), writer, flush_stopped)));

    let mut app = server::router(sim, limits);
    if let Some(spec) = args.faults.clone() {
        app = faults::layer(app, faults::FaultPlan::new(spec, listen.seed));
    }
    if let Some(sender) = record_to {
        // Outside the faults: a client is recorded as served, faults included.
        app = recording::layer(app, ClientBook::new(layout.clone(), client_names), sender);
    }
    let served = server::serve(listener, app, shutdown).await;
    let _ = stop_flush.send(());
    let flushed = match flusher {
        Some(task) => task
            .await
            .map_err(|e| format!("truth writer failed: {e}"))
            .and_then(|r| r),
        None => Ok(()),
    };
    served?;
    flushed?;
    say!("stopped");
    Ok(())
}

/// The simulator's parameters: the profile, then `--config`, then each `--set`.
fn sim_config(args: &SimServeArgs) -> Result<SimConfig, String> {
    let mut config = SimConfig::profile(args.profile())?;
    let file = match &args.config {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        ),
        None => None,
    };
    config.apply_overrides(file.as_deref(), &args.sets)?;
    Ok(config)
}

/// What the server prints when it listens: the profile, every endpoint, where
/// the truth and the recording go.
fn banner(
    config: &SimConfig,
    listen: &ListenArgs,
    args: &SimServeArgs,
    bound: SocketAddr,
) -> String {
    let mut out = format!(
        "snowleak simulator: profile {}, seed {}, layout {}, {:.3} statuses/s\n",
        config.profile,
        listen.seed,
        config.layout(),
        config.rate_per_s
    );
    for (api, url) in server::endpoints(bound) {
        out.push_str(&format!("  {api:<15} {url}\n"));
    }
    if let Some(path) = &args.truth {
        out.push_str(&format!("  truth           {}\n", path.display()));
    }
    if let Some(path) = &listen.record {
        out.push_str(&format!("{}\n", recording::banner_line(path)));
    }
    out.push_str("Ctrl-C stops.\n");
    out
}

/// Takes the truth every second, whether or not anyone asks (statuses exist
/// on the simulator's clock, not on its readers'), and once more at the stop.
async fn flush_truth(
    sim: Arc<Mutex<Simulator>>,
    writer: TruthSink,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> Result<(), String> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let last = tokio::select! {
            _ = tick.tick() => false,
            _ = &mut stopped => true,
        };
        let batch = {
            let mut sim = lock(&sim);
            sim.advance(crate::clock::now_ms());
            sim.take_truth()
        };
        writer.send(batch);
        if last {
            return writer.finish();
        }
    }
}

/// Where the truth goes: the truth file's writer (`--truth`), or the
/// recorder that also records the clients (`--record`).
enum TruthSink {
    Writer(TruthWriter, Layout),
    Recorder(Recorder, Layout),
}

impl TruthSink {
    fn send(&self, batch: Vec<SimStatus>) {
        match self {
            TruthSink::Writer(writer, layout) => writer.send(
                batch
                    .iter()
                    .map(|s| crate::sim::truth_row(layout, s))
                    .collect(),
            ),
            TruthSink::Recorder(recorder, layout) => {
                if !batch.is_empty() {
                    let rows = batch
                        .iter()
                        .map(|s| crate::sim::truth_row(layout, s))
                        .collect();
                    recorder.sender().latest_truth(rows);
                    let authors = batch
                        .iter()
                        .map(|s| rundb::TruthAuthorRow {
                            id: layout.format(s.id),
                            author: i64::from(s.author),
                        })
                        .collect();
                    recorder.sender().side(authors);
                }
            }
        }
    }

    fn finish(self) -> Result<(), String> {
        match self {
            TruthSink::Writer(writer, _) => writer.finish(),
            TruthSink::Recorder(recorder, _) => recorder
                .finish(crate::clock::now_ms(), true, "stopped")
                .map(|_| ()),
        }
    }
}

/// The `runs` row of a serve session.
fn serve_run_row(
    config: &SimConfig,
    seed: u64,
    limits: &RateLimits,
    started_ms: i64,
    backlog_ms: u64,
) -> rundb::RunRow {
    let config_json = serde_json::json!({"sim": config, "rate_limit": limits.to_string(), "backlog_ms": backlog_ms});
    let target = ("sim-serve", config.profile.as_str());
    recording::run_row(target, seed, started_ms, &config.layout(), config_json)
}

/// `experiment serve` over real HTTP on loopback: its backlog, its bad
/// input, and the truth it writes.
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn client() -> reqwest::Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::Client::builder().build().unwrap()
    }

    /// The values of `key` in a JSON array of objects, as text.
    fn field(body: &Value, key: &str) -> Vec<String> {
        body.as_array()
            .unwrap()
            .iter()
            .map(|v| match &v[key] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect()
    }

    /// The options of a test's serve: the simulator's and where it listens.
    struct ServeArgs {
        listen: ListenArgs,
        sim: SimServeArgs,
    }

    fn serve_args(sets: &[&str]) -> ServeArgs {
        ServeArgs {
            listen: ListenArgs {
                seed: 1,
                addr: "127.0.0.1:0".into(),
                record: None,
                clients: Vec::new(),
                quiet: false,
            },
            sim: SimServeArgs {
                sets: sets.iter().map(|s| s.to_string()).collect(),
                // An empty timeline at the start, as these tests expect.
                backlog: Some(0),
                ..SimServeArgs::default()
            },
        }
    }

    /// Serves until `shutdown` resolves; sends the bound address to `ready` once listening.
    async fn serve_until(
        args: ServeArgs,
        shutdown: impl Future<Output = ()> + Send + 'static,
        ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
    ) -> Result<(), String> {
        serve(args.listen, args.sim, HashMap::new(), shutdown, ready).await
    }

    /// Starts `experiment serve` with `args`; returns its address, the sender
    /// that stops it, and its task.
    async fn spawn_serve(
        args: ServeArgs,
    ) -> (
        std::net::SocketAddr,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<Result<(), String>>,
    ) {
        let (ready, bound) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(serve_until(
            args,
            async {
                let _ = stopped.await;
            },
            Some(ready),
        ));
        (bound.await.unwrap(), stop, task)
    }

    /// The newest page of 200 of the served List (Twitter v1.1).
    async fn newest_page(http: &reqwest::Client, addr: std::net::SocketAddr) -> Value {
        http.get(format!("http://{addr}/1.1/lists/statuses.json?count=200"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `--backlog`: the first request meets a timeline with history, a full page.
    #[tokio::test]
    async fn serve_starts_with_its_backlog() {
        let mut args = serve_args(&["rate_per_s=10"]);
        args.sim.backlog = Some(60_000);
        let (addr, stop, task) = spawn_serve(args).await;
        let body = newest_page(&client(), addr).await;
        assert_eq!(
            field(&body, "id_str").len(),
            200,
            "a minute at 10/s fills a page"
        );
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn serve_reports_bad_input_as_one_line_errors() {
        let never = std::future::pending::<()>;
        let mut args = serve_args(&[]);
        args.sim.profile = Some("bluesky".into());
        let err = serve_until(args, never(), None).await.unwrap_err();
        assert!(err.contains("twitter, mastodon, misskey"), "{err}");
        let err = serve_until(serve_args(&["nope=1"]), never(), None)
            .await
            .unwrap_err();
        assert!(err.contains("unknown simulator key 'nope'"), "{err}");
        let mut args = serve_args(&[]);
        args.sim.rate_limit = Some("lots".into());
        assert!(
            serve_until(args, never(), None)
                .await
                .unwrap_err()
                .contains("N/WINDOW")
        );
        let mut args = serve_args(&[]);
        args.sim.config = Some("/nonexistent/sim.toml".into());
        let err = serve_until(args, never(), None).await.unwrap_err();
        assert!(
            err.starts_with("cannot read /nonexistent/sim.toml"),
            "{err}"
        );
        let mut args = serve_args(&[]);
        args.listen.addr = "localhost".into();
        assert!(
            serve_until(args, never(), None)
                .await
                .unwrap_err()
                .contains("bad --addr")
        );
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut args = serve_args(&[]);
        args.listen.addr = taken.local_addr().unwrap().to_string();
        let err = serve_until(args, never(), None).await.unwrap_err();
        assert!(
            err.starts_with("cannot listen on") && !err.contains('\n'),
            "{err}"
        );
    }

    /// End to end in real time: everything the server returned is in the truth
    /// file, which has the schema's version and a closed `runs` row.
    #[tokio::test]
    async fn serve_writes_the_truth_of_what_it_served() {
        let dir = testkit::temp_dir("truth");
        let path = dir.join("truth.db");
        let mut args = serve_args(&["rate_per_s=500", "delay_sigma=0"]);
        args.sim.truth = Some(path.clone());
        let (addr, stop, task) = spawn_serve(args).await;
        let http = client();
        let mut served = Vec::new();
        // No sleeping: ask until statuses have appeared (500/s, visible after ~40 ms).
        for _ in 0..100_000 {
            let body = newest_page(&http, addr).await;
            served = field(&body, "id_str");
            if !served.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(!served.is_empty());
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();

        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, rundb::schema::SCHEMA_VERSION);
        let (complete, profile): (i64, String) = conn
            .query_row("SELECT complete, profile FROM runs", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((complete, profile.as_str()), (1, "twitter"));
        for id in &served {
            let n: i64 = conn
                .query_row("SELECT count(*) FROM truth WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(n, 1, "served {id} is in the truth");
        }
    }

    /// `--record`: two clients with two credentials and one without are three
    /// pollers; each one's observations are exactly what it was served; the
    /// credentials are nowhere in the file; `analyze`'s checker reads the run
    /// The Mastodon profile at 50 statuses/s with a minute of backlog,
    /// served with `--record` to a fresh `clients.db` in a directory named
    /// for `test`.
    async fn spawn_recording_mastodon(
        test: &str,
    ) -> (
        std::path::PathBuf,
        (
            std::net::SocketAddr,
            tokio::sync::oneshot::Sender<()>,
            tokio::task::JoinHandle<Result<(), String>>,
        ),
    ) {
        let db = testkit::temp_dir(test).join("clients.db");
        let mut args = serve_args(&["rate_per_s=50"]);
        args.sim.profile = Some("mastodon".into());
        args.sim.backlog = Some(60_000);
        args.listen.record = Some(db.clone());
        (db, spawn_serve(args).await)
    }

    /// and gives each client a verdict.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn record_tells_clients_apart_and_keeps_what_each_was_served() {
        let (db, (addr, stop, task)) = spawn_recording_mastodon("record").await;
        let http = client();
        let url = format!("http://{addr}/api/v1/timelines/public");
        // Polls `rounds` times with since_id = the newest seen; returns every ID served.
        let poll = |auth: Option<&'static str>, ua: &'static str, rounds: usize| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let mut seen: Vec<String> = Vec::new();
                let mut since: Option<String> = None;
                for _ in 0..rounds {
                    let mut req = http
                        .get(&url)
                        .header("User-Agent", ua)
                        .query(&[("limit", "40")]);
                    if let Some(s) = &since {
                        req = req.query(&[("since_id", s.as_str())]);
                    }
                    if let Some(a) = auth {
                        req = req.header("Authorization", a);
                    }
                    let page: Value = req.send().await.unwrap().json().await.unwrap();
                    let ids = field(&page, "id");
                    if let Some(first) = ids.first() {
                        since = Some(first.clone());
                    }
                    seen.extend(ids);
                }
                seen
            }
        };
        let a = poll(Some("Bearer token-of-a"), "bot", 4).await;
        let b = poll(Some("Bot token-of-b"), "bot", 2).await;
        let c = poll(None, "my reader/1.0", 3).await;
        // Not a timeline: not recorded.
        http.get(format!("http://{addr}/api/v1/instance"))
            .send()
            .await
            .unwrap();
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
        assert!(!a.is_empty() && !b.is_empty() && !c.is_empty());

        let conn = rusqlite::Connection::open(&db).unwrap();
        let pollers: Vec<(i64, String, String)> = conn
            .prepare("SELECT id, name, policy FROM pollers ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(pollers.len(), 3, "{pollers:?}");
        assert!(pollers.iter().all(|p| p.2 == crate::clients::CLIENT_POLICY));
        assert_eq!(pollers[2].1, "user-agent my reader/1.0 public");
        for ((id, name, _), (served, rounds)) in pollers.iter().zip([(&a, 4), (&b, 2), (&c, 3)]) {
            let observed: Vec<String> = conn
                .prepare("SELECT id FROM requests WHERE poller_id = ?1 ORDER BY id")
                .unwrap()
                .query_map([id], |r| r.get(0))
                .unwrap()
                .flat_map(|request| rundb::read::observed(&conn, request.unwrap()).unwrap())
                .collect();
            assert_eq!(
                &observed, served,
                "{name}: recorded exactly what it was served"
            );
            let (requests, cycles): (i64, i64) = conn
                .query_row(
                    "SELECT count(*), count(DISTINCT cycle) FROM requests WHERE poller_id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .unwrap();
            assert_eq!(
                (requests, cycles),
                (rounds, rounds),
                "{name}: one cycle a poll"
            );
        }
        let asked: i64 = conn
            .query_row(
                "SELECT count(*) FROM client_requests WHERE params LIKE '%since_id%'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(asked, 3 + 1 + 2, "the since_id each request sent is kept");
        let truth: i64 = conn
            .query_row("SELECT count(*) FROM truth", [], |r| r.get(0))
            .unwrap();
        assert!(truth > 0, "the truth is recorded beside the clients");
        drop(conn);
        let bytes = std::fs::read(&db).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains("token-of-a") && !text.contains("token-of-b"));

        let conn = analysis::load::open(&db).unwrap();
        let run = analysis::load::pick_run(&conn, &db, None).unwrap();
        let loaded = analysis::load::load(&conn, run).unwrap();
        let judged = analysis::diff::analyze(&loaded.history);
        assert_eq!(judged.verdicts.len(), 3, "a verdict for each client");
    }

    /// A client of a home timeline is owed only the statuses of the authors
    /// the reader follows: its requests are recorded with that scope, and
    /// analyze leaves every other status unowed to it (issue 23, item 8).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_home_timeline_client_is_owed_its_follow_set_only() {
        let (db, (addr, stop, task)) = spawn_recording_mastodon("record-home").await;
        let http = client();
        let url = format!("http://{addr}/api/v1/timelines/home");
        let me: Value = http
            .get(format!("http://{addr}/api/v1/accounts/verify_credentials"))
            .bearer_auth("home-token")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(me["username"], "snowleak");
        let mut since: Option<String> = None;
        let mut served = 0;
        for _ in 0..3 {
            let mut req = http
                .get(&url)
                .bearer_auth("home-token")
                .query(&[("limit", "40")]);
            if let Some(s) = &since {
                req = req.query(&[("since_id", s.as_str())]);
            }
            let page: Value = req.send().await.unwrap().json().await.unwrap();
            let ids = field(&page, "id");
            served += ids.len();
            since = ids.first().cloned().or(since);
        }
        stop.send(()).unwrap();
        task.await.unwrap().unwrap();
        assert!(served > 0);
        let conn = rusqlite::Connection::open(&db).unwrap();
        let config = SimConfig::profile("mastodon").unwrap();
        let follows = crate::sim::model::home_follows(1, config.authors);
        let scopes: Vec<String> = conn
            .prepare("SELECT DISTINCT scope FROM client_requests")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let expected =
            rundb::scope::Scope::Authors(follows.iter().map(|&a| i64::from(a)).collect());
        assert_eq!(
            scopes,
            [expected.to_string()],
            "the login is not a timeline request"
        );
        let authors: HashMap<String, i64> = conn
            .prepare("SELECT id, author FROM truth_authors")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let conn = analysis::load::open(&db).unwrap();
        let run = analysis::load::pick_run(&conn, &db, None).unwrap();
        let loaded = analysis::load::load(&conn, run).unwrap();
        let h = &loaded.history;
        let (mut owed, mut unowed) = (0, 0);
        for su in 0..h.statuses.len() {
            let id = loaded.status_id(su as u32);
            let author = authors[id.as_ref()] as u32;
            let unserved = h.unserved_to(su) & 1 == 1;
            assert_eq!(
                unserved,
                !follows.contains(&author),
                "status {id} by {author}"
            );
            if unserved { unowed += 1 } else { owed += 1 }
        }
        assert!(owed > 0 && unowed > 0, "{owed} owed, {unowed} not");
    }
}
