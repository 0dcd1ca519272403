//! `experiment serve`: the leaky simulator alone, in real time, so that anyone
//! can point their own client at it; optionally writing the truth (every
//! status with its ID time, posted, visible and deleted times) to SQLite in
//! the run database's schema, so that a foreign client's leaks can be judged.
//!
//! Shell only: the model is `crate::sim::model`, the HTTP side `crate::sim::server`;
//! `--backend postgres` is the PostgreSQL target's server (`targets::postgres::http`).

mod misskey_ftt;
mod postgres;
mod recording;

use crate::clients::ClientBook;
use crate::record::Recorder;
use crate::sim::faults::{self, FaultSpec};
use crate::sim::model::DEFAULT_BACKLOG_MS;
use crate::sim::model::{SimStatus, Simulator};
use crate::sim::profile::SimConfig;
use crate::sim::server::{self, RateLimits};
use rundb::write::{self, OnConflict};
use rusqlite::Connection;
use since_id::id::Layout;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Run the leaky simulator as an HTTP server (Twitter v1.1, X API v2, Mastodon, Misskey and Discord dialects).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Simulator profile: twitter (the default), mastodon, misskey or discord.
    #[arg(long)]
    pub profile: Option<String>,
    /// Seed of the simulator's random stream (same seed, same statuses).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Address to listen on. Anything but loopback is reachable by others: a warning is printed.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Write every status's truth to this SQLite file (the run database's `truth` table).
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
    /// Record every client's timeline requests and what each was served, with
    /// the truth, in this run database, so that `analyze FILE` judges each
    /// client (docs/judging.md). Clients are told apart by their credential
    /// (kept only as a short hash) or else their User-Agent.
    #[arg(long, value_name = "FILE.db")]
    pub record: Option<PathBuf>,
    /// Name the client whose token is in the environment variable ENV
    /// (repeatable; with --record): its poller is called NAME.
    #[arg(long = "client", value_name = "NAME=ENV")]
    pub clients: Vec<String>,
    /// TOML file overriding simulator parameters.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Override one simulator parameter (repeatable), e.g. --set rate_per_s=20.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,
    /// Rate limit per API, e.g. 300/5m (default: effectively unlimited).
    #[arg(long, value_name = "N/WINDOW")]
    pub rate_limit: Option<String>,
    /// History the timeline holds when the server starts (default 5m; 0s: empty).
    #[arg(long, value_parser = since_id::time::parse_duration_ms)]
    pub backlog: Option<u64>,
    /// Faults to inject, e.g. 5xx=2%,429=1%,timeout=1%,reset=0.5%,truncate=0.5%,reorder=1%,duplicate=1%,slow=2%:3s
    #[arg(long, value_name = "SPEC", value_parser = |s: &str| s.parse::<FaultSpec>())]
    pub faults: Option<FaultSpec>,
    /// What serves the timeline: `simulator`, `postgres` (a throwaway
    /// PostgreSQL cluster loaded by writers, served in the Mastodon dialect),
    /// or `misskey-ftt` (Misskey's Fanout Timeline on a throwaway Redis and
    /// PostgreSQL, served in the Misskey dialect).
    #[arg(long, default_value = "simulator", value_parser = |s: &str| s.parse::<Backend>())]
    pub backend: Backend,
    /// Print nothing on standard output (`experiment judge`, whose output is
    /// the verdicts; not a flag).
    #[arg(skip)]
    pub quiet: bool,
}

impl ServeArgs {
    /// The simulator's profile: `--profile`, else twitter.
    pub fn profile(&self) -> &str {
        self.profile.as_deref().unwrap_or("twitter")
    }

    /// Listens on `--addr` (a warning when others can reach it); returns the
    /// listener and the address bound (`--addr 127.0.0.1:0` picks a port).
    async fn listen(&self) -> Result<(tokio::net::TcpListener, SocketAddr), String> {
        let addr: SocketAddr = self.addr.parse().map_err(|_| {
            format!(
                "bad --addr '{}': expected IP:PORT such as 127.0.0.1:8080",
                self.addr
            )
        })?;
        if !addr.ip().is_loopback() {
            eprintln!(
                "warning: listening on {addr}, which is not a loopback address: other machines can reach the server"
            );
        }
        let listener = server::bind(addr).await?;
        let bound = listener
            .local_addr()
            .map_err(|e| format!("no local address: {e}"))?;
        Ok((listener, bound))
    }

    /// Refuses the flags that configure the simulator, on a backend
    /// (`postgres`, `misskey-ftt`) that does not have one.
    fn refuse_simulator_flags(&self, backend: &str) -> Result<(), String> {
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
                "{flag} configures the simulator and does not apply to --backend {backend}"
            ));
        }
        if self.truth.is_some() {
            return Err(format!(
                "--truth is the simulator's: with --backend {backend}, --record FILE.db writes the truth"
            ));
        }
        if self.record.is_none() && !self.clients.is_empty() {
            return Err("--client names a client of --record: add --record FILE.db".into());
        }
        Ok(())
    }
}

/// What serves the timeline of `experiment serve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The embedded leaky simulator.
    Simulator,
    /// A throwaway PostgreSQL cluster loaded by writers, served in the Mastodon dialect.
    Postgres,
    /// Misskey's Fanout Timeline: a throwaway Redis and PostgreSQL loaded by
    /// note creators, served in the Misskey dialect (docs/misskey-ftt.md).
    MisskeyFtt,
}

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Backend, String> {
        match s {
            "simulator" => Ok(Backend::Simulator),
            "postgres" => Ok(Backend::Postgres),
            "misskey-ftt" => Ok(Backend::MisskeyFtt),
            _ => Err(format!(
                "unknown backend '{s}': expected simulator, postgres or misskey-ftt"
            )),
        }
    }
}

/// Serves until Ctrl-C or SIGTERM, then flushes the truth.
pub async fn serve_command(args: ServeArgs) -> Result<(), String> {
    if args.backend == Backend::Postgres {
        return postgres::serve(args, HashMap::new(), crate::session::wait_for_signal()).await;
    }
    if args.backend == Backend::MisskeyFtt {
        return misskey_ftt::serve(args, HashMap::new(), crate::session::wait_for_signal()).await;
    }
    serve_until(args, crate::session::wait_for_signal(), None).await
}

/// Serves until `shutdown` resolves; sends the bound address to `ready` once listening.
pub async fn serve_until(
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), String> {
    serve_naming(args, HashMap::new(), shutdown, ready).await
}

/// [`serve_until`], with clients named beside `--client`'s: credential -> name
/// (`experiment judge` names the command it runs).
pub async fn serve_naming(
    args: ServeArgs,
    names: HashMap<String, String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), String> {
    let mut config = SimConfig::profile(args.profile())?;
    let file = match &args.config {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        ),
        None => None,
    };
    config.apply_overrides(file.as_deref(), &args.sets)?;
    if args.record.is_some() && args.truth.is_some() {
        return Err("--record writes the truth too: give --truth or --record, not both".into());
    }
    if args.record.is_none() && !args.clients.is_empty() {
        return Err("--client names a client of --record: add --record FILE.db".into());
    }
    let quiet = args.quiet;
    // The banner and the closing line, unless quiet.
    macro_rules! say {
        ($($arg:tt)*) => {
            if !quiet {
                println!($($arg)*);
            }
        };
    }
    let mut client_names = client_names(&args.clients)?;
    client_names.extend(names);
    let limits = match &args.rate_limit {
        Some(text) => text.parse::<RateLimits>()?,
        None => RateLimits::default(),
    };
    let (listener, bound) = args.listen().await?;

    let started = crate::clock::now_ms();
    let layout = config.layout();
    let backlog_ms = args.backlog.unwrap_or(DEFAULT_BACKLOG_MS);
    let mut sim = Simulator::with_backlog(config.clone(), args.seed, started, backlog_ms);
    let truth = match (&args.truth, &args.record) {
        (Some(path), _) => Some(TruthSink::Writer(TruthWriter::open(
            path, &config, &args, &limits, started,
        )?)),
        (None, Some(path)) => {
            let run = serve_run_row(&config, args.seed, &limits, started, backlog_ms);
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

    say!(
        "snowleak simulator: profile {}, seed {}, layout {}, {:.3} statuses/s",
        config.profile,
        args.seed,
        layout,
        config.rate_per_s
    );
    for (api, url) in server::endpoints(bound) {
        say!("  {api:<15} {url}");
    }
    if let Some(path) = &args.truth {
        say!("  truth           {}", path.display());
    }
    if let Some(path) = &args.record {
        say!(
            "  recording       {} (every client's requests, and the truth)",
            path.display()
        );
    }
    say!("Ctrl-C stops.");
    if let Some(ready) = ready {
        let _ = ready.send(bound);
    }

    // The truth is taken every second whether or not anyone asks: statuses
    // exist on the simulator's clock, not on its readers'.
    let (stop_flush, mut flush_stopped) = tokio::sync::oneshot::channel::<()>();
    let flusher = truth.map(|writer| {
        let sim = sim.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                let last = tokio::select! {
                    _ = tick.tick() => false,
                    _ = &mut flush_stopped => true,
                };
                let batch = {
                    let mut sim = sim.lock().unwrap_or_else(|e| e.into_inner());
                    sim.advance(crate::clock::now_ms());
                    sim.take_truth()
                };
                writer.send(batch);
                if last {
                    return writer.finish();
                }
            }
        })
    });

    let mut app = server::router(sim, limits);
    if let Some(spec) = args.faults.clone() {
        app = faults::layer(app, faults::FaultPlan::new(spec, args.seed));
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

/// Where the truth goes: the truth file's writer (`--truth`), or the
/// recorder that also records the clients (`--record`).
enum TruthSink {
    Writer(TruthWriter),
    Recorder(Recorder, Layout),
}

impl TruthSink {
    fn send(&self, batch: Vec<SimStatus>) {
        match self {
            TruthSink::Writer(writer) => writer.send(batch),
            TruthSink::Recorder(recorder, layout) => {
                if !batch.is_empty() {
                    let rows = batch
                        .iter()
                        .map(|s| crate::sim::truth_row(layout, s))
                        .collect();
                    recorder.sender().latest_truth(rows);
                    let authors = batch
                        .iter()
                        .map(|s| (layout.format(s.id), i64::from(s.author)))
                        .collect();
                    recorder.sender().truth_authors(authors);
                }
            }
        }
    }

    fn finish(self) -> Result<(), String> {
        match self {
            TruthSink::Writer(writer) => writer.finish(),
            TruthSink::Recorder(recorder, _) => recorder
                .finish(crate::clock::now_ms(), true, "stopped")
                .map(|_| ()),
        }
    }
}

/// `--client NAME=ENV` values as credential -> name; the tokens come from
/// the environment, never from the command line.
fn client_names(specs: &[String]) -> Result<HashMap<String, String>, String> {
    let mut names = HashMap::new();
    for spec in specs {
        let (name, var) = spec
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .ok_or_else(|| {
                format!(
                    "bad --client '{spec}': expected NAME=ENV (the variable that holds its token)"
                )
            })?;
        let token = std::env::var(var).map_err(|_| {
            format!("--client {name}={var}: the environment variable {var} is not set")
        })?;
        names.insert(token.trim().to_string(), name.to_string());
    }
    Ok(names)
}

/// Writes truth batches on its own thread (SQLite is blocking), one
/// transaction per batch.
struct TruthWriter {
    batches: mpsc::Sender<Vec<SimStatus>>,
    thread: std::thread::JoinHandle<Result<(), String>>,
}

impl TruthWriter {
    fn open(
        path: &Path,
        config: &SimConfig,
        args: &ServeArgs,
        limits: &RateLimits,
        started_ms: i64,
    ) -> Result<TruthWriter, String> {
        let backlog_ms = args.backlog.unwrap_or(DEFAULT_BACKLOG_MS);
        let (conn, run_id) =
            open_truth_db(path, config, args.seed, limits, started_ms, backlog_ms)?;
        let layout = config.layout();
        let path = path.display().to_string();
        let (batches, received) = mpsc::channel::<Vec<SimStatus>>();
        let thread = std::thread::spawn(move || -> Result<(), String> {
            let mut conn = conn;
            let mut first_error = None;
            for batch in received {
                if let Err(e) = write_truth(&mut conn, run_id, &layout, &batch) {
                    first_error.get_or_insert(format!("writing truth to {path}: {e}"));
                }
            }
            write::end_run(&conn, run_id, crate::clock::now_ms(), true, "stopped")
                .and_then(|()| write::close(conn))
                .map_err(|e| format!("closing the run in {path}: {e}"))?;
            first_error.map_or(Ok(()), Err)
        });
        Ok(TruthWriter { batches, thread })
    }

    fn send(&self, batch: Vec<SimStatus>) {
        if !batch.is_empty() {
            // A send fails only if the thread ended; finish() reports why.
            let _ = self.batches.send(batch);
        }
    }

    fn finish(self) -> Result<(), String> {
        drop(self.batches);
        self.thread
            .join()
            .map_err(|_| "truth writer panicked".to_string())?
    }
}

/// Creates (or opens) a run database ([`rundb::write::open`]: refused if
/// another program's or of a newer schema), and adds a `runs` row for this
/// serve session.
pub fn open_truth_db(
    path: &Path,
    config: &SimConfig,
    seed: u64,
    limits: &RateLimits,
    started_ms: i64,
    backlog_ms: u64,
) -> Result<(Connection, i64), String> {
    let conn = write::open(path, "--truth")?;
    let run = serve_run_row(config, seed, limits, started_ms, backlog_ms);
    let (run_id, _) = write::add_run(&conn, &run, &[])
        .map_err(|e| format!("truth database {}: {e}", path.display()))?;
    Ok((conn, run_id))
}

/// The `runs` row of a serve session.
fn serve_run_row(
    config: &SimConfig,
    seed: u64,
    limits: &RateLimits,
    started_ms: i64,
    backlog_ms: u64,
) -> rundb::RunRow {
    let config_json =
        serde_json::json!({"sim": config, "rate_limit": limits.to_string(), "backlog_ms": backlog_ms})
            .to_string();
    rundb::RunRow {
        started_at_ms: started_ms,
        target: "sim-serve".into(),
        profile: Some(config.profile.clone()),
        // The seed's bit pattern (rundb::rows).
        seed: Some(seed as i64),
        clock: "wall".into(),
        layout: config.layout().name().into(),
        config: config_json,
        version: rundb::VERSION.into(),
        ..rundb::RunRow::default()
    }
}

/// Inserts one batch of truth in one transaction; a status already there is
/// replaced (the latest batch knows the most).
pub fn write_truth(
    conn: &mut Connection,
    run_id: i64,
    layout: &Layout,
    batch: &[SimStatus],
) -> Result<(), rundb::Error> {
    let rows: Vec<rundb::TruthRow> = batch
        .iter()
        .map(|s| crate::sim::truth_row(layout, s))
        .collect();
    let tx = conn
        .transaction()
        .map_err(|e| rundb::Error(format!("cannot write the run database: {e}")))?;
    write::insert_truth(&tx, run_id, &rows, OnConflict::Replace)?;
    tx.commit()
        .map_err(|e| rundb::Error(format!("cannot write the run database: {e}")))
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

    fn serve_args(sets: &[&str]) -> ServeArgs {
        ServeArgs {
            profile: None,
            seed: 1,
            addr: "127.0.0.1:0".into(),
            truth: None,
            record: None,
            clients: Vec::new(),
            config: None,
            sets: sets.iter().map(|s| s.to_string()).collect(),
            rate_limit: None,
            faults: None,
            backend: Backend::Simulator,
            quiet: false,
            // An empty timeline at the start, as these tests expect.
            backlog: Some(0),
        }
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
        args.backlog = Some(60_000);
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
        args.profile = Some("bluesky".into());
        let err = serve_until(args, never(), None).await.unwrap_err();
        assert!(err.contains("twitter, mastodon, misskey"), "{err}");
        let err = serve_until(serve_args(&["nope=1"]), never(), None)
            .await
            .unwrap_err();
        assert!(err.contains("unknown simulator key 'nope'"), "{err}");
        let mut args = serve_args(&[]);
        args.rate_limit = Some("lots".into());
        assert!(
            serve_until(args, never(), None)
                .await
                .unwrap_err()
                .contains("N/WINDOW")
        );
        let mut args = serve_args(&[]);
        args.config = Some("/nonexistent/sim.toml".into());
        let err = serve_until(args, never(), None).await.unwrap_err();
        assert!(
            err.starts_with("cannot read /nonexistent/sim.toml"),
            "{err}"
        );
        let mut args = serve_args(&[]);
        args.addr = "localhost".into();
        assert!(
            serve_until(args, never(), None)
                .await
                .unwrap_err()
                .contains("bad --addr")
        );
        let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut args = serve_args(&[]);
        args.addr = taken.local_addr().unwrap().to_string();
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
        args.truth = Some(path.clone());
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
    /// and gives each client a verdict.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn record_tells_clients_apart_and_keeps_what_each_was_served() {
        let dir = testkit::temp_dir("record");
        let db = dir.join("clients.db");
        let mut args = serve_args(&["rate_per_s=50"]);
        args.profile = Some("mastodon".into());
        args.backlog = Some(60_000);
        args.record = Some(db.clone());
        let (addr, stop, task) = spawn_serve(args).await;
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
        assert_eq!(pollers[2].1, "user-agent my reader/1.0");
        for ((id, name, _), (served, rounds)) in pollers.iter().zip([(&a, 4), (&b, 2), (&c, 3)]) {
            let observed: Vec<String> = conn
                .prepare(
                    "SELECT o.status_id FROM observations o JOIN requests r ON r.id = o.request_id \
                     WHERE r.poller_id = ?1 ORDER BY r.id, o.position",
                )
                .unwrap()
                .query_map([id], |r| r.get(0))
                .unwrap()
                .map(Result::unwrap)
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
        let dir = testkit::temp_dir("record-home");
        let db = dir.join("clients.db");
        let mut args = serve_args(&["rate_per_s=50"]);
        args.profile = Some("mastodon".into());
        args.backlog = Some(60_000);
        args.record = Some(db.clone());
        let (addr, stop, task) = spawn_serve(args).await;
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

    #[test]
    fn client_names_come_from_the_environment_and_a_missing_one_is_refused() {
        let err = client_names(&["bot=SNOWLEAK_NO_SUCH_VARIABLE_SET".into()]).unwrap_err();
        assert!(
            err.contains("SNOWLEAK_NO_SUCH_VARIABLE_SET is not set"),
            "{err}"
        );
        let err = client_names(&["no-equals".into()]).unwrap_err();
        assert!(err.starts_with("bad --client"), "{err}");
        assert!(client_names(&[]).unwrap().is_empty());
    }
}
