//! `experiment serve --backend postgres`, PostgreSQL's server face: the
//! Mastodon API served from a throwaway PostgreSQL table that writers load
//! ([`super::http`]),
//! and a read-only role for consumers that read the table itself (an outbox
//! relay: judged with `analyze --delivered`). With `--record`, every client
//! of the API is recorded as with the simulator, and the truth is what the
//! writers committed, each post owed from the ms after its COMMIT returned.

use super::http::{Backend, WORKLOAD};
use crate::clients::ClientBook;
use crate::record::Recorder;
use crate::serving::{ListenArgs, recording};
use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

/// Serves until `shutdown` resolves, then stops the writers, writes the last
/// truth and removes the cluster.
pub async fn serve(
    args: ListenArgs,
    names: HashMap<String, String>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let client_names = args.client_names(names)?;
    let (listener, bound) = args.listen().await?;
    let mut backend = Backend::start(args.seed, args.record.is_some()).await?;
    let layout = backend.layout();
    let recorder = match &args.record {
        Some(path) => {
            let config = serde_json::json!({
                "schema": "mastodon", "writers": WORKLOAD.0, "rate_per_s": WORKLOAD.1
            });
            let now = crate::clock::now_ms();
            let run = recording::run_row(
                ("postgres-serve", "mastodon"),
                args.seed,
                now,
                &layout,
                config,
            );
            Some(Recorder::create(path, &run, &[])?)
        }
        None => None,
    };
    if !args.quiet {
        println!(
            "snowleak on PostgreSQL: schema mastodon, {} writers at {} statuses/s",
            WORKLOAD.0, WORKLOAD.1
        );
        println!(
            "  mastodon        http://{bound}{}",
            crate::sim::server::mastodon::PUBLIC_TIMELINE
        );
        println!(
            "  read-only SQL   {} (table statuses)",
            backend.reader_url()
        );
        if let Some(path) = &args.record {
            println!("{}", recording::banner_line(path));
        }
        println!("Ctrl-C stops (and removes the cluster).");
    }
    let mut app = backend.router();
    if let Some(recorder) = &recorder {
        let book = ClientBook::new(layout.clone(), client_names);
        app = recording::layer(app, book, recorder.sender());
    }
    let mut server = tokio::spawn(crate::sim::server::serve(listener, app, shutdown));
    // The truth is taken every second, whether or not anyone reads.
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let served = loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Some(recorder) = &recorder {
                    recorder.sender().truth(backend.take_truth());
                }
            }
            done = &mut server => break done.map_err(|e| format!("server: {e}")).and_then(|r| r),
        }
    };
    let stopped = backend.stop_writers().await;
    if let Some(recorder) = recorder {
        recorder.sender().truth(backend.take_truth());
        recorder.finish(crate::clock::now_ms(), true, "stopped")?;
    }
    drop(backend);
    served?;
    stopped?;
    if !args.quiet {
        println!("stopped");
    }
    Ok(())
}
