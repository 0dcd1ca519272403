//! MariaDB's binary log read as it grows: a connection registered as a
//! replica (`COM_REGISTER_SLAVE`, then `COM_BINLOG_DUMP`; mysql_async's
//! `Conn::get_binlog_stream`), whose events are read one at a time and
//! turned into [`super::binlog::Event`]s for the pure decoder. A second
//! connection asks the server where its log ends (`SHOW MASTER STATUS`),
//! for the last read.
//!
//! The log is read in rounds, [`READ_EVERY`] apart, as PostgreSQL's slot
//! is drained: each round is a non-blocking dump (`BINLOG_DUMP_NON_BLOCK`,
//! MariaDB's sql/sql_repl.cc), which sends what the log holds from where
//! the last round stopped and ends with an EOF packet, and a round starts
//! only when `SHOW MASTER STATUS` says the log grew. A dump held open
//! instead sends each event as it is written and wakes the reader for
//! each: on a machine whose cores the writers keep busy that cost them
//! 13-16 % of their commits (docs/benchmarks.md). Each round's dump is
//! one "Start binlog_dump" note in the server's error log when
//! `log_warnings` is 2 or more (its default), as each drain of a
//! PostgreSQL slot is one "starting logical decoding" line.
//!
//! A commit's time: the log's own stamps are whole seconds, and a round
//! reads an event up to [`READ_EVERY`] after its commit, which would
//! place an expiry after a delivery that followed it. So a task of its
//! own asks where the log ends every [`STAMP_EVERY`] (a query that wakes
//! the server for nothing else), and an event is stamped with the first
//! of those times at which the log had reached it ([`Dump::stamp_ms`]):
//! its commit is known to within [`STAMP_EVERY`], as a held-open dump
//! knew it to within its read.
//!
//! Before the dump, the session says `SET @mariadb_slave_capability=4`
//! (`MARIA_SLAVE_CAPABILITY_GTID` in MariaDB's sql/log_event.h): a replica
//! that does not say so gets each GTID event rewritten as a `BEGIN` query
//! (sql/sql_repl.cc, `send_event_to_slave`), and the transactions' GTIDs
//! are lost. mysql_async sets `@master_binlog_checksum` itself, so the
//! server sends each event with its checksum (CRC32 by default), which the
//! format description event announces and mysql_common strips.

use super::binlog::{Decoder, Event, MARIADB_GTID_EVENT, Op, gtid_event};
use super::server::db_error;
use mysql_async::binlog::events::{EventData, OptionalMetadataField, RowsEventData};
use mysql_async::binlog::value::BinlogValue;
use mysql_async::prelude::Queryable;
use mysql_async::{BinlogStream, BinlogStreamRequest, Conn, Opts, Value};
use std::pin::Pin;
use std::time::Duration;
use tokio::time::Instant;

/// How often a round reads the log (see the module's comment).
pub const READ_EVERY: Duration = Duration::from_secs(1);

/// How often the stamping task asks where the log ends.
pub const STAMP_EVERY: Duration = Duration::from_millis(10);

/// The most (end, time) pairs kept for stamping: 10 minutes of a log that
/// grows at every ask. A reader further behind stamps its oldest events
/// with the oldest time kept, never later than their commit was known.
const STAMPS_KEPT: usize = 60_000;

/// Where the log was seen to end, and when (ms), oldest first.
type Seen = std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<(Position, i64)>>>;

/// The server id the judge's reader registers with: any id but the server's own.
pub const READER_SERVER_ID: u32 = 4242;

/// Where a dump starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// The first binlog the server keeps, from its first event.
    First,
    /// Where the log ends as the dump starts (`SHOW MASTER STATUS`): only
    /// what commits after it is read.
    End,
    /// Where an earlier dump stopped (after the server restarted: the
    /// dump goes on from there into the files written since).
    At(Position),
}

/// Where in the binlog an event ends: the file and the offset after it.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    pub file: String,
    pub pos: u64,
}

/// The binlog being read, and a connection to ask where it ends.
pub struct Dump {
    /// This round's dump; `None` between rounds.
    stream: Option<BinlogStream>,
    control: Conn,
    opts: Opts,
    server_id: u32,
    /// The end of the last event read.
    pub at: Position,
    /// Whether this round's dump sent an event yet: only its first ROTATE
    /// is the fake one naming the file asked for.
    started: bool,
    /// When the next round may start.
    next_round: Instant,
    /// What the stamping task saw; it stops when the dump is dropped.
    seen: Seen,
}

impl Dump {
    /// Connects twice with `opts` and starts the dump from the first binlog.
    pub async fn open(opts: Opts) -> Result<Dump, String> {
        Dump::open_with(opts, READER_SERVER_ID, Start::First).await
    }

    /// Connects twice with `opts` and starts the dump at `start`, registered
    /// as replica `server_id` (a server drops an older dump of the same id:
    /// MariaDB KB "Replication Overview", each replica needs its own id).
    pub async fn open_with(opts: Opts, server_id: u32, start: Start) -> Result<Dump, String> {
        let connect = |what: &'static str| {
            let opts = opts.clone();
            async move {
                Conn::new(opts)
                    .await
                    .map_err(|e| format!("cannot connect to MariaDB for {what}: {}", db_error(&e)))
            }
        };
        let mut control = connect("the log's end").await?;
        // The binlog file, named in the request: the fake ROTATE event a
        // dump begins with comes before the format description, so its name
        // cannot be told from the checksum after it.
        let at = match start {
            Start::First => {
                // Log_name, File_size.
                let first: Option<mysql_async::Row> = control
                    .query_first("SHOW BINARY LOGS")
                    .await
                    .map_err(|e| format!("cannot list MariaDB's binlogs: {}", db_error(&e)))?;
                let file: String = first
                    .and_then(|row| row.get(0))
                    .ok_or("the server keeps no binlog (log_bin is off)")?;
                Position { file, pos: 4 }
            }
            Start::End => end_of(&mut control).await?,
            Start::At(at) => at,
        };
        refuse_a_taken_id(&mut control, server_id).await?;
        let conn = connect("the binlog").await?;
        // The first round at once: a user without REPLICATION SLAVE is
        // refused here, before anything is recorded.
        let stream = dump_from(conn, server_id, &at).await?;
        let seen = Seen::default();
        tokio::spawn(stamp(opts.clone(), std::sync::Arc::downgrade(&seen)));
        Ok(Dump {
            stream: Some(stream),
            control,
            opts,
            server_id,
            at,
            started: false,
            next_round: Instant::now() + READ_EVERY,
            seen,
        })
    }

    /// The time (ms) the event last read was known committed: the first
    /// time the stamping task saw the log reach its end, or now if it has
    /// not yet. Forgets what earlier positions needed.
    pub fn stamp_ms(&self) -> i64 {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        while seen.len() > 1 && seen[0].0 < self.at {
            seen.pop_front();
        }
        match seen.front() {
            Some((end, at_ms)) if *end >= self.at => *at_ms,
            _ => crate::clock::now_ms(),
        }
    }

    /// Waits for the next round and starts it once the log grew past
    /// [`Dump::at`]. Cancelled (a caller's timeout), nothing is half done:
    /// the new connection is this call's own until it is the round's.
    async fn next_round(&mut self) -> Result<BinlogStream, String> {
        loop {
            tokio::time::sleep_until(self.next_round).await;
            self.next_round = Instant::now() + READ_EVERY;
            let mut conn = Conn::new(self.opts.clone()).await.map_err(|e| {
                format!("cannot connect to MariaDB for the binlog: {}", db_error(&e))
            })?;
            if end_of(&mut conn).await? > self.at {
                return dump_from(conn, self.server_id, &self.at).await;
            }
            let _ = conn.disconnect().await;
        }
    }

    /// Whether the server still answers on the dump's second connection
    /// (after a failed read: a server that went away, or a bad event).
    pub async fn server_answers(&mut self) -> bool {
        self.control.ping().await.is_ok()
    }

    /// Where the server's binlog ends now (`SHOW MASTER STATUS`: the file
    /// and the offset after its last event).
    /// The control connection is made again once when it fails: a server
    /// restarted between two rounds closed it, unseen by the rounds.
    pub async fn end(&mut self) -> Result<Position, String> {
        if let Ok(end) = end_of(&mut self.control).await {
            return Ok(end);
        }
        self.control = Conn::new(self.opts.clone()).await.map_err(|e| {
            format!(
                "cannot connect to MariaDB for the log's end: {}",
                db_error(&e)
            )
        })?;
        end_of(&mut self.control).await
    }

    /// The next event of the log, as the dump gives it: a new round's dump
    /// opened when the last one reached its end.
    async fn next_raw(&mut self) -> Result<mysql_async::binlog::events::Event, String> {
        loop {
            let Some(stream) = &mut self.stream else {
                self.stream = Some(self.next_round().await?);
                self.started = false;
                continue;
            };
            let read = std::future::poll_fn(|cx| {
                futures_core::Stream::poll_next(Pin::new(&mut *stream), cx)
            })
            .await;
            match read {
                Some(Ok(event)) => return Ok(event),
                Some(Err(e)) => {
                    return Err(format!("cannot read MariaDB's binlog: {}", db_error(&e)));
                }
                // The round's EOF: the log is read to where it ended.
                None => {
                    if let Some(done) = self.stream.take() {
                        let _ = done.close().await;
                    }
                }
            }
        }
    }

    /// Reads the next event (waiting for it) and converts it for `decoder`:
    /// only the rows of the tables it wants are decoded.
    pub async fn next(&mut self, decoder: &Decoder) -> Result<Event, String> {
        let event = self.next_raw().await?;
        let header = event.header();
        let log_pos = u64::from(header.log_pos());
        let first = !std::mem::replace(&mut self.started, true);
        let bad = |e: std::io::Error| format!("cannot decode a binlog event at {log_pos}: {e}");
        let converted = if header.event_type_raw() == MARIADB_GTID_EVENT {
            gtid_event(event.data(), header.server_id())
                .ok_or_else(|| format!("a GTID event at {log_pos} is too short"))?
        } else {
            match event.read_data().map_err(bad)? {
                // The dump's first, fake, ROTATE (log_pos 0) names the file
                // asked for; the position stays the one asked for. A later
                // fake one (the dump moving on to the next file, as after a
                // restart) names the new file, read after the format
                // description, so its name is whole.
                Some(EventData::RotateEvent(_)) if log_pos == 0 && first => {
                    return Ok(Event::Rotate {
                        file: self.at.file.clone(),
                    });
                }
                Some(EventData::RotateEvent(r)) => Event::Rotate {
                    file: r.name().into_owned(),
                },
                Some(EventData::TableMapEvent(t)) => {
                    let mut columns = None;
                    for field in t.iter_optional_meta() {
                        if let Ok(OptionalMetadataField::ColumnName(names)) = field {
                            let names: Result<Vec<String>, _> = names
                                .iter_names()
                                .map(|n| n.map(|n| n.name().into_owned()))
                                .collect();
                            columns = Some(names.map_err(bad)?);
                        }
                    }
                    Event::TableMap {
                        table_id: t.table_id(),
                        schema: t.database_name().into_owned(),
                        table: t.table_name().into_owned(),
                        columns,
                    }
                }
                Some(EventData::RowsEvent(rows)) => {
                    let table_id = rows.table_id();
                    let op =
                        match rows {
                            RowsEventData::WriteRowsEventV1(_)
                            | RowsEventData::WriteRowsEvent(_) => Op::Insert,
                            RowsEventData::DeleteRowsEventV1(_)
                            | RowsEventData::DeleteRowsEvent(_) => Op::Delete,
                            _ => Op::Update,
                        };
                    let mut out = Vec::new();
                    if decoder.wants(table_id)
                        && let Some(tme) = self.stream.as_ref().and_then(|s| s.get_tme(table_id))
                    {
                        for row in rows.rows(tme) {
                            let (before, after) = row.map_err(bad)?;
                            let image = if op == Op::Delete { before } else { after };
                            let Some(image) = image else { continue };
                            out.push(
                                (0..image.len())
                                    .map(|i| image.as_ref(i).and_then(text))
                                    .collect(),
                            );
                        }
                    }
                    Event::Rows {
                        table_id,
                        op,
                        rows: out,
                    }
                }
                Some(EventData::XidEvent(_)) => Event::Xid {
                    at_s: header.timestamp(),
                    log_pos,
                },
                Some(EventData::QueryEvent(q)) => Event::Query {
                    sql: q.query().into_owned(),
                    schema: q.schema().into_owned(),
                    at_s: header.timestamp(),
                    log_pos,
                },
                _ => Event::Other,
            }
        };
        if let Event::Rotate { file } = &converted {
            self.at = Position {
                file: file.clone(),
                pos: 4,
            };
        } else if log_pos > self.at.pos {
            // Positions only grow within a file; a dump that starts inside
            // one first gets the file's format description again, with its
            // own (earlier) end or 0 (sql/sql_repl.cc): not a step back.
            self.at.pos = log_pos;
        }
        Ok(converted)
    }

    /// Ends the dump and the control connection.
    pub async fn close(self) {
        if let Some(stream) = self.stream {
            let _ = stream.close().await;
        }
        let _ = self.control.disconnect().await;
    }
}

/// The stamping task: every [`STAMP_EVERY`], where the log ends, kept when
/// it moved. A failed ask is tried again at the next (a server restarting
/// answers nothing for a while; the events read meanwhile are stamped when
/// read). Ends when the dump is gone.
async fn stamp(
    opts: Opts,
    seen: std::sync::Weak<std::sync::Mutex<std::collections::VecDeque<(Position, i64)>>>,
) {
    let mut conn: Option<Conn> = None;
    let mut tick = tokio::time::interval(STAMP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if seen.strong_count() == 0 {
            break;
        }
        if conn.is_none() {
            conn = Conn::new(opts.clone()).await.ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        let Ok(end) = end_of(c).await else {
            conn = None;
            continue;
        };
        let at_ms = crate::clock::now_ms();
        let Some(seen) = seen.upgrade() else { break };
        let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.back().is_none_or(|(last, _)| end > *last) {
            if seen.len() == STAMPS_KEPT {
                seen.pop_front();
            }
            seen.push_back((end, at_ms));
        }
    }
    if let Some(c) = conn {
        let _ = c.disconnect().await;
    }
}

/// Starts a round on `conn`: a non-blocking dump from `at`, registered as
/// replica `server_id`.
async fn dump_from(mut conn: Conn, server_id: u32, at: &Position) -> Result<BinlogStream, String> {
    conn.query_drop("SET @mariadb_slave_capability=4")
        .await
        .map_err(|e| format!("cannot ask for GTID events: {}", db_error(&e)))?;
    let request = BinlogStreamRequest::new(server_id)
        .with_filename(at.file.as_bytes())
        .with_pos(at.pos)
        .with_non_blocking();
    conn.get_binlog_stream(request).await.map_err(|e| {
        format!(
            "cannot read MariaDB's binlog (a dump needs REPLICATION SLAVE): {}",
            db_error(&e)
        )
    })
}

/// Refuses `server_id` when a replica registered with it is connected
/// (`SHOW SLAVE HOSTS`): each round registers again, and a server ends
/// the older dump of an id (sql/sql_repl.cc, `kill_zombie_dump_threads`),
/// so the reader would cut that replica off once a round. Listing the
/// replicas needs REPLICATION MASTER ADMIN (MariaDB KB "GRANT"), which a
/// reader needs for nothing else: without it the check is not made.
async fn refuse_a_taken_id(control: &mut Conn, server_id: u32) -> Result<(), String> {
    // Server_id, Host, Port, Master_id.
    let hosts: Vec<mysql_async::Row> = match control.query("SHOW SLAVE HOSTS").await {
        Ok(hosts) => hosts,
        // ER_SPECIFIC_ACCESS_DENIED_ERROR (MariaDB's include/mysqld_error.h).
        Err(mysql_async::Error::Server(e)) if e.code == 1227 => return Ok(()),
        Err(e) => return Err(format!("cannot list MariaDB's replicas: {}", db_error(&e))),
    };
    if hosts
        .iter()
        .any(|row| row.get::<u64, _>(0) == Some(u64::from(server_id)))
    {
        return Err(format!(
            "a replica of the server is registered with server id {server_id} (SHOW SLAVE \
             HOSTS): give watch its own --server-id"
        ));
    }
    Ok(())
}

/// Where the server's binlog ends now (`SHOW MASTER STATUS`: the file and
/// the offset after its last event; needs BINLOG MONITOR, formerly
/// REPLICATION CLIENT).
async fn end_of(control: &mut Conn) -> Result<Position, String> {
    // File, Position, Binlog_Do_DB, Binlog_Ignore_DB.
    let row: Option<mysql_async::Row> = control
        .query_first("SHOW MASTER STATUS")
        .await
        .map_err(|e| format!("cannot read where MariaDB's binlog ends: {}", db_error(&e)))?;
    let row = row.ok_or("the server keeps no binlog (log_bin is off)")?;
    match (row.get::<String, _>(0), row.get::<u64, _>(1)) {
        (Some(file), Some(pos)) => Ok(Position { file, pos }),
        _ => Err("SHOW MASTER STATUS gave no file and position".into()),
    }
}

/// A column's value as text, `None` for NULL.
fn text(value: &BinlogValue<'_>) -> Option<String> {
    match value {
        BinlogValue::Value(v) => match v {
            Value::NULL => None,
            Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::Int(i) => Some(i.to_string()),
            Value::UInt(u) => Some(u.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Double(f) => Some(f.to_string()),
            Value::Date(y, mo, d, h, mi, s, us) => Some(format!(
                "{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}{}",
                if *us > 0 {
                    format!(".{us:06}")
                } else {
                    String::new()
                }
            )),
            Value::Time(neg, d, h, mi, s, us) => Some(format!(
                "{}{}:{mi:02}:{s:02}{}",
                if *neg { "-" } else { "" },
                u32::from(*h) + d * 24,
                if *us > 0 {
                    format!(".{us:06}")
                } else {
                    String::new()
                }
            )),
        },
        other => Some(format!("{other:?}")),
    }
}
