//! The mariadb judge's log: a throwaway MariaDB (servers::mariadb) with its
//! binary log on in ROW format with full row images and full table-map
//! metadata (column names), read as a replica reads it from before COMMAND
//! starts (logtruth::dump) and decoded (logtruth::binlog) into the truth.
//! COMMAND gets `DATABASE_URL` (`mysql://root@localhost/app?socket=...`),
//! `MYSQL_UNIX_PORT` (read by the `mariadb` client), `MYSQL_USER` and
//! `MYSQL_DATABASE`; the database `app` is made before it starts.

use super::{Event, Opened, PERIOD, ReaderCtx};
use crate::clock::now_ms;
use crate::logtruth::binlog::{Decoder, parse_table};
use crate::logtruth::decode::Counts;
use crate::logtruth::dump::{Dump, Position};
use crate::servers::mariadb::{LockMode, Server, db_error};

impl super::Server for Server {
    /// `judge` refuses `--restart-server-at` on MariaDB before it starts: its
    /// binlog reader does not yet reconnect.
    fn restart(&mut self) -> Result<(), String> {
        Err("--restart-server-at applies to --backend postgres".into())
    }
}
use mysql_async::prelude::Queryable;
use rundb::LogTruthRow;
use std::time::Instant;

/// The database COMMAND is given, where `--table T` is unless `DB.T` says.
pub const DATABASE: &str = "app";

/// Rows handed to the recorder at once, at most (else every [`PERIOD`]).
const BATCH: usize = 10_000;

/// The binary log's settings (MariaDB KB "Replication and Binary Log System
/// Variables"): the log on, in ROW format, each row whole, each table map
/// with its column names (`binlog_row_metadata`, MariaDB >= 10.5), and the
/// server id a primary needs.
const BINLOG_OPTIONS: [&str; 5] = [
    "--log-bin=binlog",
    "--server-id=1",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
];

/// The table's name, checked before anything starts.
pub(super) fn check(table: &str) -> Result<(), String> {
    parse_table(table, DATABASE).map(|_| ())
}

/// Starts the server, makes the database and opens the binlog.
pub(super) fn open(
    runtime: &tokio::runtime::Runtime,
    table: &str,
    key: &str,
) -> Result<Opened, String> {
    let (schema, table) = parse_table(table, DATABASE)?;
    let server = Server::start_with(LockMode::DEFAULT, &BINLOG_OPTIONS)?;
    let opts = server.opts(None);
    let dump = runtime.block_on(async {
        let mut conn = mysql_async::Conn::new(opts.clone())
            .await
            .map_err(|e| format!("cannot connect to MariaDB: {}", db_error(&e)))?;
        conn.query_drop(format!("CREATE DATABASE IF NOT EXISTS {DATABASE}"))
            .await
            .map_err(|e| format!("cannot make the database {DATABASE}: {}", db_error(&e)))?;
        let _ = conn.disconnect().await;
        Dump::open(opts).await
    })?;
    let socket = server.socket();
    let env = vec![
        (
            "DATABASE_URL",
            format!(
                "mysql://root@localhost/{DATABASE}?socket={}",
                socket.display()
            )
            .into(),
        ),
        ("MYSQL_UNIX_PORT", socket.into_os_string()),
        ("MYSQL_USER", "root".into()),
        ("MYSQL_DATABASE", DATABASE.into()),
    ];
    let decoder = Decoder::new(&schema, &table, key);
    Ok(Opened {
        server: Box::new(server),
        env,
        table: format!("{schema}.{table}"),
        log: "MariaDB's binary log",
        target: analysis::consumers::TARGET_MARIADB,
        config: vec![("backend", "mariadb".into())],
        batch: BATCH as i64,
        reader: Box::new(move |ctx: ReaderCtx| Box::pin(read_binlog(dump, decoder, ctx))),
    })
}

/// Reads the binlog as it grows until told to stop, then up to where the
/// server says it ends; a failure is reported at once (the run stops).
async fn read_binlog(dump: Dump, decoder: Decoder, ctx: ReaderCtx) -> Result<Counts, String> {
    let ReaderCtx {
        sender,
        mut stop,
        events,
    } = ctx;
    let mut dump = dump;
    let mut decoder = decoder;
    let mut rows: Vec<LogTruthRow> = Vec::new();
    let mut flushed = Instant::now();
    let flush = |rows: &mut Vec<LogTruthRow>| {
        if !rows.is_empty() {
            // The recorder's queue is bounded: a full queue waits here.
            let batch = std::mem::take(rows);
            tokio::task::block_in_place(|| sender.log_truth(batch));
        }
    };
    let mut end: Option<Position> = None;
    let result = loop {
        if let Some(end) = &end
            && dump.at >= *end
        {
            break Ok(());
        }
        tokio::select! {
            biased;
            _ = stop.changed(), if end.is_none() => {
                // The last read: up to where the log ends now.
                match dump.end().await {
                    Ok(at) => end = Some(at),
                    Err(m) => break Err(m),
                }
            }
            read = tokio::time::timeout(PERIOD, dump.next(&decoder)) => {
                let event = match read {
                    Err(_) => {
                        flush(&mut rows);
                        flushed = Instant::now();
                        continue;
                    }
                    Ok(Err(m)) => break Err(m),
                    Ok(Ok(event)) => event,
                };
                match decoder.feed(event, now_ms()) {
                    Ok(done) => rows.extend(done),
                    Err(m) => break Err(m),
                }
                if rows.len() >= BATCH || flushed.elapsed() >= PERIOD {
                    flush(&mut rows);
                    flushed = Instant::now();
                }
            }
        }
    };
    flush(&mut rows);
    dump.close().await;
    if let Err(m) = &result {
        let _ = events.send(Event::Failed(m.clone()));
    }
    result.map(|()| decoder.counts.clone())
}
