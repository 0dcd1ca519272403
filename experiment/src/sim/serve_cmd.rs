//! `experiment serve`: the leaky simulator alone, in real time, so that anyone
//! can point their own client at it; optionally writing the truth (every
//! status with its ID time, posted, visible and deleted times) to SQLite in
//! the run database's schema, so that a foreign client's leaks can be judged.
//!
//! Shell only: the model is [`super::model`], the HTTP side [`super::server`].

use super::model::DEFAULT_BACKLOG_MS;
use super::model::{SimStatus, Simulator};
use super::profile::SimConfig;
use super::server::{self, RateLimits};
use crate::record::schema::{APPLICATION_ID, CREATE, SCHEMA_VERSION};
use rusqlite::{Connection, params};
use since_id::id::Layout;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Run the leaky simulator as an HTTP server (Twitter v1.1, X API v2, Mastodon, Misskey and Discord dialects).
#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Simulator profile: twitter, mastodon, misskey or discord.
    #[arg(long, default_value = "twitter")]
    pub profile: String,
    /// Seed of the simulator's random stream (same seed, same statuses).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Address to listen on. Anything but loopback is reachable by others: a warning is printed.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: String,
    /// Write every status's truth to this SQLite file (the run database's `truth` table).
    #[arg(long, value_name = "FILE")]
    pub truth: Option<PathBuf>,
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
    #[arg(long, value_name = "SPEC", value_parser = |s: &str| s.parse::<super::faults::FaultSpec>())]
    pub faults: Option<super::faults::FaultSpec>,
    /// What serves the timeline: `simulator`, or `postgres` (a throwaway
    /// PostgreSQL cluster loaded by writers, served in the Mastodon dialect).
    #[arg(long, default_value = "simulator", value_parser = ["simulator", "postgres"])]
    pub backend: String,
}

/// Serves until Ctrl-C, then flushes the truth.
pub async fn serve_command(args: ServeArgs) -> Result<(), String> {
    if args.backend == "postgres" {
        return crate::pg::http::serve(&args.addr, args.seed).await;
    }
    serve_until(
        args,
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
        None,
    )
    .await
}

/// Serves until `shutdown` resolves; sends the bound address to `ready` once listening.
pub async fn serve_until(
    args: ServeArgs,
    shutdown: impl Future<Output = ()> + Send + 'static,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), String> {
    let mut config = SimConfig::profile(&args.profile)?;
    let file = match &args.config {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
        ),
        None => None,
    };
    config.apply_overrides(file.as_deref(), &args.sets)?;
    let limits = match &args.rate_limit {
        Some(text) => text.parse::<RateLimits>()?,
        None => RateLimits::default(),
    };
    let addr: SocketAddr = args.addr.parse().map_err(|_| {
        format!(
            "bad --addr '{}': expected IP:PORT such as 127.0.0.1:8080",
            args.addr
        )
    })?;
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: listening on {addr}, which is not a loopback address: other machines can reach the simulator"
        );
    }
    let listener = server::bind(addr).await?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("no local address: {e}"))?;

    let started = crate::clock::now_ms();
    let layout = config.layout();
    let backlog_ms = args.backlog.unwrap_or(DEFAULT_BACKLOG_MS);
    let mut sim = Simulator::with_backlog(config.clone(), args.seed, started, backlog_ms);
    let truth = match &args.truth {
        Some(path) => Some(TruthWriter::open(path, &config, &args, &limits, started)?),
        None => {
            sim.set_truth_recording(false);
            None
        }
    };
    let sim = Arc::new(Mutex::new(sim));

    println!(
        "snowleak simulator: profile {}, seed {}, layout {}, {:.3} statuses/s",
        config.profile, args.seed, layout, config.rate_per_s
    );
    for (api, url) in server::endpoints(bound) {
        println!("  {api:<15} {url}");
    }
    if let Some(path) = &args.truth {
        println!("  truth           {}", path.display());
    }
    println!("Ctrl-C stops.");
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
        app = super::faults::layer(app, super::faults::FaultPlan::new(spec, args.seed));
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
    println!("stopped");
    Ok(())
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
            conn.execute(
                "UPDATE runs SET ended_at_ms = ?1, complete = 1, end_reason = 'stopped' WHERE id = ?2",
                params![crate::clock::now_ms(), run_id],
            )
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

/// Creates (or opens) a run database, checks its version, and adds a `runs`
/// row for this serve session.
pub fn open_truth_db(
    path: &Path,
    config: &SimConfig,
    seed: u64,
    limits: &RateLimits,
    started_ms: i64,
    backlog_ms: u64,
) -> Result<(Connection, i64), String> {
    let err = |e: rusqlite::Error| format!("truth database {}: {e}", path.display());
    let conn = Connection::open(path).map_err(err)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(err)?;
    if version != 0 && version != SCHEMA_VERSION {
        return Err(format!(
            "truth database {} has schema version {version}, this program writes {SCHEMA_VERSION}",
            path.display()
        ));
    }
    conn.execute_batch(CREATE).map_err(err)?;
    conn.execute_batch(&format!(
        "PRAGMA user_version = {SCHEMA_VERSION}; PRAGMA application_id = {APPLICATION_ID};"
    ))
    .map_err(err)?;
    let config_json =
        serde_json::json!({"sim": config, "rate_limit": limits.to_string(), "backlog_ms": backlog_ms})
            .to_string();
    conn.execute(
        "INSERT INTO runs (started_at_ms, target, profile, seed, clock, layout, interval_ms, page_limit, config, version)
         VALUES (?1, 'sim-serve', ?2, ?3, 'wall', ?4, 0, 0, ?5, ?6)",
        params![
            started_ms,
            config.profile,
            seed as i64,
            config.layout().name(),
            config_json,
            env!("CARGO_PKG_VERSION")
        ],
    )
    .map_err(err)?;
    let run_id = conn.last_insert_rowid();
    Ok((conn, run_id))
}

/// Inserts one batch of truth in one transaction.
pub fn write_truth(
    conn: &mut Connection,
    run_id: i64,
    layout: &Layout,
    batch: &[SimStatus],
) -> Result<(), rusqlite::Error> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT OR REPLACE INTO truth (run_id, id, id_key, id_time_ms, posted_at_ms, visible_at_ms, deleted_at_ms, origin)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?;
        for s in batch {
            insert.execute(params![
                run_id,
                layout.format(s.id),
                s.id.sort_key(),
                s.id_time_ms,
                s.posted_at_ms,
                s.visible_at_ms,
                s.deleted_at_ms,
                s.origin
            ])?;
        }
    }
    tx.commit()
}
