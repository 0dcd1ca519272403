//! The postgres judge's log: a throwaway cluster with `wal_level = logical`
//! and a logical slot (`test_decoding`) made on it before COMMAND starts,
//! with `DATABASE_URL`, `PGHOST`, `PGPORT`, `PGUSER` and `PGDATABASE` in
//! COMMAND's environment (and the server's binaries, `psql` among them, at
//! the end of its `PATH`). The slot is drained every [`DRAIN_EVERY`] and dropped
//! at the end.

use super::{Event, Opened, ReaderCtx};
use crate::logtruth::decode::{Counts, Decoder, parse_table};
use crate::logtruth::slot::{BATCH, DRAIN_EVERY, Slot, check_name};
use crate::record::RecordSender;
use crate::servers::postgres::{Cluster, connect};
use std::sync::mpsc::Sender;

/// The table and the slot's name, checked before anything starts.
pub(super) fn check(table: &str, slot: &str) -> Result<(), String> {
    parse_table(table)?;
    check_name(slot)
}

/// Starts the cluster and makes the slot.
pub(super) fn open(
    runtime: &tokio::runtime::Runtime,
    table: &str,
    key: &str,
    slot: &str,
) -> Result<Opened, String> {
    let (schema, table) = parse_table(table)?;
    let cluster = Cluster::start_with(&[
        ("wal_level", "logical"),
        ("max_replication_slots", "4"),
        ("max_wal_senders", "4"),
    ])?;
    let mut config = cluster.config();
    // Commit times in the log are written in the session's time zone: UTC.
    config.options("-c TimeZone=UTC");
    let made = runtime.block_on(async {
        let client = connect(&config).await?;
        Slot::create(client, slot).await
    })?;
    let mut path = std::env::var_os("PATH").unwrap_or_default();
    path.push(":");
    path.push(cluster.bin_dir());
    let host = cluster.dir().display().to_string();
    let env = vec![
        (
            "DATABASE_URL",
            format!("postgresql://postgres@/postgres?host={host}&port=5432").into(),
        ),
        ("PGHOST", host.into()),
        ("PGPORT", "5432".into()),
        ("PGUSER", "postgres".into()),
        ("PGDATABASE", "postgres".into()),
        ("PATH", path),
    ];
    let decoder = Decoder::new(&schema, &table, key);
    Ok(Opened {
        server: Box::new(cluster),
        env,
        table: format!("{schema}.{table}"),
        log: "PostgreSQL's log",
        target: analysis::consumers::TARGET,
        config: vec![
            ("slot", slot.into()),
            ("drain_every_ms", (DRAIN_EVERY.as_millis() as i64).into()),
        ],
        batch: BATCH as i64,
        reader: Box::new(move |ctx: ReaderCtx| {
            Box::pin(drain_slot(made, decoder, ctx.sender, ctx.stop, ctx.events))
        }),
    })
}

/// Drains the slot every [`DRAIN_EVERY`] until told to stop, then a last time,
/// and drops it. A failure is reported at once (the run stops), and the
/// slot is dropped all the same.
async fn drain_slot(
    slot: Slot,
    mut decoder: Decoder,
    sender: RecordSender,
    mut stop: tokio::sync::watch::Receiver<bool>,
    events: Sender<Event>,
) -> Result<Counts, String> {
    let result = loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(DRAIN_EVERY) => false,
            _ = stop.changed() => true,
        };
        // The recorder's queue is bounded: a full queue waits, off the runtime's worker.
        let drained = slot
            .drain_all(&mut decoder, |rows| {
                tokio::task::block_in_place(|| sender.log_truth(rows))
            })
            .await;
        if let Err(m) = &drained {
            let _ = events.send(Event::Failed(m.clone()));
        }
        if stopping || drained.is_err() {
            break drained;
        }
    };
    let dropped = slot.drop_slot().await;
    result.and(dropped).map(|()| decoder.counts.clone())
}
