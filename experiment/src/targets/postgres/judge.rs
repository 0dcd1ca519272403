//! The postgres judge's log: a throwaway cluster with `wal_level = logical`
//! and a logical slot (`test_decoding`) made on it before COMMAND starts,
//! with `DATABASE_URL`, `PGHOST`, `PGPORT`, `PGUSER` and `PGDATABASE` in
//! COMMAND's environment (and the server's binaries, `psql` among them, at
//! the end of its `PATH`). The slot is drained every [`DRAIN_EVERY`] and dropped
//! at the end.

use super::decode::{Decoder, parse_table};
use super::slot::{BATCH, DRAIN_EVERY, Slot, check_name};
use crate::logtruth::Counts;
use crate::logtruth::source::{JudgeOpened, ReaderCtx, Server};
use crate::servers::postgres::{Cluster, connect};

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
) -> Result<JudgeOpened, String> {
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
    let reconnect = config.clone();
    let name = slot.to_string();
    Ok(JudgeOpened {
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
            Box::pin(drain_slot(
                made,
                decoder,
                Reconnect {
                    config: reconnect,
                    name,
                },
                ctx,
            ))
        }),
    })
}

impl Server for Cluster {
    fn restart(&mut self) -> Result<(), String> {
        Cluster::restart(self)
    }
}

/// How the reader gets its slot back after the server restarted.
struct Reconnect {
    config: tokio_postgres::Config,
    name: String,
}

/// How long the reader tries to reconnect after its connection closed (a
/// restart of the server, `--restart-server-at`, takes a few seconds).
const RECONNECT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// Drains the slot every [`DRAIN_EVERY`] until told to stop, then a last time,
/// and drops it. If the connection closes (the server restarted), it
/// connects again and goes on with the same slot: the slot survives a
/// restart, and what a failed call did not return is returned again (a
/// call consumes only when it completes). Any other failure is reported at
/// once (the run stops), and the slot is dropped all the same.
async fn drain_slot(
    mut slot: Slot,
    mut decoder: Decoder,
    reconnect: Reconnect,
    mut ctx: ReaderCtx,
) -> Result<Counts, String> {
    let mut stopping = false;
    let result = loop {
        if !stopping {
            stopping = tokio::select! {
                _ = tokio::time::sleep(DRAIN_EVERY) => false,
                _ = ctx.stop.changed() => true,
            };
        }
        // The recorder's queue is bounded: a full queue waits, off the runtime's worker.
        let drained = slot
            .drain_all(&mut decoder, |rows| {
                tokio::task::block_in_place(|| ctx.sender.side(rows))
            })
            .await;
        if drained.is_err() && slot.is_closed() {
            match resume(&reconnect).await {
                Ok(again) => {
                    slot = again;
                    continue;
                }
                Err(m) => {
                    (ctx.failed)(m.clone());
                    break Err(m);
                }
            }
        }
        if let Err(m) = &drained {
            (ctx.failed)(m.clone());
        }
        if stopping || drained.is_err() {
            break drained;
        }
    };
    let dropped = slot.drop_slot().await;
    result.and(dropped).map(|()| decoder.counts.clone())
}

/// Connects again to the judge's own slot, trying for [`RECONNECT_FOR`].
async fn resume(r: &Reconnect) -> Result<Slot, String> {
    let until = tokio::time::Instant::now() + RECONNECT_FOR;
    loop {
        match connect(&r.config).await {
            Ok(client) => return Ok(Slot::resume(client, &r.name)),
            Err(m) if tokio::time::Instant::now() >= until => {
                return Err(format!(
                    "the connection to the server closed and did not come back in {} s: {m}",
                    RECONNECT_FOR.as_secs()
                ));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}
