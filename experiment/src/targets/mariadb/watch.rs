//! watch's MariaDB source: the user's binary log, read as a replica reads it
//! (dump.rs, registered as `--server-id N`) from where the log ends
//! as watch starts (`SHOW MASTER STATUS`), decoded by binlog.rs. Its
//! position (`watch_state`'s `log`) is the binlog file and offset after the
//! last event of the last transaction handed on: a resumed watch dumps from
//! there.
//!
//! What the server must have (MariaDB KB "Replication and Binary Log System
//! Variables"), checked first, each refused by name: `log_bin` on,
//! `binlog_format = ROW`, `binlog_row_image = FULL` and
//! `binlog_row_metadata = FULL` (the table maps' column names, MariaDB >=
//! 10.5). What the user needs (MariaDB KB "GRANT"): REPLICATION SLAVE (the
//! dump), BINLOG MONITOR, called REPLICATION CLIENT before 10.5 (`SHOW
//! MASTER STATUS`), and SELECT on the table (its key column is checked with
//! `SELECT key FROM T LIMIT 0`). Every session is read-only (`SET SESSION
//! TRANSACTION READ ONLY`); the password comes from `MYSQL_PWD` or
//! `--token-file`.

use super::binlog::{Decoder, parse_table};
use super::dump::{Dump, Position, Start};
use super::server::db_error;
use super::{own, quote_ident};
use crate::logtruth::Counts;
use crate::logtruth::source::{Boxed, CONNECT_TIMEOUT_MS, WatchArgs, WatchOpened, WatchSource};
use mysql_async::prelude::Queryable;
use rundb::LogTruthRow;
use std::time::Duration;

/// The server id watch's reader registers with unless `--server-id` says:
/// high and arbitrary, so as not to meet the small ids replicas are usually
/// numbered with. A primary drops the older of two dumps with one id.
pub const DEFAULT_SERVER_ID: u32 = 1_734_921_553;

/// Rows read between drains, at most (the rest waits in the stream).
const BATCH: usize = 10_000;

/// How long the binlog stream may stay silent while it owes events up to
/// the end the server reported: longer is a failure, not a wait forever.
const STALL: Duration = Duration::from_secs(30);

/// The options, checked before anything connects.
pub(super) struct Checked {
    url: String,
    opts: mysql_async::Opts,
    schema: String,
    table: String,
    server_id: u32,
    /// A watch resumed: where the state it resumes had read the log to.
    resume_at: Option<Position>,
}

/// The binlog being read, and its decoder.
pub(super) struct Source {
    dump: Dump,
    decoder: Decoder,
    /// Truth rows read between drains, handed on at the next drain.
    pending: Vec<LogTruthRow>,
    /// The end of the last event read after which no group was open: the
    /// rows of the log before it are in `pending` or were handed on.
    read_to: Position,
    /// The same, of the rows handed on by [`Source::drain`]: the position
    /// a state of the checker holds (`watch_state`'s `log`).
    handed_to: Position,
    /// The id the reader registered with, for the message when the server
    /// ends its dump.
    server_id: u32,
}

/// The URL (no password in it), the table and the server id.
pub(super) fn check(url: &str, args: &WatchArgs) -> Result<Checked, String> {
    if args.slot.is_some() || args.create_slot {
        return Err(
            "--slot and --create-slot are PostgreSQL's: mariadb reads the binary log \
             as a replica (--server-id N)"
                .into(),
        );
    }
    if args.max_slot_lag.is_some() {
        return Err(
            "--max-slot-lag is PostgreSQL's (the WAL a slot keeps): mariadb reads the \
             binary log as a replica and holds none of it back"
                .into(),
        );
    }
    let opts = own::opts(url, args.token_file.as_deref())?;
    let default_db = opts.db_name().unwrap_or_default().to_string();
    let (schema, table) = parse_table(&args.table, &default_db)?;
    if schema.is_empty() {
        return Err(format!(
            "--table {}: name its database (DB.T), or put it in the URL (mysql://USER@HOST/DB)",
            args.table
        ));
    }
    // A watch resumed reads the binlog from where its state ends.
    let resume_at = match &args.resume {
        Some(r) => Some(position(&r.state["log"]).ok_or_else(|| {
            format!(
                "{}: watch run {} of this table stored no binlog position (an older \
                 watch's): give another --db to start a new one",
                args.db.display(),
                r.run_id
            )
        })?),
        None => None,
    };
    let server_id = args.server_id.unwrap_or(DEFAULT_SERVER_ID);
    if server_id == 0 {
        return Err("--server-id 0 is refused by a primary: give 1 to 4294967295".into());
    }
    Ok(Checked {
        url: url.into(),
        opts,
        schema,
        table,
        server_id,
        resume_at,
    })
}

/// A binlog position as `watch_state`'s `log` holds it: `{"file": F,
/// "pos": N}`.
fn position(log: &serde_json::Value) -> Option<Position> {
    Some(Position {
        file: log["file"].as_str()?.to_string(),
        pos: log["pos"].as_u64()?,
    })
}

/// Connects, checks the binlog's settings and the table's key column, and
/// starts the dump where the log ends now.
pub(super) async fn open(c: Checked, key: String) -> Result<WatchOpened, String> {
    let key = key.as_str();
    let Checked {
        url,
        opts,
        schema,
        table,
        server_id,
        resume_at,
    } = c;
    let conn = tokio::time::timeout(
        Duration::from_millis(CONNECT_TIMEOUT_MS),
        mysql_async::Conn::new(opts.clone()),
    )
    .await
    .map_err(|_| format!("cannot connect to MariaDB: no answer within {CONNECT_TIMEOUT_MS} ms"))?;
    let mut conn = conn.map_err(|e| format!("cannot connect to MariaDB: {}", db_error(&e)))?;
    let checked = settings(&mut conn, server_id).await;
    let checked = match checked {
        Ok(()) => {
            let probe = format!(
                "SELECT {} FROM {}.{} LIMIT 0",
                quote_ident(key),
                quote_ident(&schema),
                quote_ident(&table)
            );
            conn.query_drop(probe)
                .await
                .map_err(|e| format!("table {schema}.{table}, key column {key}: {}", db_error(&e)))
        }
        Err(m) => Err(m),
    };
    let _ = conn.disconnect().await;
    checked?;
    let start = match resume_at {
        Some(at) => Start::At(at),
        None => Start::End,
    };
    let dump = Dump::open_with(opts, server_id, start).await?;
    let start = format!("{}:{}", dump.at.file, dump.at.pos);
    Ok(WatchOpened {
        source: Box::new(Source {
            read_to: dump.at.clone(),
            handed_to: dump.at.clone(),
            dump,
            decoder: Decoder::new(&schema, &table, key),
            pending: Vec::new(),
            server_id,
        }),
        table: format!("{schema}.{table}"),
        from: format!("from MariaDB's binary log at {start} (replica server id {server_id})"),
        target: analysis::consumers::TARGET_MARIADB,
        config: vec![
            ("backend", "mariadb".into()),
            ("url", url.into()),
            ("server_id", server_id.into()),
            ("binlog_start", start.into()),
        ],
        batch: BATCH as i64,
    })
}

/// Refuses, by name, a binary log setting the truth cannot be read with,
/// and a reader id that is the server's own.
async fn settings(conn: &mut mysql_async::Conn, server_id: u32) -> Result<(), String> {
    type Settings = (i64, String, String, String, u64);
    let row: Option<Settings> = conn
        .query_first(
            "SELECT @@GLOBAL.log_bin + 0, @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image, \
             @@GLOBAL.binlog_row_metadata, @@GLOBAL.server_id",
        )
        .await
        .map_err(|e| {
            format!(
                "cannot read the binary log's settings (binlog_row_metadata needs MariaDB \
                 >= 10.5): {}",
                db_error(&e)
            )
        })?;
    let (log_bin, format, image, metadata, own_id) =
        row.ok_or("the server returned no binary log settings")?;
    if log_bin == 0 {
        return Err(
            "log_bin is OFF: the server keeps no binary log; start it with --log-bin \
             (and binlog_format=ROW, binlog_row_image=FULL, binlog_row_metadata=FULL)"
                .into(),
        );
    }
    for (name, value) in [
        ("binlog_format", &format),
        ("binlog_row_image", &image),
        ("binlog_row_metadata", &metadata),
    ] {
        let wanted = if name == "binlog_format" {
            "ROW"
        } else {
            "FULL"
        };
        if !value.eq_ignore_ascii_case(wanted) {
            return Err(format!(
                "{name} is {value}: watch needs {name}={wanted} (SET GLOBAL {name}={wanted}, \
                 or in the server's configuration)"
            ));
        }
    }
    if u64::from(server_id) == own_id {
        return Err(format!(
            "--server-id {server_id} is the server's own server_id: give another"
        ));
    }
    Ok(())
}

impl Source {
    /// Reads the events as they come for `period`, or until [`BATCH`] rows
    /// wait for the drain. Cancelled (Ctrl-C, `--duration`), nothing is
    /// lost: an event is taken from the stream whole or not at all, and the
    /// rows read are kept for the drain.
    pub(super) async fn read_for(&mut self, period: Duration) -> Result<(), String> {
        let until = tokio::time::Instant::now() + period;
        while self.pending.len() < BATCH {
            let Ok(event) = tokio::time::timeout_at(until, self.dump.next(&self.decoder)).await
            else {
                return Ok(());
            };
            let rows = self
                .decoder
                .feed(event.map_err(|m| self.ended(m))?, self.dump.stamp_ms())?;
            self.pending.extend(rows);
            if self.decoder.between() {
                self.read_to = self.dump.at.clone();
            }
        }
        Ok(())
    }

    /// Reads the binlog up to where the server says it ends now, its truth
    /// rows added to `into`; it always does (`true`). What it handed on
    /// ends at [`Source::handed_to`], moved at each commit read.
    pub(super) async fn drain(&mut self, into: &mut Vec<LogTruthRow>) -> Result<bool, String> {
        let end = self.dump.end().await?;
        into.append(&mut self.pending);
        self.handed_to = self.read_to.clone();
        while self.dump.at < end {
            let event = tokio::time::timeout(STALL, self.dump.next(&self.decoder))
                .await
                .map_err(|_| {
                    format!(
                        "MariaDB's binlog stream sent nothing for {} s while it owed events \
                         up to {}:{}",
                        STALL.as_secs(),
                        end.file,
                        end.pos
                    )
                })?
                .map_err(|m| self.ended(m))?;
            into.extend(self.decoder.feed(event, self.dump.stamp_ms())?);
            if self.decoder.between() {
                self.read_to = self.dump.at.clone();
                self.handed_to = self.read_to.clone();
            }
        }
        Ok(true)
    }

    /// The stream's failure, with its likeliest cause on a server others
    /// replicate from: a primary keeps one dump per server id and ends the
    /// older when another replica registers with the same id (MariaDB's
    /// sql/sql_repl.cc, `kill_zombie_dump_threads`).
    fn ended(&self, m: String) -> String {
        format!(
            "{m} (a replica with server id {}? give watch its own --server-id)",
            self.server_id
        )
    }

    /// Ends the dump: nothing was made on the server, nothing to drop.
    pub(super) async fn release(self) {
        self.dump.close().await;
    }
}

impl WatchSource for Source {
    fn drain<'a>(
        &'a mut self,
        into: &'a mut Vec<LogTruthRow>,
        _last: bool,
    ) -> Boxed<'a, Result<bool, String>> {
        Box::pin(Source::drain(self, into))
    }

    /// The binlog's events come as the server writes them, so they are read
    /// meanwhile (each commit's read time is then when it arrived, not when
    /// the drain came).
    fn wait(&mut self, period: Duration) -> Boxed<'_, Result<(), String>> {
        Box::pin(self.read_for(period))
    }

    /// The binlog file and offset the rows handed on end at: a watch
    /// resumed dumps from there (the event after a commit is the next
    /// transaction's first).
    fn position(&self) -> serde_json::Value {
        serde_json::json!({"file": self.handed_to.file, "pos": self.handed_to.pos})
    }

    /// The server keeps its binlogs by its own expiry, whatever a replica
    /// read: nothing to confirm.
    fn confirm<'a>(
        &'a mut self,
        _position: &'a serde_json::Value,
    ) -> Boxed<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn release(self: Box<Self>) -> Boxed<'static, Result<(), String>> {
        Box::pin(async move {
            Source::release(*self).await;
            Ok(())
        })
    }

    /// The binlog has no slot.
    fn slot_status(&self) -> Option<crate::logtruth::source::SlotStatus> {
        None
    }

    fn counts(&self) -> &Counts {
        &self.decoder.counts
    }
}
