//! The mariadb judge's log: a throwaway MariaDB (server.rs) with its
//! binary log on in ROW format with full row images and full table-map
//! metadata (column names), read as a replica reads it from before COMMAND
//! starts (dump.rs) and decoded (binlog.rs) into the truth.
//! COMMAND gets `DATABASE_URL` (`mysql://root@localhost/app?socket=...`),
//! `MYSQL_UNIX_PORT` (read by the `mariadb` client), `MYSQL_USER` and
//! `MYSQL_DATABASE`; the database `app` is made before it starts.

use super::binlog::{Decoder, parse_table};
use super::dump::{Dump, Position, READER_SERVER_ID, Start};
use super::server::{LockMode, Server, db_error};
use crate::logtruth::Counts;
use crate::logtruth::source::{JudgeOpened, PERIOD, ReaderCtx};
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
) -> Result<JudgeOpened, String> {
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
    let reopen = server.opts(None);
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
    Ok(JudgeOpened {
        server: Box::new(server),
        env,
        table: format!("{schema}.{table}"),
        log: "MariaDB's binary log",
        target: analysis::consumers::TARGET_MARIADB,
        config: vec![("backend", "mariadb".into())],
        batch: BATCH as i64,
        reader: Box::new(move |ctx: ReaderCtx| Box::pin(read_binlog(dump, decoder, reopen, ctx))),
    })
}

/// Reads the binlog as it grows until told to stop, then up to where the
/// server says it ends; a failure is reported at once (the run stops). If
/// the server goes away (`--restart-server-at`), the dump goes on from
/// where it stopped once the server is back.
async fn read_binlog(
    dump: Dump,
    decoder: Decoder,
    opts: mysql_async::Opts,
    ctx: ReaderCtx,
) -> Result<Counts, String> {
    let ReaderCtx {
        sender,
        mut stop,
        failed,
    } = ctx;
    let mut dump = dump;
    let mut decoder = decoder;
    let mut rows: Vec<LogTruthRow> = Vec::new();
    let mut flushed = Instant::now();
    let flush = |rows: &mut Vec<LogTruthRow>| {
        if !rows.is_empty() {
            // The recorder's queue is bounded: a full queue waits here.
            let batch = std::mem::take(rows);
            tokio::task::block_in_place(|| sender.side(batch));
        }
    };
    let mut end: Option<Position> = None;
    let mut idle = 0u32;
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
                        // The last read is bounded: a log that stops short of
                        // where the server said it ends is a failure, not a wait.
                        if let Some(end) = &end {
                            idle += 1;
                            if idle * PERIOD >= LAST_READ_WITHIN {
                                break Err(format!(
                                    "the binlog's last read stopped at {}:{}, short of its end {}:{}",
                                    dump.at.file, dump.at.pos, end.file, end.pos
                                ));
                            }
                        }
                        continue;
                    }
                    Ok(Err(m)) => match resume(&mut dump, &opts, m).await {
                        Ok(again) => {
                            std::mem::replace(&mut dump, again).close().await;
                            continue;
                        }
                        Err(m) => break Err(m),
                    },
                    Ok(Ok(event)) => event,
                };
                match decoder.feed(event, dump.stamp_ms()) {
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
        failed(m.clone());
    }
    result.map(|()| decoder.counts.clone())
}

impl crate::logtruth::source::Server for Server {
    fn restart(&mut self) -> Result<(), String> {
        Server::restart(self)
    }
}

/// How long the last read may go without an event before it fails.
const LAST_READ_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the reader tries to reconnect after the server went away (a
/// restart, `--restart-server-at`, takes a few seconds).
const RECONNECT_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// After a failed read: if the server went away, the dump again from where
/// it stopped, once the server is back; else the failure.
async fn resume(
    dump: &mut Dump,
    opts: &mysql_async::Opts,
    failure: String,
) -> Result<Dump, String> {
    if dump.server_answers().await {
        return Err(failure);
    }
    let until = Instant::now() + RECONNECT_FOR;
    loop {
        match Dump::open_with(opts.clone(), READER_SERVER_ID, Start::At(dump.at.clone())).await {
            Ok(again) => return Ok(again),
            Err(m) if Instant::now() >= until => {
                return Err(format!(
                    "the server went away ({failure}) and the binlog could not be read again in {} s: {m}",
                    RECONNECT_FOR.as_secs()
                ));
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
        }
    }
}
