//! `experiment serve --backend misskey-ftt`: the FTT target's server alone
//! (`targets::misskey_ftt::serve`): a throwaway Redis and PostgreSQL, the
//! creators loading them, and Misskey's timelines over HTTP for any client.
//! With `--record`, every client of the timelines is recorded as with the
//! simulator, each owed the notes its endpoint shows, from the ms after the
//! note's INSERT returned (docs/misskey-ftt.md), and each note's pushes to
//! and trims of the timelines' Redis lists (`ftt_pushes`, `ftt_trims`).

use super::{ServeArgs, client_names, recording};
use crate::clients::ClientBook;
use crate::record::Recorder;
use crate::targets::misskey_ftt::serve::{Served, serve_load};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// The timeline endpoints, under `/api/notes/`.
const ENDPOINTS: [&str; 3] = ["timeline", "local-timeline", "hybrid-timeline"];

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
    args: ServeArgs,
    names: HashMap<String, String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    args.refuse_simulator_flags("misskey-ftt")?;
    let mut client_names = client_names(&args.clients)?;
    client_names.extend(names);
    let (listener, bound) = args.listen().await?;
    let layout: since_id::id::Layout = "misskey-aidx".parse().map_err(|e| format!("{e}"))?;
    let load = serve_load(args.seed);
    let mut served = Served::start(load.clone(), args.record.is_some()).await?;
    let recorder = match &args.record {
        Some(path) => {
            let run = rundb::RunRow {
                started_at_ms: crate::clock::now_ms(),
                target: "misskey-ftt-serve".into(),
                profile: Some("misskey-ftt".into()),
                seed: Some(args.seed as i64),
                clock: "wall".into(),
                layout: layout.name().into(),
                config: serde_json::json!({
                    "load": &load,
                    "redis_version": served.redis_version,
                    "postgres_version": served.postgres_version,
                })
                .to_string(),
                version: rundb::VERSION.into(),
                ..rundb::RunRow::default()
            };
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
            println!(
                "  recording       {} (every client's requests, and the truth)",
                path.display()
            );
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
            recorder.sender().truth_authors(authors);
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
