//! Recorder throughput: how many observations per second the SQLite writer
//! stores, through the same channel and thread a run uses.
//!
//! `cargo bench -p experiment --bench recorder` (figures in the README).

use snowleak::record::{PollerRow, Recorder, RequestRecord, RunRow, StatusRecord};
use std::time::Instant;

fn main() {
    let dir = std::env::temp_dir().join(format!("snowleak-bench-recorder-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = dir.join("run.db");
    let run = RunRow {
        started_at_ms: 0,
        target: "bench".into(),
        profile: None,
        seed: None,
        clock: "virtual".into(),
        layout: "twitter".into(),
        interval_ms: 1000,
        page_limit: 200,
        config: "{}".into(),
        ..RunRow::default()
    };
    let pollers = [
        PollerRow {
            name: "naive".into(),
            policy: "naive".into(),
            k_ms: None,
            ..PollerRow::default()
        },
        PollerRow {
            name: "compensated:k=1s".into(),
            policy: "compensated:k=1s".into(),
            k_ms: Some(1000),
            ..PollerRow::default()
        },
    ];
    let recorder = Recorder::create(&db, &run, &pollers).expect("recorder");
    let sender = recorder.sender();
    let (requests, per_request) = (10_000u64, 200u64);
    // Build the rows first: the figure is the recorder's, not the generator's.
    let mut rows = Vec::with_capacity(requests as usize);
    for r in 0..requests {
        // Half of each page is new, half was seen before: like a compensated poller.
        let items = (0..per_request)
            .map(|i| {
                let n = 1_600_000_000_000_000_000u64 + r * per_request / 2 + i;
                StatusRecord {
                    status: rundb::StatusRow {
                        id: n.to_string(),
                        id_key: format!("{n:032x}"),
                        id_time_ms: (n >> 22) as i64,
                        created_at: Some("2026-01-01T00:00:00.000Z".into()),
                        author: Some("user1".into()),
                    },
                    first_sighting: i >= per_request / 2,
                }
            })
            .collect();
        rows.push(RequestRecord {
            poller: (r % 2) as usize,
            request: rundb::RequestRow {
                cycle: (r / 2) as i64,
                sent_at_ms: r as i64,
                received_at_ms: r as i64 + 20,
                page_limit: 200,
                ..Default::default()
            },
            items,
        });
    }
    let start = Instant::now();
    for row in rows {
        sender.request(row);
    }
    drop(sender);
    let stats = recorder.finish(0, true, "bench").expect("finish");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "recorder: {} observations in {} requests in {:.2} s = {:.0} observations/s",
        stats.observations,
        stats.requests,
        secs,
        stats.observations as f64 / secs
    );
    let _ = std::fs::remove_dir_all(&dir);
}
